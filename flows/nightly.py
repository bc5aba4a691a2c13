"""The nightly flow: a dated evaluate run, then a drift report against the previous nightly run.

Every nightly run is its own run id (`nightly-<UTC timestamp>`), so runs never overwrite each other; audio is
reused across runs for unchanged requests and engine versions (settings.reuse_audio), so a night with no
engine change costs only the ASR, MOS and judge stages' cache look-ups. A night whose drift report flags a change
notifies the Prefect notification blocks named in the setting `alert_blocks` (ttseval.tasks.alerts).
"""

from __future__ import annotations

import json
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from ttseval.flows.common import artifact_key
from ttseval.flows.evaluate import evaluate
from ttseval.metrics.drift import compare_reports, paired_drift
from ttseval.tasks.common import get_store, logger, now
from ttseval.core.config import DEFAULT_SYSTEMS, load_settings
from ttseval.corpus import DEMO_DATASET
from ttseval.tasks.alerts import send_alert
from ttseval.tasks.report.html import compare_line, html_location
from ttseval.tasks.report import drift_alert, drift_markdown
from ttseval.core.store import ArtifactStore

PREFIX = "nightly-"


def nightly_run_id() -> str:
    """`nightly-<UTC timestamp>`: the run id of a night that names none."""
    return f"{PREFIX}{now().strftime('%Y%m%dT%H%M%SZ')}"


def previous_nightly(store: ArtifactStore, run_id: str) -> str | None:
    """The latest nightly run before `run_id` that has a report (names sort by their timestamp)."""
    earlier = [r for r in store.runs() if r.startswith(PREFIX) and r < run_id and store.part_files(r, "report")]
    return earlier[-1] if earlier else None


def provider_versions(store: ArtifactStore, run_id: str) -> dict[str, list[str]]:
    synthesis = store.read(run_id, "synthesis")
    versions = synthesis.dropna(subset=["provider_version"]).groupby("system_spec")["provider_version"].unique()
    return {spec: sorted(map(str, v)) for spec, v in versions.items()}


def run_links(store: ArtifactStore, run_id: str) -> list[str]:
    """Where a person reads the night: its HTML report, its drift table and (with a Prefect UI) its flow run."""
    from prefect.runtime import flow_run

    links = [f"HTML report: {html_location(store, run_id)}",
             f"drift table: {store.display('runs', run_id, 'drift.md')}"]
    if flow_run.ui_url:
        links.append(f"Prefect flow run: {flow_run.ui_url}")
    return links


@flow(name="nightly")
def nightly(
    dataset: str = str(DEMO_DATASET),
    systems: list[str] = list(DEFAULT_SYSTEMS),
    store: str | None = None,
    run_id: str | None = None,
    baseline: str | None = None,
    judges: list[str] | None = None,
    previous_run: str | None = None,
    budget_usd: float | None = None,
) -> dict[str, Any]:
    """Evaluate `systems` on a frozen dataset under a dated run id and report drift against the previous night.

    Args:
        dataset: the frozen items file every night uses, or a generated dataset NAME@VERSION in the store.
        systems: provider specs to re-run.
        store: artifact store URI; default from settings.
        run_id: default `nightly-<UTC timestamp>`.
        baseline, judges: as for evaluate.
        previous_run: the run to compare with; default the latest earlier nightly run in the store.
        budget_usd: as for evaluate: the most this night may spend on paid calls (default from settings).
    """
    settings = load_settings(store=store)
    run_id = run_id or nightly_run_id()
    result = evaluate(dataset=dataset, systems=systems, store=settings.store, run_id=run_id, baseline=baseline,
                      judges=judges, budget_usd=budget_usd)
    st = get_store(settings.store)
    versions = provider_versions(st, run_id)
    synthesis = st.read(run_id, "synthesis")
    cache_hits = int(synthesis["cache_hit"].fillna(False).astype(bool).sum())
    logger().info(f"{run_id}: provider versions {versions}; {cache_hits} clips reused from earlier runs")
    previous = previous_run or previous_nightly(st, run_id)
    summary = {"run_id": run_id, "previous_run": previous, "provider_versions": versions, "cache_hits": cache_hits,
               "flagged": None, **{k: result[k] for k in ("computed", "reused")}}
    if previous is None:
        logger().info("no earlier nightly run in this store: nothing to compare with yet")
    else:
        tables = {run: {t: st.read(run, t) for t in ("transcripts", "quality")} for run in (previous, run_id)}
        paired = paired_drift(tables[previous], tables[run_id], n_resamples=settings.bootstrap_resamples,
                              seed=settings.seed, alpha=settings.alpha, method=settings.p_adjust,
                              n_permutations=settings.permutation_resamples)
        drift = compare_reports(st.read(previous, "report"), st.read(run_id, "report"), paired)
        markdown = drift_markdown(drift, previous, run_id) + compare_line(st, previous, run_id)
        st.write_bytes(f"runs/{run_id}/drift.md", markdown.encode("utf-8"))
        st.write_bytes(f"runs/{run_id}/drift.json", drift.to_json(orient="records").encode("utf-8"))
        create_markdown_artifact(markdown=markdown, key=artifact_key("drift", run_id),
                                 description=f"drift {previous} -> {run_id}")
        summary["flagged"] = int(drift["flagged"].fillna(False).astype(bool).sum())
        logger().info(f"drift against {previous}: {summary['flagged']} flagged change(s)")
        if summary["flagged"] and settings.alert_blocks:
            summary["alerts"] = send_alert(settings.alert_blocks, *drift_alert(drift, previous, run_id,
                                                                                run_links(st, run_id)))
    st.write_bytes(f"runs/{run_id}/nightly.json", json.dumps(summary, indent=2, default=str).encode("utf-8"))
    return summary

