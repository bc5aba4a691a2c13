"""Vendor limits that hold across every Dask worker: Prefect global concurrency limits around each paid call.

A per-process semaphore would let N workers make N times a vendor's allowed calls. Prefect's global concurrency
limits live in the Prefect API, which every worker of a run reports to, so one limit binds them all:

    [vendor_limits.elevenlabs]      # ttseval.toml (or TTSEVAL_VENDOR_LIMITS__ELEVENLABS__CONCURRENCY=2)
    concurrency = 2                 # calls in flight at once, all workers together
    per_second = 5                  # calls started per second, all workers together

`ensure_vendor_limits` creates or updates the limits when a flow starts (`ttseval-tts-<provider>` for the
concurrency, `ttseval-tts-<provider>-rate` for the rate, whose slots decay at `per_second`); `vendor_slot`
holds a slot of each around one call. A provider without a configured limit costs nothing here.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

from ttseval.config import Settings


def limit_names(provider: str) -> tuple[str, str]:
    """(concurrency limit, rate limit) names of a provider, e.g. ('ttseval-tts-elevenlabs', '...-rate')."""
    return f"ttseval-tts-{provider}", f"ttseval-tts-{provider}-rate"


def ensure_vendor_limits(settings: Settings) -> list[str]:
    """Create or update the global concurrency limits `settings.vendor_limits` asks for; returns their names."""
    if not settings.vendor_limits:
        return []
    from prefect.client.orchestration import get_client

    made = []
    with get_client(sync_client=True) as client:
        for provider, limit in sorted(settings.vendor_limits.items()):
            concurrency_name, rate_name = limit_names(provider)
            if limit.concurrency is not None:
                client.upsert_global_concurrency_limit_by_name(concurrency_name, limit.concurrency)
                made.append(concurrency_name)
            if limit.per_second is not None:
                # A token bucket: at most ceil(per_second) calls at once, one slot freed every 1/per_second s.
                client.upsert_global_concurrency_limit_by_name(rate_name, max(1, math.ceil(limit.per_second)),
                                                               slot_decay_per_second=limit.per_second)
                made.append(rate_name)
    return made


@contextlib.contextmanager
def vendor_slot(settings: Settings, provider: str) -> Iterator[None]:
    """Hold the provider's shared slots (rate first, then concurrency) around one call; no-op without limits."""
    limit = settings.vendor_limits.get(provider)
    if limit is None:
        yield
        return
    from prefect.concurrency.sync import concurrency, rate_limit

    concurrency_name, rate_name = limit_names(provider)
    if limit.per_second is not None:
        rate_limit(rate_name, strict=True)
    if limit.concurrency is None:
        yield
        return
    with concurrency(concurrency_name, occupy=1, strict=True):
        yield
