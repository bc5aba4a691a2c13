"""Raters x items planning of a listening test: the 95% half-width of the closest pair's
difference per (listeners, utterances) cell, drawn from a pilot as MANGO's subsampling draws (with replacement),
checked against a direct simulation of tests of that size and the variance-components formula."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ttseval.metrics.listening import closest_pair, difference_planning

SD_RATER, SD_ITEM, SD_NOISE = 4.0, 5.0, 10.0  # a rater's own taste per system, an item's per system, each rating


def _tests(n_raters: int, n_items: int, rng: np.random.Generator, mu=(60.0, 57.0)) -> np.ndarray:
    """rater x item x system scores: system mean + rater x system + item x system + noise (a crossed design)."""
    return (
        np.array(mu)
        + rng.normal(0, SD_RATER, (n_raters, 1, 2))
        + rng.normal(0, SD_ITEM, (1, n_items, 2))
        + rng.normal(0, SD_NOISE, (n_raters, n_items, 2))
    )


def _ratings(cube: np.ndarray, systems=("a", "b")) -> pd.DataFrame:
    r, i, s = np.meshgrid(*map(np.arange, cube.shape), indexing="ij")
    return pd.DataFrame(
        {
            "rater_id": [f"r{k:03d}" for k in r.ravel()],
            "item_id": [f"i{k:03d}" for k in i.ravel()],
            "system_id": np.array(systems)[s.ravel()],
            "score": cube.ravel(),
        }
    )


def test_one_cell_matches_a_direct_simulation_and_the_formula() -> None:
    rng = np.random.default_rng(0)
    pilot = _ratings(_tests(150, 150, rng))
    plan = difference_planning(pilot, "a", "b", [5, 10, 20], [10, 20, 40], trials=2000, seed=1)
    cell = plan.set_index(["listeners", "utterances"]).loc[(10, 20)]
    # direct simulation: 4,000 fresh tests of 10 raters x 20 items drawn from the model itself
    diffs = [np.subtract(*_tests(10, 20, rng).mean(axis=(0, 1))) for _ in range(4000)]
    low, high = np.percentile(diffs, [2.5, 97.5])
    assert cell["half_width"] == pytest.approx((high - low) / 2, rel=0.06)
    # by hand: var = 2 sd_rater^2 / 10 + 2 sd_item^2 / 20 + 2 sd_noise^2 / 200 = 3.2 + 2.5 + 1 = 6.7; 1.96 sqrt(6.7)
    assert cell["half_width"] == pytest.approx(1.96 * np.sqrt(6.7), rel=0.06)
    assert cell["trials_used"] == 2000
    widths = plan.pivot(index="listeners", columns="utterances", values="half_width").to_numpy()
    assert (np.diff(widths, axis=0) < 0).all() and (np.diff(widths, axis=1) < 0).all()  # more of either: narrower
    same = plan.pivot(index="listeners", columns="utterances", values="same_sign").to_numpy()
    assert same[0, 0] < same[-1, -1] <= 1


def test_a_pilot_without_spread_and_the_closest_pair_by_hand() -> None:
    rows = [
        {"rater_id": f"r{r}", "item_id": f"i{i}", "system_id": s, "score": v}
        for r in range(3)
        for i in range(4)
        for s, v in (("top", 80.0), ("a", 70.0), ("b", 66.0), ("low", 20.0))
    ]
    ratings = pd.DataFrame(rows)
    assert closest_pair(ratings) == ("a", "b")  # gaps 10, 4, 46
    assert closest_pair(ratings[ratings["system_id"] == "a"]) is None
    plan = difference_planning(ratings, "a", "b", [2, 5], [3], trials=50, seed=0)
    # every rating of a is 70 and of b 66: every draw measures 4 exactly, in the pilot's order
    assert plan[["difference", "half_width", "same_sign"]].values.tolist() == [[4.0, 0.0, 1.0]] * 2
