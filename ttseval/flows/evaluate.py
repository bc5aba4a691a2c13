"""The evaluate flow: synthesize -> transcribe -> score -> judge -> report, over shards, on Dask, into the store.

Each stage computes only the keys missing from the store (see tasks/plan.py), so a re-run reuses everything,
a killed run resumes, and adding a system computes only its rows. Transcription and MOS of a shard start as
soon as that shard's audio exists, so the model stages overlap synthesis instead of waiting for all of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import time
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact

import ttseval
from ttseval.core.config import DEFAULT_SYSTEMS, Settings
from ttseval.core.errors import TTSEvalError
from ttseval.core.lease import RunLease
from ttseval.core.memory import give_back_freed_memory
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore, check_run_id
from ttseval.corpus import DEMO_DATASET
from ttseval.corpus.items import unknown_categories
from ttseval.flows.common import (
    artifact_key,
    check_stage_tables,
    cpu_workers_declared,
    git_commit,
    gpu_annotation,
    judge_runs_on_gpu,
    placement,
    register_items,
    run_settings,
    runs_on_gpu,
)
from ttseval.flows.preflight import check_cluster_reach, preflight_evaluate
from ttseval.flows.progress import StageProgress
from ttseval.flows.runner import NOT_STARTED, SettingsDaskTaskRunner, dask_started, through_scheduler_restarts
from ttseval.tasks.cost import Budget, estimate_synthesis, within_budget
from ttseval.tasks.judge import run_judge_stage, run_position_audit
from ttseval.tasks.judge_instructions import run_instruction_stage
from ttseval.tasks.limits import ensure_vendor_limits
from ttseval.tasks.logs import logger
from ttseval.tasks.parts import StageResult, get_store, now
from ttseval.tasks.plan import Plan, plan_synthesis
from ttseval.tasks.report import write_full_report
from ttseval.tasks.retries import task_retry_options
from ttseval.tasks.stages import STAGES, TASKS, ClipStage, plan_stage
from ttseval.tasks.staging import stage_files_systems
from ttseval.tasks.synthesize import synthesize_task
from ttseval.tasks.trends import declared_series
from ttseval.tasks.voices import References, store_prompts, store_reference_voices
from ttseval.tasks.window import Job, in_window, window_for


@flow(name="evaluate", task_runner=SettingsDaskTaskRunner())
@through_scheduler_restarts
def evaluate(
    dataset: str = str(DEMO_DATASET),
    # B006 does not apply: the default is the parameter schema's (the run form shows it), and Prefect validates a
    # call's parameters into new objects, so no run gets this list itself
    systems: list[str] = list(DEFAULT_SYSTEMS),  # noqa: B006
    store: str | None = None,
    run_id: str = "demo",
    shard_size: int | None = None,
    baseline: str | None = None,
    judges: list[str] | None = None,
    instruction_judges: list[str] | None = None,
    budget_usd: float | None = None,
    fresh_items: list[str] | None = None,
    series: str | None = None,
) -> dict[str, Any]:
    """Evaluate TTS `systems` on the items in `dataset`; tables land under `<store>/runs/<run_id>/`.

    Args:
        dataset: JSONL, CSV or Parquet items file (item_id, text, language, category, depth), or a generated
            dataset frozen in the store, NAME@VERSION (NAME@latest: its newest version).
        systems: provider specs, e.g. ["piper:joe", "espeak-ng", "flite:slt"].
        store: artifact store URI (a folder or s3://bucket/prefix); default from settings.
        run_id: the run's name; re-using it resumes and reuses what is stored.
        shard_size: items per task; default from settings.
        baseline: the system every other is judged against (EmergentTTS-Eval); default the first of `systems`.
        judges: pairwise judge specs; default from settings (the offline `objective` judge).
        instruction_judges: judges of instruction following (InstructTTSEval) for items with an instruction;
            default from settings (none: no offline judge can hear style).
        budget_usd: the most this run may spend on paid synthesis and judge calls (default from settings: no cap). Keys
            past it are not called and stay missing; a later run computes them.
        fresh_items: item ids whose clips remote voices synthesize afresh instead of reusing earlier runs' audio
            (a nightly run's canary; default from settings: none).
        series: a nightly series declared in the settings file ([series.NAME]) whose recognisers and MOS
            predictors this run uses (a night of that series); default none: the settings' own.
    """
    started, t0 = now(), time.perf_counter()
    check_run_id(run_id)  # before anything is read or written: it names a folder of the store
    settings = declared_series(
        run_settings(store=store, shard_size=shard_size, budget_usd=budget_usd, fresh_items=fresh_items), series
    )
    log = logger()
    st = get_store(settings.store, settings.store_wait_s)
    checked = preflight_evaluate(
        dataset, systems, settings, baseline=baseline, judges=judges, instruction_judges=instruction_judges
    )  # flows/preflight.py: once per invocation
    # on a cluster: its workers reach the Prefect API, the store and the model files the specs name, or nothing is
    # written
    check_cluster_reach(settings, [s.canonical for s in checked.systems] + checked.judges + checked.instruction_judges)
    items, dataset_sha256, dataset_read = checked.items, checked.dataset_sha256, checked.dataset_read
    specs, judge_specs, instruction_specs = checked.systems, checked.judges, checked.instruction_judges
    baseline_spec = checked.baseline
    items = store_prompts(st, items, source=dataset_read)  # voice prompts (content-addressed blobs), checked first
    # one writer per run id: a second invocation on it is refused (or waits), nothing written (ttseval/core/lease.py)
    with RunLease(
        st,
        run_id,
        ttl_s=settings.lease_ttl_s,
        wait_s=settings.lease_wait_s,
        purpose=f"evaluate of {len(specs)} systems",
    ) as lease:
        # the workers commit parts only while this invocation holds the lease (ArtifactStore.check_fence)
        settings = settings.model_copy(update={"lease_token": lease.token})
        # audio made elsewhere (files: folders and manifests on this machine) into the store: workers read only it
        staged = stage_files_systems(st, run_id, items, specs, baseline_spec, settings)
        specs, baseline_spec, settings = staged.systems, staged.baseline, staged.settings
        store_reference_voices(st, run_id, settings, specs)
        added = register_items(st, run_id, items)
        references = References.read(st, run_id)
        log.info("run %r in %s: %d items (%d new), %d systems", run_id, st.display(), len(items), added, len(specs))
        if own := unknown_categories(items, settings.categories):
            log.info(
                "categories %s are your own groups: evaluated and reported as such; "
                "they have no description for strong prompting (prompt=category) or judge rubrics",
                ", ".join(map(repr, own)),
            )

        system_ids = [s.id for s in specs]
        # the plans, every clip's and pair's work, live only in run_stages: freed before compaction and the report
        stages, reused, computed, from_cache = run_stages(
            st, run_id, items, specs, baseline_spec, judge_specs, instruction_specs, settings, references
        )

        give_back_freed_memory()  # the plans' and results' pages: compaction and the report do not add to them
        # One part per shard keeps writes independent; one part per table keeps later reads to one file each.
        st.check_fence(run_id, lease.token)  # a flow frozen past its lease compacts and reports nothing
        compacting = time.perf_counter()
        compacted = {t: st.compact(run_id, t) for t in stages}
        log.info(
            "parts compacted: %s (%.2f s)",
            ", ".join(f"{t} {a}->{b}" for t, (a, b) in compacted.items() if a != b),
            time.perf_counter() - compacting,
        )
        # after compaction (the same rows): each table is then one part in order, read without a copy
        check_stage_tables(st, run_id, stages)

        meta = {
            "run_id": run_id,
            "store": st.display(),
            "dataset": dataset_read,
            "baseline": baseline_spec.canonical,
            "judges": ", ".join(judge_specs),
            "instruction judges": ", ".join(instruction_specs) or "none",
            "dataset_sha256": dataset_sha256,
            "systems": ", ".join(map(str, specs)),
            "asr": json.dumps(settings.asr),
            "quality": settings.qualities[0],
            "MOS predictors": ", ".join(settings.qualities),
            "date": started.isoformat(timespec="seconds"),
            "ttseval": ttseval.__version__,
            "code": git_commit() or "unknown",
        }
        markdown = write_full_report(st, run_id, settings, system_ids, meta, reuse=True)  # unchanged: kept
        summary = st.read(run_id, "report").drop_duplicates("system_id")  # one row per system (rows are per recogniser)
        create_markdown_artifact(
            markdown=markdown, key=artifact_key("report", run_id), description=f"ttseval report for {run_id}"
        )
        wall_s = round(time.perf_counter() - t0, 2)  # one value for the run log, the log line and the command's print
        record = meta | {
            "command": "evaluate",
            "wall_s": wall_s,
            "finished_at": now().isoformat(timespec="seconds"),
            "reused": reused,
            "computed": computed,
            "from_cache": from_cache,
            "dask_started": dask_started(),  # false: nothing to compute, no cluster (flows/runner.py)
            "settings": settings.model_dump(mode="json"),
        }
        st.write_bytes(
            f"runs/{run_id}/log/{started.strftime('%Y%m%dT%H%M%S%f')}.json", json.dumps(record, indent=2).encode()
        )
        if record["dask_started"] is False:
            log.info(NOT_STARTED)
        log.info("report: %s (%.1f s)", st.display("runs", run_id, "report.md"), wall_s)

        failed = int((summary["n_failed"]).sum())
        total = int(summary["n_items"].sum())
        if total and failed / total > settings.max_error_rate:
            raise TTSEvalError(
                f"{failed}/{total} synthesis rows failed, above max_error_rate={settings.max_error_rate}"
            )
        return {
            "run_id": run_id,
            "store": st.display(),
            "wall_s": wall_s,
            "computed": computed,
            "from_cache": from_cache,
            "reused": reused,
            "system_ids": system_ids,
            "renamed": staged.renamed,
            "clip_sets": settings.clip_sets,
        }


def run_stages(
    st: ArtifactStore,
    run_id: str,
    items: list[dict[str, Any]],
    specs: list[Spec],
    baseline_spec: Spec,
    judge_specs: list[str],
    instruction_specs: list[str],
    settings: Settings,
    references: References,
) -> tuple[tuple[str, ...], dict[str, int], dict[str, int], dict[str, int]]:
    """Plan and compute every stage's missing rows: synthesis and the clip stages, then the judges. Returns the
    run's stages, and per stage the rows reused from the store, computed now, and answered from earlier runs'
    caches."""
    log = logger()
    synth = plan_synthesis(st, run_id, items, specs, settings)
    budget = None
    if settings.budget_usd is not None:
        budget = Budget(settings.budget_usd)  # synthesis draws on it first, the judges on what is left
        synth, deferred, spend = within_budget(synth, estimate_synthesis(synth, st, settings), budget)
        log.info(
            "budget USD %.4f: this run's paid synthesis calls cost USD %.4f%s",
            settings.budget_usd,
            spend,
            f"; {deferred} key(s) past the budget are left for a later run" if deferred else "",
        )
    if limits := ensure_vendor_limits(settings):
        log.info("vendor limits across all workers: %s", ", ".join(limits))
    # each clip stage (ttseval.tasks.stages): clips of earlier runs, and models added since, that lack rows
    clip_plans = {stage.table: plan_stage(stage, st, run_id, items, specs, settings, references) for stage in STAGES}
    log.info(synth.describe())  # each clip stage's line comes with its total (synthesize_and_score)

    system_ids = [s.id for s in specs]
    progress = StageProgress(f"evaluate run {run_id!r}", artifact_key("progress", run_id), log)
    with progress:
        cpu_workers = cpu_workers_declared(settings)
        results = synthesize_and_score(settings, run_id, synth, clip_plans, references, progress, cpu_workers)
        # Judging reads the stage tables (CER and MOS are the objective judge's evidence), so it runs after them.
        # A local audio-LLM judge is a model stage (GPU workers); remote and objective judges are not.
        judging_started = time.perf_counter()  # the judge stages are declared to the progress after they ran

        def place(judge: str) -> contextlib.AbstractContextManager[None]:
            return placement(settings, judge_runs_on_gpu(judge, settings), cpu_workers)

        judge_plans, judge_results = run_judge_stage(
            settings, run_id, system_ids, baseline_spec.id, judge_specs, place, budget=budget
        )
        instruction_plans, instruction_results = run_instruction_stage(
            settings, run_id, system_ids, instruction_specs, place, budget=budget
        )
        # EmergentTTS-Eval draws each pair's order at random; the audit measures what that averages out.
        audit_plans, audit_results = run_position_audit(
            settings, run_id, system_ids, baseline_spec.id, judge_specs, place, budget=budget
        )
        if budget is not None and budget.deferred > deferred:  # beyond the synthesis keys it deferred
            log.info(
                "budget: %d judgement(s) past it are left for a later run; USD %.4f unspent",
                budget.deferred - deferred,
                budget.remaining_usd,
            )
        for stage, plans, done in (
            ("judgments", judge_plans, judge_results),
            ("instruction_judgments", instruction_plans, instruction_results),
            ("position_audit", audit_plans, audit_results),
        ):
            progress.add(stage, sum(p.to_compute for p in plans), started=judging_started)
            progress.advance(stage, sum(r.n_rows for r in done))
    results += judge_results + instruction_results + audit_results
    # the clip stages this run has (lid, prosody, similarity only when asked for; similarity when some clip has
    # a voice to be compared with)
    model_plans = (synth, *(clip_plans[s.table] for s in STAGES if s.enabled(settings, references)))
    reused = {p.stage: p.present for p in model_plans} | {
        "judgments": sum(p.present for p in judge_plans),
        "instruction_judgments": sum(p.present for p in instruction_plans),
        "position_audit": sum(p.present for p in audit_plans),
    }
    stages = (*(p.stage for p in model_plans), "judgments", "instruction_judgments", "position_audit")
    computed = {stage: sum(r.n_rows for r in results if r.stage == stage) for stage in stages}
    from_cache = {stage: sum(cache_hits(st, r) for r in results if r.stage == stage) for stage in stages}
    log.info(
        "rows written: %s; of them answered from earlier runs' caches (no call, no model run): %s",
        ", ".join(f"{k} {v}" for k, v in computed.items()),
        ", ".join(f"{k} {v}" for k, v in from_cache.items()),
    )
    return stages, reused, computed, from_cache


def cache_hits(st: Any, result: StageResult) -> int:
    """How many of the rows a task wrote were answered from an earlier run's request cache (`cache_hit`): rows the
    run wrote but did not compute. 0 for a table without the column (the judges')."""
    from ttseval.core.schemas import TABLES

    table = TABLES.get(result.stage)
    if not result.part or table is None or "cache_hit" not in table.schema.names:
        return 0
    import pyarrow.compute as pc

    column = st.read_part(result.part, columns=["cache_hit"]).column("cache_hit")
    return int(pc.sum(column.cast("int64")).as_py() or 0)


def synthesize_and_score(
    settings: Settings,
    run_id: str,
    synth: Plan,
    clip_plans: dict[str, Plan],
    references: References,
    progress: StageProgress,
    cpu_workers: bool,
) -> list[StageResult]:
    """Submit synthesis shards, and for each one a task of every clip stage (ttseval.tasks.stages: ASR, MOS, and
    the LID models, prosody and speaker similarity where asked for and a clip has a reference voice), which start
    when its audio exists; then each stage's backlog `clip_plans` (clips of earlier runs, models added since).
    Returns every task's result as it completes. In a GPU run, the clip stages go to the GPU workers, CPU engines'
    synthesis to the CPU workers (`cpu_workers`)."""
    retries = task_retry_options(settings)
    synth_t = synthesize_task.with_options(**retries)
    tasks = {stage.table: TASKS[stage.table].with_options(**retries) for stage in STAGES}

    # the rows a stage writes for a shard's clips `items`: one per model of the clip's language, none for a clip
    # the stage leaves out (similarity: no reference voice)
    def shard_rows(stage: ClipStage, shard: dict[str, Any], items: list[dict[str, Any]]) -> int:
        system_id = Spec.parse(shard["system"]).id
        return sum(stage.rows_per_clip(settings, references, i["language"], i["item_id"], system_id) for i in items)

    # the stages with work: a backlog, or rows for the clips synthesized now
    stages = [
        stage
        for stage in STAGES
        if clip_plans[stage.table].to_compute or any(shard_rows(stage, s, s["items"]) for s in synth.shards)
    ]

    # Every clip synthesized now needs a row from each model of each stage; clips that fail synthesis lower these
    # totals. A stage the run has but with nothing to compute shows as done.
    progress.add("synthesis", synth.to_compute)
    for stage in STAGES:
        if stage not in stages and not stage.enabled(settings, references):
            continue
        backlog = clip_plans[stage.table]
        now_rows = sum(shard_rows(stage, s, s["items"]) for s in synth.shards)
        progress.add(stage.table, backlog.to_compute + now_rows)
        logger().info(
            f"{stage.table}: up to {backlog.to_compute + now_rows} to compute ({now_rows} for the clips "
            f"synthesized now, fewer if some fail; {backlog.to_compute} for clips of earlier runs), "
            f"{backlog.present} present (reused)"
        )

    def synthesis_job(shard: dict[str, Any]) -> Job:
        def submit() -> list[Any]:
            # a model-backed TTS (transformers on a GPU) goes where the GPU is, like ASR
            with placement(settings, runs_on_gpu(shard["system"], settings), cpu_workers):
                made = synth_t.submit(settings, run_id, shard)
            label = f"{shard['system']} shard {shard['index']}/{shard['of']}"
            shard_of[label] = shard
            with gpu_annotation(settings):
                return [made, *(tasks[stage.table].submit(settings, run_id, made, label) for stage in stages)]

        return submit

    def backlog_job(stage: ClipStage, i: int, work: list[dict[str, Any]]) -> Job:
        def submit() -> list[Any]:
            with gpu_annotation(settings):
                return [tasks[stage.table].submit(settings, run_id, work, f"backlog {i + 1}")]

        return submit

    shard_of: dict[str, dict[str, Any]] = {}
    jobs = itertools.chain(
        (synthesis_job(shard) for shard in synth.shards),
        (backlog_job(stage, i, w) for stage in stages for i, w in enumerate(clip_plans[stage.table].shards)),
    )
    sizes = [len(s["items"]) for s in synth.shards] + [len(w) for p in clip_plans.values() for w in p.shards]
    results = []
    for future in in_window(jobs, window_for(max(sizes, default=1))):  # a bounded window (ttseval.tasks.window)
        result = future.result()
        progress.advance(result.stage, result.n_rows)
        if result.stage == "synthesis" and (shard := shard_of.pop(result.label, None)) is not None:
            for stage in stages:  # the rows the shard's clips that did not come would have had
                progress.lower(
                    stage.table, shard_rows(stage, shard, shard["items"]) - shard_rows(stage, shard, result.work)
                )
        # kept for the run's counts, without the clips it handed to the next stages (every clip of the run)
        results.append(dataclasses.replace(result, work=[]))
    return results
