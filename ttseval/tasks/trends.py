"""Trends of a store's nightly runs: every night's figures (ttseval.metrics.trends), the steps the nights' paired
tests flagged and the slow drifts the CUSUM finds, as a table, a page beside the latest night's HTML report
(runs/<night>/html/trends.html) and the lines of a night's alert.

A nightly run is a run named `nightly-<UTC timestamp>` (the default series) or `nightly-<series>-<UTC timestamp>`
with a report; its steps are the flagged rows of its drift.json (between it and the series' night before:
completion, WER and CER per recogniser, MOS) and canary.json (its remote voices' fresh clips).

A series is a name: every night of one series records it in runs/<night>/series.json, and a night is only ever
compared and drawn with earlier nights of its own series, so several series share one store without mentioning each
other. A night without that file (one written before series had names, or one that stopped before writing it) is of
the series its run id names.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ttseval.core.config import DEFAULT_SYSTEMS, Settings
from ttseval.core.errors import ConfigError
from ttseval.core.registry import Spec, system_name
from ttseval.core.store import ArtifactStore
from ttseval.metrics.trends import CANARY_MEASURES, TREND_COLUMNS, TREND_METRICS, night_values, trend_changes
from ttseval.providers.tts import TTS
from ttseval.tasks.report.format import markdown_table, num

PREFIX = "nightly-"
TABLES = ("report", "transcripts", "quality", "synthesis", "winrates", "similarity", "prosody")
DEFAULT_SERIES = "nightly"
"""The series of a night that names none: the `nightly/nightly` deployment's and every night's before series."""
SERIES_FILE = "series.json"
"""A night's record of its series, beside its tables: {"series": name}."""
_SERIES = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_STAMPED = re.compile(rf"{PREFIX}(?:(?P<series>.+)-)?\d{{8}}T\d{{6}}Z")


def check_series(name: str) -> str:
    """`name` if it can name a series (it becomes part of its nights' run ids), else a ConfigError (exit code 2).

    Raises:
        ConfigError: `name` has a character outside [A-Za-z0-9_-], starts with '_' or '-', or is empty or longer
            than 64 characters.
    """
    if isinstance(name, str) and _SERIES.fullmatch(name):
        return name
    raise ConfigError(
        f"series {name!r}: a series name is part of its nights' run ids (nightly-<series>-<UTC timestamp>), so it "
        "takes letters, digits, '_' and '-' only, starts with a letter or digit and has at most 64 characters; "
        "for example --series team-voices"
    )


def series_prefix(series: str) -> str:
    """The run-id prefix of a series' nights: `nightly-` for the default series, `nightly-<series>-` for another."""
    return PREFIX if series == DEFAULT_SERIES else f"{PREFIX}{series}-"


@dataclass(frozen=True)
class Night:
    """What one night of a series runs: each of its values as the night was asked (a command's options, a
    deployment's parameters), else as the settings file declares the series ([series.NAME]), else the default (the
    demo dataset and engines, the settings)."""

    dataset: str
    systems: list[str]
    baseline: str | None
    judges: list[str] | None
    budget_usd: float | None
    settings: Settings
    """The night's settings: the series' alert blocks, canary sizes and alpha over the settings'."""

    def parameters(self) -> dict[str, Any]:
        """The nightly flow's parameters that say what the night runs."""
        return {k: getattr(self, k) for k in ("dataset", "systems", "baseline", "judges", "budget_usd")}


def night_of(
    series: str,
    settings: Settings,
    *,
    dataset: str | None = None,
    systems: list[str] | None = None,
    baseline: str | None = None,
    judges: list[str] | None = None,
    budget_usd: float | None = None,
) -> Night:
    """A night of `series` (a checked name): what was asked, else the series' declaration in `settings`, else the
    defaults. An empty `judges` list judges nothing, as for evaluate."""
    from ttseval.corpus import DEMO_DATASET

    declared = settings.series.get(series)
    if declared is None:
        return Night(
            dataset or str(DEMO_DATASET), systems or list(DEFAULT_SYSTEMS), baseline, judges, budget_usd, settings
        )
    return Night(
        dataset=dataset or declared.dataset,
        systems=systems or list(declared.systems),
        baseline=baseline or declared.baseline,
        judges=judges if judges is not None else declared.judges,
        budget_usd=budget_usd if budget_usd is not None else declared.budget_usd,
        settings=declared.apply(settings),
    )


def declared_series(settings: Settings, series: str | None) -> Settings:
    """`settings` as a night of `series` sees them (its declaration's recognisers, predictors, alerts, canary and
    alpha: NightlySeries.apply); unchanged for none.

    Raises:
        ConfigError: a series the settings file does not declare (a run may only name the operator's).
    """
    if series is None:
        return settings
    declared = settings.series.get(check_series(series))
    if declared is None:
        raise ConfigError(
            f"series {series!r}: not declared in the settings file ([series.{series}]); declared: "
            f"{', '.join(sorted(settings.series)) or 'none'}. Leave series empty to use the settings' own recognisers "
            "and predictors"
        )
    return declared.apply(settings)


def check_night_id(run_id: str, series: str) -> str:
    """`run_id` if it can name a night of `series`: any run id in the default series, `nightly-<series>-...` in a
    named one (its nights are found, ordered and drawn by that prefix); else a ConfigError (exit code 2).

    Raises:
        ConfigError: a named series' night whose run id lacks the series' prefix.
    """
    prefix = series_prefix(series)
    if series == DEFAULT_SERIES or run_id.startswith(prefix):
        return run_id
    raise ConfigError(
        f"run id {run_id!r}: a night of series {series!r} is named {prefix}<...> (its nights are found and ordered by "
        f"that prefix); leave --run-id out for {prefix}<UTC timestamp>, or use --run-id {prefix}{run_id}"
    )


def series_of(store: ArtifactStore, run_id: str) -> str:
    """The series night `run_id` belongs to: its series.json's, else the one its run id names (the default series
    for `nightly-<timestamp>` and for any other name)."""
    path = f"runs/{run_id}/{SERIES_FILE}"
    if store.exists(path):
        return str(json.loads(store.read_bytes(path))["series"])
    stamped = _STAMPED.fullmatch(run_id)
    return (stamped.group("series") if stamped else None) or DEFAULT_SERIES


def write_series(store: ArtifactStore, run_id: str, series: str) -> None:
    """Record that night `run_id` belongs to `series` (series_of reads it)."""
    store.write_bytes(f"runs/{run_id}/{SERIES_FILE}", json.dumps({"series": series}).encode("utf-8"))


def nightly_runs(store: ArtifactStore, until: str | None = None, series: str = DEFAULT_SERIES) -> list[str]:
    """The nights of `series` in the store that have a report, oldest first (names sort by their timestamp), up to
    `until`."""
    return [
        r
        for r in store.runs()
        if r.startswith(PREFIX)
        and (until is None or r <= until)
        and store.part_files(r, "report")
        and series_of(store, r) == series
    ]


def remote_specs(specs: list[str], settings: Settings) -> list[str]:
    """The canonical specs in `specs` whose provider is a remote service (its class's `remote`)."""
    plugins = settings.plugins.get("tts", {})
    parsed = [Spec.parse(s) for s in specs]
    return [s.canonical for s in parsed if getattr(TTS.resolve(s.provider, plugins), "remote", False)]


def _json(store: ArtifactStore, run_id: str, name: str) -> pd.DataFrame:
    path = f"runs/{run_id}/{name}"
    if not store.exists(path):
        return pd.DataFrame()
    return pd.read_json(io.BytesIO(store.read_bytes(path)), orient="records")


def _steps(store: ArtifactStore, run_id: str, values: pd.DataFrame) -> list[dict[str, Any]]:
    """The series of night `run_id` its paired tests flagged: a drift row names its recogniser (WER, CER) or
    none (completion, MOS: every predictor's series of the system), a canary row its measure."""
    found = []
    drift = _json(store, run_id, "drift.json")
    if len(drift):
        for r in drift[drift["flagged"].fillna(False).astype(bool)].to_dict("records"):
            detail = r.get("asr_spec") if r["metric"] in ("wer", "cer") else None
            found += [
                {"run_id": run_id, "system_id": r["system_id"], "metric": r["metric"], "detail": d}
                for d in values[(values["system_id"] == r["system_id"]) & (values["metric"] == r["metric"])]["detail"]
                if detail is None or d == detail
            ]
    canary = _json(store, run_id, "canary.json")
    if len(canary):
        found += [
            {"run_id": run_id, "system_id": r["system_id"], "metric": r["measure"], "detail": "fresh clips"}
            for r in canary[canary["flagged"].astype(bool)].to_dict("records")
        ]
    return found


def store_trends(
    store: ArtifactStore, settings: Settings, until: str | None = None, series: str = DEFAULT_SERIES
) -> pd.DataFrame:
    """Every night of `series` up to `until` (default all): its figures with their step and drift flags
    (TREND_COLUMNS)."""
    frames, steps = [], []
    for night, run_id in enumerate(nightly_runs(store, until, series)):
        tables = {t: store.read(run_id, t) for t in TABLES}
        remote = remote_specs(sorted(tables["synthesis"]["system_spec"].dropna().unique()), settings)
        values = night_values(tables, remote).assign(night=night, run_id=run_id)
        steps += _steps(store, run_id, values)
        frames.append(values)
    if not frames:
        return pd.DataFrame(columns=TREND_COLUMNS)
    values = pd.concat(frames, ignore_index=True)
    order = {m: i for i, m in enumerate(TREND_METRICS)}
    changes = trend_changes(
        values,
        pd.DataFrame(steps, columns=["run_id", "system_id", "metric", "detail"]),
        k=settings.trend_cusum_k,
        h=settings.trend_cusum_h,
    )
    return changes.sort_values(
        ["system_spec", "metric", "detail", "night"],
        key=lambda c: c.map(order).fillna(c) if c.name == "metric" else c,
        kind="stable",
    ).reset_index(drop=True)


def _series(trends: pd.DataFrame) -> pd.api.typing.DataFrameGroupBy:
    return trends.groupby(["system_spec", "metric", "detail"], sort=False)


def trends_table(trends: pd.DataFrame) -> pd.DataFrame:
    """One line per series: its first and latest night's values, the latest interval, and the nights flagged."""
    rows = []
    for (spec, metric, detail), group in _series(trends):
        first, last = group.iloc[0], group.iloc[-1]
        rows.append(
            {
                "system": spec,
                "metric": metric,
                "detail": detail,
                "nights": len(group),
                "first": num(first["value"], 3),
                "latest": num(last["value"], 3),
                "latest 95% CI": f"[{num(last['ci_low'], 3)}, {num(last['ci_high'], 3)}]",
                "step on": ", ".join(group.loc[group["step"], "run_id"]) or "-",
                "drift on": ", ".join(group.loc[group["drift"], "run_id"]) or "-",
            }
        )
    return pd.DataFrame(rows)


def tonight_drifts(trends: pd.DataFrame, run_id: str) -> list[tuple[pd.Series, pd.Series, int]]:
    """Each series whose slow-drift CUSUM crossed h on night `run_id`: its first night's row, tonight's row and its
    number of nights (the alert's lines, drift_lines, and verdict.json's slow-drift rows are these)."""
    found = []
    for _, group in _series(trends):
        tonight = group[(group["run_id"] == run_id) & group["drift"].astype(bool)]
        if len(tonight):
            found.append((group.iloc[0], tonight.iloc[0], len(group)))
    return found


def drift_lines(trends: pd.DataFrame, run_id: str, h: float) -> list[str]:
    """A night's alert lines: each series whose slow-drift CUSUM crossed h on `run_id`."""
    lines = []
    for first, now, nights in tonight_drifts(trends, run_id):
        what = f" ({now['detail']})" if now["detail"] else ""
        lines.append(
            f"- {system_name(now['system_spec'])} {now['metric']}{what} slow drift: {num(first['value'], 3)} on "
            f"{first['run_id']} -> {num(now['value'], 3)} tonight ({num(now['z'], 2)} SE; CUSUM "
            f"{num(now['cusum'], 2)} > h {num(h, 1)} over {nights} nights)"
        )
    return lines


_STAMP = re.compile(r"(\d{8}T\d{6})Z$")


def night_date(run_id: str) -> str:
    """A night's UTC start as 'YYYY-MM-DD HH:MM', from the timestamp its run id ends with; else the run id."""
    from datetime import datetime

    found = _STAMP.search(run_id)
    return datetime.strptime(found.group(1), "%Y%m%dT%H%M%S").strftime("%Y-%m-%d %H:%M") if found else run_id


def _chart(group: pd.DataFrame, metric: str, detail: str) -> str:
    """A series' chart (ttseval.tasks.report.figures.trend_svg), its y axis the metric and its better side."""
    from ttseval.metrics.registry import METRICS
    from ttseval.tasks.report.figures import trend_svg

    finite = group["value"].astype(float).map(math.isfinite)
    if not finite.any():
        return ""
    info = METRICS.get(metric)
    better = None if info is None or metric in CANARY_MEASURES else ("higher" if info.higher_is_better else "lower")
    label = metric + (f" ({detail})" if detail else "")
    return trend_svg(group[finite].assign(date=group.loc[finite, "run_id"].map(night_date)), label, better)


def _mark(name: str, on: bool) -> str:
    """A table cell that says `name` (with that class) on a night it holds, else an empty one."""
    return f'<td class="{name}">{name}</td>' if on else "<td></td>"


def trends_html(trends: pd.DataFrame, title: str, k: float, h: float) -> str:
    """The trends page: the summary table, then each series' chart and its nights."""
    from html import escape

    from markdown_it import MarkdownIt

    table = trends_table(trends)
    markdown = markdown_table(list(table.columns), table.itertuples(index=False)) if len(table) else "No nights."
    body = [
        f"<h1>{escape(title)}</h1>",
        (
            f"<p>Every metric of every system, one value a night (the x axis: the night's start, UTC) with its 95% "
            f"interval (shaded). A red ring: a step "
            f"the nights' paired test flagged; a red dot: a slow drift (one-sided CUSUM toward the worse side, "
            f"k {k:g}, h {h:g}, from the first night, or from the last flagged step). "
            '<a href="index.html">The latest night\'s report</a>.</p>'
        ),
        MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown),
    ]
    for (spec, metric, detail), group in _series(trends):
        rows = "".join(
            f"<tr><td>{escape(night_date(r.run_id))}</td><td>{escape(r.run_id)}</td><td>{num(r.value, 4)}</td>"
            f"<td>[{num(r.ci_low, 4)}, {num(r.ci_high, 4)}]</td><td>{r.n}</td><td>{num(r.z, 2)}</td>"
            f"<td>{num(r.cusum, 2)}</td>{_mark('step', r.step)}{_mark('drift', r.drift)}</tr>"
            for r in group.itertuples()
        )
        body.append(
            f'<section class="series"><h2>{escape(spec)}: {escape(metric)}'
            f"{' (' + escape(detail) + ')' if detail else ''}</h2>{_chart(group, metric, detail)}"
            "<table><tr><th>night (UTC)</th><th>run</th><th>value</th><th>95% CI</th><th>n</th><th>z</th><th>CUSUM</th>"
            f"<th>step</th><th>drift</th></tr>{rows}</table></section>"
        )
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>' + escape(title) + "</title>"
        '<link rel="stylesheet" href="style.css"></head><body>' + "".join(body) + "</body></html>"
    )


def write_trends(
    store: ArtifactStore, settings: Settings, until: str | None = None, series: str = DEFAULT_SERIES
) -> tuple[pd.DataFrame, str | None]:
    """The trends of `series` up to night `until` (default the latest), written beside that night's report as
    html/trends.html and trends.json; returns (trends, the page's location), None when there is no night."""
    trends = store_trends(store, settings, until, series)
    if trends.empty:
        return trends, None
    night = trends["run_id"].iloc[trends["night"].idxmax()]
    page = trends_html(
        trends,
        f"ttseval trends of series {series}: {trends['night'].max() + 1} nights to {night}",
        settings.trend_cusum_k,
        settings.trend_cusum_h,
    )
    store.write_bytes(f"runs/{night}/html/trends.html", page.encode("utf-8"))
    store.write_bytes(f"runs/{night}/trends.json", trends.to_json(orient="records").encode("utf-8"))
    return trends, store.display("runs", night, "html", "trends.html")
