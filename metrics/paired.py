"""Paired comparisons: two systems (or two runs of one system) on the same items, compared item by item.

Comparing two systems' confidence intervals throws the pairing away: the item effect (a hard sentence is hard for
both) stays in each interval, so intervals overlap although every item moved the same way. Here each bootstrap
resample draws items and recomputes both sides on the same draw, so the item effect cancels in the difference:

- WER and CER: the difference of the pooled ratios sum(errors) / sum(words) (B - A), percentile 95% CI over
  item resamples;
- MOS (or any per-item score): the mean of the per-item differences, its 95% CI the same way.

Beside the CI, two tests of "no difference" on the per-item differences, from scipy: the Wilcoxon signed-rank
test (`scipy.stats.wilcoxon`, zero differences dropped as Wilcoxon did; NaN when every difference is 0) and a
paired permutation test of the mean difference (`scipy.stats.permutation_test`, permutation_type='samples':
each item's two values swap sides). `flagged` when the CI excludes 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["PAIRED_COLUMNS", "Paired", "paired_mean", "paired_ratio", "paired_table"]

PAIRED_COLUMNS = ("metric", "n_items", "a", "b", "delta", "ci_low", "ci_high", "p_wilcoxon", "p_permutation",
                  "flagged")


@dataclass(frozen=True)
class Paired:
    """B - A on the items both have: point values, the difference, its 95% CI and the two p-values."""

    metric: str
    n_items: int
    a: float
    b: float
    delta: float
    ci_low: float
    ci_high: float
    p_wilcoxon: float
    p_permutation: float

    @property
    def flagged(self) -> bool:
        return bool(self.ci_low > 0 or self.ci_high < 0)


def _tests(diff: np.ndarray, n_resamples: int, seed: int) -> tuple[float, float]:
    if len(diff) < 2 or np.all(diff == 0):
        return float("nan"), float("nan")
    wilcoxon = float(stats.wilcoxon(diff, zero_method="wilcox").pvalue)
    permutation = stats.permutation_test((diff,), np.mean, permutation_type="samples", n_resamples=n_resamples,
                                         random_state=seed).pvalue
    return wilcoxon, float(permutation)


def _ci(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))


def paired_ratio(metric: str, errors_a: np.ndarray, totals_a: np.ndarray, errors_b: np.ndarray,
                 totals_b: np.ndarray, *, n_resamples: int = 1000, seed: int = 0) -> Paired:
    """Pooled-ratio difference (WER, CER) of B against A over the same items, in the same order.

    Raises:
        ValueError: the arrays differ in length or are empty, or a total is not positive.
    """
    ea, ta, eb, tb = (np.asarray(x, dtype=float) for x in (errors_a, totals_a, errors_b, totals_b))
    if not (len(ea) == len(ta) == len(eb) == len(tb)) or not len(ea):
        raise ValueError(f"{metric}: paired arrays must be non-empty and of one length")
    if (ta <= 0).any() or (tb <= 0).any():
        raise ValueError(f"{metric}: every item needs a positive reference length")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ea), size=(n_resamples, len(ea)))
    deltas = eb[idx].sum(1) / tb[idx].sum(1) - ea[idx].sum(1) / ta[idx].sum(1)
    a, b = ea.sum() / ta.sum(), eb.sum() / tb.sum()
    low, high = _ci(deltas)
    p_w, p_p = _tests(eb / tb - ea / ta, n_resamples, seed)
    return Paired(metric, len(ea), float(a), float(b), float(b - a), low, high, p_w, p_p)


def paired_mean(metric: str, a: np.ndarray, b: np.ndarray, *, n_resamples: int = 1000, seed: int = 0) -> Paired:
    """Mean per-item difference B - A (MOS and other per-item scores) over the same items, in the same order."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(xa) != len(xb) or not len(xa):
        raise ValueError(f"{metric}: paired arrays must be non-empty and of one length")
    diff = xb - xa
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(n_resamples, len(diff)))].mean(1)
    low, high = _ci(means)
    p_w, p_p = _tests(diff, n_resamples, seed)
    return Paired(metric, len(diff), float(xa.mean()), float(xb.mean()), float(diff.mean()), low, high, p_w, p_p)


def paired_table(a_transcripts: pd.DataFrame, b_transcripts: pd.DataFrame, a_quality: pd.DataFrame,
                 b_quality: pd.DataFrame, *, n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """WER, CER and MOS of B against A on the items both have (ok rows), one row per metric (PAIRED_COLUMNS);
    a metric without common items is left out. Transcripts: item_id, status, word_errors, ref_words,
    char_errors, ref_chars (one recogniser); quality: item_id, status, mos."""
    rows = []
    ta, tb = (t[t["status"] == "ok"].set_index("item_id") for t in (a_transcripts, b_transcripts))
    common = ta.index.intersection(tb.index)
    if len(common):
        ta, tb = ta.loc[common], tb.loc[common]
        for metric, errors, totals in (("wer", "word_errors", "ref_words"), ("cer", "char_errors", "ref_chars")):
            rows.append(paired_ratio(metric, ta[errors], ta[totals], tb[errors], tb[totals],
                                     n_resamples=n_resamples, seed=seed))
    qa, qb = (q[(q["status"] == "ok") & q["mos"].notna()].set_index("item_id")["mos"] for q in (a_quality, b_quality))
    shared = qa.index.intersection(qb.index)
    if len(shared):
        rows.append(paired_mean("mos", qa.loc[shared], qb.loc[shared], n_resamples=n_resamples, seed=seed))
    return pd.DataFrame([asdict(r) | {"flagged": r.flagged} for r in rows], columns=list(PAIRED_COLUMNS))
