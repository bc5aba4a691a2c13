"""The backfill_judge flow: a new judge over the audio an earlier run stored, with zero synthesis calls.

It reads the run's tables, plans the judgements this judge has not made (pairwise comparisons with their position
audit, or InstructTTSEval instruction following; over all of the run or a subset of systems, categories, depths
and items), and writes them beside the old ones (a new judge_id never rewrites another judge's rows); the report
then compares the judges.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import pandas as pd
from prefect import flow
from prefect.artifacts import create_markdown_artifact

from ttseval.core.errors import SpecError
from ttseval.core.lease import RunLease
from ttseval.core.registry import Spec
from ttseval.core.store import check_run_id
from ttseval.flows.common import (
    artifact_key,
    check_judges,
    check_stage_tables,
    cpu_workers_declared,
    judge_runs_on_gpu,
    placement,
    report_meta,
    run_settings,
    stored_systems,
)
from ttseval.flows.preflight import check_cluster_reach
from ttseval.flows.progress import StageProgress
from ttseval.flows.runner import SettingsDaskTaskRunner, through_scheduler_restarts
from ttseval.tasks.judge import run_judge_stage, run_position_audit
from ttseval.tasks.judge_instructions import run_instruction_stage
from ttseval.tasks.limits import ensure_vendor_limits
from ttseval.tasks.logs import logger
from ttseval.tasks.parts import get_store, now
from ttseval.tasks.report import write_full_report


def stored_baseline(store: Any, run_id: str, system_ids: list[str]) -> str:
    """The baseline the run was judged against before (its rows against the baseline: judge_pairs all / sampled
    store other pairs too), else the baseline its evaluate recorded (its first system unless --baseline named
    another), else the first system synthesized. Not the first synthesized before the record: on a cluster, which
    system's clip lands first is a race, and a run judged on two clusters would get two baselines."""
    from ttseval.metrics.winrate import against_baseline

    judgments = against_baseline(store.read(run_id, "judgments"))
    if not judgments.empty:
        most_judged: str = judgments["baseline_id"].value_counts().index[0]
        return most_judged
    recorded = (store.run_log(run_id) or {}).get("baseline")
    recorded_id = Spec.parse(recorded).id if recorded else None
    return recorded_id if recorded_id in system_ids else system_ids[0]


def subset_items(
    store: Any, run_id: str, categories: list[str] | None, depths: list[int] | None, items: list[str] | None
) -> set[str] | None:
    """The run's item ids within the given categories, depths and ids (each None: no restriction); None when
    nothing restricts. An empty subset is refused: a backfill over nothing is a typo.

    Raises:
        SpecError: no item of the run matches, naming what the run has.
    """
    if not (categories or depths or items):
        return None
    frame = store.read(run_id, "items", columns=["item_id", "category", "depth"])
    keep = pd.Series(True, index=frame.index)
    if categories:
        keep &= frame["category"].isin(categories)
    if depths:
        keep &= frame["depth"].isin(depths)
    if items:
        keep &= frame["item_id"].isin(items)
    chosen = set(frame.loc[keep, "item_id"])
    if not chosen:
        raise SpecError(
            f"no item of run {run_id!r} matches categories={categories} depths={depths} items={items}; "
            f"the run has categories {sorted(frame['category'].dropna().unique())} and depths "
            f"{sorted(int(d) for d in frame['depth'].dropna().unique())}"
        )
    return chosen


@flow(name="backfill_judge", task_runner=SettingsDaskTaskRunner())
@through_scheduler_restarts
def backfill_judge(
    run_id: str,
    judge: str,
    store: str | None = None,
    baseline: str | None = None,
    kind: Literal["pairwise", "instruction"] = "pairwise",
    systems: list[str] | None = None,
    categories: list[str] | None = None,
    depths: list[int] | None = None,
    items: list[str] | None = None,
) -> dict[str, Any]:
    """Judge the clips stored by run `run_id` with `judge` (a judge spec such as 'gemini:gemini-2.5-pro').

    Args:
        run_id: an existing run in the store.
        judge: the judge spec to add.
        store: artifact store URI; default from settings.
        baseline: baseline system spec (pairwise); default the baseline the run was judged against, else the one its
            evaluate recorded (stored_baseline).
        kind: `pairwise` (each candidate against the baseline, or the pairs the setting judge_pairs asks for) or
            `instruction` (InstructTTSEval: does each clip follow its item's instruction).
        systems: only these systems (specs or ids) as candidates; default all of the run's.
        categories, depths, items: only items in these categories, at these depths, with these ids.
    """
    started, t0 = now(), time.perf_counter()
    check_run_id(run_id)
    settings = run_settings(store=store)
    st = get_store(settings.store, settings.store_wait_s)
    system_ids, specs = stored_systems(st, run_id)
    judge_spec = check_judges([judge], settings, role=kind)[0]
    check_cluster_reach(settings, [judge_spec])  # on a cluster: its workers reach the API, the store, the judge's files
    if baseline:
        baseline_id = Spec.parse(baseline).id
        if baseline_id not in system_ids:
            raise SpecError(
                f"baseline {baseline!r} has no audio in run {run_id!r}; systems there: {', '.join(specs.values())}"
            )
    else:
        baseline_id = stored_baseline(st, run_id, system_ids)
    if systems:
        wanted = {Spec.parse(s).id for s in systems}
        if unknown := sorted(wanted - set(system_ids)):
            raise SpecError(
                f"systems {unknown} have no audio in run {run_id!r}; systems there: {', '.join(specs.values())}"
            )
        # a pairwise candidate is heard against the baseline, so its clips stay in reach
        system_ids = [s for s in system_ids if s in wanted or (kind == "pairwise" and s == baseline_id)]
    with RunLease(
        st, run_id, ttl_s=settings.lease_ttl_s, wait_s=settings.lease_wait_s, purpose=f"backfill of judge {judge_spec}"
    ) as lease:  # one writer per run id (ttseval/core/lease.py); its workers commit only while it holds it
        settings = settings.model_copy(update={"lease_token": lease.token})
        item_ids = subset_items(st, run_id, categories, depths, items)
        scope = f"{len(item_ids)} items" if item_ids is not None else "every item"
        logger().info(
            f"backfill {judge_spec} ({kind}) over run {run_id!r}: {len(system_ids)} systems, {scope}, "
            f"baseline {specs[baseline_id]}"
        )
        if limits := ensure_vendor_limits(settings):
            logger().info(f"vendor limits across all workers: {', '.join(limits)}")
        table = "judgments" if kind == "pairwise" else "instruction_judgments"
        tables = (table, "position_audit") if kind == "pairwise" else (table,)
        with StageProgress(
            f"backfill {judge_spec} over run {run_id!r}", artifact_key("progress", run_id), logger()
        ) as progress:
            on_gpu, cpu_workers = judge_runs_on_gpu(judge_spec, settings), cpu_workers_declared(settings)

            def place(_: str) -> Any:
                return placement(settings, on_gpu, cpu_workers)

            if kind == "pairwise":
                plans, results = run_judge_stage(
                    settings, run_id, system_ids, baseline_id, [judge_spec], place, item_ids
                )
                audit_plans, audit_results = run_position_audit(
                    settings, run_id, system_ids, baseline_id, [judge_spec], place, item_ids
                )
            else:
                plans, results = run_instruction_stage(settings, run_id, system_ids, [judge_spec], place, item_ids)
                audit_plans, audit_results = [], []
            for stage, stage_plans, done in ((table, plans, results), ("position_audit", audit_plans, audit_results)):
                progress.add(stage, sum(p.to_compute for p in stage_plans))
                progress.advance(stage, sum(r.n_rows for r in done))
        check_stage_tables(st, run_id, tables)
        st.check_fence(run_id, lease.token)  # a flow frozen past its lease compacts and reports nothing
        for name in tables:
            st.compact(run_id, name)
        # the whole report again, its provenance the evaluate's, with every judge backfilled so far
        earlier = [r["judge"] for r in st.run_logs(run_id) if r.get("command") == "backfill-judge"]
        meta = report_meta(st.run_log(run_id) or {}) | {"run_id": run_id, "store": st.display()}
        meta["backfilled judges"] = ", ".join(dict.fromkeys([*earlier, judge_spec]))
        markdown = write_full_report(st, run_id, settings, stored_systems(st, run_id)[0], meta)
        create_markdown_artifact(
            markdown=markdown, key=artifact_key("report", run_id), description=f"ttseval report for {run_id}"
        )
        summary: dict[str, Any] = {
            "run_id": run_id,
            "judge": judge_spec,
            "kind": kind,
            "computed": sum(r.n_rows for r in results),
            "reused": sum(p.present for p in plans),
            "audited": sum(r.n_rows for r in audit_results),
            "wall_s": time.perf_counter() - t0,
        }
        record: dict[str, Any] = {"command": "backfill-judge", "started_at": started.isoformat(timespec="seconds")}
        record |= summary
        record |= {"finished_at": now().isoformat(timespec="seconds"), "settings": settings.model_dump(mode="json")}
        st.write_bytes(
            f"runs/{run_id}/log/{started.strftime('%Y%m%dT%H%M%S%f')}.json", json.dumps(record, indent=2).encode()
        )
        return summary
