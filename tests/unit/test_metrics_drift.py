"""Drift flags, checked on hand-built reports (each expectation worked out in the comments)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ttseval.metrics.drift import compare_reports


def report(**systems: dict) -> pd.DataFrame:
    base = {
        "completion_rate": 1.0,
        "wer": 0.10,
        "wer_ci_low": 0.08,
        "wer_ci_high": 0.12,
        "cer": 0.05,
        "cer_ci_low": 0.04,
        "cer_ci_high": 0.06,
        "mos": 3.0,
        "mos_ci_low": 2.9,
        "mos_ci_high": 3.1,
    }
    return pd.DataFrame([{"system_id": k, "system_spec": k} | base | v for k, v in systems.items()])


def test_non_overlapping_intervals_are_flagged_with_their_direction() -> None:
    prev = report(a={}, b={})
    # a: WER 0.10 [0.08, 0.12] -> 0.20 [0.15, 0.25]: 0.15 > 0.12, no overlap -> flagged, worse (WER up)
    # b: WER 0.10 -> 0.11 [0.09, 0.13]: overlaps -> not flagged, still 'worse'
    curr = report(
        a={"wer": 0.20, "wer_ci_low": 0.15, "wer_ci_high": 0.25},
        b={"wer": 0.11, "wer_ci_low": 0.09, "wer_ci_high": 0.13, "mos": 3.5, "mos_ci_low": 3.2, "mos_ci_high": 3.8},
    )
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


def test_completion_changes_are_always_flagged_and_presence_is_flagged_unless_the_series_changed() -> None:
    out = compare_reports(report(a={}, gone={}), report(a={"completion_rate": 53 / 54}, new={}))
    rows = out.set_index(["system_id", "metric"])
    assert rows.loc[("a", "completion_rate"), "flagged"] and rows.loc[("a", "completion_rate"), "direction"] == "worse"
    assert (
        rows.loc[("new", "presence"), "direction"] == "added"
        and rows.loc[("gone", "presence"), "direction"] == "removed"
    )
    # unexplained, a system's rows appearing or vanishing is a change (a system whose every clip failed tonight has
    # no transcript, so no row per recogniser: it must not go silent)
    assert rows.loc[("new", "presence"), "flagged"] and rows.loc[("gone", "presence"), "flagged"]
    # a system added to or removed from the series changes what is compared (a series change), not how it performs
    out = compare_reports(
        report(a={}, gone={}), report(a={"completion_rate": 53 / 54}, new={}), series_changed={"new", "gone"}
    )
    rows = out.set_index(["system_id", "metric"])
    assert not rows.loc[("new", "presence"), "flagged"] and not rows.loc[("gone", "presence"), "flagged"]
    assert rows.loc[("a", "completion_rate"), "flagged"]


def test_missing_values_are_not_flagged_and_bad_reports_raise() -> None:
    out = compare_reports(report(a={}), report(a={"mos": math.nan, "mos_ci_low": math.nan, "mos_ci_high": math.nan}))
    mos = out.set_index("metric").loc["mos"]
    assert not mos["flagged"] and math.isnan(mos["delta"])
    with pytest.raises(ValueError, match="lacks column"):
        compare_reports(report(a={}).drop(columns="wer_ci_low"), report(a={}))
    with pytest.raises(ValueError, match="repeats system_id 'a'"):
        compare_reports(pd.concat([report(a={}), report(a={})]), report(a={}))


def test_each_metric_moves_by_its_declared_direction() -> None:
    # Lower WER/CER is better, higher MOS and completion are better: each moved both ways, CIs far apart.
    down = {
        "wer": 0.05,
        "wer_ci_low": 0.04,
        "wer_ci_high": 0.06,
        "cer": 0.02,
        "cer_ci_low": 0.01,
        "cer_ci_high": 0.03,
        "mos": 2.0,
        "mos_ci_low": 1.9,
        "mos_ci_high": 2.1,
        "completion_rate": 0.5,
    }
    up = {
        "wer": 0.30,
        "wer_ci_low": 0.25,
        "wer_ci_high": 0.35,
        "cer": 0.20,
        "cer_ci_low": 0.15,
        "cer_ci_high": 0.25,
        "mos": 4.0,
        "mos_ci_low": 3.9,
        "mos_ci_high": 4.1,
    }
    base = report(a={"completion_rate": 0.9}, b={"completion_rate": 0.9})
    out = compare_reports(base, report(a=down, b=up | {"completion_rate": 1.0})).set_index(["system_id", "metric"])
    assert out["direction"].to_dict() == {
        ("a", "completion_rate"): "worse",
        ("a", "wer"): "better",
        ("a", "cer"): "better",
        ("a", "mos"): "worse",
        ("b", "completion_rate"): "better",
        ("b", "wer"): "worse",
        ("b", "cer"): "worse",
        ("b", "mos"): "better",
    }
    assert out["flagged"].all()


def test_rows_are_matched_per_system_and_recogniser() -> None:
    # One system, two recognisers: tiny's WER rose beyond its CI, base's did not move; neither is pooled.
    prev = pd.concat(
        [
            report(a={}).assign(asr_id="tiny", asr_spec="fw:tiny"),
            report(a={}).assign(asr_id="base", asr_spec="fw:base"),
        ],
        ignore_index=True,
    )
    curr = prev.copy()
    curr.loc[0, ["wer", "wer_ci_low", "wer_ci_high"]] = [0.30, 0.25, 0.35]
    out = compare_reports(prev, curr).set_index(["asr_id", "metric"])
    assert out.loc[("tiny", "wer"), "flagged"] and out.loc[("tiny", "wer"), "direction"] == "worse"
    assert out.loc[("tiny", "wer"), "delta"] == pytest.approx(0.20)
    assert not out.loc[("base", "wer"), "flagged"] and out.loc[("base", "wer"), "direction"] == "same"
    assert out.loc[("base", "wer"), "asr_spec"] == "fw:base"
    # a recogniser only the current run has is a presence change, not a delta against another recogniser
    added = pd.concat([curr, report(a={}).assign(asr_id="large", asr_spec="fw:large")], ignore_index=True)
    rows = compare_reports(prev, added).set_index(["asr_id", "metric"])
    assert rows.loc[("large", "presence"), "direction"] == "added"


def test_a_report_from_before_per_recogniser_rows_is_matched_by_system() -> None:
    # The previous report has no asr_id (one pooled row per system). 'a' now has one recogniser: compared as
    # before. 'b' now has two: its old figure pooled them, so it is not compared with either (presence rows).
    prev = report(a={}, b={})
    curr = pd.concat(
        [
            report(a={"wer": 0.20, "wer_ci_low": 0.15, "wer_ci_high": 0.25}).assign(asr_id="tiny"),
            report(b={}).assign(asr_id="tiny"),
            report(b={}).assign(asr_id="base"),
        ],
        ignore_index=True,
    )
    out = compare_reports(prev, curr)
    a = out[out["system_id"] == "a"].set_index("metric")
    assert a.loc["wer", "direction"] == "worse" and a.loc["wer", "flagged"] and a.loc["wer", "asr_id"] == "tiny"
    b = out[out["system_id"] == "b"]
    assert sorted(zip(b["asr_id"].fillna("-"), b["direction"])) == [
        ("-", "removed"),
        ("base", "added"),
        ("tiny", "added"),
    ]


def test_paired_drift_flags_a_regression_the_overlap_rule_misses() -> None:
    import numpy as np

    from ttseval.metrics.bootstrap import bootstrap_ratio_ci
    from ttseval.metrics.drift import compare_reports, paired_drift

    rng = np.random.default_rng(1)
    words = rng.integers(8, 30, size=40)
    before = rng.binomial(words, rng.uniform(0.0, 0.6, size=40))
    after = np.minimum(before + 1, words)  # one more error on every item

    def run(errors):
        tr = pd.DataFrame(
            {
                "item_id": [f"i{k}" for k in range(40)],
                "system_id": "s",
                "asr_id": "a",
                "status": "ok",
                "word_errors": errors,
                "ref_words": words,
                "char_errors": errors,
                "ref_chars": 4 * words,
            }
        )
        q = pd.DataFrame({"item_id": tr["item_id"], "system_id": "s", "status": "ok", "mos": 3.0})
        wer, cer = bootstrap_ratio_ci(errors, words, seed=0), bootstrap_ratio_ci(errors, 4 * words, seed=0)
        report = pd.DataFrame(
            [
                {
                    "system_id": "s",
                    "system_spec": "espeak-ng",
                    "asr_id": "a",
                    "asr_spec": "w",
                    "completion_rate": 1.0,
                    "wer": wer.point,
                    "wer_ci_low": wer.low,
                    "wer_ci_high": wer.high,
                    "cer": cer.point,
                    "cer_ci_low": cer.low,
                    "cer_ci_high": cer.high,
                    "mos": 3.0,
                    "mos_ci_low": 3.0,
                    "mos_ci_high": 3.0,
                }
            ]
        )
        return {"transcripts": tr, "quality": q}, report

    (prev_tables, prev_report), (curr_tables, curr_report) = run(before), run(after)
    overlap_only = compare_reports(prev_report, curr_report).set_index("metric")
    assert not overlap_only.loc["wer", "flagged"]  # the intervals overlap: the old rule misses it
    paired = paired_drift(prev_tables, curr_tables, n_resamples=500)
    drift = compare_reports(prev_report, curr_report, paired).set_index("metric")
    assert drift.loc["wer", "flagged"] and drift.loc["wer", "test"] == "paired"
    assert drift.loc["wer", "delta_ci_low"] > 0 and drift.loc["wer", "direction"] == "worse"
    assert not drift.loc["mos", "flagged"]  # identical MOS: no change


def test_the_smallest_p_is_scipys_own_p_on_the_most_extreme_data() -> None:
    """smallest_p against an independent computation: scipy's permutation test on data where every item moved the
    same way (the most extreme split there is), exact below 2^n <= permutations and random above."""
    import numpy as np
    from scipy import stats

    from ttseval.metrics.paired import items_needed, smallest_p

    for n, permutations in ((5, 10000), (8, 10000), (16, 1000)):
        diff = np.arange(1, n + 1, dtype=float)  # every difference positive
        scipys = stats.permutation_test(
            (diff,), np.mean, permutation_type="samples", n_resamples=permutations, rng=np.random.default_rng(0)
        ).pvalue
        assert smallest_p(n, permutations) == pytest.approx(scipys, rel=1e-12), n
    assert smallest_p(5, 10000) == 2 / 32 and smallest_p(8, 10000) == 2 / 256 and smallest_p(1, 10000) == 1.0
    # a lone change among 6 tests (2 systems x WER, CER, MOS): 6 x 2/128 = 0.094, 6 x 2/256 = 0.047 < 0.05
    assert items_needed(6, 0.05, 10000) == 8
    assert items_needed(3, 0.05, 10000) == 7  # 3 x 2/64 = 0.094; 3 x 2/128 = 0.047
    assert items_needed(1, 0.05, 10000) == 6  # 2/32 = 0.0625; 2/64 = 0.031
    assert items_needed(1000, 0.05, 10000) is None  # 1000 x 2/10001 = 0.2 whatever the items


def _cut_nights(n_items: int) -> tuple[dict, dict, pd.DataFrame, pd.DataFrame]:
    """Two nights of one system on `n_items` items of 10 words; on the second every clip is cut to 40% of its length,
    so the recogniser loses 6 of 10 words (WER 0.1 -> 0.7 on every item) and MOS drops by 0.5 to 0.8."""
    import numpy as np

    ids = [f"i{k}" for k in range(n_items)]
    tables, reports = [], []
    for errors, mos in ((1, 3.5), (7, 3.0)):
        tr = pd.DataFrame(
            {
                "item_id": ids,
                "system_id": "s",
                "asr_id": "a",
                "status": "ok",
                "word_errors": errors,
                "ref_words": 10,
                "char_errors": 5 * errors,
                "ref_chars": 50,
            }
        )
        scores = mos - (0.0 if mos > 3.2 else np.linspace(0.0, 0.3, n_items))
        q = pd.DataFrame({"item_id": ids, "system_id": "s", "status": "ok", "mos": scores})
        tables.append({"transcripts": tr, "quality": q})
        wer, cer = errors / 10, errors / 10
        reports.append(
            pd.DataFrame(
                [
                    {
                        "system_id": "s",
                        "system_spec": "files:recorded",
                        "asr_id": "a",
                        "asr_spec": "w",
                        "completion_rate": 1.0,
                        "wer": wer,
                        "wer_ci_low": wer,
                        "wer_ci_high": wer,
                        "cer": cer,
                        "cer_ci_low": cer,
                        "cer_ci_high": cer,
                        "mos": float(np.mean(scores)),
                        "mos_ci_low": float(np.mean(scores)),
                        "mos_ci_high": float(np.mean(scores)),
                    }
                ]
            )
        )
    return tables[0], tables[1], reports[0], reports[1]


def test_clips_cut_to_40_percent_are_flagged_on_8_items_and_5_items_are_blind_and_say_so() -> None:
    from ttseval.metrics.drift import blind_tests, paired_drift

    before, after, prev_report, curr_report = _cut_nights(8)
    paired = paired_drift(before, after, n_resamples=200, n_permutations=10000)
    drift = compare_reports(prev_report, curr_report, paired).set_index("metric")
    # exact test on 8 items: p = 2/256, times 3 tests (Holm, every p equal) = 0.0234 < 0.05
    assert drift.loc["wer", "p_adjusted"] == pytest.approx(3 * 2 / 256)
    assert drift.loc["wer", "flagged"] and drift.loc["wer", "direction"] == "worse"
    assert not drift["blind"].fillna(False).any() and blind_tests(drift.reset_index(), 0.05, 10000) == []

    before, after, prev_report, curr_report = _cut_nights(5)
    paired = paired_drift(before, after, n_resamples=200, n_permutations=10000)
    drift = compare_reports(prev_report, curr_report, paired)
    rows = drift.set_index("metric")
    # 5 items: the smallest p is 2/32 = 0.0625, already over alpha before any adjustment: blind, not flagged
    assert rows.loc["wer", "p_value"] == pytest.approx(2 / 32) and not rows.loc["wer", "flagged"]
    assert rows.loc[["wer", "cer", "mos"], "blind"].all()
    assert rows.loc["wer", "p_floor"] == pytest.approx(min(1.0, 3 * 2 / 32))
    [line] = blind_tests(drift, 0.05, 10000)
    assert line == (
        "3 of 3 paired tests cannot flag a lone change of any size (wer of files:recorded, cer of files:recorded, mos "
        "of files:recorded): on 5 items the smallest p is 0.0625, adjusted across 3 test(s) 0.1875, not under alpha "
        "0.05; at least 7 items are needed for one to be flagged"
    )


def test_tests_with_nothing_to_test_leave_the_family_so_a_change_beside_them_is_not_called_blind() -> None:
    """Two systems on 7 items: one cut (its WER, CER and MOS move on every item), one unchanged (every difference 0:
    no p, left out of the adjustment). Holm adjusts over the 3 tests with a p: 3 x 2/128 = 0.047 < 0.05, flagged; a
    floor over all 6 tests (0.094) would have called them blind."""
    from ttseval.metrics.drift import blind_tests, paired_drift

    before, after, prev_report, curr_report = _cut_nights(7)
    steady = {t: before[t].assign(system_id="t") for t in before}
    both = [{t: pd.concat([night[t], steady[t]]) for t in night} for night in (before, after)]
    unchanged = prev_report.assign(system_id="t", system_spec="espeak-ng")
    reports = [pd.concat([prev_report, unchanged]), pd.concat([curr_report, unchanged])]
    paired = paired_drift(both[0], both[1], n_resamples=200, n_permutations=10000)
    drift = compare_reports(reports[0], reports[1], paired).set_index(["system_id", "metric"])
    assert drift.loc[("s", "wer"), "n_tests"] == 3 and drift.loc[("s", "wer"), "p_adjusted"] == pytest.approx(3 / 64)
    assert drift.loc[("s", "wer"), "flagged"] and not drift.loc[("s", "wer"), "blind"]
    # the unchanged system's tests: a lone change there would join the 3, 4 x 2/128 = 0.0625: blind, said so
    assert drift.loc[("t", "wer"), "n_tests"] == 4 and drift.loc[("t", "wer"), "blind"]
    [line] = blind_tests(drift.reset_index(), 0.05, 10000)
    assert line.startswith("3 of 6 paired tests cannot flag a lone change of any size (wer of espeak-ng, cer of")
    assert line.endswith(
        "adjusted across 4 test(s) 0.0625, not under alpha 0.05; at least 8 items are needed for one to be flagged"
    )
