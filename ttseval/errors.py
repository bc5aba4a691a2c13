"""The exceptions ttseval raises.

    TTSEvalError                      root: catch this to catch everything ttseval raises on purpose
    +-- ConfigError                   a setting is missing or invalid
    +-- SpecError                     a provider spec string is malformed or names an unknown provider
    +-- DatasetError                  an input dataset breaks a rule (exit code 2 from the CLI)
    +-- StoreError                    the artifact store cannot be read or written
    +-- ProviderError                 a provider failed on one request
        +-- TransientProviderError    worth retrying: timeouts, 429, 5xx, a worker that went away
        +-- PermanentProviderError    not worth retrying: bad input, refused language, empty output

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


class DatasetError(TTSEvalError):
    """An input dataset breaks a rule; `problems` lists each broken rule with its rows."""

    def __init__(self, message: str, *, source: str | None = None, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.problems = problems or []


class StoreError(TTSEvalError):
    """The artifact store cannot be read or written."""

    def __init__(self, message: str, *, uri: str | None = None) -> None:
        super().__init__(message)
        self.uri = uri


class ProviderError(TTSEvalError):
    """A provider failed on one request."""

    def __init__(self, message: str, *, spec: str | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.spec = spec
        self.key = key


class TransientProviderError(ProviderError):
    """A failure worth retrying (timeouts, rate limits, server errors)."""


class PermanentProviderError(ProviderError):
    """A failure that retrying will not fix (bad input, unsupported language, empty output)."""
