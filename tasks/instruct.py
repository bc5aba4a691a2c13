"""Instruction-following stage (InstructTTSEval): does each clip follow its item's style instruction?

Items with an `instruction` (and a `task`: APS, DSD or RP) are judged true/false per system by every
configured instruction judge; undecidable or unparseable answers are kept as rows with `follows` null.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.common import StageResult, commit, error_row, get_provider, get_store, is_transient_task_error, logger, now
from tasks.plan import Plan, _chunks, _present
from ttseval.audio import Audio
from ttseval.config import Settings
from ttseval.judging import InstructionRequest
from ttseval.registry import Spec


def plan_instruction_judgments(settings: Settings, run_id: str, system_ids: list[str], judge_spec: str) -> Plan:
    store = get_store(settings.store)
    judge_id = get_provider("judge", judge_spec, settings).judge_id
    items = store.read(run_id, "items")
    items = items[items["instruction"].notna() & (items["instruction"].astype(str).str.strip() != "")]
    synthesis = store.read(run_id, "synthesis")
    ok = synthesis[synthesis["status"] == "ok"].set_index(["item_id", "system_id"])["audio_sha256"].to_dict()
    done, again = _present(store.read(run_id, "instruction_judgments"), ["item_id", "system_id", "judge_id"])
    plan = Plan(f"instruction_judgments ({judge_spec})")
    todo = []
    for system_id in system_ids:
        for item in items.itertuples(index=False):
            plan.wanted += 1
            key = (item.item_id, system_id, judge_id)
            if key in done:
                plan.present += 1
                continue
            todo.append({"item_id": item.item_id, "system_id": system_id, "text": item.text, "language": item.language,
                         "instruction": item.instruction, "task": item.task or "", "audio_sha256": ok.get((item.item_id, system_id)),
                         "replaces": key in again})
    plan.shards = [{"judge": judge_spec, "work": c} for c in _chunks(todo, settings.shard_size)]
    return plan


def judge_instruction_work(settings: Settings, run_id: str, shard: dict[str, Any], *, label: str = "") -> StageResult:
    started = time.perf_counter()
    store = get_store(settings.store)
    spec = Spec.parse(shard["judge"]).canonical
    judge = get_provider("judge", spec, settings)

    def base(w: dict[str, Any]) -> dict[str, Any]:
        return {"item_id": w["item_id"], "system_id": w["system_id"], "judge_id": judge.judge_id, "judge_spec": spec,
                "task": w["task"] or None, "created_at": now()}

    rows, requests, pending = [], [], []
    for w in shard["work"]:
        if not w["audio_sha256"]:
            rows.append(base(w) | {"status": "skipped", "error_type": "NoAudio", "parse_ok": False, "attempt": 0,
                                   "error_message": "the system has no ok clip for this item", "retryable": False})
            continue
        requests.append(InstructionRequest(item_id=w["item_id"], text=w["text"], language=w["language"],
                                           instruction=w["instruction"], task=w["task"],
                                           audio=Audio.from_wav_bytes(store.get_audio(w["audio_sha256"]))))
        pending.append(w)
    try:
        verdicts = judge.judge_instructions(requests) if requests else []
    except Exception as e:  # noqa: BLE001 - a judge that breaks fails its rows, never the run
        rows += [base(w) | {"parse_ok": False} | error_row(e, attempt=1) for w in pending]
        verdicts = []
    for w, v in zip(pending, verdicts):
        rows.append(base(w) | {
            "follows": v.follows, "reasoning": v.reasoning, "raw_response": v.raw_response, "parse_ok": v.parse_ok,
            "attempts": v.attempts, "retries": v.retries, "input_tokens": v.input_tokens,
            "output_tokens": v.output_tokens, "cost_usd": v.cost_usd, "status": "ok", "retryable": False,
            "attempt": v.attempts, "error_message": v.error, "error_type": None if v.parse_ok else "ParseFailure"})
    replaces = {(w["item_id"], w["system_id"], judge.judge_id) for w in shard["work"] if w["replaces"]}
    part, statuses = commit(store, run_id, "instruction_judgments", rows, label=label, replaces=replaces)
    return StageResult("instruction_judgments", label, len(rows), statuses, part, time.perf_counter() - started)


@task(name="judge-instructions", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def instruction_task(settings: Settings, run_id: str, shard: dict[str, Any], label: str) -> StageResult:
    result = judge_instruction_work(settings, run_id, shard, label=label)
    logger().info(result.describe())
    return result


def run_instruction_stage(settings: Settings, run_id: str, system_ids: list[str],
                          judges: list[str]) -> tuple[list[Plan], list[StageResult]]:
    plans, futures = [], []
    retrying = instruction_task.with_options(retries=settings.task_retries, retry_delay_seconds=settings.retry_backoff_s)
    for spec in judges:
        plan = plan_instruction_judgments(settings, run_id, system_ids, spec)
        if plan.wanted:
            logger().info(plan.describe())
        plans.append(plan)
        futures += [retrying.submit(settings, run_id, shard, f"{spec} shard {i + 1}/{len(plan.shards)}")
                    for i, shard in enumerate(plan.shards)]
    return plans, [f.result() for f in futures]
