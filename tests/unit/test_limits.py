"""Vendor rate limits (tasks/limits.py): the clock that spaces calls, and the gate a task takes per vendor. That the
clock is shared by every worker of a Dask cluster is tests/e2e/test_limits_cluster.py."""

from __future__ import annotations

import threading
import types

import pytest

from ttseval.core.config import load_settings
from ttseval.tasks import limits


def test_booking_spaces_calls_one_period_apart_and_an_idle_clock_starts_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Five calls booked at one moment at 4/s start at k/4 s (the spacing worked by hand: k x 1/rate). The moment is
    # held still (the module's clock only), so a pause of this test between bookings cannot shorten the waits.
    monkeypatch.setattr(limits, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))
    waits = [limits.book("test-spacing", 4.0) for _ in range(5)]
    assert waits == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0], abs=1e-9)
    other = limits.book("test-other-vendor", 4.0)  # each vendor has its own clock
    assert other == 0.0


def test_a_vendor_without_a_limit_costs_nothing_and_a_gate_is_made_once_per_task() -> None:
    import contextlib

    settings = load_settings(vendor_limits={"gemini": {"per_second": 1000.0}})
    assert limits.vendor_gate(settings, "openai") is contextlib.nullcontext
    gate = limits.vendor_gate(settings, "gemini")  # outside a Dask worker: this process's clock
    with gate():
        pass
    assert "ttseval-vendor-gemini" in limits._clocks


def test_a_cascade_s_cheap_judge_is_held_to_its_vendor_s_rate(monkeypatch) -> None:
    """The Gemini judge inside a cascade books every HTTP call it makes on the gemini clock, at the configured rate:
    one booking per request the (fake) Gemini API receives, and the booked start times at least 1/rate apart."""
    import json

    import numpy as np

    from tests.support.fake_gemini import FakeGemini
    from ttseval.core.audio import Audio
    from ttseval.core.protocols import PairwiseRequest
    from ttseval.providers.judges.cascade import CascadeJudge

    rate = 20.0
    booked: list[tuple[str, float, float]] = []  # (clock, rate, the start it booked, on this process's clock)
    real_book, lock = limits.book, threading.Lock()

    def recording_book(name: str, per_second: float) -> float:
        with lock:  # the judge's threads book at once; read the start this booking set, as the clock holds it
            wait = real_book(name, per_second)
            booked.append((name, per_second, limits._clocks[name] - 1.0 / per_second))
        return wait

    monkeypatch.setattr(limits, "book", recording_book)
    tone = Audio((0.3 * np.sin(np.arange(4000) / 5)).astype(np.float32), 16000)
    batch = [
        PairwiseRequest(
            item_id=f"first-significant-second-{i}",
            text=f"<p{i}> Is it raining?",
            language="en",
            category="questions",
            rubric="intonation",
            first=tone,
            second=tone,
            first_signals={"order": "drawn"},
            second_signals={"order": "swapped"},
        )
        for i in range(4)
    ]
    with FakeGemini() as fake:
        monkeypatch.setenv("GEMINI_API_KEY", "fake-key")
        monkeypatch.setenv("TTSEVAL_PLUGINS", json.dumps({"judge": {"scripted": "tests.support.fakes:ScriptedJudge"}}))
        monkeypatch.setenv(
            "TTSEVAL_CASCADES",
            json.dumps(
                {
                    "c": {
                        "cheap": f"gemini:gemini-2.5-flash:base_url={fake.base_url}:backoff_s=0.01",
                        "strong": "scripted:strong",
                        "audit_share": 0.0,
                    }
                }
            ),
        )
        cascade = CascadeJudge("c")
        limits.limit_calls(cascade, load_settings(vendor_limits={"gemini": {"per_second": rate}}))
        cascade.judge_pairs(batch)
        sent = len(fake.requests)
    assert sent == 8  # both orders of 4 pairs, asked of the cheap judge
    assert [(n, r) for n, r, _ in booked] == [(limits.limit_name("gemini"), rate)] * sent
    starts = sorted(t for _, _, t in booked)
    assert min(np.diff(starts)) >= 1 / rate - 1e-9, np.diff(starts)  # never two calls closer than the rate allows
    # the fake answers the same position in both orders (a flip): all 4 pairs go to the strong judge, another
    # vendor, whose calls book nothing on the gemini clock (the count above)
    assert cascade.strong.calls == 4
