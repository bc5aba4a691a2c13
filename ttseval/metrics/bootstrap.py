"""Seeded percentile-bootstrap confidence intervals over utterances.

PashtoTTS-Bench reports WER/CER with 95% bootstrap CIs from 1,000 utterance-level
resamples; ``bootstrap_ratio_ci`` implements that for the pooled ratio and
``bootstrap_mean_ci`` does the same for a mean (MOS). Both use
``scipy.stats.bootstrap(method="percentile")``.

``bootstrap_mean_ci(..., method="BCa")`` gives the bias-corrected and accelerated interval instead (second-order
accurate; used for win-rates and paired differences). The report's rule for every interval: under
``MIN_INTERVAL_ITEMS`` items none at all ("n too small"); an int seed is combined with the data, so the same values
give the same interval in any run, whatever their order or the name of the system they belong to.

Statistical caveats: the percentile interval is first-order accurate only; for small n
(roughly < 30 utterances) or a skewed ratio it under-covers, and with 1,000 resamples the
endpoints themselves carry Monte Carlo error of about 0.1 bootstrap standard errors.
Resampling utterances treats them as independent: items sharing a speaker or a prompt
are not resampled as clusters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "CI",
    "INTERVAL_RULE",
    "MIN_INTERVAL_ITEMS",
    "bca_bounds",
    "bca_interval",
    "bootstrap_mean_ci",
    "bootstrap_ratio_ci",
    "mean_without_each",
    "seeded_by_data",
]

# Fewest items for which a report gives any interval (WER, CER, MOS, SIM, win-rates, paired differences, strengths);
# fewer: "n too small" (NaN bounds). Below it a bootstrap interval under-covers badly and moves with each clip.
MIN_INTERVAL_ITEMS = 10

INTERVAL_RULE = (
    "Every interval in this report is a 95% bootstrap over items: percentile for a level (WER, CER, MOS, SIM), "
    "BCa for a comparison (win-rates, paired differences, strengths); its resamples depend only on the `seed` "
    "setting and the clips' values, never on a system's name or the order rows were read in, so the same clips "
    "give the same interval in any run; under "
    f"{MIN_INTERVAL_ITEMS} items there is none ('n too small')."
)

RESAMPLED_VALUES = 500_000
"""Values one vectorized call of the statistic sees (resamples x items), scipy's `batch` for its bootstrap and
permutation tests: 5,000 items at once would hold 999 x 5,000 values per sample array, 40 MB each. The resamples
and so the interval and p value are the same batched or not (numpy draws the same stream); under 500 items every
resample is one batch, as unbatched. A paired WER interval and p at 5,000 items: 36 MiB at most, 0.76 s (1,000,000
values: 71 MiB, 0.63 s; 250,000: 19 MiB, 1.07 s)."""

BootstrapMethod = Literal["percentile", "BCa"]
# A vectorized statistic: the sample arrays (resamples along the last axis) in, one value per resample out.
Statistic = Callable[..., NDArray[np.float64]]


@dataclass(frozen=True)
class CI:
    """A confidence interval with its point estimate.

    Attributes:
        low: Lower endpoint.
        high: Upper endpoint.
        point: Statistic on the full sample (not the bootstrap mean).
    """

    low: float
    high: float
    point: float


def seeded_by_data(
    seed: int | np.random.Generator, data: tuple[NDArray[np.float64], ...]
) -> tuple[np.random.Generator, tuple[NDArray[np.float64], ...]]:
    """The generator and the data to resample. A Generator is used as given, on the data as given. An int seed is
    combined with the data themselves: their rows sorted (the statistics here do not depend on row order) and the
    generator seeded by `seed` and those rows' bytes, so the same values give the same interval in any run, in any
    order, under any system's or cell's name."""
    if isinstance(seed, np.random.Generator):
        return seed, data
    if not (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0):
        raise ValueError(f"seed must be a non-negative int or a numpy.random.Generator, got {seed!r}")
    order = np.lexsort(data[::-1])
    rows = tuple(np.ascontiguousarray(column[order], dtype="<f8") for column in data)
    digest = hashlib.sha256(b"".join(column.tobytes() for column in rows)).digest()
    words = np.frombuffer(digest[:16], dtype="<u4").tolist()
    return np.random.default_rng(np.random.SeedSequence([int(seed), *words])), rows


def _check_options(n_resamples: int, confidence: float) -> None:
    if not isinstance(n_resamples, (int, np.integer)) or isinstance(n_resamples, bool) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int, got {n_resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def _as_values(values: ArrayLike, name: str, *, counts: bool) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size < 1:
        raise ValueError(f"{name} is empty: a confidence interval needs at least one utterance")
    bad = np.flatnonzero(~np.isfinite(array) | ((array < 0) if counts else False))
    if bad.size:
        i = int(bad[0])
        rule = "finite and >= 0" if counts else "finite"
        raise ValueError(f"{name}[{i}] = {array[i]!r}: values must be {rule}")
    return array


def _pooled_ratio(errors: NDArray[np.float64], totals: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
    # one ratio per sample along `axis` (a 0-d array for a single 1-D sample)
    return np.asarray(np.sum(errors, axis=axis) / np.sum(totals, axis=axis), dtype=np.float64)


def _interval(
    data: tuple[NDArray[np.float64], ...],
    statistic: Statistic,
    *,
    paired: bool,
    n_resamples: int,
    confidence: float,
    rng: np.random.Generator,
    method: BootstrapMethod = "percentile",
    leave_one_out: Statistic | None = None,
) -> tuple[float, float]:
    import scipy.stats

    if method == "BCa" and leave_one_out is not None:
        return bca_interval(
            data, statistic, leave_one_out, paired=paired, n_resamples=n_resamples, confidence=confidence, rng=rng
        )
    result = scipy.stats.bootstrap(
        data,
        statistic,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method=method,
        paired=paired,
        vectorized=True,
        batch=resample_batch(data),
        rng=rng,
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def resample_batch(data: tuple[NDArray[Any], ...]) -> int:
    """Resamples per vectorized call of the statistic, so that one call sees at most RESAMPLED_VALUES values."""
    return max(1, RESAMPLED_VALUES // max(1, max(len(column) for column in data)))


def bca_interval(
    data: tuple[NDArray[np.float64], ...],
    statistic: Statistic,
    leave_one_out: Statistic,
    *,
    paired: bool,
    n_resamples: int,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """The BCa interval `scipy.stats.bootstrap(method="BCa")` gives (Efron and Tibshirani 14.3, 15.4), from the
    same resamples, with its acceleration's jackknife taken from `leave_one_out` (the statistic without each item
    in turn, an array of n values) instead of n evaluations of `statistic` on n - 1 items each.

    Why by hand: scipy's jackknife costs n^2 (5,000 items: 25 million values per interval, minutes for a report's
    hundreds of paired intervals), while for a statistic made of sums the n leave-one-out values cost n. Checked
    equal to scipy's BCa interval in tests/unit/test_bootstrap_bca.py. NaN bounds where scipy's are NaN (every
    resample alike).
    """
    import scipy.stats

    boot = scipy.stats.bootstrap(
        data,
        statistic,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        paired=paired,
        vectorized=True,
        batch=resample_batch(data),
        rng=rng,
    ).bootstrap_distribution
    low, high = bca_bounds(boot, statistic(*data), leave_one_out(*data), confidence)
    return float(low), float(high)


def bca_bounds(
    boot: ArrayLike, theta_hat: ArrayLike, theta_i: ArrayLike, confidence: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The BCa bounds of scipy's `_bca_interval` from a bootstrap distribution (resamples along the last axis), the
    statistic on the whole sample and its leave-one-out values (items along the last axis), for a scalar or a
    vector statistic (one interval per component). NaN bounds where scipy's are NaN (every resample alike)."""
    from scipy.special import ndtr, ndtri

    boot = np.asarray(boot, dtype=np.float64)
    theta_hat = np.asarray(theta_hat, dtype=np.float64)[..., None]
    theta_i = np.asarray(theta_i, dtype=np.float64)
    below = np.count_nonzero(boot < theta_hat, axis=-1) + np.count_nonzero(boot <= theta_hat, axis=-1)
    z0 = ndtri(below / (2 * boot.shape[-1]))
    n = float(theta_i.shape[-1])
    u = (n - 1) * (theta_i.mean(axis=-1, keepdims=True) - theta_i)
    with np.errstate(divide="ignore", invalid="ignore"):  # every value alike: NaN, as scipy's
        a_hat = 1 / 6 * (np.sum(u**3, axis=-1) / n**3) / (np.sum(u**2, axis=-1) / n**2) ** (3 / 2)
        z_alpha = float(ndtri((1 - confidence) / 2))
        levels = [ndtr(z0 + (z0 + z) / (1 - a_hat * (z0 + z))) for z in (z_alpha, -z_alpha)]
    flat = boot.reshape(-1, boot.shape[-1])
    bounds = []
    for level in levels:
        level = np.broadcast_to(level, flat.shape[:1])
        bounds.append(
            np.array([np.quantile(row, q) if np.isfinite(q) else np.nan for row, q in zip(flat, level)]).reshape(
                boot.shape[:-1]
            )
        )
    return bounds[0], bounds[1]


def mean_without_each(values: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
    # the mean without item i, for every i
    return np.asarray((values.sum() - values) / (values.size - 1), dtype=np.float64)


def bootstrap_ratio_ci(
    errors: ArrayLike,
    totals: ArrayLike,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator,
    min_items: int = 1,
) -> CI:
    """Percentile-bootstrap CI of the pooled ratio ``sum(errors) / sum(totals)``.

    Utterance indices are resampled with replacement (errors and totals together) and
    the pooled ratio is recomputed on each resample.

    Args:
        errors: Per-utterance error counts (e.g. word errors).
        totals: Per-utterance reference lengths, same order; each must be > 0.
        n_resamples: Number of bootstrap resamples.
        confidence: Two-sided confidence level.
        seed: Non-negative int, combined with the data (the same values give the same interval whatever their
            order), or a Generator (whose state is advanced; the values resampled in the order given).
        min_items: With fewer utterances, no interval: NaN bounds ("n too small"; reports pass
            MIN_INTERVAL_ITEMS, so every interval they show follows one rule).

    Returns:
        ``CI(low, high, point)``. With one utterance every resample equals the sample,
        so ``low == high == point``: the interval is degenerate, not a real CI.

    Raises:
        ValueError: empty input, lengths differ, a negative/NaN count, a zero total
            (the message names its index), or a bad option.
    """
    _check_options(n_resamples, confidence)
    e = _as_values(errors, "errors", counts=True)
    t = _as_values(totals, "totals", counts=True)
    if e.shape != t.shape:
        raise ValueError(f"errors and totals differ in length: {e.size} != {t.size}")
    zero = np.flatnonzero(t == 0)
    if zero.size:
        # A zero total would let a resample consist only of empty references (0/0).
        raise ValueError(f"totals[{int(zero[0])}] = 0: every utterance needs a non-empty reference")
    point = float(_pooled_ratio(e, t))
    rng, (e, t) = seeded_by_data(seed, (e, t))
    if e.size < min_items:
        return CI(low=np.nan, high=np.nan, point=point)
    if e.size == 1:
        return CI(low=point, high=point, point=point)
    low, high = _interval((e, t), _pooled_ratio, paired=True, n_resamples=n_resamples, confidence=confidence, rng=rng)
    return CI(low=low, high=high, point=point)


def bootstrap_mean_ci(
    values: ArrayLike,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator,
    method: BootstrapMethod = "percentile",
    min_items: int = 1,
) -> CI:
    """Bootstrap CI of the mean of ``values`` (e.g. per-utterance MOS), percentile or BCa.

    Args:
        values: Per-utterance values.
        n_resamples: Number of bootstrap resamples.
        confidence: Two-sided confidence level.
        seed: Non-negative int, combined with the data (the same values give the same interval whatever their
            order), or a Generator (whose state is advanced; the values resampled in the order given).
        method: "percentile" or "BCa" (``scipy.stats.bootstrap``'s methods).
        min_items: With fewer values, no interval: NaN bounds ("n too small"), as in bootstrap_ratio_ci.

    Returns:
        ``CI(low, high, point)``; with one value, or values all alike, ``low == high == point`` (degenerate:
        every resample is the sample).

    Raises:
        ValueError: empty input, a NaN/infinite value (the message names its index), or
            a bad option.
    """
    _check_options(n_resamples, confidence)
    v = _as_values(values, "values", counts=False)
    point = float(np.mean(v))
    rng, (v,) = seeded_by_data(seed, (v,))
    if method not in ("percentile", "BCa"):
        raise ValueError(f"method must be 'percentile' or 'BCa', got {method!r}")
    if v.size < min_items:
        return CI(low=np.nan, high=np.nan, point=point)
    if v.size == 1 or np.ptp(v) == 0:
        return CI(low=point, high=point, point=point)
    low, high = _interval(
        (v,),
        np.mean,
        paired=False,
        n_resamples=n_resamples,
        confidence=confidence,
        rng=rng,
        method=method,
        leave_one_out=mean_without_each,
    )
    return CI(low=low, high=high, point=point)
