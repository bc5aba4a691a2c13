"""Tests for ttseval.metrics.agreement.

Independent references, per test: hand-worked values in the comments; scipy.stats
(friedmanchisquare for the identity chi2 = m (n - 1) W, spearmanr directly); and the
published worked example of Krippendorff (2011), "Computing Krippendorff's
Alpha-Reliability", section C (4 observers x 12 units with missing values), whose
published values are nominal 0.743, ordinal 0.815, interval 0.849, ratio 0.797.
"""

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from ttseval.metrics.agreement import (
    human_alignment,
    kendalls_w,
    krippendorff_alpha,
    pairwise_spearman,
    preference_alignment,
)

NAN = float("nan")

# Hand-worked, no ties: 3 judges x 4 systems, scores already ranks.
#   ranks  J1: 1 2 3 4 | J2: 2 1 3 4 | J3: 1 3 2 4
#   rank sums R = 4, 6, 8, 12; mean m (n + 1) / 2 = 7.5; deviations -3.5 -1.5 0.5 4.5
#   S = 12.25 + 2.25 + 0.25 + 20.25 = 35;  W = 12 * 35 / (3^2 * (4^3 - 4)) = 420 / 540 = 7/9
UNTIED = np.array([[1, 2, 3, 4], [2, 1, 3, 4], [1, 3, 2, 4]], dtype=float)

# Hand-worked, with ties (raw scores, higher = better):
#   J1 4 2 2 1 -> ranks 4 2.5 2.5 1   (one pair tied:  T1 = 2^3 - 2 = 6)
#   J2 4 3 1 2 -> ranks 4 3 1 2       (T2 = 0)
#   J3 3 3 1 1 -> ranks 3.5 3.5 1.5 1.5 (two pairs: T3 = 6 + 6 = 12)
#   R = 11.5, 9, 5, 4.5; deviations from 7.5: 4, 1.5, -2.5, -3; S = 16 + 2.25 + 6.25 + 9 = 33.5
#   corrected:   W = 12 * 33.5 / (9 * 60 - 3 * 18) = 402 / 486 = 67/81
#   uncorrected: W = 402 / 540 = 67/90
TIED = np.array([[4, 2, 2, 1], [4, 3, 1, 2], [3, 3, 1, 1]], dtype=float)

# Krippendorff (2011), section C: rows = observers A-D, columns = units 1-12, NaN = missing.
KRIPP_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
        [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
    ]
)


def test_kendalls_w_hand_worked_untied_and_tied():
    assert kendalls_w(UNTIED) == pytest.approx(7 / 9, abs=1e-12)
    assert kendalls_w(UNTIED, correct_ties=False) == pytest.approx(7 / 9, abs=1e-12)  # no ties: same
    assert kendalls_w(TIED) == pytest.approx(67 / 81, abs=1e-12)
    assert kendalls_w(TIED, correct_ties=False) == pytest.approx(67 / 90, abs=1e-12)


def test_kendalls_w_invariants():
    # Identical rankings -> 1; exact reversal by one of two judges -> 0 (R_i all equal n + 1).
    same = np.array([[0.1, 0.5, 0.9], [1.0, 2.0, 3.0], [10, 20, 30]])
    assert kendalls_w(same) == pytest.approx(1.0, abs=1e-12)
    assert kendalls_w(np.array([[1, 2, 3, 4], [4, 3, 2, 1]])) == pytest.approx(0.0, abs=1e-12)
    # Higher-is-better vs lower-is-better ranking gives the same W; labels do not matter.
    assert kendalls_w(-TIED) == pytest.approx(kendalls_w(TIED), abs=1e-12)
    frame = pd.DataFrame(TIED, index=["g", "h", "k"], columns=["a", "b", "c", "d"])
    assert kendalls_w(frame) == pytest.approx(67 / 81, abs=1e-12)


@pytest.mark.parametrize("data", [UNTIED, TIED, np.random.default_rng(0).integers(1, 6, (7, 5)).astype(float)])
def test_friedman_identity_chi2_equals_m_n_minus_1_w(data):
    # scipy.stats.friedmanchisquare takes one sample per treatment (= system, a column) with the
    # blocks (= judges) aligned, and divides by the tie correction 1 - sum T / (m n (n^2 - 1)).
    # Algebra: that corrected chi2 equals m (n - 1) W with the tie-corrected W, on tied data too.
    # (The random 7 x 5 integer data has many ties.)
    m, n = data.shape
    chi2 = scipy.stats.friedmanchisquare(*data.T).statistic
    assert chi2 == pytest.approx(m * (n - 1) * kendalls_w(data), rel=1e-12)
    # Hand value for TIED: 3 * 3 * 67/81 = 67/9
    if data is TIED:
        assert chi2 == pytest.approx(67 / 9, rel=1e-12)


def test_kendalls_w_rejects_bad_input():
    with pytest.raises(ValueError, match="at least 2 judges and 2 systems"):
        kendalls_w(np.array([[1.0, 2.0, 3.0]]))
    with pytest.raises(ValueError, match="at least 2 judges and 2 systems"):
        kendalls_w(np.array([[1.0], [2.0]]))
    frame = pd.DataFrame([[1.0, 2.0], [NAN, 1.0]], index=["g", "h"], columns=["sysA", "sysB"])
    with pytest.raises(ValueError, match=r"judge='h', system='sysA'"):
        kendalls_w(frame)
    with pytest.raises(ValueError, match="undefined"):
        kendalls_w(np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]))


def test_pairwise_spearman_hand_case_and_scipy():
    # J1 1 2 3 4; J2 1 2 4 3: d = 0 0 1 1, rho = 1 - 6 * 2 / (4 * 15) = 0.8
    # J3 4 3 2 1 is J1 reversed: rho(J1, J3) = -1; rho(J2, J3): d = -3 -1 2 2, sum d^2 = 18,
    # rho = 1 - 6 * 18 / 60 = -0.8
    scores = pd.DataFrame(
        [[1, 2, 3, 4], [1, 2, 4, 3], [4, 3, 2, 1]], index=["J1", "J2", "J3"], columns=list("abcd"), dtype=float
    )
    rho = pairwise_spearman(scores)
    expected = pd.DataFrame(
        [[1.0, 0.8, -1.0], [0.8, 1.0, -0.8], [-1.0, -0.8, 1.0]], index=["J1", "J2", "J3"], columns=["J1", "J2", "J3"]
    )
    pd.testing.assert_frame_equal(rho, expected, atol=1e-12, rtol=0)
    # Against scipy directly on random tied data (scipy's matrix form for > 2 variables).
    rng = np.random.default_rng(5)
    data = pd.DataFrame(rng.integers(0, 4, (4, 9)).astype(float), index=list("wxyz"))
    np.testing.assert_allclose(pairwise_spearman(data).to_numpy(), scipy.stats.spearmanr(data.T).statistic, atol=1e-12)


def test_pairwise_spearman_constant_judge_is_nan_not_a_fallback():
    scores = pd.DataFrame([[1, 2, 3], [2, 2, 2], [1, 3, 2]], index=["g", "flat", "h"], dtype=float)
    rho = pairwise_spearman(scores)
    assert rho.loc["flat"].isna().all() and rho["flat"].isna().all()
    assert rho.loc["g", "h"] == pytest.approx(0.5, abs=1e-12)  # d = 0 -1 1, 1 - 6 * 2 / 24 = 0.5
    with pytest.raises(ValueError, match=r"judge='g', system=1"):
        pairwise_spearman(pd.DataFrame([[1, NAN, 3], [1, 2, 3]], index=["g", "h"], dtype=float))


def test_human_alignment_hand_case_matched_by_index():
    # judge ranks a..e: 1 3 2 5 4; human ranks: 1 3 2 4 5; d = 0 0 0 1 -1, rho = 1 - 6 * 2 / (5 * 24) = 0.9.
    judge = pd.Series({"a": 0.1, "b": 0.5, "c": 0.3, "d": 0.9, "e": 0.7})
    human = pd.Series({"e": 5.0, "d": 4.0, "c": 2.0, "b": 3.0, "a": 1.0})  # other order: matched by index
    result = human_alignment(judge, human)
    assert result["spearman"] == pytest.approx(0.9, abs=1e-12)
    assert result["n_systems"] == 5
    assert result["p_value"] == pytest.approx(
        scipy.stats.spearmanr([0.1, 0.5, 0.3, 0.9, 0.7], [1, 3, 2, 4, 5]).pvalue, rel=1e-12
    )


def test_human_alignment_rejects_mismatch_and_degenerate_input():
    judge = pd.Series({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    human = pd.Series({"a": 1.0, "b": 2.0, "c": 3.0, "x": 4.0})
    with pytest.raises(ValueError, match=r"missing from human_scores \['d'\], missing from judge_scores \['x'\]"):
        human_alignment(judge, human)
    with pytest.raises(ValueError, match="at least 3 systems"):
        human_alignment(judge.iloc[:2], judge.iloc[:2])
    with pytest.raises(ValueError, match="same score"):
        human_alignment(judge, pd.Series(1.0, index=judge.index))
    with pytest.raises(ValueError, match=r"system_id='b'"):
        human_alignment(judge, pd.Series({"a": 1.0, "b": NAN, "c": 3.0, "d": 4.0}))


@pytest.mark.parametrize(
    ("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
)
def test_krippendorff_alpha_reproduces_published_2011_example(level, published):
    # Published to 3 decimals (the wrapper gives nominal 0.74342..., ordinal 0.81539..., interval
    # 0.84911..., ratio 0.79740...), so the check is equality after rounding to 3 decimals.
    assert round(krippendorff_alpha(KRIPP_2011, level=level), 3) == published


def test_krippendorff_alpha_nominal_small_case_by_hand():
    # Raters A = 0 0 1 1 1, B = 0 1 1 1 NaN (unit 5 has one value: unpairable, ignored).
    # Coincidences (each pairable unit adds 2 / (m_u - 1) = 2 pairable values):
    #   o_00 = 2 (unit 1), o_01 = o_10 = 1 (unit 2), o_11 = 4 (units 3, 4);  n_0 = 3, n_1 = 5, n = 8
    #   alpha = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c n_k = 1 - 7 * 2 / (2 * 3 * 5) = 8/15
    data = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 1, NAN]])
    assert krippendorff_alpha(data) == pytest.approx(8 / 15, abs=1e-12)
    assert krippendorff_alpha(np.array([[0, 1, 2], [0, 1, 2]])) == pytest.approx(1.0, abs=1e-12)


def test_krippendorff_alpha_rejects_bad_input():
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(KRIPP_2011, level="binary")
    with pytest.raises(ValueError, match="at least 2 raters"):
        krippendorff_alpha(np.array([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="two-dimensional"):
        krippendorff_alpha(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="more than one value"):
        krippendorff_alpha(np.array([[1.0, 1.0], [1.0, 1.0]]))


# (item, system): judge / human
#   (i1, s1) c / c   (i2, s1) c / b   (i1, s2) b / b   (i2, s2) t / t   (i1, s3) t / c   (i2, s3) b / b
#   plus (i3, s1) only in judge -> counted as n_judge_only, not compared.
# raw agreement: pairs 1, 3, 4, 6 agree -> 4/6
# nominal alpha, judge and human as 2 raters over 6 units:
#   pairs (c,c) (c,b) (b,b) (t,t) (t,c) (b,b) -> o_cc 2, o_cb = o_bc 1, o_bb 4, o_tt 2, o_tc = o_ct 1
#   n_c = 4, n_b = 5, n_t = 3, n = 12; off-diagonal sum 4; sum_{c != k} n_c n_k = 144 - (16 + 25 + 9) = 94
#   alpha = 1 - 11 * 4 / 94 = 50/94 = 25/47
# per-system win-rates (c 1, t 0.5, b 0): judge s1 1.0, s2 0.25, s3 0.25; human s1 0.5, s2 0.25, s3 0.5
#   ranks judge 3 1.5 1.5, human 2.5 1 2.5; deviations (1, -.5, -.5) and (.5, -1, .5)
#   rho = (0.5 + 0.5 - 0.25) / sqrt(1.5 * 1.5) = 0.5
JUDGE = pd.DataFrame(
    [
        ("i1", "s1", "candidate"),
        ("i2", "s1", "candidate"),
        ("i1", "s2", "baseline"),
        ("i2", "s2", "tie"),
        ("i1", "s3", "tie"),
        ("i2", "s3", "baseline"),
        ("i3", "s1", "candidate"),
    ],
    columns=["item_id", "system_id", "preference"],
)
HUMAN = pd.DataFrame(
    [
        ("i2", "s3", "baseline"),
        ("i1", "s3", "candidate"),
        ("i2", "s2", "tie"),
        ("i1", "s2", "baseline"),
        ("i2", "s1", "baseline"),
        ("i1", "s1", "candidate"),
    ],
    columns=["item_id", "system_id", "preference"],
)


def test_preference_alignment_hand_worked():
    result = preference_alignment(JUDGE, HUMAN)
    assert (result["n"], result["n_judge_only"], result["n_human_only"], result["n_systems"]) == (6, 1, 0, 3)
    assert result["raw_agreement"] == pytest.approx(4 / 6, abs=1e-12)
    assert result["krippendorff_alpha"] == pytest.approx(25 / 47, abs=1e-12)
    assert result["spearman"] == pytest.approx(0.5, abs=1e-12)


def test_preference_alignment_identical_raters_and_errors():
    same = preference_alignment(HUMAN, HUMAN)
    assert (same["raw_agreement"], same["krippendorff_alpha"], same["spearman"]) == (1.0, 1.0, 1.0)
    bad = JUDGE.copy()
    bad.loc[2, "preference"] = None
    with pytest.raises(ValueError, match=r"judge row item_id='i1', system_id='s2' has preference (None|nan)"):
        preference_alignment(bad, HUMAN)
    with pytest.raises(ValueError, match=r"human has a duplicate row for item_id='i2', system_id='s3'"):
        preference_alignment(JUDGE, pd.concat([HUMAN, HUMAN.iloc[[0]]]))
    with pytest.raises(ValueError, match="no \\(item_id, system_id\\) pair"):
        preference_alignment(JUDGE.assign(item_id=JUDGE.item_id + "x"), HUMAN)


def test_degenerate_judge_flags_a_constant_or_mute_judge_and_nothing_else() -> None:
    from ttseval.metrics.agreement import degenerate_judge

    def rows(answers: list[str | None], status: str = "ok") -> pd.DataFrame:
        return pd.DataFrame({"status": status, "parse_ok": [a is not None for a in answers], "winner_raw": answers})

    assert "answered 'first' on all 12 parsed" in degenerate_judge(rows(["first"] * 12))
    assert "answered 'tie' on all 10 parsed" in degenerate_judge(rows(["tie"] * 10 + [None] * 3))
    assert "none of its 11 answers parsed" in degenerate_judge(rows([None] * 11))
    assert degenerate_judge(rows(["first"] * 11 + ["second"])) is None  # one different answer is a ranking
    assert degenerate_judge(rows(["first"] * 9)) is None  # too few to tell from chance
    assert degenerate_judge(rows(["first"] * 9 + [None] * 3)) is None  # 12 answered, 9 parsed: too few parsed
    assert degenerate_judge(rows([None] * 20, status="failed")) is None  # transport failures are not answers


def test_judge_agreement_over_overall_win_rates_needs_two_judges_and_two_shared_systems() -> None:
    from ttseval.metrics.agreement import judge_agreement

    def rows(judge: str, rates: dict[str, float]) -> list[dict]:
        return [{"judge_spec": judge, "system_id": s, "level": "overall", "win_rate": r} for s, r in rates.items()]

    same = pd.DataFrame(
        rows("A", {"s1": 0.8, "s2": 0.5, "s3": 0.2})
        + rows("B", {"s1": 0.7, "s2": 0.6, "s3": 0.1})
        + [{"judge_spec": "B", "system_id": "s1", "level": "category", "win_rate": 0.0}]
    )
    out = judge_agreement(same)
    assert out["n_systems"] == 3 and out["kendalls_w"] == pytest.approx(1.0)
    assert out["spearman"].loc["A", "B"] == pytest.approx(1.0)
    # reversed rankings: every system's rank sum is 4, so W is 0; a system one judge lacks is left out
    reversed_ = pd.DataFrame(
        rows("A", {"s1": 0.8, "s2": 0.5, "s3": 0.2, "s4": 0.4}) + rows("B", {"s1": 0.1, "s2": 0.5, "s3": 0.9})
    )
    out = judge_agreement(reversed_)
    assert out["n_systems"] == 3 and out["kendalls_w"] == pytest.approx(0.0)
    assert out["spearman"].loc["A", "B"] == pytest.approx(-1.0)
    assert judge_agreement(pd.DataFrame(rows("A", {"s1": 0.8, "s2": 0.5}))) is None
