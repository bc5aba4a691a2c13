"""One retry and backoff policy for every layer that retries: items in a stage, LLM transport, Prefect tasks.

Every retrying loop asks `RetryPolicy` "how many times, how long to wait", so the budgets are read from one place
(settings `item_retries`, `task_retries`, `retry_backoff_s`; an LLM spec's `max_retries`, `backoff_s`,
`max_backoff_s`) and the delays follow one formula:

    delay before retry n (n = 1, 2, ...) = min(cap_s, retry_after_s if the server asked for one, else base_s * 2**(n-1))

No jitter: delays are reproducible and testable, and the servers that throttle hardest (429) say how long to wait
with Retry-After, which is honoured. The budgets of nested layers multiply (a task retry re-runs its items'
retries), which is why each stays small and visible in settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ttseval.core.errors import RetriesExhausted

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often to try again after a transient failure and how long to wait first.

    Attributes:
        max_retries: Retries after the first try; a call makes at most `max_retries + 1` attempts.
        base_s: Delay before the first retry, in seconds; doubles on each retry.
        cap_s: Upper bound on one delay, in seconds, a server's Retry-After included.
    """

    max_retries: int = 2
    base_s: float = 1.0
    cap_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.base_s < 0 or self.cap_s < 0:
            raise ValueError(f"retry policy values must be >= 0, got {self}")

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1

    def delay_s(self, retry: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (1-based, = the number of the attempt that just failed).

        A server's `retry_after_s` replaces the exponential delay; both are capped at `cap_s`.
        """
        if retry < 1:
            raise ValueError(f"retry numbers start at 1, got {retry}")
        wanted = retry_after_s if retry_after_s is not None else self.base_s * 2 ** (retry - 1)
        return max(0.0, min(wanted, self.cap_s))

    def delays(self) -> list[float]:
        """Every delay the policy allows, in order (Prefect's `retry_delay_seconds` takes this list)."""
        return [self.delay_s(n) for n in range(1, self.max_retries + 1)]

    def call(
        self,
        fn: Callable[[], T],
        is_transient: Callable[[BaseException], bool],
        *,
        retries_used: int = 0,
        retry_after: Callable[[BaseException], float | None] | None = None,
        on_retry: Callable[[BaseException, int, float], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> tuple[T, int]:
        """Call `fn` until it returns, retrying the errors `is_transient` accepts; returns (value, attempts).

        Args:
            fn: The call to make; takes no arguments.
            is_transient: True for an error a later try can fix. Any other error propagates at once, unchanged.
            retries_used: Retries already spent on the same request elsewhere (an LLM request's budget spans its
                re-asks), so the budget is per request, not per call of this method.
            retry_after: The wait a server asked for, read from the error (None: use the exponential delay).
            on_retry: Called as `(error, retry number, delay_s)` before each wait: logging and counting.
            sleep: How to wait (tests pass a recorder).

        Returns:
            (fn's value, attempts made by this call, 1 when the first try succeeded).

        Raises:
            RetriesExhausted: a transient error persisted past the budget; `.last` is that error, `.attempts` the
                tries this call made. Raised `from` the last error.
            Exception: whatever `fn` raised that `is_transient` rejects.
        """
        attempts = 0
        while True:
            attempts += 1
            try:
                return fn(), attempts
            except Exception as e:
                if not is_transient(e):
                    raise
                retry = retries_used + attempts
                if retry > self.max_retries:
                    raise RetriesExhausted(e, attempts=attempts, retries=retry - 1) from e
                delay = self.delay_s(retry, retry_after(e) if retry_after is not None else None)
                if on_retry is not None:
                    on_retry(e, retry, delay)
                sleep(delay)
