"""The whole report of a run: the per-item table, summary, win-rates and figures stored, report.md and the HTML
report written."""

from __future__ import annotations

from typing import Any

from ttseval.core.config import Settings
from ttseval.core.store import ArtifactStore
from ttseval.tasks.quality import primary_quality_id
from ttseval.tasks.report.compute import (RunTables, baseline_id, compute_rankings, compute_summary,
                                          compute_winrates, store_summary, store_winrates)
from ttseval.tasks.report.figures import depth_figure
from ttseval.tasks.report.html import build_data, html_location, write_html_report
from ttseval.tasks.report.judges import instruction_markdown, leaderboard_markdown
from ttseval.tasks.report.per_item import write_per_item
from ttseval.tasks.report.markdown import cost_markdown, listening_markdown, render_markdown, tables_markdown
from ttseval.tasks.report.stages import (audio_checks_markdown, grouped_markdown, insv_markdown, paired_markdown,
                                         predictors_markdown, prosody_markdown, recognisers_markdown,
                                         planning_markdown, significance_markdown, similarity_markdown)


def write_full_report(store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str],
                      meta: dict[str, Any]) -> str:
    """Summary, win-rates, figures and Markdown for a run; returns the Markdown, stored once as report.md."""
    tables = RunTables.read(store, run_id, system_ids, primary_quality_id(settings))  # every section reads these
    meta = {**meta, "html report": html_location(store, run_id)}
    write_per_item(store, run_id, settings, tables)  # runs/<id>/per_sentence.csv, every run's tidy per-item table
    summary = compute_summary(store, run_id, settings, system_ids, tables)
    store_summary(store, run_id, summary)
    winrates = compute_winrates(store, run_id, settings)
    names = dict(zip(summary["system_id"], summary["system_spec"]))
    rankings = compute_rankings(store, run_id, settings) if not winrates.empty else None
    if not winrates.empty:
        store_winrates(store, run_id, winrates)
        for judge_id in winrates["judge_id"].unique():
            png = depth_figure(winrates, judge_id, names)
            if png:
                store.write_bytes(f"runs/{run_id}/figures/winrate-by-depth-{judge_id}.png", png)
    markdown = (render_markdown(summary, meta) + cost_markdown(store, run_id, names)
                + insv_markdown(store, run_id, settings, tables)
                + recognisers_markdown(settings, tables, names)
                + paired_markdown(settings, tables, baseline_id(meta), names)
                + planning_markdown(settings, tables, baseline_id(meta), names)
                + significance_markdown(settings, tables, names)
                + prosody_markdown(store, run_id, tables, names)
                + similarity_markdown(settings, tables, names)
                + predictors_markdown(settings, tables, names)
                + audio_checks_markdown(tables, names)
                + grouped_markdown(tables, names)
                + leaderboard_markdown(store, run_id, summary, winrates, rankings)
                + instruction_markdown(store, run_id, names) + listening_markdown(store, run_id)
                + tables_markdown(store, run_id))
    store.write_bytes(f"runs/{run_id}/report.md", markdown.encode("utf-8"))
    write_html_report(store, run_id, build_data(store, run_id, tables, summary, winrates, markdown, meta,
                                                    rankings))
    return markdown
