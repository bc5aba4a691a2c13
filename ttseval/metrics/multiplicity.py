"""Adjusting p-values for the number of tests a report makes (its family), and the decision taken from them.

A report that runs one test per system x metric x recogniser finds "differences" by chance alone: at alpha 0.05,
one in twenty true nulls. The family's p-values are adjusted together:

- ``holm``: Holm's step-down (1979), which controls the family-wise error rate (the chance of any false
  "differs") under any dependence between the tests. Sorted ascending, p_(i) becomes
  max over j <= i of min(1, (m - j + 1) p_(j)).
- ``bh``: Benjamini-Hochberg (1995), which controls the false discovery rate (the expected share of false
  "differs" among those called), from ``scipy.stats.false_discovery_control``.

A NaN p-value (a test that could not run: every difference zero, one item) is left out of the family and stays
NaN. Checked against statsmodels' ``multipletests`` in tests/unit/test_metrics_paired.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

__all__ = ["METHODS", "Method", "adjust_p"]

METHODS: dict[str, str] = {"holm": "Holm", "bh": "Benjamini-Hochberg"}

Method = Literal["holm", "bh"]


def adjust_p(pvalues: Sequence[float], method: Method = "holm") -> np.ndarray:
    """The family's p-values adjusted by `method` ('holm' or 'bh'), in the input's order; NaN stays NaN.

    Raises:
        ValueError: an unknown method, or a p-value outside [0, 1] (the message names its index).
    """
    from scipy import stats

    if method not in METHODS:
        raise ValueError(f"multiple-testing method {method!r} is not one of {sorted(METHODS)}")
    p = np.asarray(pvalues, dtype=float).ravel()
    bad = np.flatnonzero(~np.isnan(p) & ((p < 0) | (p > 1)))
    if bad.size:
        raise ValueError(
            f"p-value [{int(bad[0])}] = {float(p[bad[0]])!r} is outside [0, 1]: pass p-values, not statistics"
        )
    out = np.full_like(p, np.nan)
    known = np.flatnonzero(~np.isnan(p))
    if not known.size:
        return out
    if method == "bh":
        out[known] = stats.false_discovery_control(p[known], method="bh")
        return out
    order = known[np.argsort(p[known], kind="stable")]
    m = len(order)
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(stepped)
    return out
