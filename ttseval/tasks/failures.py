"""Failures as rows: the status columns of keys whose call raised, which failures are final, and the check that a
provider answered once per request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from ttseval.core.errors import (
    DeferredProviderError,
    PermanentProviderError,
    RetriesExhausted,
    TransientProviderError,
    TruncatedAudioError,
)
from ttseval.tasks.logs import logger

T = TypeVar("T")


def is_final(exc: BaseException) -> bool:
    """True for an error a provider documents as permanent: the only kind of failed row no later run retries.

    Everything else a stage records is retryable: a transient error that outlived the item's retries, and any
    error nobody documented (a TypeError in a provider, a missing extra, a worker that lost its model). Storing
    those as final would keep a bug's rows after the bug is fixed, with no way to recompute them but a new run id.
    """
    return isinstance(exc, PermanentProviderError)


def _keys_text(keys: Sequence[tuple[Any, ...]]) -> str:
    shown = ", ".join("/".join(str(p) for p in k) for k in keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def error_row(exc: BaseException, *, attempt: int, stage: str, keys: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    """The status columns of the rows of `keys`, whose call raised `exc`, and one log line that says what follows.

    `retryable` is False only for a PermanentProviderError (see `is_final`); the planner (`ttseval.tasks.plan._present`)
    computes every retryable key again on the next run. A RetriesExhausted is unwrapped, so the row names the
    provider's own error and the attempts really made.
    """
    if isinstance(exc, RetriesExhausted):
        attempt = exc.attempts
        exc = exc.last
    final = is_final(exc)
    status = "empty" if isinstance(exc, TruncatedAudioError) else "failed"  # a cut clip: no usable audio
    what = (
        f"{stage}: {type(exc).__name__} on {len(keys)} key(s) ({_keys_text(keys)}) after {attempt} attempt(s): "
        f"{str(exc)[:300]}"
    )
    if final:
        logger().info("%s; a permanent failure, recorded as final", what)
    elif isinstance(exc, (TransientProviderError, DeferredProviderError)):
        logger().warning("%s; recorded as %s, will be retried by the next run", what, status)
    else:
        logger().warning(
            "%s; unexpected (not a documented provider error), recorded as failed, will be retried by the next run",
            what,
        )
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
        raise ValueError(
            f"{provider} returned {len(results)} result(s) for {len(requests)} request(s); "
            "a provider must return one result per request, in order"
        )
    return results
