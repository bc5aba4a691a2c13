"""The whole report of a run: the per-item table, summary, win-rates and figures stored, report.md and the HTML
report written.

With `reuse` (the evaluate flow), a report whose inputs did not change since it was written is kept as it is: the
inputs are every file of the run's folder but the report's own outputs and the run's log and lease (by name and
size: parts are written once under new names, so a change of rows is a change of names), the settings, the systems
and the run's description but its date. Their sha256 is stored beside report.md; a re-run that computed nothing then
skips 3.7 s of rendering (issue 31), and its report keeps the date of the run that wrote it.
"""

from __future__ import annotations

import hashlib
import json
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


# What write_full_report writes under runs/<id>/ (and the run's log and lease): not its inputs.
REPORT_OUTPUTS = ("report.md", "html", "figures", "report", "winrates", "per_sentence.csv", "log", "report.inputs")
REPORT_INPUTS = "report.inputs"


def report_inputs(store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str],
                  meta: dict[str, Any]) -> str:
    """The sha256 of everything a run's report is made of (module doc)."""
    files = {name: size for name, size in store.listing(f"runs/{run_id}").items()
             if name.split("/")[0] not in REPORT_OUTPUTS and not name.split("/")[-1].startswith(".")}
    described = {k: v for k, v in meta.items() if k != "date"}
    blob = json.dumps({"files": files, "settings": settings.model_dump(mode="json"), "systems": system_ids,
                       "meta": described, "store": store.display()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def write_full_report(store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str],
                      meta: dict[str, Any], *, reuse: bool = False) -> str:
    """Summary, win-rates, figures and Markdown for a run; returns the Markdown, stored once as report.md.

    `reuse`: keep the stored report when its inputs are those it was written from (module doc)."""
    digest = report_inputs(store, run_id, settings, system_ids, meta) if reuse else None
    if digest is not None and _written_from(store, run_id, digest):
        return store.read_bytes(f"runs/{run_id}/report.md").decode("utf-8")
    markdown = _write_full_report(store, run_id, settings, system_ids, meta)
    if digest is not None:
        store.write_bytes(f"runs/{run_id}/{REPORT_INPUTS}", digest.encode("ascii"))
    return markdown


def _written_from(store: ArtifactStore, run_id: str, digest: str) -> bool:
    """Whether the stored report (report.md and its HTML page) was written from inputs of this digest."""
    outputs = (f"runs/{run_id}/report.md", f"runs/{run_id}/html/index.html", f"runs/{run_id}/{REPORT_INPUTS}")
    return (all(store.exists(p) for p in outputs)
            and store.read_bytes(outputs[-1]).decode("ascii", "replace") == digest)


def _write_full_report(store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str],
                       meta: dict[str, Any]) -> str:
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
