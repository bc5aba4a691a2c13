"""The report's Markdown outside the per-stage and per-judge sections: the head (run metadata and the
per-(system, recogniser) table, whose cells the terminal table shares), synthesis cost, where the tables live,
the listening tests' stored analyses, drift between two runs, and the statistics of a generated dataset.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ttseval.core.registry import system_name
from ttseval.core.schemas import TABLES
from ttseval.core.store import ArtifactStore
from ttseval.metrics.bootstrap import INTERVAL_RULE
from ttseval.metrics.registry import METRICS, change
from ttseval.metrics.trends import CANARY_MEASURES as NO_BETTER_SIDE
from ttseval.tasks.report.format import ROLE_LABEL, header, markdown_table, missing, num, pct, with_ci

# -- frozen dataset statistics (EmergentTTS-Eval appendix A.7; InstructTTSEval instructions) ----------------------


def _min_mean_max(row: object, column: str, *, decimals: int = 0) -> str:
    return (
        f"{getattr(row, column + '_min'):.{decimals}f} / {getattr(row, column + '_mean'):.2f} / "
        f"{getattr(row, column + '_max'):.{decimals}f}"
    )


def dataset_statistics_markdown(stats: pd.DataFrame, *, words_per_minute: float) -> str:
    """The statistics table of a generated dataset (ttseval.corpus.generation.dataset_statistics), one row a
    category."""
    table = markdown_table(
        ["category", "items", "chars min / mean / max", "words min / mean / max", "est. audio s min / mean / max"],
        [
            [
                r.category,
                r.n_items,
                _min_mean_max(r, "chars"),
                _min_mean_max(r, "words"),
                _min_mean_max(r, "est_audio_s", decimals=2),
            ]
            for r in stats.itertuples()
        ],
    )
    return f"{table}\n\nAudio length is estimated at {words_per_minute:g} words per minute.\n"


def instruction_statistics_markdown(stats: pd.DataFrame) -> str:
    """The statistics table of generated instructions (ttseval.corpus.instructions.instruction_statistics), one row
    a task."""
    columns = ("instruction_chars", "instruction_words", "text_chars", "text_words")
    headers = ["task", "items", *[f"{c.replace('_', ' ')} min / mean / max" for c in columns]]
    return (
        markdown_table(
            headers, [[r.task, r.n_items, *[_min_mean_max(r, c) for c in columns]] for r in stats.itertuples()]
        )
        + "\n"
    )


# -- the head: run metadata and the per-(system, recogniser) table ------------------------------------------------


def rows_for_display(summary: pd.DataFrame) -> list[dict[str, str]]:
    """One dict of display strings per (system, recogniser), in summary order."""
    out = []
    with_sim = "sim" in summary.columns and summary["sim"].notna().any()
    for r in summary.to_dict("records"):
        sim = (
            {header("SIM", "similarity", "[95% CI]"): with_ci(r["sim"], r["sim_ci_low"], r["sim_ci_high"], 3)}
            if with_sim
            else {}
        )
        out.append(
            {
                "system": system_name(r["system_spec"]) + ROLE_LABEL[r.get("role") or "tts"],
                "recogniser": "–" if missing(r.get("asr_spec")) else r["asr_spec"],
                header("completion %", "completion_rate"): f"{pct(r['completion_rate'])} ({r['n_ok']}/{r['n_items']})",
                "failed/empty/unsup.": f"{r['n_failed']}/{r['n_empty']}/{r['n_unsupported']}",
                header("WER %", "wer", "[95% CI]"): with_ci(r["wer"], r["wer_ci_low"], r["wer_ci_high"], percent=True),
                header("CER %", "cer", "[95% CI]"): with_ci(r["cer"], r["cer_ci_low"], r["cer_ci_high"], percent=True),
                header("Perfect %", "perfect_pct"): num(r["perfect_pct"], 1),
                header("MOS", "mos", "[95% CI]"): with_ci(r["mos"], r["mos_ci_low"], r["mos_ci_high"]),
                **sim,
                "mean dur. s": num(r["mean_duration_s"]),
                header("RTF", "rtf"): num(r["rtf"], 3),
            }
        )
    return out


def render_markdown(summary: pd.DataFrame, meta: dict[str, Any]) -> str:
    """The report's head: run metadata and the per-(system, recogniser) table."""
    rows = rows_for_display(summary)
    lines = [f"# ttseval report: run `{meta['run_id']}`", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items() if k != "run_id"]
    lines += [
        "",
        (
            "One row per system and recogniser: WER/CER are that recogniser's, never pooled across "
            "recognisers; completion, MOS and RTF are the system's. WER/CER are corpus figures (errors pooled over "
            "utterances); MOS is predicted (by "
            f"`{meta.get('quality', 'the MOS predictor')}`), not human; RTF is synthesis time over audio time. ↓ "
            "lower is better, ↑ higher is better. SIM, where the run compares voices, is the first speaker "
            f"encoder's similarity of each clip to its reference (every encoder: Speaker similarity). {INTERVAL_RULE}"
        ),
        "",
    ]
    if rows:
        lines.append(markdown_table(list(rows[0]), [list(r.values()) for r in rows]))
    else:
        lines.append("No systems in this run yet.")
    return "\n".join(lines) + "\n"


# -- the run's cost, tables and listening tests ------------------------------------------------------------------


def cost_markdown(store: ArtifactStore, run_id: str, names: dict[str, str]) -> str:
    """What the run's synthesis calls cost per system (rows computed by this run id; reused audio is free)."""
    synthesis = store.read(run_id, "synthesis", columns=["system_id", "billable_chars", "cost_usd", "cache_hit"])
    if synthesis.empty or not synthesis["cost_usd"].fillna(0).gt(0).any():
        return ""
    rows = []
    for system_id, g in synthesis.groupby("system_id", sort=False):
        rows.append(
            [
                names.get(system_id, system_id),
                str(int(g["billable_chars"].fillna(0).sum())),
                f"${float(g['cost_usd'].fillna(0).sum()):.4f}",
                str(int(g["cache_hit"].fillna(False).astype(bool).sum())),
            ]
        )
    return "\n## Synthesis cost\n\n" + markdown_table(["system", "billable chars", "USD", "reused clips"], rows) + "\n"


def tables_markdown(store: ArtifactStore, run_id: str) -> str:
    """Where each of the run's tables lives, so the Prefect UI's report links to the data behind it."""
    lines = ["", "## Tables", "", "Each reads with `pandas.read_parquet(URI)`.", ""]
    for name in TABLES:
        if store.part_files(run_id, name) or name == "report":
            uri = store.display("runs", run_id, name)
            link = f"file://{uri}" if store.is_local else uri
            lines.append(f"- {name}: [{uri}]({link})")
    return "\n".join(lines) + "\n"


def listening_markdown(store: ArtifactStore, run_id: str) -> str:
    """Each listening test's stored analysis (ttseval.tasks.listening.analyse_test writes it), under one heading."""
    ratings = store.read(run_id, "ratings", columns=["test_id", "created_at"])
    tests = list(ratings.sort_values("created_at")["test_id"].drop_duplicates())
    parts = [
        store.read_bytes(f"runs/{run_id}/listening/{t}/analysis.md").decode("utf-8")
        for t in tests
        if store.exists(f"runs/{run_id}/listening/{t}/analysis.md")
    ]
    return "\n## Listening tests\n\n" + "\n".join(parts) if parts else ""


# -- drift --------------------------------------------------------------------------------------------------------


def canary_markdown(changes: pd.DataFrame, previous: str) -> str:
    """The canary section of drift.md (ttseval.metrics.canary.canary_changes): one line per (system, measure)."""
    lines = ["", "## Canary: remote voices' fresh clips against the previous night's", ""]
    if changes.empty:
        return "\n".join(
            [
                *lines,
                (
                    f"No canary clips to compare: no remote voice, or none with clips of the canary "
                    f"items in both this run and `{previous}`."
                ),
                "",
            ]
        )
    table = [
        [
            system_name(r["system_spec"]),
            r["measure"],
            str(int(r["n_items"])),
            str(int(r["identical_clips"])),
            num(r["reference"], 3),
            num(r["tonight"], 3),
            num(r["delta"], 3) + ("" if missing(r["ci_low"]) else f" [{num(r['ci_low'], 3)}, {num(r['ci_high'], 3)}]"),
            num(r["p_permutation"], 4),
            num(r["p_adjusted"], 4),
            "**yes**" if r["flagged"] else "no",
        ]
        for r in changes.to_dict("records")
    ]
    headers = [
        "system",
        "measure",
        "items",
        "identical clips",
        f"`{previous}`",
        "tonight",
        "delta [95% CI]",
        "permutation p",
        "adjusted p",
        "flagged",
    ]
    return "\n".join(
        [
            *lines,
            (
                "Each night the remote voices speak the canary items afresh (settings canary_fixed, "
                "canary_rotating); their clips are compared item by item with the previous night's: a paired "
                "permutation test per measure, the p adjusted across the canary's tests (`p_adjust`), flagged "
                "under `alpha`. Fresh clips of an unchanged voice differ byte for byte; a shift the same way "
                "on most items is a change of the voice."
            ),
            "",
            markdown_table(headers, table),
            "",
        ]
    )


def _flagged_rows(drift: pd.DataFrame, canary: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The drift table's flagged rows (a presence row the series change explains is not flagged) and the canary's."""
    flagged = drift[drift["flagged"].fillna(False).astype(bool)]
    voices = canary[canary["flagged"].astype(bool)] if canary is not None and len(canary) else pd.DataFrame()
    return flagged, voices


def flagged_changes(drift: pd.DataFrame, canary: pd.DataFrame | None = None, slides: list[str] | None = None) -> int:
    """A night's verdict, counted once: the drift table's flagged rows, the canary's flagged measures and the slow
    drifts the trends flagged tonight. drift.md's first paragraph, the alert's subject, nightly.json's `flagged` and
    the command's line all give this number."""
    flagged, voices = _flagged_rows(drift, canary)
    return len(flagged) + len(voices) + len(slides or [])


VERDICT_COLUMNS = [
    "kind",
    "system_spec",
    "recogniser",
    "metric",
    "test",
    "previous",
    "current",
    "delta",
    "p_value",
    "p_adjusted",
    "direction",
]
"""A row of verdict.json: one flagged change of a night, of kind 'drift' (the drift table), 'canary' (a remote voice's
fresh clips) or 'slow drift' (the trends' CUSUM)."""


def verdict_rows(
    drift: pd.DataFrame, canary: pd.DataFrame | None, slow: list[tuple[pd.Series, pd.Series, int]]
) -> list[dict[str, Any]]:
    """Every flagged change of a night as a VERDICT_COLUMNS row, the machine-readable view of the verdict
    flagged_changes counts: the drift table's flagged rows, the canary's, and `slow`, the series whose slow-drift
    CUSUM crossed h tonight (ttseval.tasks.trends.tonight_drifts: one row each, as drift_lines writes one line
    each)."""
    flagged, voices = _flagged_rows(drift, canary)
    rows: list[dict[str, Any]] = [
        {
            "kind": "drift",
            "system_spec": r["system_spec"],
            "recogniser": None if missing(r.get("asr_spec")) else r["asr_spec"],
            "metric": r["metric"],
            "test": None if missing(r.get("test")) else r["test"],
            "previous": r.get("previous"),
            "current": r.get("current"),
            "delta": r.get("delta"),
            "p_value": r.get("p_value"),
            "p_adjusted": r.get("p_adjusted"),
            "direction": r["direction"],
        }
        for r in flagged.to_dict("records")
    ]
    rows += [
        {
            "kind": "canary",
            "system_spec": r["system_spec"],
            "recogniser": None,
            "metric": r["measure"],
            "test": "paired",
            "previous": r["reference"],
            "current": r["tonight"],
            "delta": r["delta"],
            "p_value": r["p_permutation"],
            "p_adjusted": r["p_adjusted"],
            "direction": "changed",
        }
        for r in voices.to_dict("records")
    ]
    for first, now, _ in slow:
        metric = now["metric"]
        rows.append(
            {
                "kind": "slow drift",
                "system_spec": now["system_spec"],
                "recogniser": now["detail"] or None,
                "metric": metric,
                "test": "cusum",
                "previous": first["value"],
                "current": now["value"],
                "delta": now["value"] - first["value"],
                "p_value": None,
                "p_adjusted": None,
                # a metric with a better side (WER, MOS, ...) says which way; a canary measure only moved
                "direction": "changed"
                if metric in NO_BETTER_SIDE or metric not in METRICS
                else change(metric, float(first["value"]), float(now["value"])),
            }
        )
    return rows


def drift_alert(
    drift: pd.DataFrame,
    previous: str,
    current: str,
    links: list[str],
    canary: pd.DataFrame | None = None,
    slides: list[str] | None = None,
    series_change: list[str] | None = None,
    blind: list[str] | None = None,
) -> tuple[str, str] | None:
    """The one message a nightly run sends when its drift report flags changes: (subject, body), None when none.

    A remote voice's canary change (ttseval.metrics.canary, `canary`) comes first: it has no direction, only a
    size. Each flagged change is a line, the worst first, naming the system, the recogniser, the metric, its size
    (previous -> current, the delta and the adjusted p when the change was tested item by item) and its direction;
    `links` are the run's
    pages (its HTML report, the Prefect flow run). `slides` are the slow drifts the trends flagged tonight
    (ttseval.tasks.trends.drift_lines), listed last. `series_change` (ttseval.flows.nightly.series_changes) is
    what changed in the series itself: said below the changes, never counted as one; alone it sends nothing.
    `blind` (ttseval.metrics.drift.blind_tests) warns of the tests that could not flag any change."""
    flagged, voices = _flagged_rows(drift, canary)
    slides = slides or []
    if flagged.empty and voices.empty and not slides:
        return None
    # the worst first: changes for the worse before the others, each kind by its adjusted p (untested ones last)
    flagged = flagged.assign(
        _better=flagged["direction"] != "worse", _p=flagged["p_adjusted"].astype(float).fillna(1.0)
    ).sort_values(["_better", "_p"], kind="stable")
    lines = [
        f"- {system_name(r['system_spec'])} canary {r['measure']}: {num(r['reference'], 3)} -> {num(r['tonight'], 3)} "
        f"(delta {num(r['delta'], 3)}, adjusted p {num(r['p_adjusted'], 4)}, {int(r['n_items'])} fresh clips)"
        for r in voices.to_dict("records")
    ]
    for r in flagged.to_dict("records"):
        recogniser = "" if missing(r.get("asr_spec")) else f" ({r['asr_spec']})"
        if r["metric"] == "presence":  # a system or recogniser without rows tonight that no series change explains
            lines.append(f"- {system_name(r['system_spec'])}{recogniser}: {r['direction']} since {previous}")
            continue
        p = "" if missing(r.get("p_adjusted")) else f", adjusted p {num(r['p_adjusted'], 4)}"
        lines.append(
            f"- {system_name(r['system_spec'])}{recogniser} {r['metric']}: {num(r['previous'], 3)} -> "
            f"{num(r['current'], 3)} (delta {num(r['delta'], 3)}{p}), {r['direction']}"
        )
    lines += slides
    if series_change:
        lines += ["", f"The series itself changed since {previous} (not counted as drift):"]
        lines += [f"- {line}" for line in series_change]
    if blind:
        lines += ["", "Warning: blind tests (a change there could not be flagged tonight):"]
        lines += [f"- {line}" for line in blind]
    worse = int((flagged["direction"] == "worse").sum()) + len(slides)
    subject = (
        f"ttseval nightly {current}: {flagged_changes(drift, canary, slides)} flagged change(s), {worse} for the worse"
    )
    body = "\n".join([f"Drift of {current} against {previous}:", *lines, "", *links])
    return subject, body


def _ci(r: dict[str, Any], lo: str, hi: str) -> str:
    """` [lo, hi]` of a drift row's interval, or nothing when the row has none."""
    return "" if missing(r.get(lo)) else f" [{num(r[lo], 3)}, {num(r[hi], 3)}]"


def drift_markdown(
    drift: pd.DataFrame,
    previous: str,
    current: str,
    series_change: list[str] | None = None,
    blind: list[str] | None = None,
    *,
    canary: pd.DataFrame | None = None,
    slides: list[str] | None = None,
) -> str:
    """A drift table (ttseval.metrics.drift.compare_reports) as Markdown: one line per (system, recogniser, metric),
    after a warning for the tests that could not flag a lone change (`blind`: ttseval.metrics.drift.blind_tests) and
    what changed in the series itself (`series_change`; a system or recogniser in one night only is a row of metric
    'presence', marked as a series change when that change explains it, flagged otherwise). Its first paragraph is
    the night's verdict (flagged_changes: with the `canary` table's flags and the trends' `slides`, which are listed
    below it)."""
    total = flagged_changes(drift, canary, slides)
    flagged, voices = _flagged_rows(drift, canary)
    table = []
    for r in drift.to_dict("records"):
        recogniser = "–" if missing(r.get("asr_spec")) else r["asr_spec"]
        if r["metric"] == "presence":
            mark = "**yes**" if r["flagged"] else "series change"
            table.append(
                [system_name(r["system_spec"]), recogniser, "presence", "", "", "", "", "", "", r["direction"], mark]
            )
            continue
        p_value = "" if missing(r.get("p_value")) else num(r["p_value"], 4)
        p_adjusted = "" if missing(r.get("p_adjusted")) else num(r["p_adjusted"], 4)
        table.append(
            [
                system_name(r["system_spec"]),
                recogniser,
                header(r["metric"], r["metric"]),
                f"{num(r['previous'], 3)}{_ci(r, 'previous_ci_low', 'previous_ci_high')}",
                f"{num(r['current'], 3)}{_ci(r, 'current_ci_low', 'current_ci_high')}",
                f"{num(r['delta'], 3)}{_ci(r, 'delta_ci_low', 'delta_ci_high')}",
                p_value,
                p_adjusted,
                "" if missing(r.get("test")) else r["test"],
                r["direction"],
                "**yes**" if r["flagged"] else "no",
            ]
        )
    headers = [
        "system",
        "recogniser",
        "metric",
        "previous [95% CI]",
        "current [95% CI]",
        "delta [paired 95% CI]",
        "permutation p",
        "adjusted p",
        "test",
        "change",
        "flagged",
    ]
    lines = [
        f"# Drift: `{current}` against `{previous}`",
        "",
        (
            f"{total} flagged change(s)"
            + (
                f" ({len(flagged)} in the table below, {len(voices)} in the canary, {len(slides or [])} slow drift(s))"
                if total != len(flagged)
                else ""
            )
            + ". WER, CER and MOS are compared item by item (ttseval.metrics.paired): "
            "flagged when the paired permutation test's p, adjusted across every paired test of this report (the "
            "`p_adjust` setting), is under the `alpha` setting (test `paired`; the delta's interval is a BCa "
            "bootstrap 95% CI, none for very few items); without per-item rows, when the two runs' CIs do not "
            "overlap (`ci-overlap`); completion: any change."
        ),
        "",
        *(["Slow drifts flagged tonight (the trends' CUSUM):", "", *slides, ""] if slides else []),
        *(
            ["**Warning: blind tests.** A change there could not be flagged tonight, whatever its size:", ""]
            + [f"- {line}" for line in blind]
            + [""]
            if blind
            else []
        ),
        *(
            [f"The series itself changed since `{previous}` (not counted as drift):", ""]
            + [f"- {line}" for line in series_change]
            + [""]
            if series_change
            else []
        ),
        markdown_table(headers, table),
    ]
    return "\n".join(lines) + "\n"
