"""What every stage shares: cached providers per worker process, row stamps, retries, summaries."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
import logging
import os
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from collections.abc import Iterator
from typing import Any, Callable, TypeVar

from ttseval.core.config import STORE_WAIT_S, Settings
from ttseval.core.errors import (USER_ERRORS, ConfigError, DeferredProviderError, MissingKeyError,
                                 PermanentProviderError, RetriesExhausted, StoreError,
                                 StoreUnwritableError, TransientProviderError, TruncatedAudioError)
from ttseval.core.registry import REGISTRIES, Spec
from ttseval.core.retry import RetryPolicy
from ttseval.core.store import ArtifactStore, part_label

T = TypeVar("T")

# Prefect's loggers of flow and task runs: each logs an exception that ends a run with its traceback
# ("Encountered exception during execution", "Task run failed with exception").
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


class UserErrorsWithoutTraceback(logging.Filter):
    """Logs a user error (ttseval.core.errors.USER_ERRORS) that ends a flow or task run as its message alone:
    `refused: <message>`, no traceback, in the terminal and in the run's logs in the UI (the run is still marked
    failed, with the message as its state's). Any other exception keeps its traceback: it is a bug or a failure
    someone must read."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, USER_ERRORS):
            record.msg, record.args = "refused: %s", (error,)
            record.exc_info, record.exc_text = None, None
        return True


def quiet_user_errors() -> None:
    """Install UserErrorsWithoutTraceback on Prefect's run loggers (once per process; any process that imports
    the stages: the CLI's, a deployment's worker, a Dask worker)."""
    for name in RUN_LOGGERS:
        run_logger = logging.getLogger(name)
        if not any(isinstance(f, UserErrorsWithoutTraceback) for f in run_logger.filters):
            run_logger.addFilter(UserErrorsWithoutTraceback())


quiet_user_errors()


def logger() -> logging.Logger | logging.LoggerAdapter:
    """Prefect's run logger inside a task or flow, the module logger elsewhere (plain calls, tests)."""
    try:
        from prefect import get_run_logger
        from prefect.exceptions import MissingContextError

        try:
            return get_run_logger()
        except MissingContextError:
            pass
    except ImportError:
        pass
    return logging.getLogger("ttseval")


def secret_from_block(variable: str | None, blocks: dict[str, str]) -> Any:
    """The API key named `variable` from the Prefect Secret block the setting `secret_blocks` names for it, when
    the environment does not set the variable; None otherwise. The value stays a SecretStr, never logged."""
    if not variable or os.environ.get(variable) or variable not in blocks:
        return None
    from prefect.blocks.system import Secret
    from pydantic import SecretStr

    try:
        value = Secret.load(blocks[variable]).get()
    except ValueError as e:
        raise ConfigError(f"setting secret_blocks.{variable}: no Prefect Secret block {blocks[variable]!r} ({e}); "
                          f"create it (prefect block create secret) or set {variable} in the environment") from e
    return SecretStr(str(value))


_KEYLESS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("ttseval_keyless", default=None)
PLACEHOLDER_KEY = "ttseval-estimate-only-no-key"
"""The key a provider is built with inside `estimate_only` when it has none of its own; never sent anywhere."""


@contextlib.contextmanager
def estimate_only() -> Iterator[list[str]]:
    """Inside, a provider that refuses to be built for want of an API key is built with a placeholder key instead
    (and marked `estimate_only`), so `evaluate --dry-run` can price a vendor before the user has signed up with
    it. Nothing built here may call its vendor; the flows never enter it. Yields the specs built keyless."""
    keyless: list[str] = []
    token = _KEYLESS.set(keyless)
    try:
        yield keyless
    finally:
        _KEYLESS.reset(token)


def build_provider(kind: str, spec: str, settings: Settings) -> Any:
    """Build a provider (no cache): its plugins, its API key from a Prefect Secret block when the key's variable is
    not in the environment (settings `secret_blocks`), and the run's settings it declares (`run_settings`)."""
    return _build(kind, spec, settings, _KEYLESS.get() is not None)


def _build(kind: str, spec: str, settings: Settings, keyless: bool = False) -> Any:
    registry = REGISTRIES[kind]
    plugins = settings.plugins.get(kind, {})
    cls = registry.resolve(Spec.parse(spec).provider, plugins)
    key = secret_from_block(getattr(cls, "key_variable", None), settings.secret_blocks)
    # A provider built from part of the run's settings names those fields (`run_settings`: pushed:<label> and a
    # staged files:<label> read the run's store, a cascade its judges): it gets them from the settings object the
    # task was given, never through the spec, nor from the environment of the worker that builds it.
    context: dict[str, Any] = {name: getattr(settings, name) for name in getattr(cls, "run_settings", ())}
    try:
        return registry.build(spec, extra=plugins, **context, **({"api_key": key} if key is not None else {}))
    except MissingKeyError:
        if not (keyless and key is None and "api_key" in inspect.signature(cls.__init__).parameters):
            raise
    from pydantic import SecretStr

    provider = registry.build(spec, extra=plugins, api_key=SecretStr(PLACEHOLDER_KEY))
    provider.estimate_only = True
    if (built := _KEYLESS.get()) is not None and Spec.parse(spec).canonical not in built:
        built.append(Spec.parse(spec).canonical)
    return provider


_PROVIDERS: OrderedDict[str, Any] = OrderedDict()  # cache key (get_provider) -> provider, most recently used last
_PROVIDERS_LOCK = threading.Lock()
MAX_PROVIDERS = 32
METRIC_KINDS = frozenset({"asr", "quality", "speaker", "lid"})  # the model stages' kinds (setting models_in_memory)


def get_provider(kind: str, spec: str, settings: Settings) -> Any:
    """One provider object per (kind, spec) per process, so models load once per worker: keyed by the spec and
    every part of the run's settings that builds it (plugins, secret blocks, its `run_settings`), so runs of
    different settings on one worker never share a provider built for the other."""
    parsed = Spec.parse(spec)
    plugins = settings.plugins.get(kind, {})
    cls = REGISTRIES[kind].resolve(parsed.provider, plugins)
    key = json.dumps([kind, parsed.canonical, plugins, settings.secret_blocks, _KEYLESS.get() is not None,
                      settings.model_dump(mode="json", include=set(getattr(cls, "run_settings", ())))],
                     sort_keys=True, default=str)
    with _PROVIDERS_LOCK:
        if key in _PROVIDERS:
            _PROVIDERS.move_to_end(key)
            return _PROVIDERS[key]
    limit = settings.models_in_memory if kind in METRIC_KINDS else 0
    if limit:  # make room before loading: the models given up are freed before this one takes their memory
        _forget_metric_models(keep=limit - 1)
    provider = _build(kind, parsed.canonical, settings, _KEYLESS.get() is not None)
    with _PROVIDERS_LOCK:
        provider = _PROVIDERS.setdefault(key, provider)  # a thread that built it first wins
        while len(_PROVIDERS) > MAX_PROVIDERS:
            _PROVIDERS.popitem(last=False)
    return provider


def _forget_metric_models(keep: int) -> None:
    """Drop all but the `keep` most recently used metric models from this process's cache, and free what they held
    (a task still using one keeps it until it finishes): setting models_in_memory."""
    with _PROVIDERS_LOCK:
        metric = [k for k in _PROVIDERS if json.loads(k)[0] in METRIC_KINDS]
        dropped = [_PROVIDERS.pop(k) for k in metric[:max(0, len(metric) - keep)]]
    if not dropped:
        return
    del dropped
    import gc
    import sys

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    if sys.platform == "linux":  # glibc keeps freed heap for the process; give it back to the system
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


def model_output_id(kind: str, spec: Spec, settings: Settings) -> str:
    """The id that keys a model stage's rows ('asr' -> asr_id, 'quality' -> quality_id): the spec's id with the
    provider's `output_revision` (ttseval.core.registry.Registry.output_id)."""
    return REGISTRIES[kind].output_id(spec, settings.plugins.get(kind, {}))


def reused_or_computed(store: ArtifactStore, namespace: str, keys: list[str], compute: Callable[[list[int]], list[dict]],
                       *, reuse: bool) -> tuple[list[dict[str, Any]], list[bool]]:
    """One JSON-able answer per key, in order, and whether each came from the store's request cache: the keys
    answered by an earlier run (any run of this store) are read back; `compute(missing positions)` answers the
    rest, in order, and its answers are kept for later runs. With `reuse` False nothing is read (all computed)
    but the answers are still kept. A recogniser's transcript and a predictor's scores are cached this way,
    keyed by what they depend on (the clip's SHA-256, the model's output id, its version, the language hint),
    as synthesis caches audio."""
    from ttseval.core.cache import RequestCache

    cache = RequestCache(store, namespace)
    answers: list[dict[str, Any] | None] = [cache.get(k) if reuse else None for k in keys]
    missing = [i for i, a in enumerate(answers) if a is None]
    hit = [a is not None for a in answers]
    if missing:
        for i, answer in zip(missing, one_per_request(compute(missing), missing, namespace)):
            cache.put(keys[i], answer)
            answers[i] = answer
    return answers, hit  # type: ignore[return-value]


def by_model(work: list[dict[str, Any]], models_of: Callable[[dict[str, Any]], list[str]]) -> dict[str, list[dict]]:
    """Work items grouped by the model spec (canonical) that must process them: the one the planner named
    (`model_spec`, a backlog item), else every model `models_of(item)` lists (a clip just synthesized)."""
    from ttseval.core.registry import Spec

    groups: dict[str, list[dict[str, Any]]] = {}
    for w in work:
        for spec in [w["model_spec"]] if w.get("model_spec") else models_of(w):
            groups.setdefault(Spec.parse(spec).canonical, []).append(w)
    return groups


@functools.lru_cache(maxsize=8)
def get_store(uri: str, wait_s: float = STORE_WAIT_S) -> ArtifactStore:
    """One store object per URI in a worker process (settings.store, settings.store_wait_s)."""
    return ArtifactStore(uri, wait_s=wait_s)


def now() -> datetime:
    return datetime.now(timezone.utc)


def is_final(exc: BaseException) -> bool:
    """True for an error a provider documents as permanent: the only kind of failed row no later run retries.

    Everything else a stage records is retryable: a transient error that outlived the item's retries, and any
    error nobody documented (a TypeError in a provider, a missing extra, a worker that lost its model). Storing
    those as final would keep a bug's rows after the bug is fixed, with no way to recompute them but a new run id.
    """
    return isinstance(exc, PermanentProviderError)


def _keys_text(keys: list[tuple]) -> str:
    shown = ", ".join("/".join(str(p) for p in k) for k in keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def error_row(exc: BaseException, *, attempt: int, stage: str, keys: list[tuple]) -> dict[str, Any]:
    """The status columns of the rows of `keys`, whose call raised `exc`, and one log line that says what follows.

    `retryable` is False only for a PermanentProviderError (see `is_final`); the planner (`ttseval.tasks.plan._present`)
    computes every retryable key again on the next run. A RetriesExhausted is unwrapped, so the row names the
    provider's own error and the attempts really made.
    """
    if isinstance(exc, RetriesExhausted):
        exc, attempt = exc.last, exc.attempts
    final = is_final(exc)
    status = "empty" if isinstance(exc, TruncatedAudioError) else "failed"  # a cut clip: no usable audio
    what = f"{stage}: {type(exc).__name__} on {len(keys)} key(s) ({_keys_text(keys)}) after {attempt} attempt(s): " \
           f"{str(exc)[:300]}"
    if final:
        logger().info("%s; a permanent failure, recorded as final", what)
    elif isinstance(exc, (TransientProviderError, DeferredProviderError)):
        logger().warning("%s; recorded as %s, will be retried by the next run", what, status)
    else:
        logger().warning("%s; unexpected (not a documented provider error), recorded as failed, will be retried "
                         "by the next run", what)
    return {
        "status": status,
        "error_type": type(exc).__name__,
        "error_message": str(exc)[:2000] or repr(exc),
        "retryable": not final,
        "attempt": attempt,
    }


def one_per_request(results: list[T], requests: list[Any], provider: str) -> list[T]:
    """`results`, after checking the protocol's promise of one result per request, in order.

    Raises:
        ValueError: a provider returned more or fewer results; the stage records the batch as failed (retryable)
            rather than pairing results with the wrong requests or dropping items.
    """
    results = list(results)
    if len(results) != len(requests):
        raise ValueError(f"{provider} returned {len(results)} result(s) for {len(requests)} request(s); "
                         "a provider must return one result per request, in order")
    return results


def item_policy(settings: Settings) -> RetryPolicy:
    """Retries of one provider call within a run (`item_retries`, backoff from `retry_backoff_s`)."""
    return RetryPolicy(max_retries=settings.item_retries, base_s=settings.retry_backoff_s)


def task_policy(settings: Settings) -> RetryPolicy:
    """Prefect retries of a task that raised (`task_retries`), on the same backoff as items."""
    return RetryPolicy(max_retries=settings.task_retries, base_s=settings.retry_backoff_s)


def task_retry_options(settings: Settings) -> dict[str, Any]:
    """Options for `task.with_options(**...)`: the task policy's budget and its delays, one per retry."""
    policy = task_policy(settings)
    return {"retries": policy.max_retries, "retry_delay_seconds": policy.delays() or 0}


def call_with_retries(fn: Callable[[], T], settings: Settings) -> tuple[T, int]:
    """Call `fn`, retrying TransientProviderError under `item_policy` (a server's Retry-After, carried as the
    error's `retry_after_s`, replaces the backoff); returns (result, attempts).

    Raises:
        RetriesExhausted: the error was still transient after the last retry (`error_row` unwraps it).
        Exception: anything else `fn` raised, at once.
    """
    return item_policy(settings).call(fn, lambda e: isinstance(e, TransientProviderError),
                                      retry_after=lambda e: getattr(e, "retry_after_s", None))


@dataclass
class StageResult:
    """What a task returns: counts, where the part landed, and the work it hands to the next stage."""

    stage: str
    label: str
    n_rows: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    part: str | None = None
    seconds: float = 0.0
    work: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))
        return f"{self.stage} {self.label}: {self.n_rows} rows ({counts}) in {self.seconds:.1f} s"


def commit(store: ArtifactStore, run_id: str, table: str, rows: list[dict], *, label: str,
           replaces: set[tuple], looked: bool = False) -> tuple[str | None, dict[str, int]]:
    """Write the shard's rows as one part; drop older rows of keys it recomputed; returns (part, status counts of
    the rows written).

    Dask runs a finished task again when the worker holding its result dies before the next stage read it. The
    part its first attempt committed carries a label derived from the shard's keys, so the second attempt finds it
    and writes none of the rows it settled (its retryable ones are superseded): one row per key. Model stages and
    judges answer such keys from their caches, so nothing is computed twice either. Synthesis, whose provider may
    be paid, looks before it calls (`looked=True`: its `label` is that derived label already)."""
    from ttseval.core.schemas import TABLES, table_from_rows

    key_of = TABLES[table].key

    def key(row: dict) -> tuple:
        return tuple(row[c] for c in key_of)

    if not looked and rows:
        label = attempt_label(label, [key(r) for r in rows])
        earlier = earlier_attempt(store, run_id, table, label)
        settled = {key(r) for r in earlier if not r["retryable"]} - replaces
        replaces = replaces | {key(r) for r in earlier if r["retryable"]} - settled
        rows = [r for r in rows if key(r) not in settled]
    part = store.write_part(run_id, table, table_from_rows(table, rows), label=label)
    if part and replaces:
        store.supersede(run_id, table, replaces, keep=part)
    return part, dict(Counter(r["status"] for r in rows))


def attempt_label(prefix: str, keys: list[tuple]) -> str:
    """A part label naming the shard by its keys: the same shard, run again, writes (and finds) the same label.
    The prefix is cut and made file-name safe as ArtifactStore.write_part makes it (store.part_label)."""
    import hashlib

    digest = hashlib.sha256("\x1e".join("\x1f".join(map(str, k)) for k in sorted(keys)).encode()).hexdigest()
    return f"{part_label(prefix[:60])}-{digest[:12]}"


def earlier_attempt(store: ArtifactStore, run_id: str, table: str, label: str) -> list[dict[str, Any]]:
    """The rows an earlier attempt of the same shard committed (parts labelled `label`).

    One listing of the table's parts and a read of the matching part: no scan of the whole table per task."""
    from ttseval.core.schemas import TABLES

    mine = [p for p in store.part_files(run_id, table) if f"-{label}-" in p.rsplit("/", 1)[-1]]
    rows: list[dict[str, Any]] = []
    for path in mine:
        rows += store.read_part(path, schema=TABLES[table].schema).to_pylist()
    return rows


TRANSIENT_TASK_ERRORS = (TransientProviderError, StoreError, OSError, TimeoutError, ConnectionError)
"""What makes Prefect retry a whole task: a store or network hiccup. Provider errors never get here (stages turn
them into rows); anything else a task raises is a bug that a retry would only repeat."""


def is_transient_task_error(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect retry condition: retry a task only for errors a second try can fix."""
    error = state.result(raise_on_failure=False)
    return isinstance(error, TRANSIENT_TASK_ERRORS) and not isinstance(error, StoreUnwritableError)
