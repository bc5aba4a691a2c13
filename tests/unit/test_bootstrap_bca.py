"""ttseval's BCa interval (metrics.bootstrap.bca_interval, its jackknife in n rather than n^2) against
scipy.stats.bootstrap(method="BCa") itself, the independent computation: the same resamples, the same bounds, for
each statistic the reports give a BCa interval of (a paired pooled-ratio difference, a paired mean difference, a
mean), at several sizes and shapes of data; and NaN where scipy's is NaN."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from ttseval.metrics.bootstrap import bca_interval, bootstrap_mean_ci, mean_without_each
from ttseval.metrics.paired import _ratio_delta, _ratio_delta_without_each, paired_mean, paired_ratio


def scipy_bca(data, statistic, paired, seed):
    ci = stats.bootstrap(
        data,
        statistic,
        n_resamples=999,
        confidence_level=0.95,
        method="BCa",
        paired=paired,
        vectorized=True,
        rng=np.random.default_rng(seed),
    ).confidence_interval
    return ci.low, ci.high


def ours(data, statistic, leave_one_out, paired, seed):
    return bca_interval(
        data,
        statistic,
        leave_one_out,
        paired=paired,
        n_resamples=999,
        confidence=0.95,
        rng=np.random.default_rng(seed),
    )


@pytest.mark.parametrize("n", [10, 37, 400])
@pytest.mark.parametrize("seed", [0, 7])
def test_the_same_interval_as_scipys_bca_for_every_statistic_a_report_uses(n: int, seed: int) -> None:
    rng = np.random.default_rng(1000 + n + seed)
    totals_a, totals_b = rng.integers(3, 30, n).astype(float), rng.integers(3, 30, n).astype(float)
    errors_a = rng.binomial(totals_a.astype(int), 0.1).astype(float)
    errors_b = rng.binomial(totals_b.astype(int), 0.2).astype(float)
    ratio = (errors_a, totals_a, errors_b, totals_b)
    np.testing.assert_allclose(
        ours(ratio, _ratio_delta, _ratio_delta_without_each, True, seed),
        scipy_bca(ratio, _ratio_delta, True, seed),
        rtol=1e-9,
    )
    skewed = rng.exponential(1.0, n) - 0.5  # a lopsided difference: the acceleration matters

    def mean(x, axis=-1):
        return np.mean(x, axis=axis)

    np.testing.assert_allclose(
        ours((skewed,), mean, mean_without_each, True, seed), scipy_bca((skewed,), mean, True, seed), rtol=1e-9
    )
    np.testing.assert_allclose(
        ours((skewed,), mean, mean_without_each, False, seed), scipy_bca((skewed,), mean, False, seed), rtol=1e-9
    )


def test_the_public_intervals_match_scipy_and_a_degenerate_one_is_nan() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(3.5, 0.4, 60), rng.normal(3.7, 0.4, 60)
    got = paired_mean("mos", a, b, n_resamples=999, seed=11)
    # the reports' intervals: resamples seeded by the data (seeded_by_data), the same generator given to scipy here
    from ttseval.metrics.bootstrap import seeded_by_data

    generator, (diff,) = seeded_by_data(11, (b - a,))
    expected = stats.bootstrap(
        (diff,), np.mean, n_resamples=999, method="BCa", paired=True, vectorized=True, rng=generator
    ).confidence_interval
    np.testing.assert_allclose([got.ci_low, got.ci_high], [expected.low, expected.high], rtol=1e-9)
    wins = rng.integers(0, 2, 80).astype(float)
    ci = bootstrap_mean_ci(wins, seed=5, method="BCa", n_resamples=999)
    generator, (values,) = seeded_by_data(5, (wins,))
    expected = stats.bootstrap((values,), np.mean, n_resamples=999, method="BCa", rng=generator).confidence_interval
    np.testing.assert_allclose([ci.low, ci.high], [expected.low, expected.high], rtol=1e-9)
    same = paired_ratio("wer", [1.0] * 12, [10.0] * 12, [1.0] * 12, [10.0] * 12, n_resamples=200, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scipy_same = scipy_bca(
            ((np.ones(12)), np.full(12, 10.0), np.ones(12), np.full(12, 10.0)), _ratio_delta, True, 1
        )
    assert np.isnan(same.ci_low) and np.isnan(same.ci_high) and np.isnan(scipy_same[0])


def test_batched_resampling_of_many_items_gives_scipys_unbatched_interval() -> None:
    """Over RESAMPLED_VALUES / 999 items the resamples are drawn in batches (scipy's `batch`, to bound memory): the
    interval is still scipy's unbatched BCa of the same data and seed."""
    from ttseval.metrics.bootstrap import RESAMPLED_VALUES, resample_batch

    n = 3_000
    rng = np.random.default_rng(5)
    totals_a, totals_b = rng.integers(3, 30, n).astype(float), rng.integers(3, 30, n).astype(float)
    ratio = (
        rng.binomial(totals_a.astype(int), 0.1).astype(float),
        totals_a,
        rng.binomial(totals_b.astype(int), 0.15).astype(float),
        totals_b,
    )
    assert resample_batch(ratio) == RESAMPLED_VALUES // n < 999  # batched indeed
    np.testing.assert_allclose(
        ours(ratio, _ratio_delta, _ratio_delta_without_each, True, 4),
        scipy_bca(ratio, _ratio_delta, True, 4),
        rtol=1e-9,
    )
