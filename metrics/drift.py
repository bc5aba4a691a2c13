"""Drift between two runs of the same systems: per-system metric deltas, flagged when the change is beyond
what the runs' own uncertainty explains.

A metric with a 95% CI is flagged when the two runs' intervals do not overlap. That is conservative (two
intervals can overlap while the difference is still significant at 5%), chosen so a nightly alarm means a
real change. Completion has no CI: every item it gains or loses is a change in F1 and is flagged.
"""

from __future__ import annotations

import math

import pandas as pd

from metrics.wer import MetricInfo

# metric -> (CI low column, CI high column) or None when the metric has no CI
DRIFT_METRICS: dict[str, tuple[str, str] | None] = {
    "completion_rate": None,
    "wer": ("wer_ci_low", "wer_ci_high"),
    "cer": ("cer_ci_low", "cer_ci_high"),
    "mos": ("mos_ci_low", "mos_ci_high"),
}
DIRECTION: dict[str, MetricInfo] = {
    "completion_rate": MetricInfo(higher_is_better=True, aggregate="n_ok / n_items"),
    "wer": MetricInfo(higher_is_better=False, aggregate="corpus WER"),
    "cer": MetricInfo(higher_is_better=False, aggregate="corpus CER"),
    "mos": MetricInfo(higher_is_better=True, aggregate="mean predicted MOS"),
}

COLUMNS = ["system_id", "system_spec", "metric", "previous", "current", "delta", "previous_ci_low",
           "previous_ci_high", "current_ci_low", "current_ci_high", "flagged", "direction"]


def _nan(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def compare_reports(previous: pd.DataFrame, current: pd.DataFrame) -> pd.DataFrame:
    """One row per (system in both runs, metric) with the delta current - previous and whether it is flagged.

    `direction` says whether the change is an improvement or a regression ('better' / 'worse' / 'same'), from
    the metric's declared direction. Systems present in only one run are returned with metric 'presence'.

    Raises:
        ValueError: a report lacks a required column or repeats a system_id.
    """
    for name, frame in (("previous", previous), ("current", current)):
        needed = {"system_id", "system_spec", *DRIFT_METRICS, *(c for ci in DRIFT_METRICS.values() if ci for c in ci)}
        missing = needed - set(frame.columns)
        if missing:
            raise ValueError(f"{name} report lacks column(s) {sorted(missing)}")
        if frame["system_id"].duplicated().any():
            raise ValueError(f"{name} report repeats system_id {frame.loc[frame['system_id'].duplicated(), 'system_id'].iloc[0]!r}")
    prev, curr = previous.set_index("system_id"), current.set_index("system_id")
    rows = []
    for system_id in curr.index:
        if system_id not in prev.index:
            rows.append({"system_id": system_id, "system_spec": curr.loc[system_id, "system_spec"], "metric": "presence",
                         "flagged": True, "direction": "added"})
            continue
        p, c = prev.loc[system_id], curr.loc[system_id]
        for metric, ci in DRIFT_METRICS.items():
            a, b = p[metric], c[metric]
            row = {"system_id": system_id, "system_spec": c["system_spec"], "metric": metric, "previous": a,
                   "current": b, "delta": (b - a) if not (_nan(a) or _nan(b)) else float("nan")}
            if ci:
                row |= {"previous_ci_low": p[ci[0]], "previous_ci_high": p[ci[1]], "current_ci_low": c[ci[0]],
                        "current_ci_high": c[ci[1]]}
                bounds = [p[ci[0]], p[ci[1]], c[ci[0]], c[ci[1]]]
                row["flagged"] = (not any(_nan(v) for v in bounds)) and (c[ci[0]] > p[ci[1]] or c[ci[1]] < p[ci[0]])
            else:
                row["flagged"] = not _nan(row["delta"]) and row["delta"] != 0
            if _nan(row["delta"]) or row["delta"] == 0:
                row["direction"] = "same"
            else:
                improved = (row["delta"] > 0) == DIRECTION[metric].higher_is_better
                row["direction"] = "better" if improved else "worse"
            rows.append(row)
    for system_id in prev.index.difference(curr.index):
        rows.append({"system_id": system_id, "system_spec": prev.loc[system_id, "system_spec"], "metric": "presence",
                     "flagged": True, "direction": "removed"})
    return pd.DataFrame(rows).reindex(columns=COLUMNS)
