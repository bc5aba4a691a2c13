"""Report stage: per-system summary as a table, Markdown in the run folder, and a Prefect artifact."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa

from metrics.summary import summarize_systems
from ttseval.config import Settings
from ttseval.report import render_markdown
from ttseval.schemas import REPORT
from ttseval.store import ArtifactStore


def compute_summary(store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str] | None = None) -> pd.DataFrame:
    """The per-system summary of a run from its stored tables (all systems unless `system_ids` is given)."""
    items = store.read(run_id, "items")
    synthesis = store.read(run_id, "synthesis")
    if system_ids is not None:
        synthesis = synthesis[synthesis["system_id"].isin(system_ids)]
        order = {s: i for i, s in enumerate(system_ids)}
        synthesis = synthesis.sort_values("system_id", key=lambda c: c.map(order), kind="stable")
    synthesis = synthesis[synthesis["item_id"].isin(items["item_id"])]
    return summarize_systems(items, synthesis, store.read(run_id, "transcripts"), store.read(run_id, "quality"),
                             n_resamples=settings.bootstrap_resamples, seed=settings.seed)


def write_report(store: ArtifactStore, run_id: str, summary: pd.DataFrame, meta: dict[str, Any]) -> str:
    """Store the summary as the run's `report` table and `report.md`; returns the Markdown."""
    table = pa.Table.from_pandas(summary[REPORT.names], schema=REPORT, preserve_index=False)
    store.replace_table(run_id, "report", table)
    markdown = render_markdown(summary, meta)
    store.write_bytes(f"runs/{run_id}/report.md", markdown.encode("utf-8"))
    return markdown
