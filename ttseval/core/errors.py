"""The exceptions ttseval raises.

    TTSEvalError                      root: catch this to catch everything ttseval raises on purpose
    +-- ConfigError                   a setting is missing or invalid
    +-- SpecError                     a provider spec string is malformed or names an unknown provider
    |   +-- MissingKeyError           a paid provider was built without its API key (also a ValueError)
    +-- DatasetError                  an input dataset breaks a rule (exit code 2 from the CLI)
    +-- NotFoundError                 no such store, or no such run in it (exit code 2 from every command)
    +-- StoreError                    the artifact store cannot be read or written
    |   +-- StoreUnwritableError      it refuses writes: read-only, no permission, or full (exit code 2)
    |   +-- CorruptObjectError        a stored catalog object does not parse (exit code 2; `ttseval store repair`)
    +-- ProviderError                 a provider failed on one request
        +-- TransientProviderError    worth retrying: timeouts, 429, 5xx, a worker that went away
        |   +-- TruncatedAudioError   a cut stream: retried, then an `empty` row a later run asks again
        +-- PermanentProviderError    not worth retrying: bad input, refused language, empty output
        +-- DeferredProviderError     not now, but a later run may succeed: a missing input file, an exhausted
                                      quota, a rejected key; not retried within the run, retried by the next
    +-- RetriesExhausted              a transient error outlived the retry budget (ttseval.core.retry); wraps it

Only PermanentProviderError (and a stage's own `unsupported` / `skipped` rows) makes a failed row final. Every
other error a stage records, transient or unexpected (a bug in a provider), is stored with `retryable` set, so
the next run of the same run id computes that key again.

USER_ERRORS (below) are the user's to fix (bad input, a busy run id, a store that refuses writes, a store or run
that is not there): the CLI prints their message alone and exits 2, and inside a flow or task run they are logged
without a traceback (ttseval.tasks.logs.quiet_user_errors). Every other exception is a failure of the run or a bug:
its traceback is kept.

Errors carry their context as attributes (`spec`, `uri`, `key`) as well as in the message.
"""

from __future__ import annotations


class TTSEvalError(Exception):
    """Root of every error ttseval raises on purpose."""


class ConfigError(TTSEvalError):
    """A setting is missing or invalid."""


class SpecError(TTSEvalError):
    """A provider spec is malformed or names an unknown provider."""

    def __init__(self, message: str, *, spec: str | None = None) -> None:
        super().__init__(message)
        self.spec = spec


class MissingKeyError(SpecError, ValueError):
    """A provider that calls a paid API was built without its key. Providers raise it (a ValueError, as every bad
    constructor argument is) and the registry keeps the type when it adds the spec to the message, so callers
    (the dry run's keyless estimate) can tell it from any other bad spec."""


class RunBusyError(TTSEvalError):
    """Another invocation holds the run id's lease (ttseval/core/lease.py): nothing was written."""


class LeaseLostError(RunBusyError):
    """Another invocation took over the run id's lease while this one was frozen or cut off: this one commits
    nothing more (a fenced write, ArtifactStore.write_part)."""


class DatasetError(TTSEvalError):
    """An input dataset breaks a rule; `problems` lists each broken rule with its rows."""

    def __init__(self, message: str, *, source: str | None = None, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.problems = problems or []


class NotFoundError(TTSEvalError):
    """A command named a store that holds nothing, or a run the store does not hold: nothing was written."""

    def __init__(self, message: str, *, uri: str | None = None, run_id: str | None = None) -> None:
        super().__init__(message)
        self.uri = uri
        self.run_id = run_id


class StoreError(TTSEvalError):
    """The artifact store cannot be read or written."""

    def __init__(self, message: str, *, uri: str | None = None) -> None:
        super().__init__(message)
        self.uri = uri


class StoreUnwritableError(StoreError):
    """The store refuses writes (read-only, no permission, full): retrying cannot help, the user must act."""


class CorruptObjectError(StoreError):
    """A catalog object the store holds (a dataset's or a pushed system's manifest) is not what was written: the user
    sets it aside with `ttseval store repair` and pushes again."""


class ProviderError(TTSEvalError):
    """A provider failed on one request."""

    def __init__(self, message: str, *, spec: str | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.spec = spec
        self.key = key


class TransientProviderError(ProviderError):
    """A failure worth retrying (timeouts, rate limits, server errors); `retry_after_s` is the wait the server
    asked for (HTTP Retry-After), when it did."""

    def __init__(
        self, message: str, *, spec: str | None = None, key: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message, spec=spec, key=key)
        self.retry_after_s = retry_after_s


class TruncatedAudioError(TransientProviderError):
    """Audio that stopped short of what its own header promised (a cut stream). Retried like any transient error;
    if every attempt comes back cut, the row is `empty` (no usable clip) and retryable, so a later run asks again."""


class PermanentProviderError(ProviderError):
    """A failure that retrying will not fix (bad input, unsupported language, empty output)."""


class DeferredProviderError(ProviderError):
    """A failure no retry within this run can fix, which a later run may not meet: a clip file not there yet,
    a vendor quota used up, a key that was refused. The row is failed and retryable (the next run asks again)."""


class RetriesExhausted(TTSEvalError):
    """A transient error persisted through every retry a `RetryPolicy` allows.

    Callers record `last` (the error itself, so rows name its real type) and `attempts`; the wrapper only carries
    the count out of the retry loop.
    """

    def __init__(self, last: BaseException, *, attempts: int, retries: int) -> None:
        super().__init__(f"{type(last).__name__}: {last} (gave up after {retries} retries)")
        self.last = last
        self.attempts = attempts
        self.retries = retries


# The user's to fix, nothing written: exit code 2 from the CLI, logged without a traceback inside flow runs.
USER_ERRORS: tuple[type[TTSEvalError], ...] = (
    DatasetError,
    SpecError,
    ConfigError,
    RunBusyError,
    StoreUnwritableError,
    CorruptObjectError,
    NotFoundError,
)
