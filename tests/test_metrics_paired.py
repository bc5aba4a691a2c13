"""Paired comparisons (metrics/paired.py): p-values against exact enumerations written out here, the paired CI
against the unpaired intervals on data where only the pairing shows the change."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ttseval.metrics.bootstrap import bootstrap_ratio_ci
from ttseval.metrics.paired import paired_mean, paired_ratio, paired_table


def _exact_sign_flip_p(diff: np.ndarray, statistic) -> float:
    """Two-sided p of a paired test by enumerating every assignment of signs (2^n)."""
    observed = abs(statistic(diff))
    flips = [abs(statistic(diff * np.array(signs))) >= observed - 1e-12
             for signs in itertools.product([1, -1], repeat=len(diff))]
    return float(np.mean(flips))


def test_p_values_match_exact_enumeration() -> None:
    a = np.array([3.1, 2.0, 4.4, 3.3, 2.9, 3.8, 4.0, 2.2])
    b = np.array([3.6, 2.9, 4.1, 3.9, 3.5, 4.6, 4.3, 2.9])
    result = paired_mean("mos", a, b, n_resamples=5000)
    diff = b - a
    # permutation test of the mean difference: every sign flip of the 8 differences (256) enumerated by hand
    assert result.p_permutation == pytest.approx(_exact_sign_flip_p(diff, np.mean))
    # Wilcoxon signed-rank, exact: the sum of positive ranks' null distribution over all 256 sign patterns
    ranks = stats.rankdata(np.abs(diff))
    w_plus = ranks[diff > 0].sum()
    null = [ranks[np.array(s) > 0].sum() for s in itertools.product([1, -1], repeat=len(diff))]
    mean_null = ranks.sum() / 2
    exact = float(np.mean([abs(w - mean_null) >= abs(w_plus - mean_null) - 1e-12 for w in null]))
    assert result.p_wilcoxon == pytest.approx(exact)
    assert result.delta == pytest.approx(diff.mean()) and result.ci_low < result.delta < result.ci_high


def test_a_consistent_change_that_interval_overlap_misses_is_flagged() -> None:
    rng = np.random.default_rng(1)
    words = rng.integers(8, 30, size=40)
    before = rng.binomial(words, rng.uniform(0.0, 0.6, size=40))  # items differ a lot in difficulty
    after = np.minimum(before + 1, words)  # every item one more error: a real regression
    ci_before = bootstrap_ratio_ci(before, words, seed=0)
    ci_after = bootstrap_ratio_ci(after, words, seed=0)
    assert ci_after.low < ci_before.high  # the unpaired intervals overlap: CI overlap sees nothing
    paired = paired_ratio("wer", before, words, after, words, seed=0)
    assert paired.flagged and paired.ci_low > 0  # the paired CI excludes 0
    assert paired.delta == pytest.approx(after.sum() / words.sum() - before.sum() / words.sum())
    assert paired.p_wilcoxon < 0.001
    same = paired_ratio("wer", before, words, before, words, seed=0)
    assert not same.flagged and same.delta == 0 and np.isnan(same.p_wilcoxon)


def test_the_table_pairs_by_item_and_ignores_unpaired_and_failed_rows() -> None:
    def transcripts(errors: list[int], status: list[str] | None = None) -> pd.DataFrame:
        n = len(errors)
        return pd.DataFrame({"item_id": [f"i{k}" for k in range(n)], "status": status or ["ok"] * n,
                             "word_errors": errors, "ref_words": 10, "char_errors": errors, "ref_chars": 40})

    a = transcripts([1, 2, 3, 4, 0])
    b = transcripts([2, 3, 4, 5, 9], status=["ok"] * 4 + ["failed"])  # i4 failed in B: not paired
    qa = pd.DataFrame({"item_id": ["i0", "i1", "i2"], "status": "ok", "mos": [3.0, 3.5, 4.0]})
    qb = pd.DataFrame({"item_id": ["i0", "i1", "i9"], "status": "ok", "mos": [3.5, 4.5, 1.0]})
    table = paired_table(a, b, qa, qb, n_resamples=200).set_index("metric")
    assert table.loc["wer", "n_items"] == 4 and table.loc["wer", "delta"] == pytest.approx(14 / 40 - 10 / 40)
    assert table.loc["cer", "delta"] == pytest.approx(14 / 160 - 10 / 160)
    assert table.loc["mos", "n_items"] == 2 and table.loc["mos", "delta"] == pytest.approx(0.75)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="one length"):
        paired_ratio("wer", [1], [2], [1, 2], [2, 2])
    with pytest.raises(ValueError, match="positive reference length"):
        paired_ratio("wer", [1], [0], [1], [2])
