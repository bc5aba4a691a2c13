"""The evaluate flow: synthesize -> transcribe -> score -> report, over shards, on Dask, into the store.

Each stage computes only the keys missing from the store (see tasks/plan.py), so a re-run reuses everything,
a killed run resumes, and adding a system computes only its rows. Transcription and MOS of a shard start as
soon as that shard's audio exists, so the model stages overlap synthesis instead of waiting for all of it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import flow
from prefect.artifacts import create_markdown_artifact

import ttseval
from flows.runner import SettingsDaskTaskRunner, task_runner  # noqa: F401 - task_runner is re-exported
from tasks.common import get_store, logger, now
from tasks.instruct import run_instruction_stage
from tasks.judge import run_judge_stage
from tasks.plan import asr_id_for, plan_model_stage, plan_synthesis, quality_id_for
from tasks.quality import quality_task
from tasks.report import write_full_report
from tasks.synthesize import synthesize_task
from tasks.transcribe import transcribe_task
from ttseval.config import DEFAULT_SYSTEMS, Settings, load_settings
from ttseval.dataset import DEMO_DATASET, load_items, validate_items
from ttseval.errors import DatasetError, SpecError, TTSEvalError
from ttseval.registry import JUDGES, TTS, Spec
from ttseval.schemas import table_from_rows
from ttseval.store import ArtifactStore
from ttseval.validation import check_stage_output


def check_systems(systems: list[str], settings: Settings) -> list[Spec]:
    """Parse and construct every system once before any work, so a typo fails in seconds, not mid-run."""
    specs = [Spec.parse(s) for s in systems]
    seen: dict[str, str] = {}
    for spec in specs:
        if spec.id in seen:
            raise TTSEvalError(f"systems {seen[spec.id]!r} and {spec.canonical!r} are the same configuration")
        seen[spec.id] = spec.canonical
        provider = TTS.build(spec, extra=settings.plugins.get("tts"))
        prompt = spec.option("prompt")
        if prompt is not None and prompt != "category":
            raise SpecError(f"system {spec.canonical!r}: prompt={prompt!r} is not known; the only value is prompt=category")
        if prompt and not getattr(provider, "accepts_instruction", False):
            raise SpecError(f"system {spec.canonical!r} is strongly prompted, but {spec.provider} takes no "
                            "instruction; drop ':prompt=category' or choose a provider that accepts one")
    return specs


def check_judges(judges: list[str], settings: Settings) -> list[str]:
    """Build each judge once up front (a bad spec or missing API key fails before any work)."""
    for judge in judges:
        JUDGES.build(judge, extra=settings.plugins.get("judge"))
    return [Spec.parse(j).canonical for j in judges]


def register_items(store: ArtifactStore, run_id: str, items: pd.DataFrame) -> int:
    """Add the dataset's items to the run; an item id already there with other content is refused."""
    existing = store.read(run_id, "items")
    if not existing.empty:
        merged = items.merge(existing, on="item_id", suffixes=("", "_old"))
        changed = merged[(merged["text"] != merged["text_old"]) | (merged["language"] != merged["language_old"])]
        if not changed.empty:
            ids = ", ".join(changed["item_id"].head(5))
            raise DatasetError(f"run {run_id!r} already holds different text or language for item(s) {ids}; "
                               "results would mix two datasets. Use a new --run-id, or give changed items new ids.")
    new = items[~items["item_id"].isin(existing["item_id"])]
    if not new.empty:
        store.write_part(run_id, "items", table_from_rows("items", new.to_dict("records")), label="items")
    return len(new)


def _git_commit() -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    return None


def read_items(dataset: str, settings: Settings) -> tuple[pd.DataFrame, str, str]:
    """The items of a file, or of a frozen dataset NAME@VERSION in the store; the sha256 of what was read; and
    what was read (NAME@latest resolved to its version)."""
    from ttseval import catalog

    if catalog.is_ref(dataset) and not Path(dataset).exists():
        ref, items, sha = catalog.resolve(get_store(settings.store), dataset)
        # The generation spec defined its categories; the evaluate category set need not list them.
        validate_items(items, source=ref, categories=settings.categories | set(items["category"]))
        return items, sha, ref
    items = load_items(dataset, categories=settings.categories)
    return items, hashlib.sha256(Path(dataset).read_bytes()).hexdigest(), str(dataset)


@flow(name="evaluate", task_runner=SettingsDaskTaskRunner())
def evaluate(
    dataset: str = str(DEMO_DATASET),
    systems: list[str] = list(DEFAULT_SYSTEMS),
    store: str | None = None,
    run_id: str = "demo",
    shard_size: int | None = None,
    baseline: str | None = None,
    judges: list[str] | None = None,
    instruction_judges: list[str] | None = None,
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
    """
    started, t0 = now(), time.perf_counter()
    settings = load_settings(store=store, shard_size=shard_size)
    log = logger()
    st = get_store(settings.store)
    items, dataset_sha256, dataset_read = read_items(dataset, settings)
    specs = check_systems(systems, settings)
    judge_specs = check_judges(judges if judges is not None else settings.judges, settings)
    instruction_specs = check_judges(instruction_judges if instruction_judges is not None
                                     else settings.instruction_judges, settings)
    baseline_spec = Spec.parse(baseline) if baseline else specs[0]
    if baseline_spec.id not in {s.id for s in specs}:
        raise SpecError(f"baseline {baseline_spec.canonical!r} is not one of the systems; add it to --systems")
    added = register_items(st, run_id, items)
    log.info(f"run {run_id!r} in {st.display()}: {len(items)} items ({added} new), {len(specs)} systems")

    synth = plan_synthesis(st, run_id, items, specs, settings)
    asr = plan_model_stage(st, run_id, items, specs, settings, table="transcripts", id_for=asr_id_for(settings))
    mos = plan_model_stage(st, run_id, items, specs, settings, table="quality", id_for=quality_id_for(settings))
    for plan in (synth, asr, mos):
        log.info(plan.describe() + (" (clips from earlier runs)" if plan is not synth else ""))

    retries = {"retries": settings.task_retries, "retry_delay_seconds": settings.retry_backoff_s}
    synth_t, asr_t, mos_t = (t.with_options(**retries) for t in (synthesize_task, transcribe_task, quality_task))
    futures = [synth_t.submit(settings, run_id, shard) for shard in synth.shards]
    model_futures = []
    with _gpu_annotation(settings):
        for i, f in enumerate(futures):
            label = f"{synth.shards[i]['system']} shard {synth.shards[i]['index']}/{synth.shards[i]['of']}"
            model_futures += [asr_t.submit(settings, run_id, f, label), mos_t.submit(settings, run_id, f, label)]
        model_futures += [asr_t.submit(settings, run_id, w, f"backlog {i + 1}") for i, w in enumerate(asr.shards)]
        model_futures += [mos_t.submit(settings, run_id, w, f"backlog {i + 1}") for i, w in enumerate(mos.shards)]
    results = [f.result() for f in futures + model_futures]
    # Judging reads the stage tables (CER and MOS are the objective judge's evidence), so it runs after them.
    system_ids = [s.id for s in specs]
    with _gpu_annotation(settings):  # a local audio-LLM judge is a model stage too
        judge_plans, judge_results = run_judge_stage(settings, run_id, system_ids, baseline_spec.id, judge_specs)
        instruction_plans, instruction_results = run_instruction_stage(settings, run_id, system_ids, instruction_specs)
    results += judge_results + instruction_results
    reused = {p.stage: p.present for p in (synth, asr, mos)} | {
        "judgments": sum(p.present for p in judge_plans),
        "instruction_judgments": sum(p.present for p in instruction_plans)}
    stages = ("synthesis", "transcripts", "quality", "judgments", "instruction_judgments")
    computed = {stage: sum(r.n_rows for r in results if r.stage == stage) for stage in stages}
    log.info("computed rows: " + ", ".join(f"{k} {v}" for k, v in computed.items()))

    problems = [p for t in ("synthesis", "transcripts", "quality") for p in check_stage_output(t, st.read(run_id, t))]
    if problems:
        raise TTSEvalError("stage output breaks expectations:\n- " + "\n- ".join(problems))

    meta = {"run_id": run_id, "store": st.display(), "dataset": dataset_read, "baseline": baseline_spec.canonical,
            "judges": ", ".join(judge_specs), "instruction judges": ", ".join(instruction_specs) or "none",
            "dataset_sha256": dataset_sha256, "systems": ", ".join(map(str, specs)),
            "asr": json.dumps(settings.asr), "quality": settings.quality, "date": started.isoformat(timespec="seconds"),
            "ttseval": ttseval.__version__, "code": _git_commit() or "unknown"}
    markdown = write_full_report(st, run_id, settings, system_ids, meta)
    summary = st.read(run_id, "report")
    create_markdown_artifact(markdown=markdown, key=_artifact_key(run_id), description=f"ttseval report for {run_id}")
    wall_s = time.perf_counter() - t0
    record = meta | {"wall_s": round(wall_s, 2), "finished_at": now().isoformat(timespec="seconds"),
                     "reused": reused, "computed": computed, "settings": settings.model_dump(mode="json")}
    st.write_bytes(f"runs/{run_id}/log/{started.strftime('%Y%m%dT%H%M%S%f')}.json", json.dumps(record, indent=2).encode())
    log.info(f"report: {st.display('runs', run_id, 'report.md')} ({wall_s:.1f} s)")

    failed = int((summary["n_failed"]).sum())
    total = int(summary["n_items"].sum())
    if total and failed / total > settings.max_error_rate:
        raise TTSEvalError(f"{failed}/{total} synthesis rows failed, above max_error_rate={settings.max_error_rate}")
    return {"run_id": run_id, "store": st.display(), "wall_s": wall_s, "computed": computed,
            "reused": reused, "system_ids": system_ids}


def _gpu_annotation(settings: Settings) -> contextlib.AbstractContextManager:
    if not settings.gpu:
        return contextlib.nullcontext()
    import dask

    return dask.annotate(resources={"GPU": 1})


def _artifact_key(run_id: str) -> str:
    from ttseval.ids import slug

    return "ttseval-report-" + slug(run_id, "run")
