"""The backfill_judge flow: a new judge over the audio an earlier run stored, with zero synthesis calls.

It reads the run's tables, plans the comparisons this judge has not made, and writes its judgments beside the
old ones (a new judge_id never rewrites another judge's rows); the report then compares the judges.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from flows.common import (artifact_key, check_judges, check_stage_tables, cpu_workers_declared, judge_runs_on_gpu,
                          placement)
from flows.progress import StageProgress
from flows.runner import SettingsDaskTaskRunner
from tasks.common import get_store, logger
from tasks.judge import run_judge_stage, run_position_audit
from tasks.limits import ensure_vendor_limits
from tasks.report import write_full_report
from ttseval.config import load_settings
from ttseval.errors import SpecError, TTSEvalError
from ttseval.registry import Spec


def stored_systems(store: Any, run_id: str) -> tuple[list[str], dict[str, str]]:
    """System ids of a stored run in the order they were first synthesized, and their specs."""
    synthesis = store.read(run_id, "synthesis")
    if synthesis.empty:
        raise TTSEvalError(f"run {run_id!r} in {store.display()} has no synthesis rows; runs there: "
                           f"{', '.join(store.runs()) or 'none'}")
    first = synthesis.sort_values("created_at", kind="stable").drop_duplicates("system_id")
    return first["system_id"].tolist(), dict(zip(first["system_id"], first["system_spec"]))


def stored_baseline(store: Any, run_id: str, system_ids: list[str]) -> str:
    """The baseline the run was judged against before, else its first system."""
    judgments = store.read(run_id, "judgments")
    if not judgments.empty:
        return judgments["baseline_id"].value_counts().index[0]
    return system_ids[0]


@flow(name="backfill_judge", task_runner=SettingsDaskTaskRunner())
def backfill_judge(run_id: str, judge: str, store: str | None = None, baseline: str | None = None) -> dict[str, Any]:
    """Judge the clips stored by run `run_id` with `judge` (a judge spec such as 'gemini:gemini-2.5-pro').

    Args:
        run_id: an existing run in the store.
        judge: the judge spec to add.
        store: artifact store URI; default from settings.
        baseline: baseline system spec; default the baseline the run was judged against, else its first system.
    """
    t0 = time.perf_counter()
    settings = load_settings(store=store)
    st = get_store(settings.store)
    system_ids, specs = stored_systems(st, run_id)
    judge_spec = check_judges([judge], settings)[0]
    if baseline:
        baseline_id = Spec.parse(baseline).id
        if baseline_id not in system_ids:
            raise SpecError(f"baseline {baseline!r} has no audio in run {run_id!r}; systems there: "
                            f"{', '.join(specs.values())}")
    else:
        baseline_id = stored_baseline(st, run_id, system_ids)
    logger().info(f"backfill {judge_spec} over run {run_id!r}: {len(system_ids)} systems, baseline {specs[baseline_id]}")
    if limits := ensure_vendor_limits(settings):
        logger().info(f"vendor limits across all workers: {', '.join(limits)}")
    with StageProgress(f"backfill {judge_spec} over run {run_id!r}", artifact_key("progress", run_id),
                       logger()) as progress:
        on_gpu, cpu_workers = judge_runs_on_gpu(judge_spec, settings), cpu_workers_declared(settings)
        plans, results = run_judge_stage(settings, run_id, system_ids, baseline_id, [judge_spec],
                                         lambda _: placement(settings, on_gpu, cpu_workers))
        progress.add("judgments", sum(p.to_compute for p in plans))
        progress.advance("judgments", sum(r.n_rows for r in results))
        audit_plans, audit_results = run_position_audit(settings, run_id, system_ids, baseline_id, [judge_spec],
                                                        lambda _: placement(settings, on_gpu, cpu_workers))
        progress.add("position_audit", sum(p.to_compute for p in audit_plans))
        progress.advance("position_audit", sum(r.n_rows for r in audit_results))
    check_stage_tables(st, run_id, ("judgments", "position_audit"))
    for table in ("judgments", "position_audit"):
        st.compact(run_id, table)
    markdown = write_full_report(st, run_id, settings, system_ids, {"run_id": run_id, "store": st.display(),
                                                                     "backfilled judge": judge_spec})
    create_markdown_artifact(markdown=markdown, key=artifact_key("report", run_id), description=f"ttseval report for {run_id}")
    return {"run_id": run_id, "judge": judge_spec, "computed": sum(r.n_rows for r in results),
            "reused": sum(p.present for p in plans), "audited": sum(r.n_rows for r in audit_results),
            "wall_s": time.perf_counter() - t0}
