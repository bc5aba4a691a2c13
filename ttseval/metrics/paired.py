"""Paired comparisons: two systems (or two runs of one system) on the same items, compared item by item.

Comparing two systems' confidence intervals throws the pairing away: the item effect (a hard sentence is hard for
both) stays in each interval, so intervals overlap although every item moved the same way. Here each resample draws
items and recomputes both sides on the same draw, so the item effect cancels in the difference:

- WER and CER: the difference of the pooled ratios sum(errors) / sum(words) (B - A);
- MOS (or any per-item score): the mean of the per-item differences.

**The decision** ("differs") comes from a test, never from the interval: the paired permutation test of that
difference (`scipy.stats.permutation_test`, permutation_type='samples': each item's two sides swap; exact, every one
of the 2^n swaps, when 2^n is at most `n_permutations`, else that many random swaps: its p is never below about
1 / n_permutations, which a family adjustment multiplies, hence more permutations than bootstrap resamples), its
p-value adjusted across the family of tests the report makes (`decide`, Holm or Benjamini-Hochberg:
ttseval.metrics.multiplicity) and compared with alpha. The Wilcoxon signed-rank p (`scipy.stats.wilcoxon`, zero
differences dropped; NaN when every difference is 0) is shown beside it as a robustness check; it does not vote.

**The interval** is a bias-corrected and accelerated (BCa) bootstrap 95% CI of the difference
(`scipy.stats.bootstrap(method='BCa')`), which keeps its coverage at small n better than the percentile interval
(which under-covers there: an 8-item percentile CI excluded 0 while both tests gave p > 0.1). Under
`MIN_INTERVAL_ITEMS` items no interval is given at all (NaN; reports say "n too small"): with so few items no
bootstrap interval, BCa included, can be trusted.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ttseval.metrics.bootstrap import (
    MIN_INTERVAL_ITEMS,
    Statistic,
    bca_interval,
    mean_without_each,
    resample_batch,
    seeded_by_data,
)
from ttseval.metrics.multiplicity import METHODS, Method, adjust_p

__all__ = [
    "DECISION_COLUMNS",
    "MIN_INTERVAL_ITEMS",
    "PAIRED_COLUMNS",
    "TEST",
    "Paired",
    "all_pairs",
    "decide",
    "items_needed",
    "paired_mean",
    "paired_ratio",
    "paired_table",
    "smallest_p",
]

PAIRED_COLUMNS = ("metric", "n_items", "a", "b", "delta", "ci_low", "ci_high", "p_wilcoxon", "p_permutation")
DECISION_COLUMNS = ("p_adjusted", "differs")

# The test behind "differs", as reports name it.
TEST = "paired permutation test"


@dataclass(frozen=True)
class Paired:
    """B - A on the items both have: point values, the difference, its BCa 95% CI (NaN under MIN_INTERVAL_ITEMS
    items or when every resample is the same) and the two p-values, unadjusted."""

    metric: str
    n_items: int
    a: float
    b: float
    delta: float
    ci_low: float
    ci_high: float
    p_wilcoxon: float
    p_permutation: float


def _wilcoxon(diff: NDArray[np.float64]) -> float:
    from scipy import stats

    if len(diff) < 2 or np.all(diff == 0):
        return float("nan")
    return float(stats.wilcoxon(diff, zero_method="wilcox").pvalue)


def _bca(
    data: tuple[NDArray[np.float64], ...], statistic: Statistic, leave_one_out: Statistic, n_resamples: int, seed: int
) -> tuple[float, float]:
    from scipy import stats

    if len(data[0]) < MIN_INTERVAL_ITEMS:
        return float("nan"), float("nan")
    rng, data = seeded_by_data(seed, data)  # the same clips give the same interval in any run (bootstrap.py)
    with warnings.catch_warnings():  # every resample alike (no spread): NaN, kept as NaN
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        return bca_interval(
            data, statistic, leave_one_out, paired=True, n_resamples=n_resamples, confidence=0.95, rng=rng
        )


def _ratio_delta(
    ea: NDArray[np.float64], ta: NDArray[np.float64], eb: NDArray[np.float64], tb: NDArray[np.float64], axis: int = -1
) -> NDArray[np.float64]:
    return np.asarray(eb.sum(axis) / tb.sum(axis) - ea.sum(axis) / ta.sum(axis), dtype=np.float64)


def _ratio_delta_without_each(
    ea: NDArray[np.float64], ta: NDArray[np.float64], eb: NDArray[np.float64], tb: NDArray[np.float64], axis: int = -1
) -> NDArray[np.float64]:
    # _ratio_delta without item i, for every i
    return np.asarray((eb.sum() - eb) / (tb.sum() - tb) - (ea.sum() - ea) / (ta.sum() - ta), dtype=np.float64)


def _mean_of(d: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
    return np.asarray(d.mean(axis), dtype=np.float64)


def paired_ratio(
    metric: str,
    errors_a: ArrayLike,
    totals_a: ArrayLike,
    errors_b: ArrayLike,
    totals_b: ArrayLike,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    n_permutations: int | None = None,
) -> Paired:
    """Pooled-ratio difference (WER, CER) of B against A over the same items, in the same order. The permutation
    test swaps each item's (errors, total) between the sides and recomputes the pooled difference.

    Raises:
        ValueError: the arrays differ in length or are empty, or a total is not positive.
    """
    from scipy import stats

    ea, ta, eb, tb = (np.asarray(x, dtype=np.float64) for x in (errors_a, totals_a, errors_b, totals_b))
    if not (len(ea) == len(ta) == len(eb) == len(tb)) or not len(ea):
        raise ValueError(f"{metric}: paired arrays must be non-empty and of one length")
    if (ta <= 0).any() or (tb <= 0).any():
        raise ValueError(f"{metric}: every item needs a positive reference length")
    n = len(ea)
    a, b = ea.sum() / ta.sum(), eb.sum() / tb.sum()
    low, high = _bca((ea, ta, eb, tb), _ratio_delta, _ratio_delta_without_each, n_resamples, seed)
    errors, totals = np.concatenate([ea, eb]), np.concatenate([ta, tb])

    def pooled(side_a: NDArray[np.int64], side_b: NDArray[np.int64], axis: int = -1) -> NDArray[np.float64]:
        # the sides hold item indices into errors/totals; a swap moves a pair
        ia, ib = side_a.astype(np.intp, copy=False), side_b.astype(np.intp, copy=False)
        return np.asarray(
            errors[ib].sum(axis) / totals[ib].sum(axis) - errors[ia].sum(axis) / totals[ia].sum(axis), dtype=np.float64
        )

    if n < 2 or (np.array_equal(ea, eb) and np.array_equal(ta, tb)):
        p_perm = float("nan")
    else:
        sides = (np.arange(n), np.arange(n) + n)
        p_perm = float(
            stats.permutation_test(
                sides,
                pooled,
                permutation_type="samples",
                vectorized=True,
                n_resamples=n_permutations or n_resamples,
                batch=resample_batch(sides),  # the same permutations as unbatched, a few MB at a time
                rng=np.random.default_rng(seed),
            ).pvalue
        )
    return Paired(metric, n, float(a), float(b), float(b - a), low, high, _wilcoxon(eb / tb - ea / ta), p_perm)


def paired_mean(
    metric: str,
    a: ArrayLike,
    b: ArrayLike,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    n_permutations: int | None = None,
) -> Paired:
    """Mean per-item difference B - A (MOS and other per-item scores) over the same items, in the same order; the
    permutation test flips the sign of each item's difference."""
    from scipy import stats

    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(xa) != len(xb) or not len(xa):
        raise ValueError(f"{metric}: paired arrays must be non-empty and of one length")
    diff = xb - xa
    low, high = _bca((diff,), _mean_of, mean_without_each, n_resamples, seed)
    if len(diff) < 2 or np.all(diff == 0):
        p_perm = float("nan")
    else:
        p_perm = float(
            stats.permutation_test(
                (diff,),
                np.mean,
                permutation_type="samples",
                vectorized=True,
                n_resamples=n_permutations or n_resamples,
                batch=resample_batch((diff,)),
                rng=np.random.default_rng(seed),
            ).pvalue
        )
    return Paired(
        metric, len(diff), float(xa.mean()), float(xb.mean()), float(diff.mean()), low, high, _wilcoxon(diff), p_perm
    )


def smallest_p(n_items: int, n_permutations: int) -> float:
    """The smallest two-sided p the paired permutation test can give on `n_items` items, whatever the data: exact
    (2^n <= n_permutations), only the observed split and its mirror image are as extreme, 2 / 2^n; with random
    swaps, scipy counts the observed split among them, 2 / (n_permutations + 1). 1.0 under 2 items (no test)."""
    if n_items < 2:
        return 1.0
    if 2**n_items <= n_permutations:
        return float(min(1.0, 2.0 / 2**n_items))
    return float(min(1.0, 2.0 / (n_permutations + 1)))


def items_needed(n_tests: int, alpha: float, n_permutations: int) -> int | None:
    """The fewest items on which a lone change, adjusted across `n_tests` tests (Holm and BH both multiply the
    smallest of the family's p by their count), can have an adjusted p under `alpha`; None when no item count can
    (the permutations themselves cap how small p gets: raise `permutation_resamples`)."""
    for n in range(2, 64):
        if n_tests * smallest_p(n, n_permutations) < alpha:
            return n
        if 2**n > n_permutations:  # from here on p no longer shrinks with n
            return None
    return None


def decide(family: pd.DataFrame, *, alpha: float = 0.05, method: Method = "holm") -> pd.DataFrame:
    """The family's rows (PAIRED_COLUMNS, one test each) with `p_adjusted` (the permutation p adjusted across
    every row by `method`) and `differs` (p_adjusted < alpha; False where the test could not run).

    Raises:
        ValueError: alpha outside (0, 1) or an unknown method.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if method not in METHODS:
        raise ValueError(f"multiple-testing method {method!r} is not one of {sorted(METHODS)}")
    out = family.copy()
    out["p_adjusted"] = adjust_p(out["p_permutation"].astype(float).to_numpy(), method) if len(out) else []
    out["differs"] = (out["p_adjusted"].astype(float) < alpha).astype(bool)
    return out


def paired_table(
    a_transcripts: pd.DataFrame,
    b_transcripts: pd.DataFrame,
    a_quality: pd.DataFrame,
    b_quality: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    n_permutations: int | None = None,
) -> pd.DataFrame:
    """WER, CER and MOS of B against A on the items both have (ok rows), one row per metric (PAIRED_COLUMNS,
    undecided: `decide` takes the whole family); a metric without common items is left out. Transcripts: item_id,
    status, word_errors, ref_words, char_errors, ref_chars (one recogniser); quality: item_id, status, mos."""
    rows = []
    ta, tb = (t[t["status"] == "ok"].set_index("item_id") for t in (a_transcripts, b_transcripts))
    common = ta.index.intersection(tb.index)
    if len(common):
        ta, tb = ta.loc[common], tb.loc[common]
        for metric, errors, totals in (("wer", "word_errors", "ref_words"), ("cer", "char_errors", "ref_chars")):
            rows.append(
                paired_ratio(
                    metric,
                    ta[errors],
                    ta[totals],
                    tb[errors],
                    tb[totals],
                    n_resamples=n_resamples,
                    seed=seed,
                    n_permutations=n_permutations,
                )
            )
    qa, qb = (q[(q["status"] == "ok") & q["mos"].notna()].set_index("item_id")["mos"] for q in (a_quality, b_quality))
    shared = qa.index.intersection(qb.index)
    if len(shared):
        rows.append(
            paired_mean(
                "mos", qa.loc[shared], qb.loc[shared], n_resamples=n_resamples, seed=seed, n_permutations=n_permutations
            )
        )
    return pd.DataFrame([asdict(r) for r in rows], columns=list(PAIRED_COLUMNS))


def all_pairs(
    metric: str,
    values: pd.DataFrame,
    *,
    totals: pd.DataFrame | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    n_permutations: int | None = None,
) -> pd.DataFrame:
    """Every pair of systems compared item by item (the significance matrix's tests, undecided: `decide` takes the
    family): one row per pair (system_a, system_b) in column order, a before b, with PAIRED_COLUMNS for b - a on
    the items both have (there `a` and `b` are the two systems' values). `values` is item x system: per-item
    scores (a mean difference), or per-item error counts with `totals` the reference lengths of the same shape (a
    pooled-ratio difference, WER and CER). Pairs sharing no item are left out."""
    rows = []
    systems = list(values.columns)
    for k, a in enumerate(systems):
        for b in systems[k + 1 :]:
            both = values[[a, b]].notna().all(axis=1)
            if totals is not None:
                both &= totals[[a, b]].notna().all(axis=1)
            if not both.any():
                continue
            if totals is None:
                r = paired_mean(
                    metric,
                    values.loc[both, a],
                    values.loc[both, b],
                    n_resamples=n_resamples,
                    seed=seed,
                    n_permutations=n_permutations,
                )
            else:
                r = paired_ratio(
                    metric,
                    values.loc[both, a],
                    totals.loc[both, a],
                    values.loc[both, b],
                    totals.loc[both, b],
                    n_resamples=n_resamples,
                    seed=seed,
                    n_permutations=n_permutations,
                )
            rows.append({"system_a": a, "system_b": b} | asdict(r))
    return pd.DataFrame(rows, columns=["system_a", "system_b", *PAIRED_COLUMNS])
