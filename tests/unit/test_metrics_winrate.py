"""Tests for ttseval.metrics.winrate on small hand-built judgment frames, numbers worked by hand.

Independent computations: the counts and rates in the comments, derived by hand from the
frames; the CI (BCa) is checked for determinism, containment, independence from other cells,
"n too small" and degenerate (all-ties) width, and against the normal interval p +- 1.96 sqrt(var / n) on a
large sample (an independent closed form).
"""

import numpy as np
import pandas as pd
import pytest

from ttseval.metrics.bootstrap import MIN_INTERVAL_ITEMS
from ttseval.metrics.winrate import WINRATE_COLUMNS, win_rate_table

NAN = float("nan")
COLS = ["item_id", "system_id", "baseline_id", "judge_id", "winner", "parse_ok", "status", "category", "depth"]

# judge g, sysA vs base:
#   i1 win, i2 win, i3 win, i4 tie, i5 tie, i6 loss  -> scored: 3 wins, 2 ties, 1 loss, (3 + 1) / 6 = 4/6
#   i7 status ok, parse_ok False -> 1 parse failure; i8 failed; i9 skipped -> counted, not scored
# judge g, sysB vs base: three ties -> 0.5, tie_rate 1, zero-width CI
# judge g, sysC vs base: one failed row only -> n_judged 0, NaN rates
# judge h, sysA vs base: i1 loss, i2 loss -> 0.0 (a second judge is its own row)
JUDGMENTS = pd.DataFrame(
    [
        ("i1", "sysA", "base", "g", "candidate", True, "ok", "emotions", 0),
        ("i2", "sysA", "base", "g", "candidate", True, "ok", "emotions", 1),
        ("i3", "sysA", "base", "g", "candidate", True, "ok", "questions", 0),
        ("i4", "sysA", "base", "g", "tie", True, "ok", "emotions", 1),
        ("i5", "sysA", "base", "g", "tie", True, "ok", "questions", 0),
        ("i6", "sysA", "base", "g", "baseline", True, "ok", "questions", 1),
        ("i7", "sysA", "base", "g", None, False, "ok", "emotions", 0),
        ("i8", "sysA", "base", "g", NAN, None, "failed", "questions", 1),
        ("i9", "sysA", "base", "g", None, None, "skipped", "questions", 0),
        ("i1", "sysB", "base", "g", "tie", True, "ok", "emotions", 0),
        ("i2", "sysB", "base", "g", "tie", True, "ok", "emotions", 1),
        ("i3", "sysB", "base", "g", "tie", True, "ok", "questions", 0),
        ("i1", "sysC", "base", "g", None, None, "failed", "emotions", 0),
        ("i1", "sysA", "base", "h", "baseline", True, "ok", "emotions", 0),
        ("i2", "sysA", "base", "h", "baseline", True, "ok", "emotions", 1),
    ],
    columns=COLS,
)


def _row(table, **where):
    mask = np.ones(len(table), dtype=bool)
    for column, value in where.items():
        mask &= table[column].to_numpy() == value
    assert mask.sum() == 1, where
    return table[mask].iloc[0]


def test_overall_counts_and_rates_worked_by_hand():
    table = win_rate_table(JUDGMENTS, n_resamples=200, seed=0)
    assert list(table.columns) == ["judge_id", "system_id", "baseline_id", *WINRATE_COLUMNS]
    # first-appearance order of (judge, system, baseline)
    cells = list(zip(table["judge_id"], table["system_id"]))
    assert cells == [("g", "sysA"), ("g", "sysB"), ("g", "sysC"), ("h", "sysA")]

    a = _row(table, judge_id="g", system_id="sysA")
    assert (a.n_judged, a.wins, a.ties, a.losses) == (6, 3, 2, 1)
    assert a.win_rate == pytest.approx(4 / 6, abs=1e-12)  # (3 + 0.5 * 2) / 6
    assert a.tie_rate == pytest.approx(2 / 6, abs=1e-12)
    # i7 (ok, unparsed), i8 (failed), i9 (skipped): counted, not scored
    assert (a.n_parse_failures, a.n_failed, a.n_skipped) == (1, 1, 1)

    c = _row(table, judge_id="g", system_id="sysC")
    assert (c.n_judged, c.n_failed, c.n_parse_failures, c.n_skipped) == (0, 1, 0, 0)
    assert np.isnan(c.win_rate) and np.isnan(c.tie_rate)
    assert np.isnan(c.win_rate_ci_low) and np.isnan(c.win_rate_ci_high)

    h = _row(table, judge_id="h", system_id="sysA")
    assert (h.n_judged, h.wins, h.ties, h.losses, h.win_rate) == (2, 0, 0, 2, 0.0)
    assert table["n_judged"].dtype == np.int64


def test_all_ties_is_one_half_and_too_few_items_get_no_interval():
    b = _row(win_rate_table(JUDGMENTS, seed=3), judge_id="g", system_id="sysB")
    assert (b.n_judged, b.ties, b.tie_rate, b.win_rate) == (3, 3, 1.0, 0.5)
    assert MIN_INTERVAL_ITEMS > 3 and np.isnan(b.win_rate_ci_low) and np.isnan(b.win_rate_ci_high)  # n too small
    many = _frame(["tie"] * MIN_INTERVAL_ITEMS)  # enough items, every score alike: every resample is the sample
    row = win_rate_table(many, seed=3).iloc[0]
    assert row.win_rate == row.win_rate_ci_low == row.win_rate_ci_high == 0.5


def _frame(winners: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "item_id": [f"i{k}" for k in range(len(winners))],
            "system_id": "s",
            "baseline_id": "b",
            "judge_id": "g",
            "winner": winners,
            "parse_ok": True,
            "status": "ok",
        }
    )


def test_per_category_split_worked_by_hand():
    table = win_rate_table(JUDGMENTS, by=("category",), n_resamples=200, seed=0)
    assert list(table.columns) == ["judge_id", "system_id", "baseline_id", "category", *WINRATE_COLUMNS]
    # sysA emotions: i1 win, i2 win, i4 tie (+ i7 unparsed) -> 2.5 / 3
    emo = _row(table, judge_id="g", system_id="sysA", category="emotions")
    assert (emo.n_judged, emo.wins, emo.ties, emo.losses, emo.n_parse_failures) == (3, 2, 1, 0, 1)
    assert emo.win_rate == pytest.approx(2.5 / 3, abs=1e-12)
    assert (emo.n_failed, emo.n_skipped) == (0, 0)
    # sysA questions: i3 win, i5 tie, i6 loss (+ i8 failed, i9 skipped) -> 1.5 / 3
    q = _row(table, judge_id="g", system_id="sysA", category="questions")
    assert (q.n_judged, q.wins, q.ties, q.losses) == (3, 1, 1, 1)
    assert q.win_rate == pytest.approx(0.5, abs=1e-12)
    assert (q.n_parse_failures, q.n_failed, q.n_skipped) == (0, 1, 1)
    # the split partitions every row: per-category counts add up to the overall ones
    overall = win_rate_table(JUDGMENTS, n_resamples=200, seed=0)
    for column in ("n_judged", "wins", "ties", "losses", "n_parse_failures", "n_failed", "n_skipped"):
        assert table.groupby(["judge_id", "system_id"])[column].sum().sort_index().tolist() == (
            overall.set_index(["judge_id", "system_id"])[column].sort_index().tolist()
        )


def test_per_category_and_depth_split_worked_by_hand():
    table = win_rate_table(JUDGMENTS, by=("category", "depth"), n_resamples=200, seed=0)
    a = table[(table.judge_id == "g") & (table.system_id == "sysA")]
    got = {
        (r.category, r.depth): (r.n_judged, r.win_rate, r.n_parse_failures, r.n_failed, r.n_skipped)
        for r in a.itertuples()
    }
    assert got == {
        ("emotions", 0): (1, 1.0, 1, 0, 0),  # i1 win; i7 unparsed
        ("emotions", 1): (2, 0.75, 0, 0, 0),  # i2 win, i4 tie -> 1.5 / 2
        ("questions", 0): (2, 0.75, 0, 0, 1),  # i3 win, i5 tie; i9 skipped
        ("questions", 1): (1, 0.0, 0, 1, 0),  # i6 loss; i8 failed
    }


def test_ci_contains_point_is_seeded_and_independent_of_other_cells():
    # JUDGMENTS' sysA scores four times over (24 items, 12 wins, 8 ties, 4 losses) beside the small cells
    frame = pd.concat(
        [
            JUDGMENTS,
            *(
                JUDGMENTS[(JUDGMENTS.system_id == "sysA") & (JUDGMENTS.judge_id == "g")].assign(
                    item_id=lambda f, k=k: f["item_id"] + f"-{k}"
                )
                for k in range(3)
            ),
        ]
    )
    first = win_rate_table(frame, n_resamples=500, seed=7)
    again = win_rate_table(frame, n_resamples=500, seed=7)
    pd.testing.assert_frame_equal(first, again)
    judged = first[first.n_judged >= MIN_INTERVAL_ITEMS]
    assert (judged.win_rate_ci_low <= judged.win_rate).all() and (judged.win_rate <= judged.win_rate_ci_high).all()
    a = _row(first, judge_id="g", system_id="sysA")
    assert a.n_judged == 24 and a.win_rate_ci_low < a.win_rate < a.win_rate_ci_high  # varied scores: an interval
    other_seed = _row(win_rate_table(frame, n_resamples=500, seed=8), judge_id="g", system_id="sysA")
    assert (other_seed.win_rate_ci_low, other_seed.win_rate_ci_high) != (a.win_rate_ci_low, a.win_rate_ci_high)
    # Seeds come from a stable hash of the cell, so dropping other systems or reordering rows changes nothing.
    alone = frame[(frame.system_id == "sysA") & (frame.judge_id == "g")].iloc[::-1]
    b = _row(win_rate_table(alone, n_resamples=500, seed=7), judge_id="g", system_id="sysA")
    assert (b.win_rate_ci_low, b.win_rate_ci_high) == (a.win_rate_ci_low, a.win_rate_ci_high)


def test_ci_matches_normal_interval_on_a_large_sample():
    # 400 items: 200 wins, 80 ties, 120 losses. Point = (200 + 40) / 400 = 0.6.
    # Per-item variance = E[s^2] - 0.6^2 = (200 + 0.25 * 80) / 400 - 0.36 = 0.55 - 0.36 = 0.19.
    # Normal 95% interval: 0.6 +- 1.96 * sqrt(0.19 / 400) = 0.6 +- 0.04272. Tolerance 0.01 covers
    # the BCa-vs-normal difference and Monte Carlo error of 4000 resamples.
    winners = ["candidate"] * 200 + ["tie"] * 80 + ["baseline"] * 120
    frame = pd.DataFrame(
        {
            "item_id": [f"i{k}" for k in range(400)],
            "system_id": "s",
            "baseline_id": "b",
            "judge_id": "g",
            "winner": winners,
            "parse_ok": True,
            "status": "ok",
        }
    )
    row = win_rate_table(frame, n_resamples=4000, seed=1).iloc[0]
    half = 1.959963984540054 * np.sqrt(0.19 / 400)
    assert row.win_rate == pytest.approx(0.6, abs=1e-12)
    assert row.win_rate_ci_low == pytest.approx(0.6 - half, abs=0.01)
    assert row.win_rate_ci_high == pytest.approx(0.6 + half, abs=0.01)


def test_invalid_winner_names_the_row_key():
    bad = JUDGMENTS.copy()
    bad.loc[3, "winner"] = "A"  # i4 / sysA
    with pytest.raises(ValueError, match=r"item_id='i4', system_id='sysA'.*winner = 'A'"):
        win_rate_table(bad)
    unparsed_null = JUDGMENTS.copy()
    unparsed_null.loc[0, "winner"] = None  # ok and parsed, but no verdict
    with pytest.raises(ValueError, match=r"item_id='i1', system_id='sysA'"):
        win_rate_table(unparsed_null)


@pytest.mark.parametrize(
    ("row", "column", "value", "message"),
    [
        (6, "winner", "candidate", r"item_id='i7'.*only ok, parsed rows may carry a winner"),  # unparsed with a verdict
        (7, "winner", "tie", r"item_id='i8'.*status = 'failed'"),  # failed with a verdict
        (0, "status", "done", r"item_id='i1'.*status 'done'"),
        (0, "parse_ok", None, r"item_id='i1'.*parse_ok = None"),
        (0, "category", None, r"item_id='i1'.*null category"),
    ],
)
def test_inconsistent_rows_raise_naming_the_key(row, column, value, message):
    bad = JUDGMENTS.astype({"category": object}).copy()
    bad.loc[row, column] = value
    with pytest.raises(ValueError, match=message):
        win_rate_table(bad, by=("category",))


def test_duplicates_missing_columns_and_bad_options_raise():
    with pytest.raises(ValueError, match=r"duplicate row for item_id='i1', system_id='sysA'"):
        win_rate_table(pd.concat([JUDGMENTS, JUDGMENTS.iloc[[0]]]))
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['language'\]"):
        win_rate_table(JUDGMENTS, by=("language",))
    with pytest.raises(ValueError, match="seed"):
        win_rate_table(JUDGMENTS, seed=-1)
    with pytest.raises(ValueError, match="by must name"):
        win_rate_table(JUDGMENTS, by=("system_id",))


def test_voice_variance_is_the_sample_std_of_the_voices_win_rates() -> None:
    from ttseval.metrics.winrate import voice_variance

    # Three voices of model M (win-rates 0.2, 0.5, 0.8 overall), one voice of N (left out: a single voice).
    rows = [
        {"judge_id": "j", "system_id": s, "level": "overall", "category": None, "win_rate": w}
        for s, w in (("m1", 0.2), ("m2", 0.5), ("m3", 0.8), ("n1", 0.9))
    ]
    rows += [
        {"judge_id": "j", "system_id": s, "level": "category", "category": "questions", "win_rate": w}
        for s, w in (("m1", 0.25), ("m2", 0.75))
    ]
    out = voice_variance(pd.DataFrame(rows), {"m1": "M", "m2": "M", "m3": "M", "n1": "N"})
    overall = out[out["level"] == "overall"].iloc[0]
    # By hand: mean 0.5; squared deviations 0.09, 0, 0.09; / (3 - 1) = 0.09; sqrt = 0.3.
    assert (overall["model"], overall["n_voices"]) == ("M", 3)
    assert overall["win_rate_mean"] == pytest.approx(0.5) and overall["win_rate_std"] == pytest.approx(0.3)
    questions = out[out["category"] == "questions"].iloc[0]
    # Two values 0.25, 0.75: deviations 0.25 each; 2 * 0.0625 / 1 = 0.125; sqrt = 0.35355...
    assert questions["win_rate_std"] == pytest.approx(0.125**0.5)
    assert set(out["model"]) == {"M"}
    assert voice_variance(pd.DataFrame(rows), {"n1": "N"}).empty


def test_model_of_voices_drops_the_voice_slot_and_leaves_voiceless_systems_out() -> None:
    from ttseval.metrics.winrate import model_of_voices

    names = {"a": "openai:alloy:model=tts-1", "b": "openai:nova:model=tts-1", "c": "espeak-ng", "d": "piper:joe"}
    assert model_of_voices(names) == {"a": "openai:model=tts-1", "b": "openai:model=tts-1", "d": "piper"}
