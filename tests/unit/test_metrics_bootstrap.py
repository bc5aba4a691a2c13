"""Tests for ttseval.metrics.bootstrap: determinism, degenerate cases, and two independent checks.

Independent computations: (1) a percentile bootstrap written here with its own numpy loop
and its own seed; (2) the normal (delta-method) interval for a large i.i.d. sample.
"""

import numpy as np
import pytest

from ttseval.metrics.bootstrap import CI, bootstrap_mean_ci, bootstrap_ratio_ci

Z_975 = 1.959963984540054  # standard normal 97.5% quantile


def _wer_like_data(n, *, seed, p=0.2):
    rng = np.random.default_rng(seed)
    totals = rng.integers(5, 31, n)  # 5-30 reference words per utterance
    errors = rng.binomial(totals, p)
    return errors, totals


def _loop_bootstrap_ratio(errors, totals, *, n_resamples, seed):
    rng = np.random.default_rng(seed)
    n = len(errors)
    replicates = np.empty(n_resamples)
    for b in range(n_resamples):
        idx = rng.integers(0, n, n)
        replicates[b] = errors[idx].sum() / totals[idx].sum()
    return replicates


def test_an_int_seed_is_combined_with_the_data_so_the_same_values_give_the_same_ci_in_any_order():
    errors, totals = _wer_like_data(50, seed=0)
    first = bootstrap_ratio_ci(errors, totals, seed=11)
    assert bootstrap_ratio_ci(errors, totals, seed=11) == first
    shuffled = np.random.default_rng(5).permutation(50)  # the same utterances, read in another order
    assert bootstrap_ratio_ci(errors[shuffled], totals[shuffled], seed=11) == first
    assert bootstrap_ratio_ci(errors, totals, seed=12) != first
    changed = errors.copy()
    changed[0] += 1  # one utterance's count differs: other data, another stream (and another interval)
    assert bootstrap_ratio_ci(changed, totals, seed=11) != first
    values = np.linspace(1, 5, 40)
    assert bootstrap_mean_ci(values, seed=3) == bootstrap_mean_ci(values[::-1], seed=3)
    # a Generator is used as given, on the values as given: reproducible from its own seed
    assert bootstrap_ratio_ci(errors, totals, seed=np.random.default_rng(11)) == bootstrap_ratio_ci(
        errors, totals, seed=np.random.default_rng(11)
    )


def test_under_min_items_the_point_and_no_interval():
    ci = bootstrap_ratio_ci([1, 0, 3], [4, 6, 2], seed=0, min_items=10)
    assert ci.point == pytest.approx(4 / 12) and np.isnan(ci.low) and np.isnan(ci.high)
    mean = bootstrap_mean_ci(np.arange(9.0), seed=0, min_items=10)
    assert mean.point == 4.0 and np.isnan(mean.low) and np.isnan(mean.high)
    assert not np.isnan(bootstrap_mean_ci(np.arange(10.0), seed=0, min_items=10).low)


def test_constant_ratio_collapses_exactly():
    # Every utterance has ratio 1/3, so every resample's pooled ratio is k / 3k, which
    # IEEE division rounds to the same double: the interval is exactly the point.
    ci = bootstrap_ratio_ci([1, 2, 3, 4], [3, 6, 9, 12], seed=0)
    assert ci.low == ci.high == ci.point == 1 / 3
    ci = bootstrap_ratio_ci([0, 0, 0], [4, 5, 6], seed=0)
    assert ci == CI(0.0, 0.0, 0.0)
    ci = bootstrap_mean_ci([3.5, 3.5, 3.5], seed=0)
    assert ci == CI(3.5, 3.5, 3.5)


def test_single_utterance_collapses_to_point():
    assert bootstrap_ratio_ci([2], [5], seed=0) == CI(0.4, 0.4, 0.4)
    assert bootstrap_mean_ci([4.25], seed=0) == CI(4.25, 4.25, 4.25)


def test_hand_worked_point_estimates():
    # Pooled ratio (1+0+3)/(4+6+10) = 0.2, not the mean of ratios (0.25+0+0.3)/3.
    assert bootstrap_ratio_ci([1, 0, 3], [4, 6, 10], seed=0).point == pytest.approx(0.2, abs=1e-15)
    assert bootstrap_mean_ci([1.0, 2.0, 4.5], seed=0).point == pytest.approx(2.5, abs=1e-15)


@pytest.mark.parametrize("data_seed", range(5))
@pytest.mark.parametrize("n", [2, 10, 100])
def test_point_lies_inside_interval(n, data_seed):
    errors, totals = _wer_like_data(n, seed=data_seed)
    ci = bootstrap_ratio_ci(errors, totals, seed=data_seed)
    assert ci.low <= ci.point <= ci.high
    values = np.random.default_rng(data_seed).uniform(1, 5, n)
    ci = bootstrap_mean_ci(values, seed=data_seed)
    assert ci.low <= ci.point <= ci.high


def test_ratio_ci_matches_independent_loop_bootstrap():
    # Independent computation: our own numpy resampling loop (different seed) with
    # np.percentile. Both estimate the same bootstrap quantiles; they differ only by Monte
    # Carlo error. With B resamples, the SE of a 2.5% quantile estimate is about
    # sqrt(0.025*0.975/B) / phi(1.96) = 0.085*sd (B=1000) or 0.019*sd (B=20000), where sd
    # is the bootstrap SD; the difference of two independent estimates is sqrt(2) larger.
    # Tolerances: 0.15*sd at B=20000 (about 5.6 SE), 0.5*sd at B=1000 (about 4 SE).
    errors, totals = _wer_like_data(200, seed=123)
    for n_resamples, tolerance_sd in ((20000, 0.15), (1000, 0.5)):
        replicates = _loop_bootstrap_ratio(errors, totals, n_resamples=n_resamples, seed=2)
        low, high = np.percentile(replicates, [2.5, 97.5])
        sd = replicates.std(ddof=1)
        ci = bootstrap_ratio_ci(errors, totals, n_resamples=n_resamples, seed=1)
        assert ci.point == pytest.approx(errors.sum() / totals.sum(), abs=1e-15)
        assert abs(ci.low - low) < tolerance_sd * sd
        assert abs(ci.high - high) < tolerance_sd * sd


def test_ratio_ci_matches_normal_approximation_for_large_sample():
    # Independent computation: delta-method SE of a ratio estimator,
    # se = sqrt(sum((e_i - R t_i)^2) / (n-1)) / (sqrt(n) * mean(t)), CI = R +- 1.96 se.
    # For n=2000 i.i.d. utterances the bootstrap distribution is close to normal; the
    # percentile interval differs by O(n^-1/2) skewness (~1% of the half-width here) plus
    # Monte Carlo error (~2% of the half-width at B=5000). Tolerance: 8% of the half-width.
    errors, totals = _wer_like_data(2000, seed=7, p=0.15)
    ratio = errors.sum() / totals.sum()
    n = len(errors)
    residual = errors - ratio * totals
    se = np.sqrt(np.sum(residual**2) / (n - 1)) / (np.sqrt(n) * totals.mean())
    half_width = Z_975 * se
    ci = bootstrap_ratio_ci(errors, totals, n_resamples=5000, seed=3)
    assert abs(ci.low - (ratio - half_width)) < 0.08 * half_width
    assert abs(ci.high - (ratio + half_width)) < 0.08 * half_width


def test_mean_ci_matches_normal_approximation_for_large_sample():
    # Independent computation: mean +- 1.96 * s / sqrt(n) for 2000 uniform(1, 5) scores;
    # same tolerance argument as for the ratio (8% of the half-width).
    values = np.random.default_rng(8).uniform(1, 5, 2000)
    mean = values.mean()
    half_width = Z_975 * values.std(ddof=1) / np.sqrt(len(values))
    ci = bootstrap_mean_ci(values, n_resamples=5000, seed=3)
    assert ci.point == pytest.approx(mean, abs=1e-12)
    assert abs(ci.low - (mean - half_width)) < 0.08 * half_width
    assert abs(ci.high - (mean + half_width)) < 0.08 * half_width


def test_wider_confidence_gives_wider_interval():
    errors, totals = _wer_like_data(100, seed=4)
    narrow = bootstrap_ratio_ci(errors, totals, confidence=0.5, seed=0)
    wide = bootstrap_ratio_ci(errors, totals, confidence=0.99, seed=0)
    assert wide.low < narrow.low < narrow.high < wide.high


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bootstrap_ratio_ci([], [], seed=0), "empty"),
        (lambda: bootstrap_ratio_ci([1, 2], [3], seed=0), "differ in length"),
        (lambda: bootstrap_ratio_ci([1, 2], [3, 0], seed=0), r"totals\[1\] = 0"),
        (lambda: bootstrap_ratio_ci([1, float("nan")], [3, 3], seed=0), r"errors\[1\]"),
        (lambda: bootstrap_ratio_ci([1, -1], [3, 3], seed=0), r"errors\[1\]"),
        (lambda: bootstrap_ratio_ci([1], [3], n_resamples=0, seed=0), "n_resamples"),
        (lambda: bootstrap_ratio_ci([1], [3], confidence=1.0, seed=0), "confidence"),
        (lambda: bootstrap_ratio_ci([1], [3], seed=-1), "seed"),
        (lambda: bootstrap_ratio_ci([1], [3], seed=1.5), "seed"),
        (lambda: bootstrap_ratio_ci([1], [3], seed=True), "seed"),
        (lambda: bootstrap_mean_ci([], seed=0), "empty"),
        (lambda: bootstrap_mean_ci([4.0, float("nan"), 3.0], seed=0), r"values\[1\]"),
    ],
)
def test_bad_input_raises(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_seed_is_required():
    with pytest.raises(TypeError):
        bootstrap_ratio_ci([1, 2], [3, 4])  # type: ignore[call-arg]
