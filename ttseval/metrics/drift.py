"""Drift between two runs of the same systems: per-row metric deltas, flagged when the change is beyond what the
runs' own uncertainty explains.

A row of a report is one (system, recogniser) pair (``ttseval.metrics.summary``). A report written before recognisers
had their own rows (no ``asr_id``) is matched by system where the system now has a single recogniser.

WER, CER and MOS are compared item by item when the runs' per-item tables are given (`paired_drift`, from
ttseval.metrics.paired), as a report compares systems: flagged when the paired permutation test's p, adjusted
(Holm or Benjamini-Hochberg) across every paired test of the drift report, is under alpha; a BCa 95% CI of the
difference beside it (none under MIN_INTERVAL_ITEMS items). Comparing the two runs' own CIs (the fallback, when
only the reports are at hand) misses real changes: the item effect stays in both intervals, so they overlap though
every item moved the same way. Completion has no CI: every item it gains or loses is a change in F1 and is
flagged. Whether a change is better or worse comes from the metric's declared direction
(``ttseval.metrics.registry``).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ttseval.core.registry import system_name
from ttseval.metrics.multiplicity import Method
from ttseval.metrics.registry import METRICS, change

# The metrics a drift report compares, in display order; their CI columns and direction are in the registry.
DRIFT_METRICS: tuple[str, ...] = ("completion_rate", "wer", "cer", "mos")

# A report row's key: (system_id, asr_id), asr_id None in a report written before rows were per recogniser.
RowKey = tuple[str, str | None]

COLUMNS = [
    "system_id",
    "system_spec",
    "asr_id",
    "asr_spec",
    "metric",
    "previous",
    "current",
    "delta",
    "previous_ci_low",
    "previous_ci_high",
    "current_ci_low",
    "current_ci_high",
    "delta_ci_low",
    "delta_ci_high",
    "p_value",
    "p_adjusted",
    "test",
    "flagged",
    "direction",
    "n_items",
    "n_tests",
    "p_floor",
    "blind",
]
"""A drift row; `n_items`, `n_tests`, `p_floor` and `blind` are the paired test's power (paired_drift), on its rows
only."""


def _nan(v: object) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _rows(frame: pd.DataFrame, name: str) -> dict[RowKey, pd.Series]:
    """(system_id, asr_id) -> row, in the report's order."""
    needed = {
        "system_id",
        "system_spec",
        *DRIFT_METRICS,
        *(c for m in DRIFT_METRICS for c in METRICS[m].ci or ()),
    }
    missing = needed - set(frame.columns)
    if missing:
        raise ValueError(f"{name} report lacks column(s) {sorted(missing)}")
    rows: dict[RowKey, pd.Series] = {}
    for _, r in frame.iterrows():
        asr_id = r.get("asr_id")
        key: RowKey = (r["system_id"], None if _nan(asr_id) else asr_id)
        if key in rows:
            raise ValueError(f"{name} report repeats system_id {key[0]!r} with asr_id {key[1]!r}")
        rows[key] = r
    return rows


def paired_drift(
    previous: dict[str, pd.DataFrame],
    current: dict[str, pd.DataFrame],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    method: Method = "holm",
    n_permutations: int | None = None,
) -> pd.DataFrame:
    """Item-by-item WER, CER and MOS of each (system, recogniser) in both runs (ttseval.metrics.paired.paired_table),
    decided as one family (ttseval.metrics.paired.decide, `alpha`, `method` 'holm' or 'bh'): columns system_id,
    asr_id, PAIRED_COLUMNS, DECISION_COLUMNS, and each test's power: `n_tests`, the family a change in that metric
    alone would be adjusted across (the tests that have a p-value, this one included: a test whose every difference
    is 0 has none and is left out of the adjustment), `p_floor`, the smallest adjusted p such a lone change could
    reach (the smallest p its item count allows times `n_tests`, as Holm and BH both adjust the smallest p), and
    `blind`, True when that floor is not under `alpha` and the test did not flag (a lone change of any size could not
    be flagged). `previous` and `current` hold each run's `transcripts` and `quality` tables."""
    from ttseval.metrics.paired import DECISION_COLUMNS, PAIRED_COLUMNS, decide, paired_table, smallest_p

    rows = []
    pt, ct = previous["transcripts"], current["transcripts"]
    pq, cq = previous["quality"], current["quality"]
    for (system_id, asr_id), tr in ct.groupby(["system_id", "asr_id"], sort=False):
        before = pt[(pt["system_id"] == system_id) & (pt["asr_id"] == asr_id)]
        if before.empty:
            continue
        table = paired_table(
            before,
            tr,
            pq[pq["system_id"] == system_id],
            cq[cq["system_id"] == system_id],
            n_resamples=n_resamples,
            seed=seed,
            n_permutations=n_permutations,
        )
        rows += [{"system_id": system_id, "asr_id": asr_id} | r for r in table.to_dict("records")]
    family = pd.DataFrame(rows, columns=["system_id", "asr_id", *PAIRED_COLUMNS])
    permutations = n_permutations or n_resamples
    known = int(family["p_permutation"].notna().sum())
    family["n_tests"] = [known + int(pd.isna(p)) for p in family["p_permutation"]]
    family["p_floor"] = [
        min(1.0, m * smallest_p(int(n), permutations)) for m, n in zip(family["n_tests"], family["n_items"])
    ]
    decided = decide(family, alpha=alpha, method=method)
    decided["blind"] = (decided["p_floor"] >= alpha) & ~decided["differs"].astype(bool)
    return decided.reindex(
        columns=["system_id", "asr_id", *PAIRED_COLUMNS, *DECISION_COLUMNS, "n_tests", "p_floor", "blind"]
    )


def blind_tests(drift: pd.DataFrame, alpha: float, n_permutations: int) -> list[str]:
    """A warning line per (item count, family size) among the drift rows whose paired test is `blind`
    (paired_drift): how many tests, why a lone change there cannot be flagged (the smallest p on that many items,
    times the tests it would be adjusted across, against `alpha`) and the items a series needs so that it could
    (ttseval.metrics.paired.items_needed). Empty when no test is blind."""
    from ttseval.metrics.paired import items_needed, smallest_p

    if "blind" not in drift or not len(drift):
        return []
    paired = drift[drift["test"] == "paired"]
    blind = paired[paired["blind"].fillna(False).astype(bool)]
    lines = []
    for (n, family), rows in blind.groupby(["n_items", "n_tests"], sort=True):
        floor, family = smallest_p(int(n), n_permutations), int(family)
        needed = items_needed(family, alpha, n_permutations)
        need = (
            f"at least {needed} items are needed for one to be flagged"
            if needed
            else "no item count is enough: raise permutation_resamples"
        )
        tests = ", ".join(f"{r['metric']} of {system_name(r['system_spec'])}" for r in rows.to_dict("records"))
        lines.append(
            f"{len(rows)} of {len(paired)} paired tests cannot flag a lone change of any size ({tests}): on {int(n)} "
            f"items the smallest p is {floor:.4g}, adjusted across {family} test(s) {min(1.0, family * floor):.4g}, "
            f"not under alpha {alpha:g}; {need}"
        )
    return lines


def compare_reports(
    previous: pd.DataFrame,
    current: pd.DataFrame,
    paired: pd.DataFrame | None = None,
    *,
    series_changed: set[str] | frozenset[str] = frozenset(),
) -> pd.DataFrame:
    """One row per ((system, recogniser) in both runs, metric) with the delta current - previous and a flag.

    With `paired` (paired_drift's table), WER, CER and MOS take its delta CI, permutation p, adjusted p and
    decision (`test` 'paired'); otherwise, or for a pair it lacks, the flag is the runs' CIs not overlapping (`test`
    'ci-overlap').

    `direction` says whether the change is an improvement or a regression ('better' / 'worse' / 'same'), from
    the metric's declared direction. Pairs present in only one run are returned with metric 'presence', flagged
    unless their system spec is in `series_changed` (a system added to or removed from the series, or every system
    when its recognisers changed: a change of what is compared, not of how it performs). An unexplained one is a
    change: a configured system that produced no transcript tonight (every clip failed) is one.

    Raises:
        ValueError: a report lacks a required column or repeats a (system_id, asr_id) pair.
    """
    prev, curr = _rows(previous, "previous"), _rows(current, "current")
    prev = _legacy_matched(prev, curr)
    by_item = (
        {} if paired is None else {(r["system_id"], r["asr_id"], r["metric"]): r for r in paired.to_dict("records")}
    )
    rows = []
    for key, c in curr.items():
        ids = _ids(key, c)
        if key not in prev:
            rows.append(
                ids | {"metric": "presence", "flagged": ids["system_spec"] not in series_changed, "direction": "added"}
            )
            continue
        p = prev[key]
        for metric in DRIFT_METRICS:
            a, b = p[metric], c[metric]
            delta = (b - a) if not (_nan(a) or _nan(b)) else float("nan")
            row = ids | {"metric": metric, "previous": a, "current": b, "delta": delta}
            ci = METRICS[metric].ci
            if ci:
                row |= {
                    "previous_ci_low": p[ci[0]],
                    "previous_ci_high": p[ci[1]],
                    "current_ci_low": c[ci[0]],
                    "current_ci_high": c[ci[1]],
                }
                bounds = [p[ci[0]], p[ci[1]], c[ci[0]], c[ci[1]]]
                row["flagged"] = (not any(_nan(v) for v in bounds)) and (c[ci[0]] > p[ci[1]] or c[ci[1]] < p[ci[0]])
                row["test"] = "ci-overlap"
                if (pair := by_item.get((key[0], key[1], metric))) is not None:
                    row |= {
                        "delta_ci_low": pair["ci_low"],
                        "delta_ci_high": pair["ci_high"],
                        "p_value": pair["p_permutation"],
                        "p_adjusted": pair["p_adjusted"],
                        "flagged": bool(pair["differs"]),
                        "test": "paired",
                        # a paired table not made by paired_drift may lack the power columns
                        "n_items": pair.get("n_items", float("nan")),
                        "n_tests": pair.get("n_tests", float("nan")),
                        "p_floor": pair.get("p_floor", float("nan")),
                        "blind": bool(pair.get("blind", False)),
                    }
            else:
                row["flagged"] = not _nan(delta) and delta != 0
            row["direction"] = "same" if _nan(delta) else change(metric, float(a), float(b))
            rows.append(row)
    for key, p in prev.items():
        if key not in curr:
            gone = _ids(key, p)
            rows.append(
                gone
                | {"metric": "presence", "flagged": gone["system_spec"] not in series_changed, "direction": "removed"}
            )
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


def _legacy_matched(prev: dict[RowKey, pd.Series], curr: dict[RowKey, pd.Series]) -> dict[RowKey, pd.Series]:
    """A report written before rows were per recogniser (every asr_id null) is matched to the current one by
    system, where the system now has exactly one row: its WER pooled one recogniser then too. A system with
    several recognisers now is left unmatched (presence rows), since its old figure pooled them."""
    if any(asr is not None for _, asr in prev):
        return prev
    now: dict[str, list[str | None]] = {}
    for system_id, asr_id in curr:
        now.setdefault(system_id, []).append(asr_id)
    return {
        ((system_id, now[system_id][0]) if len(now.get(system_id, [])) == 1 else (system_id, asr)): row
        for (system_id, asr), row in prev.items()
    }


def _ids(key: RowKey, row: pd.Series) -> dict[str, Any]:
    asr_spec = row.get("asr_spec")
    return {
        "system_id": key[0],
        "system_spec": row["system_spec"],
        "asr_id": key[1],
        "asr_spec": None if _nan(asr_spec) else asr_spec,
    }
