"""How many items a paired comparison needs: the sample-size planner.

From a run (or a pilot) the per-item differences between two systems give the spread `sd` of a paired difference;
the planner answers: how many items does a two-sided paired test at level alpha need to detect a true mean
difference `delta` with probability `power`?

The answer is that of the paired t-test, exactly: the smallest n whose power, from the noncentral t distribution
(`scipy.stats.nct`, df = n - 1, noncentrality delta / sd * sqrt(n)), reaches `power`. The report decides with a
paired permutation test, whose power at these sizes is close to the t-test's (both test the mean difference);
tests/unit/test_metrics_planning.py checks the planned n against statsmodels' `TTestPower` and against a simulation that
resamples a pilot's own per-item differences (shifted to the planned delta) and counts how often the test rejects.

With the report's family of m tests adjusted by Holm, plan with alpha / m (`tests`): Holm's first step is
Bonferroni's, so this is what the smallest p must pass; it is conservative for the later steps.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["EFFECT_SIZES", "MAX_ITEMS", "items_needed", "per_item_sd", "power_of"]

# Differences worth detecting, per metric, in the metric's units (WER/CER as fractions, MOS points).
EFFECT_SIZES: dict[str, tuple[float, ...]] = {
    "wer": (0.01, 0.02, 0.05),
    "cer": (0.005, 0.01, 0.02),
    "mos": (0.05, 0.1, 0.2),
    "sim": (0.01, 0.02, 0.05),
}
MAX_ITEMS = 1_000_000  # past this the planner answers "more than"


def power_of(n: int, delta: float, sd: float, *, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test on n items for a true mean difference delta with per-item sd."""
    from scipy import stats

    if n < 2:
        return 0.0
    df = n - 1
    critical = stats.t.ppf(1 - alpha / 2, df)
    nc = abs(delta) / sd * math.sqrt(n)
    return float(stats.nct.sf(critical, df, nc) + stats.nct.cdf(-critical, df, nc))


def items_needed(delta: float, sd: float, *, alpha: float = 0.05, power: float = 0.8, tests: int = 1) -> int | None:
    """The fewest items for which a two-sided paired t-test at alpha / tests detects delta with at least `power`;
    None when more than MAX_ITEMS would be needed.

    Raises:
        ValueError: delta 0, sd not positive, alpha or power outside (0, 1), or tests < 1 (the message names it).
    """
    from scipy import stats

    for name, value in (("alpha", alpha), ("power", power)):
        if not 0 < value < 1:
            raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    if not delta or not math.isfinite(delta):
        raise ValueError(f"delta must be a non-zero difference to detect, got {delta!r}")
    if not sd > 0 or not math.isfinite(sd):
        raise ValueError(f"sd must be positive (the spread of the per-item differences), got {sd!r}")
    if tests < 1:
        raise ValueError(f"tests must be at least 1, got {tests!r}")
    level = alpha / tests
    # start from the normal approximation, then step to the exact t answer
    z = stats.norm.ppf(1 - level / 2) + stats.norm.ppf(power)
    n = max(2, math.ceil((z * sd / abs(delta)) ** 2))
    if n > MAX_ITEMS:
        return None
    while n > 2 and power_of(n - 1, delta, sd, alpha=level) >= power:
        n -= 1
    while power_of(n, delta, sd, alpha=level) < power:
        n += 1
        if n > MAX_ITEMS:
            return None
    return n


def per_item_sd(differences: np.ndarray) -> float:
    """The sample standard deviation (ddof 1) of per-item differences; NaN under two items."""
    d = np.asarray(differences, dtype=float)
    return float(np.std(d, ddof=1)) if len(d) >= 2 else float("nan")
