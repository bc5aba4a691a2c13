"""Paired comparisons (metrics/paired.py) and the family's adjustment (metrics/multiplicity.py): p-values against
exact enumerations written out here, the adjustment against statsmodels' multipletests, the decision on the issue's
8-item case (no) and on a real difference (yes), the paired CI against the unpaired intervals on data where only the
pairing shows the change."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ttseval.metrics.bootstrap import bootstrap_ratio_ci
from ttseval.metrics.multiplicity import adjust_p
from ttseval.metrics.paired import MIN_INTERVAL_ITEMS, decide, paired_mean, paired_ratio, paired_table


def _exact_sign_flip_p(diff: np.ndarray, statistic) -> float:
    """Two-sided p of a paired test by enumerating every assignment of signs (2^n)."""
    observed = abs(statistic(diff))
    flips = [
        abs(statistic(diff * np.array(signs))) >= observed - 1e-12
        for signs in itertools.product([1, -1], repeat=len(diff))
    ]
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
    assert result.delta == pytest.approx(diff.mean())
    assert len(diff) < MIN_INTERVAL_ITEMS and np.isnan(result.ci_low) and np.isnan(result.ci_high)  # n too small


def test_the_pooled_ratio_permutation_p_matches_exact_enumeration_of_item_swaps() -> None:
    ea, ta = np.array([1, 0, 3, 2, 0, 4, 1, 2]), np.array([5, 6, 9, 7, 4, 12, 6, 8])
    eb, tb = np.array([2, 1, 3, 4, 1, 4, 3, 2]), np.array([5, 6, 9, 7, 4, 12, 6, 8])
    result = paired_ratio("wer", ea, ta, eb, tb, n_resamples=5000)

    def pooled(swap: tuple[bool, ...]) -> float:  # swapping an item moves its (errors, words) to the other side
        s = np.array(swap)
        xa, xb = np.where(s, eb, ea), np.where(s, ea, eb)
        wa, wb = np.where(s, tb, ta), np.where(s, ta, tb)
        return xb.sum() / wb.sum() - xa.sum() / wa.sum()

    observed = abs(pooled((False,) * 8))
    exact = np.mean([abs(pooled(s)) >= observed - 1e-12 for s in itertools.product([False, True], repeat=8)])
    assert result.p_permutation == pytest.approx(exact)
    assert result.delta == pytest.approx(eb.sum() / tb.sum() - ea.sum() / ta.sum())


def test_a_large_runs_permutation_p_is_scipys_unbatched_one() -> None:
    """At 5,000 items the permutations are drawn a batch at a time (a few MB held, not 80); the p values equal
    scipy's permutation_test drawing them all at once, with the same seed (the independent computation here)."""
    rng = np.random.default_rng(3)
    n = 5_000
    ea, eb = rng.integers(0, 4, n), rng.integers(0, 5, n)
    ta = tb = rng.integers(4, 14, n)
    errors, totals = np.concatenate([ea, eb]).astype(float), np.concatenate([ta, tb]).astype(float)

    def pooled(side_a, side_b, axis=-1):
        return errors[side_b].sum(axis) / totals[side_b].sum(axis) - errors[side_a].sum(axis) / totals[side_a].sum(axis)

    unbatched = stats.permutation_test(
        (np.arange(n), np.arange(n) + n),
        pooled,
        permutation_type="samples",
        vectorized=True,
        n_resamples=299,
        rng=np.random.default_rng(7),
    ).pvalue
    assert paired_ratio("wer", ea, ta, eb, tb, n_resamples=99, seed=7, n_permutations=299).p_permutation == unbatched
    diff = (eb / tb - ea / ta).astype(float)
    unbatched = stats.permutation_test(
        (diff,), np.mean, permutation_type="samples", vectorized=True, n_resamples=299, rng=np.random.default_rng(7)
    ).pvalue
    assert paired_mean("mos", ea / ta, eb / tb, n_resamples=99, seed=7, n_permutations=299).p_permutation == unbatched
    assert 0 < unbatched < 1


# The eight-item case: MOS difference 0.153 over 8 items; the percentile bootstrap CI excludes 0, the tests do not.
ISSUE_DIFF = np.array([0.31, -0.14, 0.59, 0.12, 0.16, -0.08, -0.03, 0.29])


def test_the_eight_item_case_no_longer_differs_and_a_real_difference_still_does() -> None:
    a = np.full(8, 3.0)
    small = paired_mean("mos", a, a + ISSUE_DIFF)
    # the old rule, computed here with numpy: percentile bootstrap CI of the mean difference excludes 0
    resampled = ISSUE_DIFF[np.random.default_rng(0).integers(0, 8, size=(1000, 8))].mean(1)
    assert np.quantile(resampled, 0.025) > 0
    assert small.p_wilcoxon == pytest.approx(0.1484375) and small.p_permutation > 0.1  # exact, 256 sign flips
    rng = np.random.default_rng(7)
    before = rng.normal(3.2, 0.6, size=40)
    real = paired_mean("mos", before, before + 0.3 + rng.normal(0, 0.3, size=40))  # a real difference, 40 items
    unchanged = paired_mean("mos", before, before + rng.normal(0, 0.3, size=40))
    family = pd.DataFrame([vars(small), vars(real), vars(unchanged)])
    decided = decide(family, alpha=0.05, method="holm")
    assert list(decided["differs"]) == [False, True, False]
    assert decided["p_adjusted"].tolist() == pytest.approx(adjust_p(family["p_permutation"], "holm"))
    assert decided.loc[0, "p_adjusted"] >= small.p_permutation
    assert real.ci_low > 0 and real.ci_low < real.delta < real.ci_high  # BCa at n = 40


@pytest.mark.parametrize("method, statsmodels_method", [("holm", "holm"), ("bh", "fdr_bh")])
def test_the_adjustment_matches_statsmodels_multipletests(method: str, statsmodels_method: str) -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(11)
    p = np.concatenate([rng.uniform(0, 0.05, 6), rng.uniform(0, 1, 14), [0.01, 0.01]])  # ties included
    rng.shuffle(p)
    expected = multipletests(p, alpha=0.05, method=statsmodels_method)[1]
    assert adjust_p(p, method) == pytest.approx(expected, abs=1e-12)
    # a test that could not run (NaN) is left out of the family: the rest adjust as a family of 22
    with_nan = adjust_p(np.append(p, np.nan), method)
    assert np.isnan(with_nan[-1]) and with_nan[:-1] == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match=r"p-value \[1\] = 1.5"):
        adjust_p([0.1, 1.5], method)
    with pytest.raises(ValueError, match="not one of"):
        adjust_p([0.1], "bonferroni")


def test_a_consistent_change_that_interval_overlap_misses_is_flagged() -> None:
    rng = np.random.default_rng(1)
    words = rng.integers(8, 30, size=40)
    before = rng.binomial(words, rng.uniform(0.0, 0.6, size=40))  # items differ a lot in difficulty
    after = np.minimum(before + 1, words)  # every item one more error: a real regression
    ci_before = bootstrap_ratio_ci(before, words, seed=0)
    ci_after = bootstrap_ratio_ci(after, words, seed=0)
    assert ci_after.low < ci_before.high  # the unpaired intervals overlap: CI overlap sees nothing
    paired = paired_ratio("wer", before, words, after, words, seed=0)
    assert decide(pd.DataFrame([vars(paired)]))["differs"].item() and paired.ci_low > 0  # the BCa CI excludes 0
    assert paired.delta == pytest.approx(after.sum() / words.sum() - before.sum() / words.sum())
    assert paired.p_wilcoxon < 0.001
    same = paired_ratio("wer", before, words, before, words, seed=0)
    assert same.delta == 0 and np.isnan(same.p_wilcoxon) and np.isnan(same.p_permutation)
    assert not decide(pd.DataFrame([vars(same)]))["differs"].item()


def test_the_table_pairs_by_item_and_ignores_unpaired_and_failed_rows() -> None:
    def transcripts(errors: list[int], status: list[str] | None = None) -> pd.DataFrame:
        n = len(errors)
        return pd.DataFrame(
            {
                "item_id": [f"i{k}" for k in range(n)],
                "status": status or ["ok"] * n,
                "word_errors": errors,
                "ref_words": 10,
                "char_errors": errors,
                "ref_chars": 40,
            }
        )

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
