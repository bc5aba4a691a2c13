"""Krippendorff's ordinal alpha worked by hand from its definition, against which test_mos_forms and
test_listening_metrics check ttseval's own."""

from __future__ import annotations

import itertools

import numpy as np


def ordinal_alpha_by_hand(data: np.ndarray) -> float:
    """Krippendorff (2011), 'Computing Krippendorff's alpha-reliability': coincidence matrix o_ck, marginals n_c,
    ordinal metric d_ck = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2, alpha = 1 - (n - 1) sum o d / sum n_c n_k d."""
    values = sorted({v for v in data.ravel() if not np.isnan(v)})
    index = {v: i for i, v in enumerate(values)}
    o = np.zeros((len(values), len(values)))
    for unit in data.T:
        present = [v for v in unit if not np.isnan(v)]
        m = len(present)
        if m < 2:
            continue
        for a, b in itertools.permutations(range(m), 2):
            o[index[present[a]], index[present[b]]] += 1 / (m - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    d = np.zeros_like(o)
    for c, k in itertools.product(range(len(values)), repeat=2):
        low, high = min(c, k), max(c, k)
        d[c, k] = (n_c[low : high + 1].sum() - (n_c[c] + n_c[k]) / 2) ** 2
    expected = sum(n_c[c] * n_c[k] * d[c, k] for c, k in itertools.product(range(len(values)), repeat=2))
    return 1 - (n - 1) * (o * d).sum() / expected
