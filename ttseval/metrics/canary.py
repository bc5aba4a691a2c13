"""Canary clips: a nightly run's fresh audio from remote voices, compared item by item with the reference night's.

A cloud voice's version is its API's, which stays the same when the vendor changes the voice behind it, so a night
that reuses audio for an unchanged request (setting `reuse_audio`) cannot hear such a change. Each night the
remote voices therefore speak a canary sample afresh (ttseval.flows.nightly):

- `canary_sample`: a fixed part, the same every night, stratified by (category, language): one item of each
  stratum in turn, in a fixed order; and a rotating part drawn from the rest, seeded by the night's date, so over
  the weeks every item is heard fresh. Both orders come from SHA-256 of the item id (and the date), so they do
  not depend on the dataset's row order or on Python's hash seed.
- `canary_changes`: for each remote system, the canary items' clips of tonight and of the reference night,
  compared item by item on what a listener would notice: duration, and, where the prosody stage measured both
  clips, mean F0 and speech time. Each is the paired permutation test of ttseval.metrics.paired (sign flips of
  the per-item differences) with the p adjusted across every canary test of the night (Holm by default), flagged
  when under alpha and at least `canary_min_change` of the reference (5%): a vendor's fresh clips vary from night
  to night, so a changed clip (its SHA-256) alone is no change of the voice; a shift the same way on most items
  is, if it is large enough to hear (a 1% jitter leaning one way by chance, 1 night in 20 at alpha 0.05, is not).
  How many clips were byte-identical is reported too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ttseval.metrics.multiplicity import Method
from ttseval.metrics.paired import decide, paired_mean

__all__ = ["CANARY_COLUMNS", "CANARY_MEASURES", "canary_changes", "canary_sample"]

# What a fresh clip is compared on, in display order: (column, what it is).
CANARY_MEASURES: tuple[tuple[str, str], ...] = (
    ("duration_s", "clip duration, s"),
    ("f0_mean_hz", "mean F0 of voiced frames, Hz (prosody stage)"),
    ("speech_s", "speech time by VAD, s (prosody stage)"),
)
_MEASURE_COLUMNS = tuple(m for m, _ in CANARY_MEASURES)

CANARY_COLUMNS = [
    "system_id",
    "system_spec",
    "measure",
    "n_items",
    "identical_clips",
    "reference",
    "tonight",
    "delta",
    "ci_low",
    "ci_high",
    "p_permutation",
    "p_adjusted",
    "flagged",
]


def _order(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def canary_sample(items: pd.DataFrame, fixed: int, rotating: int, night: str) -> list[str]:
    """Item ids of the night's canary: `fixed` stratified by (category, language), the same every night, then
    `rotating` more from the other items, drawn by the date `night` (YYYY-MM-DD). Fewer when the dataset is small.

    Raises:
        ValueError: a negative size.
    """
    if fixed < 0 or rotating < 0:
        raise ValueError(f"canary sizes must be >= 0, got fixed={fixed}, rotating={rotating}")
    frame = items.assign(
        category=items.get("category", pd.Series("", index=items.index)).fillna(""),
        language=items["language"].fillna(""),
    )
    strata = [
        sorted(group["item_id"].astype(str), key=_order)
        for _, group in frame.groupby(["category", "language"], sort=True)
    ]
    chosen: list[str] = []
    depth = 0
    while len(chosen) < fixed and any(depth < len(s) for s in strata):
        chosen += [s[depth] for s in strata if depth < len(s)][: fixed - len(chosen)]
        depth += 1
    rest = sorted(set(frame["item_id"].astype(str)) - set(chosen), key=lambda i: _order(f"{night}/{i}"))
    return chosen + rest[:rotating]


def canary_changes(
    reference: pd.DataFrame,
    tonight: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    method: Method = "holm",
    n_permutations: int | None = None,
    measures: Sequence[str] = _MEASURE_COLUMNS,
    min_change: float = 0.0,
) -> pd.DataFrame:
    """One row per (system, measure): tonight's fresh canary clips against the reference night's clips of the same
    items (CANARY_COLUMNS). Both frames have one row per (system_id, item_id) with `system_spec`, `audio_sha256`
    and the measures' columns (NaN where not measured); a measure without two values on at least 2 items gets
    no row. `delta` is tonight - reference, its BCa CI NaN under MIN_INTERVAL_ITEMS items. A row is flagged when
    its adjusted p is under `alpha` and the change is at least `min_change` of the reference's mean (a share:
    0.05 is 5%), so a vendor's night-to-night jitter that happens to lean one way is no voice change."""
    keys = ["system_id", "item_id"]
    both = reference.merge(tonight, on=keys, suffixes=("_ref", "_new"))
    rows = []
    for system_id, group in both.groupby("system_id", sort=True):
        identical = int((group["audio_sha256_ref"] == group["audio_sha256_new"]).sum())
        for measure in measures:
            if f"{measure}_ref" not in group:
                continue
            pair = group[[f"{measure}_ref", f"{measure}_new"]].astype(float).dropna()
            if len(pair) < 2:
                continue
            p = paired_mean(
                measure,
                pair.iloc[:, 0].to_numpy(),
                pair.iloc[:, 1].to_numpy(),
                n_resamples=n_resamples,
                seed=seed,
                n_permutations=n_permutations,
            )
            p_perm = p.p_permutation if not np.isnan(p.p_permutation) else 1.0  # every difference 0: no change
            rows.append(
                {
                    "system_id": system_id,
                    "system_spec": group["system_spec_new"].iloc[0],
                    "measure": measure,
                    "n_items": p.n_items,
                    "identical_clips": identical,
                    "reference": p.a,
                    "tonight": p.b,
                    "delta": p.delta,
                    "ci_low": p.ci_low,
                    "ci_high": p.ci_high,
                    "p_permutation": p_perm,
                }
            )
    if not rows:
        return pd.DataFrame(columns=CANARY_COLUMNS)
    decided = decide(pd.DataFrame(rows), alpha=alpha, method=method)
    large = (decided["delta"].abs() >= min_change * decided["reference"].abs()).to_numpy(bool)
    decided["differs"] = decided["differs"].to_numpy(bool) & large
    return decided.rename(columns={"differs": "flagged"}).reindex(columns=CANARY_COLUMNS)
