"""Bradley-Terry strengths (metrics/bradley_terry.py): a case worked by hand (closed-form logits), choix's
`opt_pairwise` (an established implementation) on simulated outcomes with ties, the Elo rescaling by hand, and the
bootstrap intervals over items (contain the truth on a large simulated run; none under MIN_INTERVAL_ITEMS items)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ttseval.metrics.bootstrap import MIN_INTERVAL_ITEMS
from ttseval.metrics.bradley_terry import BT_COLUMNS, ELO_SCALE, bradley_terry, fit_strengths, judgment_outcomes


def _simulate(true: np.ndarray, n_items: int, seed: int, tie_share: float = 0.2) -> pd.DataFrame:
    """Every pair of systems on every item: a win with probability (1 - tie_share) * P_BT, a tie with tie_share."""
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(n_items):
        for i in range(len(true)):
            for j in range(i + 1, len(true)):
                p = 1 / (1 + np.exp(-(true[i] - true[j])))
                u = rng.uniform()
                score = 1.0 if u < (1 - tie_share) * p else 0.5 if u < (1 - tie_share) * p + tie_share else 0.0
                rows.append((f"i{item:03d}", f"s{i}", f"s{j}", score))
    return pd.DataFrame(rows, columns=["item_id", "a", "b", "score"])


def _choix_data(a, b, score) -> list[tuple[int, int]]:
    """choix takes (winner, loser) pairs: a win is counted twice, a tie once each way (a tie is half a win)."""
    data = []
    for x, y, s in zip(a, b, score):
        data += [(x, y), (x, y)] if s == 1 else [(y, x), (y, x)] if s == 0 else [(x, y), (y, x)]
    return data


def test_a_star_design_worked_by_hand() -> None:
    # baseline 0; system 1 against it: win, win, tie, tie, loss -> share (2 + 1) / 5 = 0.6; system 2: 1 win, 3 losses
    a = [1] * 5 + [2] * 4
    b = [0] * 9
    score = [1, 1, 0.5, 0.5, 0, 1, 0, 0, 0]
    s = fit_strengths(3, a, b, score, alpha=0)
    # no prior: each pair's MLE is the logit of its share, s1 - s0 = ln(0.6 / 0.4), s2 - s0 = ln(0.25 / 0.75)
    assert s[1] - s[0] == pytest.approx(math.log(1.5), abs=1e-7)
    assert s[2] - s[0] == pytest.approx(math.log(1 / 3), abs=1e-7)
    assert s.sum() == pytest.approx(0, abs=1e-12)
    # the Elo view: 400 * log10 of the odds; 1 beats 0 at 3:2 -> 400 log10(1.5) = 70.4 points
    assert ELO_SCALE * (s[1] - s[0]) == pytest.approx(400 * math.log10(1.5))


@pytest.mark.parametrize("alpha", [0.0, 0.01, 0.5])
def test_strengths_match_choix_on_simulated_outcomes_with_ties(alpha: float) -> None:
    import choix

    true = np.array([0.0, 0.6, 1.1, -0.4, 0.2])
    outcomes = _simulate(true, 40, seed=3)
    a = outcomes["a"].str[1:].astype(int).to_numpy()
    b = outcomes["b"].str[1:].astype(int).to_numpy()
    mine = fit_strengths(5, a, b, outcomes["score"], alpha=alpha)
    # choix's penalty is alpha * sum(s^2) on its doubled data, i.e. twice the likelihood: 2 * alpha here
    theirs = choix.opt_pairwise(5, _choix_data(a, b, outcomes["score"]), alpha=2 * alpha, tol=1e-10)
    assert mine == pytest.approx(theirs - theirs.mean(), abs=1e-6)


def test_intervals_over_items_cover_the_truth_and_rank_by_lower_bound() -> None:
    true = np.array([0.0, 0.8, -0.8])
    outcomes = _simulate(true, 150, seed=5, tie_share=0.0)  # no ties: the simulated strengths are the truth
    table = bradley_terry(outcomes, n_resamples=400, seed=1)
    assert list(table.columns) == list(BT_COLUMNS)
    assert list(table["system_id"]) == ["s1", "s0", "s2"]  # by the lower bound, highest first
    assert list(table["rank"]) == [1, 2, 3]  # intervals apart: each its own rank
    by = table.set_index("system_id")
    centred = true - true.mean()
    for k, s in enumerate(["s0", "s1", "s2"]):
        assert by.loc[s, "strength_ci_low"] < centred[k] < by.loc[s, "strength_ci_high"]
        assert by.loc[s, "strength_ci_low"] < by.loc[s, "strength"] < by.loc[s, "strength_ci_high"]
        assert by.loc[s, "elo_ci_low"] == pytest.approx(1000 + ELO_SCALE * by.loc[s, "strength_ci_low"])
    assert (table["n_items"] == 150).all() and (table["n_comparisons"] == 300).all()


@pytest.mark.parametrize("batched", [False, True])
def test_intervals_are_scipys_bca_interval_of_the_same_refits(batched: bool, monkeypatch) -> None:
    """The strengths' intervals are scipy.stats.bootstrap(method="BCa") of the refit over resampled items (the
    independent computation: scipy's own jackknife, which holds every leave-one-out sample at once, with every
    resample drawn at once), to 1e-9; also when the resamples are drawn a few at a time, as for thousands of items."""
    from scipy import stats

    from ttseval.metrics import bootstrap

    if batched:
        monkeypatch.setattr(bootstrap, "RESAMPLED_VALUES", 40 * 7)  # 40 items: 7 resamples per batch
        assert bootstrap.resample_batch((np.arange(40),)) == 7
    outcomes = _simulate(np.array([0.0, 0.4, -0.6, 0.1]), 40, seed=11)
    table = bradley_terry(outcomes, n_resamples=200, seed=3).set_index("system_id")
    systems = list(dict.fromkeys([*outcomes["a"], *outcomes["b"]]))
    index = {s: k for k, s in enumerate(systems)}
    items, item_of = np.unique(outcomes["item_id"].to_numpy(), return_inverse=True)
    a, b = outcomes["a"].map(index).to_numpy(), outcomes["b"].map(index).to_numpy()
    score = outcomes["score"].to_numpy(dtype=float)
    point = fit_strengths(len(systems), a, b, score)

    def refit(drawn: np.ndarray, axis: int = -1) -> np.ndarray:
        counts = np.bincount(drawn.astype(int), minlength=len(items))[item_of]
        return fit_strengths(len(systems), a, b, score, weights=counts, initial=point)

    ci = stats.bootstrap(
        (np.arange(len(items)),), refit, n_resamples=200, method="BCa", vectorized=False, rng=np.random.default_rng(3)
    ).confidence_interval
    for k, s in enumerate(systems):
        assert table.loc[s, "strength_ci_low"] == pytest.approx(ci.low[k], abs=1e-9)
        assert table.loc[s, "strength_ci_high"] == pytest.approx(ci.high[k], abs=1e-9)


def test_overlapping_intervals_share_a_rank_and_few_items_get_no_interval() -> None:
    close = _simulate(np.array([0.0, 0.05, 1.5]), 30, seed=2)
    table = bradley_terry(close, n_resamples=300, seed=0).set_index("system_id")
    assert table.loc["s2", "rank"] == 1 and table.loc["s0", "rank"] == table.loc["s1", "rank"] == 2
    few = bradley_terry(close[close["item_id"] < f"i{MIN_INTERVAL_ITEMS - 1:03d}"], n_resamples=50)
    assert few["strength_ci_low"].isna().all() and few["elo"].notna().all()  # n too small: strengths, no interval
    assert list(few["rank"]) == [1, 2, 3]  # without intervals: ordered by strength


def test_judgments_become_outcomes_and_bad_input_is_refused() -> None:
    judgments = pd.DataFrame(
        {
            "item_id": ["i1", "i2", "i3", "i4"],
            "system_id": "s1",
            "baseline_id": "s0",
            "judge_id": "g",
            "winner": ["candidate", "tie", None, "baseline"],
            "parse_ok": [True, True, False, True],
            "status": ["ok", "ok", "ok", "ok"],
        }
    )
    out = judgment_outcomes(judgments)
    assert list(out["score"]) == [1.0, 0.5, 0.0] and list(out["a"]) == ["s1"] * 3 and list(out["b"]) == ["s0"] * 3
    with pytest.raises(ValueError, match=r"comparison 1: a=1, b=1"):
        fit_strengths(2, [0, 1], [1, 1], [1, 1])
    with pytest.raises(ValueError, match=r"comparison 0: .*score=1.5"):
        fit_strengths(2, [0], [1], [1.5])
    with pytest.raises(ValueError, match="lack column"):
        bradley_terry(pd.DataFrame({"a": ["x"]}))
