"""Speaker similarity (SIM): the cosine similarity of two speaker embeddings, and its summary per system.

SIM as Seed-TTS-eval and the zero-shot TTS papers after it report it: embed the synthesized clip and the voice
prompt with a speaker-verification encoder, and take the cosine of the two vectors (1: the same direction, 0:
unrelated, -1: opposite). Figures from two encoders are on different scales and are never pooled: the summary is
per encoder.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ttseval.metrics.bootstrap import MIN_INTERVAL_ITEMS, bootstrap_mean_ci


def cosine_similarity(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """cos(a, b) = a.b / (|a| |b|), in float64.

    Raises:
        ValueError: the vectors differ in shape, are not 1-D, hold a non-finite value, or one is all zeros (no
            direction to compare).
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"embeddings must be 1-D and of one length; got shapes {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("an embedding holds a non-finite value")
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 or ny == 0:
        raise ValueError("an embedding is all zeros: it has no direction")
    return float(np.clip(np.dot(x, y) / (nx * ny), -1.0, 1.0))


def similarity_summary(similarity: pd.DataFrame, *, n_resamples: int, seed: int) -> pd.DataFrame:
    """Per (encoder_id, system_id): n (ok rows), mean SIM and its bootstrap 95% CI over clips, and which
    references the rows used ('prompt', 'voice' or both). Rows that are not ok are left out (counted by the
    report from the table). Sorted by encoder then system, in the frame's order of appearance."""
    columns = ["encoder_id", "encoder_spec", "system_id", "n", "sim", "sim_ci_low", "sim_ci_high", "reference"]
    ok = similarity[similarity["status"] == "ok"]
    rows = []
    for (encoder_id, system_id), group in ok.groupby(["encoder_id", "system_id"], sort=False):
        values = group["similarity"].astype(float).to_numpy()
        ci = bootstrap_mean_ci(values, n_resamples=n_resamples, seed=seed, min_items=MIN_INTERVAL_ITEMS)
        rows.append(
            {
                "encoder_id": encoder_id,
                "encoder_spec": group["encoder_spec"].iloc[0],
                "system_id": system_id,
                "n": len(values),
                "sim": ci.point,
                "sim_ci_low": ci.low,
                "sim_ci_high": ci.high,
                "reference": "+".join(sorted(set(group["reference"]))),
            }
        )
    return pd.DataFrame(rows, columns=columns)
