"""Drift flags, checked on hand-built reports (each expectation worked out in the comments)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from metrics.drift import compare_reports


def report(**systems: dict) -> pd.DataFrame:
    base = {"completion_rate": 1.0, "wer": 0.10, "wer_ci_low": 0.08, "wer_ci_high": 0.12, "cer": 0.05,
            "cer_ci_low": 0.04, "cer_ci_high": 0.06, "mos": 3.0, "mos_ci_low": 2.9, "mos_ci_high": 3.1}
    return pd.DataFrame([{"system_id": k, "system_spec": k} | base | v for k, v in systems.items()])


def test_non_overlapping_intervals_are_flagged_with_their_direction() -> None:
    prev = report(a={}, b={})
    # a: WER 0.10 [0.08, 0.12] -> 0.20 [0.15, 0.25]: 0.15 > 0.12, no overlap -> flagged, worse (WER up)
    # b: WER 0.10 -> 0.11 [0.09, 0.13]: overlaps -> not flagged, still 'worse'
    curr = report(a={"wer": 0.20, "wer_ci_low": 0.15, "wer_ci_high": 0.25},
                  b={"wer": 0.11, "wer_ci_low": 0.09, "wer_ci_high": 0.13, "mos": 3.5, "mos_ci_low": 3.2,
                     "mos_ci_high": 3.8})
    out = compare_reports(prev, curr).set_index(["system_id", "metric"])
    assert out.loc[("a", "wer"), "flagged"] and out.loc[("a", "wer"), "direction"] == "worse"
    assert out.loc[("a", "wer"), "delta"] == pytest.approx(0.10)
    assert not out.loc[("b", "wer"), "flagged"] and out.loc[("b", "wer"), "direction"] == "worse"
    # b: MOS 3.0 [2.9, 3.1] -> 3.5 [3.2, 3.8]: 3.2 > 3.1 -> flagged, better (MOS up)
    assert out.loc[("b", "mos"), "flagged"] and out.loc[("b", "mos"), "direction"] == "better"
    assert not out.loc[("a", "cer"), "flagged"] and out.loc[("a", "cer"), "direction"] == "same"


def test_touching_intervals_are_not_flagged() -> None:
    out = compare_reports(report(a={}), report(a={"wer": 0.14, "wer_ci_low": 0.12, "wer_ci_high": 0.16}))
    assert not out.set_index("metric").loc["wer", "flagged"]  # 0.12 == 0.12: they overlap at a point


def test_completion_changes_are_always_flagged_and_presence_is_reported() -> None:
    out = compare_reports(report(a={}, gone={}), report(a={"completion_rate": 53 / 54}, new={}))
    rows = out.set_index(["system_id", "metric"])
    assert rows.loc[("a", "completion_rate"), "flagged"] and rows.loc[("a", "completion_rate"), "direction"] == "worse"
    assert rows.loc[("new", "presence"), "direction"] == "added" and rows.loc[("gone", "presence"), "direction"] == "removed"


def test_missing_values_are_not_flagged_and_bad_reports_raise() -> None:
    out = compare_reports(report(a={}), report(a={"mos": math.nan, "mos_ci_low": math.nan, "mos_ci_high": math.nan}))
    mos = out.set_index("metric").loc["mos"]
    assert not mos["flagged"] and math.isnan(mos["delta"])
    with pytest.raises(ValueError, match="lacks column"):
        compare_reports(report(a={}).drop(columns="wer_ci_low"), report(a={}))
    with pytest.raises(ValueError, match="repeats system_id 'a'"):
        compare_reports(pd.concat([report(a={}), report(a={})]), report(a={}))
