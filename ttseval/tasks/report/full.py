"""The whole report of a run: the per-item table, summary, win-rates and figures stored, report.md and the HTML
report written.

Every report records what it was written from (runs/<id>/report.inputs, a sha256): every file of the run's folder
but the report's own outputs and the run's log and lease (by name and size: parts are written once under new names,
so a change of rows is a change of names), the settings, the systems, the run's description but its date, and the
reporting code on disk (ttseval.core.paths.source_fingerprint). With `reuse` (the evaluate flow), a report whose
record matches is kept as it is: a re-run that computed nothing skips 3.7 s of rendering, and its report
keeps the date of the run that wrote it.

What a terminal shows of the run (the per-system table's cells and the leaderboard's Markdown) is stored with the
report too (runs/<id>/report.terminal.json, with the run's files, systems and settings it was made from), so a
command prints it after its flow without computing the summary's bootstraps, the win-rates and the Bradley-Terry
ranking again (1.5 s on the demo); once a file of the run changed, or for other systems or settings, it is computed
from the tables.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from ttseval.core.config import HOW_IT_RUNS, Settings
from ttseval.core.memory import give_back_freed_memory
from ttseval.core.paths import source_fingerprint
from ttseval.core.registry import system_name
from ttseval.core.store import ArtifactStore
from ttseval.tasks.quality import primary_quality_id
from ttseval.tasks.report.compute import (
    RunTables,
    baseline_id,
    compute_rankings,
    compute_summary,
    compute_winrates,
    run_system_ids,
    store_summary,
    store_winrates,
)
from ttseval.tasks.report.figures import depth_figure
from ttseval.tasks.report.html import build_data, html_location, write_html_report
from ttseval.tasks.report.judges import instruction_markdown, leaderboard_markdown
from ttseval.tasks.report.markdown import (
    cost_markdown,
    listening_markdown,
    render_markdown,
    rows_for_display,
    tables_markdown,
)
from ttseval.tasks.report.per_item import write_per_item
from ttseval.tasks.report.stages import (
    audio_checks_markdown,
    grouped_markdown,
    insv_markdown,
    listener_agreement_markdown,
    paired_markdown,
    planning_markdown,
    predictors_markdown,
    prosody_markdown,
    recognisers_markdown,
    seedtts_markdown,
    significance_markdown,
    similarity_markdown,
)

REPORT_INPUTS = "report.inputs"
TERMINAL_VIEW = "report.terminal.json"
# What write_full_report writes under runs/<id>/ (and the run's log and lease): not its inputs.
REPORT_OUTPUTS = (
    "report.md",
    "html",
    "figures",
    "report",
    "winrates",
    "per_sentence.csv",
    "log",
    REPORT_INPUTS,
    TERMINAL_VIEW,
)


def input_files(store: ArtifactStore, run_id: str) -> dict[str, int]:
    """The run's files a report is made of, with their sizes: all but the report's outputs, the log and the lease."""
    return {
        name: size
        for name, size in store.listing(f"runs/{run_id}").items()
        if name.split("/")[0] not in REPORT_OUTPUTS and not name.split("/")[-1].startswith(".")
    }


@functools.cache
def reporting_code() -> str:
    """The code a report is rendered by, as it is on disk: the tasks (the report among them) and the metrics."""
    import ttseval.metrics
    import ttseval.tasks

    return source_fingerprint(Path(ttseval.tasks.__file__).parent, Path(ttseval.metrics.__file__).parent)


def _digest(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def report_inputs(
    store: ArtifactStore,
    run_id: str,
    settings: Settings,
    system_ids: list[str],
    meta: dict[str, Any],
    files: dict[str, int] | None = None,
) -> str:
    """The sha256 of everything a run's report is made of (module doc)."""
    return _digest(
        files=input_files(store, run_id) if files is None else files,
        settings=settings.model_dump(mode="json", exclude=set(HOW_IT_RUNS)),
        systems=system_ids,
        store=store.display(),
        meta={k: v for k, v in meta.items() if k != "date"},
        code=reporting_code(),
    )


def store_terminal_view(
    store: ArtifactStore,
    run_id: str,
    settings: Settings,
    system_ids: list[str],
    files: dict[str, int],
    summary: Any,
    leaderboard: str,
) -> None:
    """What a terminal shows of the run (ttseval.tasks.report.terminal.print_view), as the report was written from
    `files`."""
    view = {
        "system_ids": list(system_ids),
        "files": files,
        "made_by": _made_by(settings),
        "rows": rows_for_display(summary),
        "leaderboard": leaderboard,
    }
    store.write_bytes(f"runs/{run_id}/{TERMINAL_VIEW}", json.dumps(view, ensure_ascii=False).encode("utf-8"))


def _made_by(settings: Settings) -> str:
    return _digest(settings=settings.model_dump(mode="json", exclude=set(HOW_IT_RUNS)), code=reporting_code())


def stored_terminal_view(
    store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str] | None
) -> dict[str, Any] | None:
    """The view stored with the run's report while the run's files, the settings and the code are those it was made
    from and it shows `system_ids` (None: all of the run's); otherwise None, and the caller computes it."""
    if not store.exists(f"runs/{run_id}/{TERMINAL_VIEW}"):
        return None
    view = json.loads(store.read_bytes(f"runs/{run_id}/{TERMINAL_VIEW}"))
    if view["made_by"] != _made_by(settings) or view["files"] != input_files(store, run_id):
        return None
    if system_ids is None:  # all of the run's, in the order the report lists them (rows are stored as shards end)
        return view if sorted(view["system_ids"]) == sorted(run_system_ids(store, run_id)) else None
    return view if view["system_ids"] == list(system_ids) else None


def write_full_report(
    store: ArtifactStore,
    run_id: str,
    settings: Settings,
    system_ids: list[str],
    meta: dict[str, Any],
    *,
    reuse: bool = False,
) -> str:
    """Summary, win-rates, figures and Markdown for a run; returns the Markdown, stored once as report.md.

    `reuse`: keep the stored report when its inputs are those it was written from (module doc)."""
    files = input_files(store, run_id)  # listed before any table is read: a part committed later is not covered
    digest = report_inputs(store, run_id, settings, system_ids, meta, files)
    if reuse and _written_from(store, run_id, digest):
        return store.read_bytes(f"runs/{run_id}/report.md").decode("utf-8")
    markdown = _write_full_report(store, run_id, settings, system_ids, meta, files)
    store.write_bytes(f"runs/{run_id}/{REPORT_INPUTS}", digest.encode("ascii"))  # every render: none is kept stale
    return markdown


def _written_from(store: ArtifactStore, run_id: str, digest: str) -> bool:
    """Whether the stored report (report.md, its HTML page and terminal view) was written from inputs of this
    digest."""
    outputs = (
        f"runs/{run_id}/report.md",
        f"runs/{run_id}/html/index.html",
        f"runs/{run_id}/{TERMINAL_VIEW}",
        f"runs/{run_id}/{REPORT_INPUTS}",
    )
    return all(store.exists(p) for p in outputs) and store.read_bytes(outputs[-1]).decode("ascii", "replace") == digest


def _write_full_report(
    store: ArtifactStore,
    run_id: str,
    settings: Settings,
    system_ids: list[str],
    meta: dict[str, Any],
    files: dict[str, int],
) -> str:
    # every section reads these: the columns they show (RunTables.read's `reported`)
    tables = RunTables.read(store, run_id, system_ids, primary_quality_id(settings), reported=True)
    meta = {**meta, "html report": html_location(store, run_id)}
    write_per_item(store, run_id, settings, tables)  # runs/<id>/per_sentence.csv, every run's tidy per-item table
    summary = compute_summary(store, run_id, settings, system_ids, tables)
    store_summary(store, run_id, summary)
    winrates = compute_winrates(store, run_id, settings)
    names = dict(zip(summary["system_id"], summary["system_spec"].map(system_name)))
    rankings = compute_rankings(store, run_id, settings) if not winrates.empty else None
    if not winrates.empty:
        store_winrates(store, run_id, winrates)
        for judge_id in winrates["judge_id"].unique():
            png = depth_figure(winrates, judge_id, names)
            if png:
                store.write_bytes(f"runs/{run_id}/figures/winrate-by-depth-{judge_id}.png", png)
    leaderboard = leaderboard_markdown(store, run_id, summary, winrates, rankings)
    store_terminal_view(store, run_id, settings, system_ids, files, summary, leaderboard)  # printed after the flow
    markdown = (
        render_markdown(summary, meta)
        + seedtts_markdown(settings, tables, names)
        + cost_markdown(store, run_id, names)
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
        + instruction_markdown(store, run_id, names)
        + listening_markdown(store, run_id)
        + listener_agreement_markdown(store, run_id, settings, tables)
        + tables_markdown(store, run_id)
    )
    store.write_bytes(f"runs/{run_id}/report.md", markdown.encode("utf-8"))
    give_back_freed_memory()  # what the sections freed, before the page reads the texts it alone shows
    write_html_report(store, run_id, build_data(store, run_id, tables, summary, winrates, markdown, meta, rankings))
    return markdown
