"""The exit-code policy's thresholds (metrics/policy.py), on hand-built summaries and drift rows."""

from __future__ import annotations

import pandas as pd

from ttseval.metrics.policy import threshold_breaches


def _summary() -> pd.DataFrame:
    # espeak-ng has two recogniser rows (its completion repeats); flite lost a third of its clips: 6 of 9.
    return pd.DataFrame(
        [
            {
                "system_id": "a",
                "system_spec": "piper:joe",
                "asr_id": "t",
                "n_ok": 9,
                "n_items": 9,
                "completion_rate": 1.0,
            },
            {
                "system_id": "b",
                "system_spec": "espeak-ng",
                "asr_id": "t",
                "n_ok": 8,
                "n_items": 9,
                "completion_rate": 8 / 9,
            },
            {
                "system_id": "b",
                "system_spec": "espeak-ng",
                "asr_id": "m",
                "n_ok": 8,
                "n_items": 9,
                "completion_rate": 8 / 9,
            },
            {
                "system_id": "c",
                "system_spec": "flite:slt",
                "asr_id": "t",
                "n_ok": 6,
                "n_items": 9,
                "completion_rate": 6 / 9,
            },
        ]
    )


def test_off_by_default_and_each_system_below_the_completion_threshold_named_once() -> None:
    assert threshold_breaches(_summary()) == []
    # 0.9 by hand: 9/9 = 1.0 passes; 8/9 = 0.889 and 6/9 = 0.667 are below it
    assert threshold_breaches(_summary(), min_completion=0.9) == [
        "system espeak-ng: completion 88.9% (8/9) is below min_completion 90.0%",
        "system flite:slt: completion 66.7% (6/9) is below min_completion 90.0%",
    ]
    assert threshold_breaches(_summary(), min_completion=0.8) == [
        "system flite:slt: completion 66.7% (6/9) is below min_completion 80.0%"
    ]
    assert threshold_breaches(_summary(), min_completion=6 / 9) == []  # at the threshold is not below it


def test_only_flagged_changes_for_the_worse_breach_and_only_when_asked() -> None:
    drift = pd.DataFrame(
        [
            {
                "system_spec": "piper:joe",
                "asr_spec": "faster-whisper:tiny.en",
                "metric": "wer",
                "previous": 0.05,
                "current": 0.12,
                "flagged": True,
                "direction": "worse",
            },
            {
                "system_spec": "piper:joe",
                "asr_spec": "faster-whisper:tiny.en",
                "metric": "mos",
                "previous": 3.1,
                "current": 3.4,
                "flagged": True,
                "direction": "better",
            },
            {
                "system_spec": "flite:slt",
                "asr_spec": "faster-whisper:tiny.en",
                "metric": "cer",
                "previous": 0.02,
                "current": 0.03,
                "flagged": False,
                "direction": "worse",
            },
        ]
    )
    assert threshold_breaches(_summary(), regressions=drift) == []
    assert threshold_breaches(_summary(), regressions=drift, fail_on_regression=True) == [
        "regression flagged: piper:joe (faster-whisper:tiny.en) wer 0.05 -> 0.12, worse than the previous run"
    ]
