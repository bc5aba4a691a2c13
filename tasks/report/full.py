"""The whole report of a run: the per-item table, summary, win-rates and figures stored, report.md and the HTML
report written.

With `reuse` (the evaluate flow), a report whose inputs did not change since it was written is kept as it is: the
inputs are every file of the run's folder but the report's own outputs and the run's log and lease (by name and
size: parts are written once under new names, so a change of rows is a change of names), the settings, the systems
and the run's description but its date. Their sha256 is stored beside report.md; a re-run that computed nothing then
skips 3.7 s of rendering (issue 31), and its report keeps the date of the run that wrote it.

What a terminal shows of the run (the per-system table's cells and the leaderboard's Markdown) is stored with the
report too (runs/<id>/report.terminal.json, with the input files it was made from), so a command prints it after
its flow without computing the summary's bootstraps, the win-rates and the Bradley-Terry ranking again (1.5 s on
the demo); once a table of the run changed, or for other systems, it is computed from the tables.
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
from ttseval.tasks.report.markdown import (cost_markdown, listening_markdown, render_markdown, rows_for_display,
                                           tables_markdown)
from ttseval.tasks.report.stages import (audio_checks_markdown, grouped_markdown, insv_markdown, paired_markdown,
                                         predictors_markdown, prosody_markdown, recognisers_markdown,
                                         planning_markdown, significance_markdown, similarity_markdown)


REPORT_INPUTS = "report.inputs"
TERMINAL_VIEW = "report.terminal.json"
# What write_full_report writes under runs/<id>/ (and the run's log and lease): not its inputs.
REPORT_OUTPUTS = ("report.md", "html", "figures", "report", "winrates", "per_sentence.csv", "log", REPORT_INPUTS,
                  TERMINAL_VIEW)


def input_files(store: ArtifactStore, run_id: str) -> dict[str, int]:
    """The run's files a report is made of, with their sizes: all but the report's outputs, the log and the lease."""
    return {name: size for name, size in store.listing(f"runs/{run_id}").items()
            if name.split("/")[0] not in REPORT_OUTPUTS and not name.split("/")[-1].startswith(".")}


def report_inputs(store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str],
                  meta: dict[str, Any]) -> str:
    """The sha256 of everything a run's report is made of (module doc)."""
    described = {k: v for k, v in meta.items() if k != "date"}
    blob = json.dumps({"files": input_files(store, run_id), "settings": settings.model_dump(mode="json"),
                       "systems": system_ids, "meta": described, "store": store.display()}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def store_terminal_view(store: ArtifactStore, run_id: str, system_ids: list[str], summary: Any,
                        leaderboard: str) -> None:
    """What a terminal shows of the run (ttseval.tasks.report.terminal.print_view), as the report was written."""
    view = {"system_ids": list(system_ids), "files": input_files(store, run_id), "rows": rows_for_display(summary),
            "leaderboard": leaderboard}
    store.write_bytes(f"runs/{run_id}/{TERMINAL_VIEW}", json.dumps(view, ensure_ascii=False).encode("utf-8"))


def stored_terminal_view(store: ArtifactStore, run_id: str, system_ids: list[str] | None) -> dict[str, Any] | None:
    """The view stored with the run's report while the run's files are those it was made from and it covers
    `system_ids` (None: the systems it was written for); otherwise None, and the caller computes it."""
    if not store.exists(f"runs/{run_id}/{TERMINAL_VIEW}"):
        return None
    view = json.loads(store.read_bytes(f"runs/{run_id}/{TERMINAL_VIEW}"))
    if system_ids is not None and view["system_ids"] != list(system_ids):
        return None
    return view if view["files"] == input_files(store, run_id) else None


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
    outputs = (f"runs/{run_id}/report.md", f"runs/{run_id}/html/index.html", f"runs/{run_id}/{TERMINAL_VIEW}",
               f"runs/{run_id}/{REPORT_INPUTS}")
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
    leaderboard = leaderboard_markdown(store, run_id, summary, winrates, rankings)
    store_terminal_view(store, run_id, system_ids, summary, leaderboard)  # what a command prints after its flow
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
                + leaderboard
                + instruction_markdown(store, run_id, names) + listening_markdown(store, run_id)
                + tables_markdown(store, run_id))
    store.write_bytes(f"runs/{run_id}/report.md", markdown.encode("utf-8"))
    write_html_report(store, run_id, build_data(store, run_id, tables, summary, winrates, markdown, meta,
                                                    rankings))
    return markdown
