"""Listening-test statistics (metrics/listening.py) against hand-worked cases, scipy, Krippendorff's formula
written out by hand (tests/unit/test_mos_forms.py), and a synthetic ratings set of known structure: simulated raters
with biases and noise, some of them unreliable."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tests.support.alpha import ordinal_alpha_by_hand
from ttseval.metrics.listening import (
    DGWeights,
    cmos_summary,
    dg_score,
    fault_isolation,
    lambda_effect,
    metric_correlation,
    mos_alpha,
    rater_rejection,
    subsampling,
    system_stats,
)

TRUE = {"ref": 92.0, "st2": 74.0, "vits": 66.0, "fs2": 55.0, "anchor": 25.0}  # well apart


def _sheet(**fields: float) -> pd.DataFrame:
    base = dict.fromkeys(
        [
            "mild_pronunciation",
            "severe_pronunciation",
            "unnatural_pauses",
            "digital_artifacts",
            "energy_fluctuations",
            "word_skips",
        ],
        0.0,
    ) | dict.fromkeys(["liveliness", "voice_quality", "rhythm"], 100.0)
    return pd.DataFrame([base | fields])


def test_dg_formula_matches_appendix_a6_worked_by_hand() -> None:
    # (100 + 85 + 70) / 3 = 85; - 2 mild x 5 - 1 severe x 10 - 1 pause x 5 - 1 energy x 5 = 85 - 30 = 55
    assert (
        dg_score(
            _sheet(
                liveliness=100,
                voice_quality=85,
                rhythm=70,
                mild_pronunciation=2,
                severe_pronunciation=1,
                unnatural_pauses=1,
                energy_fluctuations=1,
            )
        ).iloc[0]
        == 55.0
    )
    # one word skip costs 25, a digital artifact 5
    assert dg_score(_sheet(word_skips=1, digital_artifacts=1)).iloc[0] == 70.0
    # the caps: 20 mild count as 15 (-75), 9 severe as 7 (-70); unclipped 100 - 145 = -45, clipped 0
    capped = _sheet(mild_pronunciation=20, severe_pronunciation=9)
    assert dg_score(capped, DGWeights(clip=False)).iloc[0] == -45.0
    assert dg_score(capped).iloc[0] == 0.0
    assert dg_score(_sheet(mild_pronunciation=16), DGWeights(clip=False)).iloc[0] == 25.0  # capped at 15
    # weights are settings: an audiobook might punish a word skip less and a flat voice more
    assert dg_score(_sheet(word_skips=2), DGWeights(word_skips=10)).iloc[0] == 80.0
    assert np.isnan(dg_score(_sheet(rhythm=np.nan)).iloc[0])  # a missing field is no score


def test_ci_is_students_t_by_hand_and_by_scipy() -> None:
    ratings = pd.DataFrame(
        {
            "system_id": ["a"] * 3 + ["b"] * 40,
            "role": "system",
            "score": [60, 70, 80, *np.random.default_rng(0).normal(50, 12, 40)],
        }
    )
    table = system_stats(ratings).set_index("system_id")
    # by hand: mean 70, sigma 10, t(0.975, 2) = 4.302653, half-width 4.302653 * 10 / sqrt(3) = 24.841
    assert table.loc["a", "mean"] == 70 and table.loc["a", "sigma"] == 10
    assert table.loc["a", "ci95"] == pytest.approx(24.841, abs=1e-3)
    b = ratings.loc[ratings["system_id"] == "b", "score"]
    low, high = stats.t.interval(0.95, len(b) - 1, loc=b.mean(), scale=stats.sem(b))
    assert (table.loc["b", "ci_low"], table.loc["b", "ci_high"]) == pytest.approx((low, high), rel=1e-12)
    assert list(table["rank"]) == [1, 2]


def _page_ratings(ref_scores: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for rater, scores in ref_scores.items():
        for page, score in enumerate(scores):
            rows.append(
                {
                    "rater_id": rater,
                    "trial_id": f"p{page}",
                    "item_id": f"i{page}",
                    "system_id": "nat",
                    "role": "reference",
                    "score": score,
                }
            )
            rows.append(
                {
                    "rater_id": rater,
                    "trial_id": f"p{page}",
                    "item_id": f"i{page}",
                    "system_id": "sys",
                    "role": "system",
                    "score": score - 20,
                }
            )
    return pd.DataFrame(rows)


def test_rejection_rule_by_hand() -> None:
    # 10 pages each; A scores the hidden reference below 90 on 2 pages (20% > 15%), B on 1 (10%), C on none
    ratings = _page_ratings(
        {"A": [95, 85, 80, 95, 95, 95, 95, 95, 95, 95], "B": [95, 95, 89.9, 95, 95, 95, 95, 95, 95, 95], "C": [90] * 10}
    )  # 90 is not below 90
    verdict = rater_rejection(ratings, 90).set_index("rater_id")
    assert verdict["below"].to_dict() == {"A": 2, "B": 1, "C": 0}
    assert verdict["rejected"].to_dict() == {"A": True, "B": False, "C": False}
    assert verdict.loc["A", "share_below"] == 0.2
    assert not rater_rejection(ratings, 82).set_index("rater_id").loc["A", "rejected"]  # 80 < 82 only once: 10%
    effect = lambda_effect(ratings, [90])
    kept = effect.drop_duplicates("lambda")["raters_kept"]  # no rule first, then each lambda
    assert list(kept) == [3, 2]  # none rejected without the rule, A at 90
    nat_90 = effect[(effect["lambda"] == 90) & (effect["system_id"] == "nat")]["mean"].iloc[0]
    assert nat_90 == pytest.approx(np.mean([95] * 9 + [89.9] + [90] * 10))  # B and C's references
    no_ref = pd.DataFrame(
        [{"rater_id": "D", "trial_id": "p0", "item_id": "i0", "system_id": "sys", "role": "system", "score": 50.0}]
    )
    assert pd.isna(rater_rejection(no_ref, 90)["rejected"].iloc[0])  # not judged: no hidden reference


def _simulated(n_raters: int = 24, n_unreliable: int = 4, n_items: int = 30, seed: int = 0) -> pd.DataFrame:
    """Every rater rates every item's five conditions. Reliable raters: the condition's true quality + the
    item's difficulty + their own bias (sd 6) + noise (sd 8), the hidden reference near the top. Unreliable
    raters: anything between 0 and 100."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 4, n_items)
    rows = []
    for r in range(n_raters):
        unreliable = r >= n_raters - n_unreliable
        bias = rng.normal(0, 6)
        for i in range(n_items):
            for system, quality in TRUE.items():
                if unreliable:
                    score = rng.uniform(0, 100)
                elif system == "ref":
                    score = np.clip(97 + rng.normal(0, 2), 0, 100)
                else:
                    score = np.clip(quality + difficulty[i] + bias + rng.normal(0, 8), 0, 100)
                rows.append(
                    {
                        "rater_id": f"r{r:02d}",
                        "trial_id": f"p{i:03d}",
                        "item_id": f"i{i:03d}",
                        "system_id": system,
                        "role": "reference" if system == "ref" else "system",
                        "score": float(score),
                    }
                )
    return pd.DataFrame(rows)


def test_synthetic_raters_give_the_true_ranking_and_the_unreliable_ones_are_rejected() -> None:
    ratings = _simulated()
    table = system_stats(ratings)
    assert list(table["system_id"]) == sorted(TRUE, key=TRUE.get, reverse=True)
    verdict = rater_rejection(ratings, 90)
    assert set(verdict.loc[verdict["rejected"].astype(bool), "rater_id"]) == {"r20", "r21", "r22", "r23"}
    effect = lambda_effect(ratings, [50, 90])
    # rejecting the unreliable raters keeps the ranks and moves the scores (section 4.4): the reference up
    by = {lam: g.set_index("system_id") for lam, g in effect.fillna({"lambda": -1}).groupby("lambda")}
    assert (by[-1]["rank"] == by[90]["rank"]).all()
    assert by[90].loc["ref", "mean"] > by[-1].loc["ref", "mean"] + 3
    assert by[90]["raters_kept"].iloc[0] == 20


def test_subsampling_curve_rises_with_listeners_and_utterances_to_one() -> None:
    ratings = _simulated(n_raters=20, n_unreliable=0, seed=1)
    # reliable raters, two close systems: small subsets of raters and items disagree with the full ranking
    ratings = ratings[ratings["system_id"].isin(["st2", "vits", "fs2"])].copy()
    ratings.loc[ratings["system_id"] == "vits", "score"] += 5  # 71 vs 74: hard to tell apart
    curve = subsampling(ratings, [2, 5, 10, 20], [2, 10, 30], trials=300, seed=0)
    grid = curve.pivot(index="listeners", columns="utterances", values="mean_rho")
    assert grid.loc[20, 30] == pytest.approx(1.0)  # every rater and item: the full set itself
    assert grid.loc[2, 2] < 0.9  # two listeners of two utterances often get the close pair wrong
    for utterances in grid.columns:  # more listeners, closer to the full ranking
        assert grid[utterances].is_monotonic_increasing
    for listeners in grid.index:
        assert grid.loc[listeners].is_monotonic_increasing
    assert (curve["trials_used"] > 0).all()


def test_subsampling_equals_the_average_over_every_subset_by_scipy() -> None:
    """3 raters x 2 items, 2 listeners x 2 utterances: the 3 rater pairs are equally likely, so the mean over many
    draws tends to the average of scipy's Spearman over the three."""
    scores = {"r0": {"a": 80, "b": 60, "c": 40}, "r1": {"a": 50, "b": 70, "c": 30}, "r2": {"a": 55, "b": 50, "c": 70}}
    ratings = pd.DataFrame(
        [
            {
                "rater_id": r,
                "item_id": i,
                "trial_id": i,
                "system_id": s,
                "role": "system",
                "score": v + (5 if i == "i1" else 0),
            }
            for r, by in scores.items()
            for s, v in by.items()
            for i in ("i0", "i1")
        ]
    )
    full = ratings.groupby("system_id")["score"].mean()
    expected = np.mean(
        [
            stats.spearmanr(
                ratings[ratings["rater_id"].isin(pair)].groupby("system_id")["score"].mean(), full
            ).statistic
            for pair in itertools.combinations(scores, 2)
        ]
    )
    got = subsampling(ratings, [2], [2], trials=4000, seed=3)["mean_rho"].iloc[0]
    assert got == pytest.approx(expected, abs=0.03)


def test_cmos_and_preference_shares_by_hand() -> None:
    ratings = pd.DataFrame(
        {"system_id": ["st2"] * 5 + ["fs2"] * 4, "score": [1.0, 0.5, 0.0, -0.5, 1.5, -1.0, -2.0, -1.5, 0.0]}
    )
    table = cmos_summary(ratings).set_index("system_id")
    # st2: mean 0.5, sd sqrt(((.5)^2 + 0 + .5^2 + 1^2 + 1^2) / 4) = sqrt(0.625); t(0.975, 4) = 2.776445
    assert table.loc["st2", "cmos"] == 0.5
    assert table.loc["st2", "ci95"] == pytest.approx(2.776445 * np.sqrt(0.625) / np.sqrt(5), abs=1e-6)
    assert (table.loc["st2", "prefer_system"], table.loc["st2", "equal"], table.loc["st2", "prefer_reference"]) == (
        0.6,
        0.2,
        0.2,
    )
    assert table.loc["fs2", "cmos"] == -1.125 and table.loc["fs2", "prefer_reference"] == 0.75


def test_mos_alpha_against_krippendorffs_formula_by_hand() -> None:
    rng = np.random.default_rng(4)
    rows = [
        {
            "rater_id": f"r{r}",
            "item_id": f"i{i}",
            "system_id": s,
            "score": float(np.clip(q + rng.integers(-1, 2), 1, 5)),
        }
        for r in range(5)
        for i in range(6)
        for s, q in (("good", 4), ("bad", 2))
    ]
    ratings = pd.DataFrame(rows)
    units = ratings.pivot_table(index="rater_id", columns=["item_id", "system_id"], values="score").to_numpy(float)
    assert mos_alpha(ratings) == pytest.approx(ordinal_alpha_by_hand(units), abs=1e-9)
    assert np.isnan(mos_alpha(ratings[ratings["rater_id"] == "r0"]))  # one rater: undefined


def test_fault_isolation_and_metric_correlation() -> None:
    sheets = pd.concat(
        [
            _sheet(word_skips=1).assign(system_id="a"),
            _sheet().assign(system_id="a"),
            _sheet(digital_artifacts=2, liveliness=70).assign(system_id="b"),
        ]
    )
    faults = fault_isolation(sheets).set_index("system_id")
    assert faults.loc["a", "word_skips"] == 0.5 and faults.loc["b", "digital_artifacts"] == 1.0
    assert faults.loc["b", "liveliness"] == 70 and faults.loc["a", "n"] == 2
    human = pd.DataFrame({"system_id": list("abcd"), "score": [80, 70, 60, 50]})
    metrics = pd.DataFrame(
        {"system_id": list("abcd"), "wer": [0.01, 0.05, 0.04, 0.2], "mos": [4.1, 3.9, 3.0, 2.2], "flat": [1, 1, 1, 1]}
    )
    corr = metric_correlation(human, metrics, ["system_id"]).set_index("metric")
    assert corr.loc["wer", "spearman"] == pytest.approx(stats.spearmanr([80, 70, 60, 50], [0.01, 0.05, 0.04, 0.2])[0])
    assert corr.loc["mos", "spearman"] == 1.0 and corr.loc["wer", "spearman"] < 0
    assert corr.loc["mos", "pearson"] == pytest.approx(stats.pearsonr([80, 70, 60, 50], [4.1, 3.9, 3.0, 2.2])[0])
    assert np.isnan(corr.loc["flat", "spearman"])  # a constant metric correlates with nothing


def test_subsampling_grid_is_the_grid_below_n_and_n_itself() -> None:
    from ttseval.metrics.listening import GRID, subsampling_grid

    assert subsampling_grid(12) == [2, 3, 5, 10, 12]
    assert subsampling_grid(10) == [2, 3, 5, 10]
    assert subsampling_grid(2) == [2]
    assert subsampling_grid(1) == [1]
    assert subsampling_grid(250) == [*GRID, 250]
