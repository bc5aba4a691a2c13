"""The sample-size planner (metrics/planning.py): the planned n against statsmodels' TTestPower (an independent
implementation), and against simulations that resample a skewed pilot's per-item differences shifted to the planned
difference: the paired t-test and the report's paired permutation test (sign flips) each reject at about the stated
power."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ttseval.metrics.planning import items_needed, per_item_sd, power_of


@pytest.mark.parametrize(
    "delta, sd, alpha, power, tests",
    [(0.2, 0.6, 0.05, 0.8, 1), (0.02, 0.05, 0.05, 0.9, 1), (0.1, 0.3, 0.05, 0.8, 6), (1.0, 0.5, 0.01, 0.8, 1)],
)
def test_the_planned_n_matches_statsmodels(delta: float, sd: float, alpha: float, power: float, tests: int) -> None:
    from statsmodels.stats.power import TTestPower

    n = items_needed(delta, sd, alpha=alpha, power=power, tests=tests)
    expected = TTestPower().solve_power(
        effect_size=delta / sd, alpha=alpha / tests, power=power, alternative="two-sided"
    )
    assert n == math.ceil(expected - 1e-9)
    assert power_of(n, delta, sd, alpha=alpha / tests) >= power > power_of(n - 1, delta, sd, alpha=alpha / tests)
    assert power_of(n, delta, sd, alpha=alpha / tests) == pytest.approx(
        TTestPower().power(effect_size=delta / sd, nobs=n, alpha=alpha / tests, alternative="two-sided"), abs=1e-6
    )


def _simulated_power(pilot: np.ndarray, n: int, delta: float, alpha: float, rng) -> tuple[float, float]:
    """Power of the paired t-test and of the report's permutation test (sign flips of the mean, 400 per run) on
    n items drawn from the pilot's differences shifted to the true difference delta, over 4,000 simulated runs."""
    shifted = pilot - pilot.mean() + delta  # the pilot's shape, the planned true difference
    samples = shifted[rng.integers(0, len(shifted), size=(4000, n))]
    t_power = float((stats.ttest_1samp(samples, 0.0, axis=1).pvalue < alpha).mean())
    flips = rng.choice([-1.0, 1.0], size=(400, n))
    observed = np.abs(samples.mean(axis=1))
    null = np.abs(samples @ flips.T / n)  # runs x flips
    p = (1 + (null >= observed[:, None] - 1e-12).sum(axis=1)) / (1 + flips.shape[0])
    return t_power, float((p < alpha).mean())


def test_the_planned_n_reaches_the_stated_power_in_a_simulation_from_a_pilot() -> None:
    rng = np.random.default_rng(0)
    pilot = rng.normal(0.1, 0.35, size=60)  # a pilot of 60 per-item MOS differences
    delta, power, alpha = 0.15, 0.8, 0.05
    n = items_needed(delta, per_item_sd(pilot), alpha=alpha, power=power)
    t_power, permutation_power = _simulated_power(pilot, n, delta, alpha, rng)
    print(f"n={n}: simulated power t-test {t_power:.3f}, permutation {permutation_power:.3f}")
    assert t_power == pytest.approx(power, abs=0.03) and permutation_power == pytest.approx(power, abs=0.03)
    # with 5 fewer items the simulated power falls short: the answer is not merely safe, it is the size
    assert _simulated_power(pilot, n - 5, delta, alpha, rng)[0] < power - 0.03


def test_a_skewed_pilot_gets_a_conservative_plan() -> None:
    # strongly right-skewed differences (skewness about 0.9): the t-based plan is on the safe side
    rng = np.random.default_rng(0)
    pilot = rng.gamma(2.0, 0.25, size=60) - 0.5
    n = items_needed(0.15, per_item_sd(pilot))
    t_power, permutation_power = _simulated_power(pilot, n, 0.15, 0.05, rng)
    assert 0.8 <= t_power <= 0.9 and 0.8 <= permutation_power <= 0.9


def test_bad_input_names_the_field() -> None:
    with pytest.raises(ValueError, match="delta must be a non-zero"):
        items_needed(0.0, 1.0)
    with pytest.raises(ValueError, match="sd must be positive"):
        items_needed(0.1, 0.0)
    with pytest.raises(ValueError, match="power must be in"):
        items_needed(0.1, 1.0, power=1.0)
    assert items_needed(1e-6, 1.0) is None  # more than MAX_ITEMS
    assert math.isnan(per_item_sd(np.array([0.3])))
