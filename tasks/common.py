"""What every stage shares: cached providers per worker process, row stamps, retries, summaries."""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, TypeVar

from ttseval.config import Settings
from ttseval.errors import PermanentProviderError, StoreError, TransientProviderError
from ttseval.registry import REGISTRIES, Spec
from ttseval.store import ArtifactStore

T = TypeVar("T")


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


@functools.lru_cache(maxsize=32)
def _provider(kind: str, spec: str, plugins: tuple[tuple[str, str], ...]) -> Any:
    return REGISTRIES[kind].build(spec, extra=dict(plugins))


def get_provider(kind: str, spec: str, settings: Settings) -> Any:
    """One provider object per (kind, spec) per process, so models load once per worker."""
    return _provider(kind, Spec.parse(spec).canonical, tuple(sorted(settings.plugins.get(kind, {}).items())))


@functools.lru_cache(maxsize=8)
def get_store(uri: str) -> ArtifactStore:
    return ArtifactStore(uri)


def now() -> datetime:
    return datetime.now(timezone.utc)


def error_row(exc: BaseException, *, attempt: int) -> dict[str, Any]:
    """The status columns of a row whose call raised. Only transient errors are retried by a later run."""
    status = "failed"
    return {
        "status": status,
        "error_type": type(exc).__name__,
        "error_message": str(exc)[:2000] or repr(exc),
        "retryable": isinstance(exc, TransientProviderError),
        "attempt": attempt,
    }


def call_with_retries(fn: Callable[[], T], settings: Settings) -> tuple[T, int]:
    """Call `fn`, retrying TransientProviderError with exponential backoff; returns (result, attempts)."""
    attempt = 1
    while True:
        try:
            return fn(), attempt
        except TransientProviderError as e:
            if attempt > settings.item_retries:
                e.attempts = attempt  # type: ignore[attr-defined]
                raise
            time.sleep(settings.retry_backoff_s * (2 ** (attempt - 1)))
            attempt += 1


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
           replaces: set[tuple]) -> tuple[str | None, dict[str, int]]:
    """Write the shard's rows as one part; drop older rows of keys it recomputed; returns (part, status counts)."""
    from ttseval.schemas import table_from_rows

    part = store.write_part(run_id, table, table_from_rows(table, rows), label=label)
    if part and replaces:
        store.supersede(run_id, table, replaces, keep=part)
    return part, dict(Counter(r["status"] for r in rows))


def is_transient_task_error(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect retry condition: retry a task only for errors a second try can fix."""
    try:
        state.result()
    except (TransientProviderError, StoreError, OSError, TimeoutError, ConnectionError):
        return True
    except PermanentProviderError:
        return False
    except Exception:  # noqa: BLE001 - anything else is a bug or bad input: retrying would hide it
        return False
    return False
