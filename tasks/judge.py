"""Judge stage: pairwise comparisons of each candidate system against the baseline, by one judge per task.

Planning reads only stored tables (synthesis, transcripts, quality), so the same code serves the evaluate flow
and a backfill over audio stored by an earlier run: no TTS provider is ever built here.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from providers.judges.prompts import rubric_for
from tasks.common import StageResult, commit, error_row, get_provider, get_store, is_transient_task_error, logger, now
from tasks.plan import Plan, _chunks, _present
from ttseval.audio import Audio
from ttseval.config import Settings
from ttseval.judging import PairwiseRequest, candidate_first, to_candidate_view
from ttseval.registry import Spec
from ttseval.store import ArtifactStore


def judge_id_of(spec: str, settings: Settings) -> str:
    return get_provider("judge", spec, settings).judge_id


def _signals(store: ArtifactStore, run_id: str) -> dict[tuple[str, str], dict[str, float | None]]:
    """CER and MOS per clip from the stored tables (one transcript and one MOS per clip by construction)."""
    out: dict[tuple[str, str], dict[str, float | None]] = {}
    transcripts = store.read(run_id, "transcripts")
    for r in transcripts[transcripts["status"] == "ok"].itertuples(index=False):
        out.setdefault((r.item_id, r.system_id), {})["cer"] = float(r.cer)
    quality = store.read(run_id, "quality")
    for r in quality[quality["status"] == "ok"].itertuples(index=False):
        out.setdefault((r.item_id, r.system_id), {})["mos"] = float(r.mos)
    return out


def plan_judgments(store: ArtifactStore, run_id: str, system_ids: list[str], baseline_id: str, judge_spec: str,
                   settings: Settings) -> Plan:
    """Every (item, candidate) pair against the baseline that this judge has not yet judged."""
    judge_id = judge_id_of(judge_spec, settings)
    items = store.read(run_id, "items").set_index("item_id")
    synthesis = store.read(run_id, "synthesis")
    ok = synthesis[synthesis["status"] == "ok"].set_index(["item_id", "system_id"])["audio_sha256"].to_dict()
    done, again = _present(store.read(run_id, "judgments"), ["item_id", "system_id", "baseline_id", "judge_id"])
    signals = _signals(store, run_id)
    plan = Plan(f"judgments ({judge_spec})")
    todo = []
    for system_id in system_ids:
        if system_id == baseline_id:
            continue
        for item_id, item in items.iterrows():
            plan.wanted += 1
            key = (item_id, system_id, baseline_id, judge_id)
            if key in done:
                plan.present += 1
                continue
            todo.append({
                "item_id": item_id, "system_id": system_id, "baseline_id": baseline_id, "text": item["text"],
                "language": item["language"], "category": item["category"],
                "candidate_sha": ok.get((item_id, system_id)), "baseline_sha": ok.get((item_id, baseline_id)),
                "candidate_signals": signals.get((item_id, system_id), {}),
                "baseline_signals": signals.get((item_id, baseline_id), {}), "replaces": key in again,
            })
    plan.shards = [{"judge": judge_spec, "work": c} for c in _chunks(todo, settings.shard_size)]
    return plan


def _row(w: dict[str, Any], judge: Any, spec: str) -> dict[str, Any]:
    return {"item_id": w["item_id"], "system_id": w["system_id"], "baseline_id": w["baseline_id"],
            "judge_id": judge.judge_id, "judge_spec": spec, "created_at": now()}


def judge_work(settings: Settings, run_id: str, shard: dict[str, Any], *, label: str = "") -> StageResult:
    """Judge one shard of pairs; pairs missing a clip are written as `skipped` with the reason."""
    started = time.perf_counter()
    store = get_store(settings.store)
    spec = Spec.parse(shard["judge"]).canonical
    judge = get_provider("judge", spec, settings)
    rows, requests, pending = [], [], []
    for w in shard["work"]:
        if not w["candidate_sha"] or not w["baseline_sha"]:
            which = "candidate" if not w["candidate_sha"] else "baseline"
            rows.append(_row(w, judge, spec) | {"status": "skipped", "error_type": f"No{which.title()}Audio",
                        "error_message": f"the {which} has no ok clip for this item", "retryable": False,
                        "attempt": 0, "parse_ok": False})
            continue
        first = candidate_first(w["item_id"], w["system_id"], w["baseline_id"], settings.seed)
        cand = Audio.from_wav_bytes(store.get_audio(w["candidate_sha"]))
        base = Audio.from_wav_bytes(store.get_audio(w["baseline_sha"]))
        requests.append(PairwiseRequest(
            item_id=w["item_id"], text=w["text"], language=w["language"], category=w["category"],
            rubric=rubric_for(w["category"]), first=cand if first else base, second=base if first else cand,
            first_signals=w["candidate_signals"] if first else w["baseline_signals"],
            second_signals=w["baseline_signals"] if first else w["candidate_signals"]))
        pending.append((w, first))
    try:
        verdicts = judge.judge_pairs(requests) if requests else []
    except Exception as e:  # noqa: BLE001 - a judge that breaks fails its rows, never the run
        rows += [_row(w, judge, spec) | {"candidate_first": first, "parse_ok": False} | error_row(e, attempt=1)
                 for w, first in pending]
        verdicts = []
    for (w, first), v in zip(pending, verdicts):
        cand_score, base_score = (v.score_first, v.score_second) if first else (v.score_second, v.score_first)
        cand_why, base_why = (v.reasoning_first, v.reasoning_second) if first else (v.reasoning_second, v.reasoning_first)
        rows.append(_row(w, judge, spec) | {
            "candidate_first": first, "winner_raw": v.winner, "winner": to_candidate_view(v.winner, first),
            "score_candidate": cand_score, "score_baseline": base_score, "reasoning_candidate": cand_why,
            "reasoning_baseline": base_why, "comparison": v.comparison, "raw_response": v.raw_response,
            "parse_ok": v.parse_ok, "attempts": v.attempts, "retries": v.retries, "input_tokens": v.input_tokens,
            "output_tokens": v.output_tokens, "cost_usd": v.cost_usd, "status": "ok", "retryable": False,
            "attempt": v.attempts, "error_message": v.error, "error_type": None if v.parse_ok else "ParseFailure"})
    replaces = {(w["item_id"], w["system_id"], w["baseline_id"], judge.judge_id) for w in shard["work"] if w["replaces"]}
    part, statuses = commit(store, run_id, "judgments", rows, label=label, replaces=replaces)
    return StageResult("judgments", label, len(rows), statuses, part, time.perf_counter() - started)


@task(name="judge", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def judge_task(settings: Settings, run_id: str, shard: dict[str, Any], label: str) -> StageResult:
    result = judge_work(settings, run_id, shard, label=label)
    logger().info(result.describe())
    return result


def run_judge_stage(settings: Settings, run_id: str, system_ids: list[str], baseline_id: str,
                    judges: list[str]) -> tuple[list[Plan], list[StageResult]]:
    """Plan and run every judge's missing comparisons as Prefect tasks on the flow's task runner."""
    store = get_store(settings.store)
    plans, futures = [], []
    retrying = judge_task.with_options(retries=settings.task_retries, retry_delay_seconds=settings.retry_backoff_s)
    for spec in judges:
        plan = plan_judgments(store, run_id, system_ids, baseline_id, spec, settings)
        logger().info(plan.describe())
        plans.append(plan)
        futures += [retrying.submit(settings, run_id, shard, f"{spec} shard {i + 1}/{len(plan.shards)}")
                    for i, shard in enumerate(plan.shards)]
    return plans, [f.result() for f in futures]
