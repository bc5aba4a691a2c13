"""The exit-code policy for automation (CI, schedulers): which thresholds a finished run breached.

Off by default. `min_completion` fails a run where any system's completion (clips with audio / items, the report's
`completion_rate`) is below it; `fail_on_regression` fails a nightly run whose drift report flags a change for the
worse. The command line turns a breach into exit code 3 ("ran, thresholds breached"), apart from 1 ("the run
failed": it could not run) and 2 (bad input).
"""

from __future__ import annotations

import pandas as pd

from ttseval.core.registry import system_name

__all__ = ["threshold_breaches"]


def threshold_breaches(
    summary: pd.DataFrame,
    *,
    min_completion: float | None = None,
    regressions: pd.DataFrame | None = None,
    fail_on_regression: bool = False,
) -> list[str]:
    """One line per breach, for a person: each system whose completion is below `min_completion` (the summary has
    one row per system and recogniser; completion is the system's, so each system is named once), and, with
    `fail_on_regression`, each change the drift report flags as worse (`regressions`: metrics.drift rows with
    `flagged` and `direction`). Empty: no threshold breached (or none set)."""
    out = []
    if min_completion is not None and not summary.empty:
        per_system = summary.drop_duplicates("system_id")
        for row in per_system.itertuples(index=False):
            if row.completion_rate < min_completion:
                out.append(
                    f"system {system_name(row.system_spec)}: completion {100 * row.completion_rate:.1f}% "
                    f"({row.n_ok}/{row.n_items}) is below min_completion {100 * min_completion:.1f}%"
                )
    if fail_on_regression and regressions is not None and not regressions.empty:
        worse = regressions[regressions["flagged"].fillna(False).astype(bool) & (regressions["direction"] == "worse")]
        for row in worse.to_dict("records"):
            asr = row.get("asr_spec")
            out.append(
                f"regression flagged: {system_name(row['system_spec'])}"
                + (f" ({asr})" if isinstance(asr, str) else "")
                + f" {row['metric']} {row['previous']:.4g} -> {row['current']:.4g}, worse than the previous run"
            )
    return out
