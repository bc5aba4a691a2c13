"""The two retry budgets: a provider call retried within the task (items), and a task Prefect runs again (only for
errors a second try can fix)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ttseval.core.config import Settings
from ttseval.core.errors import StoreError, StoreUnwritableError, TransientProviderError
from ttseval.core.retry import RetryPolicy

T = TypeVar("T")


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
    return item_policy(settings).call(
        fn, lambda e: isinstance(e, TransientProviderError), retry_after=lambda e: getattr(e, "retry_after_s", None)
    )


TRANSIENT_TASK_ERRORS = (TransientProviderError, StoreError, OSError, TimeoutError, ConnectionError)
"""What makes Prefect retry a whole task: a store or network hiccup. Provider errors never get here (stages turn
them into rows); anything else a task raises is a bug that a retry would only repeat."""


def is_transient_task_error(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect retry condition: retry a task only for errors a second try can fix."""
    error = state.result(raise_on_failure=False)
    return isinstance(error, TRANSIENT_TASK_ERRORS) and not isinstance(error, StoreUnwritableError)
