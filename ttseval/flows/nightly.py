"""The nightly flow: a dated evaluate run, then a drift report against the previous night of its series.

Every nightly run is its own run id (`nightly-<UTC timestamp>`, or `nightly-<series>-<UTC timestamp>` in a named
series), so runs never overwrite each other. A night is compared only with earlier nights of its own series
(ttseval.tasks.trends: series_of); a change of the series itself (its dataset, systems or recognisers) is reported
as a series change, never as drift. Audio is
reused across runs for unchanged requests and engine versions (settings.reuse_audio), so a night with no
engine change costs only the ASR, MOS and judge stages' cache look-ups. Remote voices (a vendor's API, whose
version does not change when its voice does) speak the night's canary items afresh, compared item by item with the
previous night's clips (ttseval.metrics.canary). A night whose drift report or canary flags a change notifies the
Prefect notification blocks named in the setting `alert_blocks` (ttseval.tasks.alerts).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from prefect import flow
from prefect.artifacts import create_markdown_artifact

from ttseval.core.config import Settings
from ttseval.core.store import ArtifactStore, check_run_id
from ttseval.corpus.items import read_items
from ttseval.flows.common import artifact_key, run_settings
from ttseval.flows.evaluate import evaluate
from ttseval.metrics.canary import CANARY_COLUMNS, canary_changes, canary_sample
from ttseval.metrics.drift import blind_tests, compare_reports, paired_drift
from ttseval.tasks.alerts import send_alert
from ttseval.tasks.logs import logger
from ttseval.tasks.parts import get_store, now
from ttseval.tasks.report import canary_markdown, drift_alert, drift_markdown, flagged_changes, verdict_rows
from ttseval.tasks.report.html import compare_line, html_location, store_link
from ttseval.tasks.trends import (
    DEFAULT_SERIES,
    check_night_id,
    check_series,
    drift_lines,
    night_of,
    nightly_runs,
    remote_specs,
    series_prefix,
    tonight_drifts,
    write_series,
    write_trends,
)


def nightly_run_id(series: str = DEFAULT_SERIES) -> str:
    """`nightly-<UTC timestamp>` (`nightly-<series>-<UTC timestamp>` in a named series): the run id of a night that
    names none."""
    return f"{series_prefix(series)}{now().strftime('%Y%m%dT%H%M%SZ')}"


def previous_nightly(store: ArtifactStore, run_id: str, series: str = DEFAULT_SERIES) -> str | None:
    """The latest night of `series` before `run_id` that has a report (names sort by their timestamp)."""
    earlier = [r for r in nightly_runs(store, series=series) if r < run_id]
    return earlier[-1] if earlier else None


def series_changes(store: ArtifactStore, previous: str, current: str) -> tuple[list[str], set[str]]:
    """What changed in the series itself between two of its nights, from each night's evaluate record: the dataset
    (its SHA-256), the systems added or removed, the recognisers, the MOS predictors. Returns the lines for drift.md
    and the alert, and the system specs whose presence rows in the drift table those changes explain (the systems
    added or removed; every system when the recognisers or predictors changed): those rows are a series change,
    never drift. A presence row they do not explain (a configured system that produced no transcript tonight) stays
    a flagged change."""
    before, after = store.run_log(previous) or {}, store.run_log(current) or {}
    lines = []
    if before.get("dataset_sha256") != after.get("dataset_sha256"):
        lines.append(
            f"dataset: {before.get('dataset')} ({str(before.get('dataset_sha256'))[:12]}) -> "
            f"{after.get('dataset')} ({str(after.get('dataset_sha256'))[:12]}); the figures compare different items"
        )
    systems = [{s.strip() for s in str(r.get("systems", "")).split(",") if s.strip()} for r in (before, after)]
    if added := sorted(systems[1] - systems[0]):
        lines.append(f"systems added: {', '.join(added)}")
    if removed := sorted(systems[0] - systems[1]):
        lines.append(f"systems removed: {', '.join(removed)}")
    explained = systems[0] ^ systems[1]
    if before.get("asr") != after.get("asr"):
        lines.append(f"recognisers: {before.get('asr')} -> {after.get('asr')}")
        explained = systems[0] | systems[1]
    if before.get("MOS predictors") != after.get("MOS predictors"):
        lines.append(f"MOS predictors: {before.get('MOS predictors')} -> {after.get('MOS predictors')}")
        explained = systems[0] | systems[1]
    return lines, explained


def provider_versions(store: ArtifactStore, run_id: str) -> dict[str, list[str]]:
    synthesis = store.read(run_id, "synthesis")
    versions = synthesis.dropna(subset=["provider_version"]).groupby("system_spec")["provider_version"].unique()
    return {spec: sorted(map(str, v)) for spec, v in versions.items()}


def night_canary(dataset: str, settings: Settings, night: str | None = None) -> list[str]:
    """The canary item ids of the night `night` (YYYY-MM-DD; default today in UTC): ttseval.metrics.canary."""
    items, _, _ = read_items(dataset, settings)
    return canary_sample(items, settings.canary_fixed, settings.canary_rotating, night or now().date().isoformat())


def remote_systems(systems: list[str], settings: Settings) -> list[str]:
    """The canonical specs of `systems` whose provider is a remote service (its class's `remote`)."""
    return remote_specs(systems, settings)


def canary_clips(store: ArtifactStore, run_id: str, items: list[str], specs: list[str]) -> pd.DataFrame:
    """A run's clips of the canary `items` by `specs` (one row per system and item: its SHA-256 and duration),
    with the prosody stage's mean F0 and speech time where it measured them (NaN elsewhere)."""
    clips = store.read(
        run_id, "synthesis", columns=["item_id", "system_id", "system_spec", "audio_sha256", "duration_s", "status"]
    )
    clips = clips[(clips["status"] == "ok") & clips["item_id"].isin(items) & clips["system_spec"].isin(specs)]
    prosody = store.read(run_id, "prosody", columns=["item_id", "system_id", "f0_mean_hz", "speech_s", "status"])
    prosody = prosody[prosody["status"] == "ok"].drop_duplicates(["item_id", "system_id"], keep="last")
    return clips.drop(columns="status").merge(prosody.drop(columns="status"), on=["item_id", "system_id"], how="left")


def serves_page(url: str, timeout_s: float = 3.0) -> bool:
    """Whether `url` answers a GET with a page (status under 400): a Prefect server started without its UI (the
    shared server the command starts is API-only) still hands out UI links, which would answer 404."""
    import httpx

    try:
        return httpx.get(url, timeout=timeout_s, follow_redirects=True).status_code < 400
    except (httpx.HTTPError, httpx.InvalidURL):
        return False


def run_links(store: ArtifactStore, run_id: str) -> list[str]:
    """Where a person reads the night: its HTML report, its drift table and its flow run in the Prefect UI when
    the server serves one (a link that would not open is left out)."""
    from prefect.runtime import flow_run

    links = [
        f"HTML report: {html_location(store, run_id)}",
        f"drift table: {store_link(store, 'runs', run_id, 'drift.md')}",
    ]
    if flow_run.ui_url and serves_page(flow_run.ui_url):
        links.append(f"Prefect flow run: {flow_run.ui_url}")
    return links


@flow(name="nightly")
def nightly(
    dataset: str | None = None,
    systems: list[str] | None = None,
    store: str | None = None,
    run_id: str | None = None,
    baseline: str | None = None,
    judges: list[str] | None = None,
    previous_run: str | None = None,
    budget_usd: float | None = None,
    series: str = DEFAULT_SERIES,
) -> dict[str, Any]:
    """Evaluate `systems` on a frozen dataset under a dated run id and report drift against the previous night of
    its series.

    Args:
        dataset: the frozen items file every night uses, or a generated dataset NAME@VERSION in the store; default
            the series' declared dataset (setting series), else the demo dataset.
        systems: provider specs to re-run; default the series' declared systems, else the demo engines.
        store: artifact store URI; default from settings.
        run_id: default `nightly-<UTC timestamp>` (`nightly-<series>-<UTC timestamp>` in a named series, whose
            nights must start with `nightly-<series>-`).
        baseline, judges: as for evaluate; default the series' declared ones, else evaluate's defaults.
        previous_run: the run to compare with; default the latest earlier night of the series in the store.
        budget_usd: as for evaluate: the most this night may spend on paid calls (default the series' declared
            budget, else from settings).
        series: the series this night belongs to; it is compared and drawn only with that series' nights. A series
            declared in the settings file ([series.NAME]) gives the values left out here, and its alert blocks,
            canary sizes and alpha.
    """
    series = check_series(series)
    night_plan = night_of(
        series,
        run_settings(store=store),
        dataset=dataset,
        systems=systems,
        baseline=baseline,
        judges=judges,
        budget_usd=budget_usd,
    )
    settings, dataset, systems = night_plan.settings, night_plan.dataset, night_plan.systems
    baseline, judges, budget_usd = night_plan.baseline, night_plan.judges, night_plan.budget_usd
    run_id = check_night_id(check_run_id(run_id or nightly_run_id(series)), series)
    night = now().date().isoformat()
    remote = remote_systems(systems, settings)
    canary = night_canary(dataset, settings, night) if remote else []  # local engines reuse every clip
    if canary:
        logger().info(f"canary: {len(canary)} items spoken afresh tonight by {', '.join(remote)}")
    result = evaluate(
        dataset=dataset,
        systems=systems,
        store=settings.store,
        run_id=run_id,
        baseline=baseline,
        judges=judges,
        budget_usd=budget_usd,
        fresh_items=canary,
        # a declared series' recognisers and predictors (evaluate reads the settings afresh)
        series=series if series in settings.series else None,
    )
    st = get_store(settings.store, settings.store_wait_s)
    write_series(st, run_id, series)
    versions = provider_versions(st, run_id)
    synthesis = st.read(run_id, "synthesis")
    cache_hits = int(synthesis["cache_hit"].fillna(False).astype(bool).sum())
    logger().info(f"{run_id}: provider versions {versions}; {cache_hits} clips reused from earlier runs")
    previous = previous_run or previous_nightly(st, run_id, series)
    summary = {
        "run_id": run_id,
        "series": series,
        "previous_run": previous,
        "series_change": [],
        "blind": [],
        "provider_versions": versions,
        "cache_hits": cache_hits,
        "canary": {"night": night, "items": canary, "systems": remote, "flagged": None},
        "flagged": None,
        **{k: result[k] for k in ("computed", "reused")},
    }
    if previous is None:
        logger().info(f"no earlier night of series {series!r} in this store: nothing to compare with yet")
    else:
        summary["series_change"], explained = series_changes(st, previous, run_id)
        if summary["series_change"]:
            logger().info(f"series {series!r} changed since {previous}: " + "; ".join(summary["series_change"]))
        tables = {run: {t: st.read(run, t) for t in ("transcripts", "quality")} for run in (previous, run_id)}
        paired = paired_drift(
            tables[previous],
            tables[run_id],
            n_resamples=settings.bootstrap_resamples,
            seed=settings.seed,
            alpha=settings.alpha,
            method=settings.p_adjust,
            n_permutations=settings.permutation_resamples,
        )
        drift = compare_reports(
            st.read(previous, "report"), st.read(run_id, "report"), paired, series_changed=explained
        )
        summary["blind"] = blind_tests(drift, settings.alpha, settings.permutation_resamples)
        for line in summary["blind"]:
            logger().warning(f"blind test: {line}")
        # the remote voices' fresh canary clips against the previous night's clips of the same items
        changes = (
            canary_changes(
                canary_clips(st, previous, canary, remote),
                canary_clips(st, run_id, canary, remote),
                n_resamples=settings.bootstrap_resamples,
                seed=settings.seed,
                alpha=settings.alpha,
                method=settings.p_adjust,
                n_permutations=settings.permutation_resamples,
                min_change=settings.canary_min_change,
            )
            if canary
            else pd.DataFrame(columns=CANARY_COLUMNS)
        )
        st.write_bytes(f"runs/{run_id}/drift.json", drift.to_json(orient="records").encode("utf-8"))
        st.write_bytes(f"runs/{run_id}/canary.json", changes.to_json(orient="records").encode("utf-8"))
    # every night's figures so far, a step or slow drift flagged per series (ttseval.metrics.trends)
    trends, page = write_trends(st, settings, run_id, series)
    slides = drift_lines(trends, run_id, settings.trend_cusum_h)
    summary["trends"] = {
        "page": page,
        "nights": int(trends["night"].max()) + 1 if len(trends) else 0,
        "drifts": len(slides),
    }
    if slides:
        logger().info(f"trends: {len(slides)} slow drift(s) flagged tonight:\n" + "\n".join(slides))
    if previous is not None:
        # the night's one verdict: the drift table's flags, the canary's and the slow drifts, counted once
        # (flagged_changes) for drift.md, the alert, this summary and the command's line alike
        summary["canary"]["flagged"] = int(changes["flagged"].astype(bool).sum())
        summary["flagged"] = flagged_changes(drift, changes, slides)
        verdict = verdict_rows(drift, changes, tonight_drifts(trends, run_id))
        if len(verdict) != summary["flagged"]:  # one verdict: its rows are the changes counted, by construction
            raise AssertionError(f"verdict.json has {len(verdict)} rows for {summary['flagged']} flagged changes")
        st.write_bytes(
            f"runs/{run_id}/verdict.json",
            json.dumps(
                {
                    "run_id": run_id,
                    "series": series,
                    "previous_run": previous,
                    "flagged": summary["flagged"],
                    "changes": verdict,
                    "series_change": summary["series_change"],
                    "blind": summary["blind"],
                },
                indent=2,
                default=str,
            ).encode("utf-8"),
        )
        markdown = (
            drift_markdown(
                drift, previous, run_id, summary["series_change"], summary["blind"], canary=changes, slides=slides
            )
            + canary_markdown(changes, previous)
            + compare_line(st, previous, run_id)
        )
        st.write_bytes(f"runs/{run_id}/drift.md", markdown.encode("utf-8"))
        create_markdown_artifact(
            markdown=markdown, key=artifact_key("drift", run_id), description=f"drift {previous} -> {run_id}"
        )
        logger().info(
            f"drift against {previous}: {summary['flagged']} flagged change(s), "
            f"{summary['canary']['flagged']} of them in the canary clips, {len(slides)} slow drift(s)"
        )
    if previous is not None and (summary["flagged"] or slides) and settings.alert_blocks:
        links = [*run_links(st, run_id), f"trends: {store_link(st, 'runs', run_id, 'html', 'trends.html')}"]
        # a message whenever something is flagged, as here; None would mean nothing to send
        message = drift_alert(
            drift, previous, run_id, links, changes, slides, summary["series_change"], summary["blind"]
        )
        if message is not None:
            summary["alerts"] = send_alert(settings.alert_blocks, *message)
    st.write_bytes(f"runs/{run_id}/nightly.json", json.dumps(summary, indent=2, default=str).encode("utf-8"))
    return summary
