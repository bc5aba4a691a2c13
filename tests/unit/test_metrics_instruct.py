"""Tests for ttseval.metrics.instruct on hand-built verdict frames, numbers worked by hand.

Independent computations: the counts and scores in the comments, derived by hand; and the
published InstructTTSEval Table 5 row for gpt-4o-mini-tts (EN: APS 76.4, DSD 74.3, RP
54.8, Avg. 68.5), rebuilt from counts out of 1,000 items per task.
"""

import numpy as np
import pandas as pd
import pytest

from ttseval.metrics.instruct import INSTRUCT_COLUMNS, instruction_scores

NAN = float("nan")
COLS = ["item_id", "system_id", "judge_id", "task", "language", "follows", "parse_ok"]

# judge g, system s, en:
#   APS: T T F None        -> n 4, true 2, false 1, undecidable 1; score 2/3, all-items 2/4
#   DSD: T F (unparsed)    -> n 3, true 1, false 1, parse failure 1; score 1/2, all-items 1/3
#   RP:  F F               -> n 2, false 2; score 0, all-items 0
#   macro: score (2/3 + 1/2 + 0) / 3 = 7/18; all-items (1/2 + 1/3 + 0) / 3 = 5/18; counts summed
# judge g, system s, zh: APS T only -> score 1; macro NaN (DSD and RP missing)
# judge g, system t, en: APS None None, DSD T, RP T -> APS score NaN (0 decided), so macro NaN
FRAME = pd.DataFrame(
    [
        ("a1", "s", "g", "APS", "en", True, True),
        ("a2", "s", "g", "APS", "en", True, True),
        ("a3", "s", "g", "APS", "en", False, True),
        ("a4", "s", "g", "APS", "en", None, True),
        ("d1", "s", "g", "DSD", "en", True, True),
        ("d2", "s", "g", "DSD", "en", False, True),
        ("d3", "s", "g", "DSD", "en", None, False),
        ("r1", "s", "g", "RP", "en", False, True),
        ("r2", "s", "g", "RP", "en", False, True),
        ("z1", "s", "g", "APS", "zh", True, True),
        ("a1", "t", "g", "APS", "en", None, True),
        ("a2", "t", "g", "APS", "en", None, True),
        ("d1", "t", "g", "DSD", "en", True, True),
        ("r1", "t", "g", "RP", "en", True, True),
    ],
    columns=COLS,
)


def _row(table, **where):
    mask = np.ones(len(table), dtype=bool)
    for column, value in where.items():
        mask &= table[column].to_numpy() == value
    assert mask.sum() == 1, where
    return table[mask].iloc[0]


def test_task_rows_worked_by_hand():
    table = instruction_scores(FRAME)
    assert list(table.columns) == list(INSTRUCT_COLUMNS)
    counts = ["n", "n_true", "n_false", "n_undecidable", "n_parse_failures"]
    aps = _row(table, system_id="s", language="en", task="APS")
    assert aps[counts].tolist() == [4, 2, 1, 1, 0]
    assert aps.score == pytest.approx(2 / 3, abs=1e-12) and aps.score_all_items == pytest.approx(0.5, abs=1e-12)
    dsd = _row(table, system_id="s", language="en", task="DSD")
    assert dsd[counts].tolist() == [3, 1, 1, 0, 1]
    assert dsd.score == pytest.approx(0.5, abs=1e-12) and dsd.score_all_items == pytest.approx(1 / 3, abs=1e-12)
    rp = _row(table, system_id="s", language="en", task="RP")
    assert rp[counts].tolist() == [2, 0, 2, 0, 0] and rp.score == 0.0 and rp.score_all_items == 0.0
    assert table["n"].dtype == np.int64


def test_macro_rows_worked_by_hand():
    table = instruction_scores(FRAME)
    macro = _row(table, system_id="s", language="en", task="macro")
    assert macro[["n", "n_true", "n_false", "n_undecidable", "n_parse_failures"]].tolist() == [9, 3, 4, 1, 1]
    assert macro.score == pytest.approx(7 / 18, abs=1e-12)  # unweighted: not 3 / 7 pooled over decided items
    assert macro.score_all_items == pytest.approx(5 / 18, abs=1e-12)
    # zh has APS only: the macro is NaN, not the APS score
    zh = _row(table, system_id="s", language="zh", task="macro")
    assert np.isnan(zh.score) and np.isnan(zh.score_all_items) and zh.n == 1
    assert _row(table, system_id="s", language="zh", task="APS").score == 1.0
    # t: APS has no decided verdict -> APS score NaN -> macro score NaN; all-items APS is 0/2 = 0
    t_aps = _row(table, system_id="t", task="APS")
    assert np.isnan(t_aps.score) and t_aps.score_all_items == 0.0 and t_aps.n_undecidable == 2
    t_macro = _row(table, system_id="t", task="macro")
    assert np.isnan(t_macro.score)
    assert t_macro.score_all_items == pytest.approx((0 + 1 + 1) / 3, abs=1e-12)


def test_row_order_tasks_then_macro_per_cell():
    table = instruction_scores(FRAME)
    assert list(zip(table.system_id, table.language, table.task)) == [
        ("s", "en", "APS"), ("s", "en", "DSD"), ("s", "en", "RP"), ("s", "en", "macro"),
        ("s", "zh", "APS"), ("s", "zh", "macro"),
        ("t", "en", "APS"), ("t", "en", "DSD"), ("t", "en", "RP"), ("t", "en", "macro"),
    ]  # fmt: skip


def test_reproduces_published_average_from_counts():
    # InstructTTSEval Table 5, gpt-4o-mini-tts (EN): APS 76.4, DSD 74.3, RP 54.8 over 1,000 items each;
    # Avg. 68.5 = (76.4 + 74.3 + 54.8) / 3 = 205.5 / 3.
    rows = []
    for task, n_true in (("APS", 764), ("DSD", 743), ("RP", 548)):
        rows += [(f"{task}{k}", "gpt", "gemini", task, "en", k < n_true, True) for k in range(1000)]
    table = instruction_scores(pd.DataFrame(rows, columns=COLS))
    scores = dict(zip(table.task, table.score))
    assert scores["APS"] == pytest.approx(0.764) and scores["RP"] == pytest.approx(0.548)
    assert 100 * scores["macro"] == pytest.approx(68.5, abs=1e-9)


@pytest.mark.parametrize(
    ("row", "column", "value", "message"),
    [
        (0, "task", "XYZ", r"item_id='a1', system_id='s', judge_id='g' has task 'XYZ'"),
        (0, "follows", "yes", r"item_id='a1'.*follows = 'yes'"),
        (0, "parse_ok", None, r"item_id='a1'.*parse_ok = None"),
        (6, "follows", True, r"item_id='d3'.*parse_ok False but follows = True"),
        (0, "language", None, r"item_id='a1'.*null language"),
    ],
)
def test_invalid_rows_raise_naming_the_key(row, column, value, message):
    bad = FRAME.astype(object).copy()
    bad.loc[row, column] = value
    with pytest.raises(ValueError, match=message):
        instruction_scores(bad)


def test_duplicates_and_missing_columns_raise():
    with pytest.raises(ValueError, match=r"duplicate row for item_id='a1', system_id='s', judge_id='g'"):
        instruction_scores(pd.concat([FRAME, FRAME.iloc[[0]]]))
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['parse_ok'\]"):
        instruction_scores(FRAME.drop(columns="parse_ok"))
