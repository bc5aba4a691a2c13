"""Quality stage: a reference-free MOS prediction per stored clip from each MOS predictor in settings.quality."""

from __future__ import annotations

import json
import time
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from ttseval.tasks.common import (StageResult, by_model, commit, error_row, get_provider, get_store, is_transient_task_error, logger,
                          model_output_id, now, one_per_request, reused_or_computed)
from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.ids import digest
from ttseval.core.registry import Spec


def score_work(settings: Settings, run_id: str, work: list[dict[str, Any]], *, label: str = "") -> StageResult:
    """Predict MOS for each clip with the predictor its work item names (`model_spec`, from the planner), else with
    every predictor in settings.quality (clips just synthesized); one part per call."""
    started = time.perf_counter()
    store = get_store(settings.store)
    rows: list[dict[str, Any]] = []
    replaces: set[tuple] = set()
    for quality_spec, batch in by_model(work, lambda w: settings.qualities).items():
        spec = Spec.parse(quality_spec)
        quality_id = model_output_id("quality", spec, settings)
        base = {"quality_id": quality_id, "quality_spec": spec.canonical}
        keys = [(w["item_id"], w["system_id"], quality_id) for w in batch]
        replaces |= {k for w, k in zip(batch, keys) if w.get("replaces")}
        try:
            predictor = get_provider("quality", spec.canonical, settings)
            version = str(getattr(predictor, "version", "unknown"))

            def predict(todo: list[int], batch=batch, predictor=predictor) -> list[dict[str, Any]]:
                audios = [Audio.from_wav_bytes(store.get_audio(batch[i]["audio_sha256"])) for i in todo]
                return [{"mos": s.mos, "details": s.details}
                        for s in one_per_request(predictor.score(audios), todo, spec.canonical)]

            scores, hits = reused_or_computed(
                store, "quality", [digest({"audio": w["audio_sha256"], "quality": quality_id, "version": version})
                                   for w in batch], predict, reuse=settings.reuse_scores)
            rows += [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now(),
                      "mos": s["mos"], "details": json.dumps(s["details"], sort_keys=True), "status": "ok",
                      "retryable": False, "attempt": 1, "cache_hit": hit} for w, s, hit in zip(batch, scores, hits)]
        # The batch fails as rows, never as a lost shard; retryable unless documented permanent (ttseval.tasks.common).
        except Exception as e:  # noqa: BLE001
            failed = error_row(e, attempt=1, stage=f"quality {spec.canonical}", keys=keys)
            rows += [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now()} | failed
                     for w in batch]
    part, statuses = commit(store, run_id, "quality", rows, label=label, replaces=replaces)
    return StageResult("quality", label, sum(statuses.values()), statuses, part, time.perf_counter() - started)


def primary_quality_id(settings: Settings) -> str:
    """The quality_id of the first MOS predictor: the summary's MOS, the objective judge's and the leaderboard's."""
    return model_output_id("quality", Spec.parse(settings.qualities[0]), settings)


@task(name="score-quality", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def quality_task(settings: Settings, run_id: str, source: StageResult | list[dict[str, Any]], label: str) -> StageResult:
    work = source.work if isinstance(source, StageResult) else source
    result = score_work(settings, run_id, work, label=label)
    logger().info(result.describe())
    return result
