"""Vendor limits that hold across every Dask worker: a vendor's calls in flight and calls per second.

A vendor is a provider name: a TTS provider (`elevenlabs`), a judge or LLM provider (`gemini`: one key, one
quota, whether it judges or generates).

    [vendor_limits.elevenlabs]      # ttseval.toml (or TTSEVAL_VENDOR_LIMITS__ELEVENLABS__CONCURRENCY=2)
    concurrency = 2                 # calls in flight at once, all workers together
    per_second = 5                  # calls started per second, all workers together

A per-process semaphore would let N workers make N times a vendor's allowed calls, so each limit lives in one
place every worker reaches:

- `concurrency` is a Prefect global concurrency limit (`ttseval-vendor-<name>`, created by
  `ensure_vendor_limits` when a flow starts): it lives in the Prefect API, so it binds every run that reports
  there, on any cluster.
- `per_second` is a clock kept by the Dask scheduler: each call books the next start time, 1/per_second after
  the last one booked, and sleeps until then. Calls are spaced evenly, so the vendor never sees a burst, and
  the rate is used in full (measured: benchmarks/bench_judge_rate.py). It binds every run on that scheduler
  (a `dask_address` shared by runs; a LocalCluster is one run's). Outside a Dask worker the clock is the
  process's own. Why not Prefect's rate limit (a concurrency limit whose slots decay): its clients sleep for
  server-chosen, jittered intervals that grow with the callers waiting; it sustained 0.71 of the rate with 8
  callers and let bursts through that the vendor refused with 429 (same benchmark). No library
  keeps a rate across Dask workers; `limits` and `pyrate-limiter` need Redis for that.

`vendor_gate` gives what to hold around one call (synthesis wraps each call in it; `limit_calls` hands it to a
client that makes its own calls in threads, such as a judge's batch). A vendor without a configured limit costs
nothing here.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from ttseval.core.config import Settings, VendorLimit

_clocks: dict[str, float] = {}  # limit name -> when its next call may start (this process's monotonic clock)
_clocks_lock = threading.Lock()


def limit_name(provider: str) -> str:
    """The Prefect global concurrency limit of a vendor's calls in flight, e.g. 'ttseval-vendor-elevenlabs'."""
    return f"ttseval-vendor-{provider}"


def ensure_vendor_limits(settings: Settings) -> list[str]:
    """Create or update the concurrency limits `settings.vendor_limits` asks for; returns what binds the run."""
    if not settings.vendor_limits:
        return []
    from prefect.client.orchestration import get_client

    made = []
    with get_client(sync_client=True) as client:
        for provider, limit in sorted(settings.vendor_limits.items()):
            if limit.concurrency is not None:
                client.upsert_global_concurrency_limit_by_name(limit_name(provider), limit.concurrency)
                made.append(f"{limit_name(provider)} ({limit.concurrency} in flight)")
            if limit.per_second is not None:
                made.append(f"{provider} {limit.per_second:g}/s (the Dask scheduler's clock)")
    return made


def book(name: str, per_second: float) -> float:
    """Seconds until the caller may start its call; books the start after it. Runs in the process that keeps the
    clock: the Dask scheduler's (`Client.run_on_scheduler`), or the caller's own."""
    with _clocks_lock:
        now = time.monotonic()
        start = max(now, _clocks.get(name, now))
        _clocks[name] = start + 1.0 / per_second
        return start - now


def rate_clock() -> Callable[[str, float], float]:
    """`book` where the clock lives, found from the calling thread: a Dask worker's task thread knows its worker
    (threads the task starts do not, so resolve it here and hand the result to them): the scheduler's clock, shared
    by every worker; elsewhere this process's."""
    try:
        from distributed import get_client, get_worker

        get_worker()  # ValueError outside a Dask worker's task thread
    except (ImportError, ValueError):
        return book
    client = get_client()
    # distributed's Client.run_on_scheduler has no annotations
    return lambda name, per_second: client.run_on_scheduler(book, name, per_second)  # type: ignore[no-untyped-call]


@contextlib.contextmanager
def _slot(limit: VendorLimit, provider: str, clock: Callable[[str, float], float]) -> Iterator[None]:
    """Around one call: wait for the vendor's turn under its rate, then hold a slot of its concurrency."""
    if limit.per_second is not None:
        wait = clock(limit_name(provider), limit.per_second)
        if wait > 0:
            time.sleep(wait)
    if limit.concurrency is None:
        yield
        return
    from prefect.concurrency.sync import concurrency

    with concurrency(limit_name(provider), occupy=1, strict=True):
        yield


def vendor_gate(settings: Settings, provider: str) -> Callable[[], AbstractContextManager[Any]]:
    """What to hold around each call to the vendor `provider` (a no-op without a configured limit). Call it in the
    task's own thread; the gate it returns may be entered from any thread."""
    limit = settings.vendor_limits.get(provider)
    if limit is None:
        return contextlib.nullcontext
    clock = rate_clock()
    return lambda: _slot(limit, provider, clock)


def limit_calls(provider: Any, settings: Settings) -> None:
    """Route each call a provider makes (retries included) through its vendor's limits, when the vendor has a
    configured limit and the provider makes calls of its own (`limit_calls`, e.g. ttseval.providers.judges.gemini)."""
    if provider.name in settings.vendor_limits and hasattr(provider, "limit_calls"):
        provider.limit_calls(vendor_gate(settings, provider.name))
    for part in getattr(provider, "parts", ()):  # a composite (a judge cascade): each part by its own vendor
        limit_calls(part, settings)
