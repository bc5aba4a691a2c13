"""Quality stage: a reference-free MOS prediction per stored clip."""

from __future__ import annotations

import json
import time
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.common import (StageResult, commit, error_row, get_provider, get_store, is_transient_task_error, logger,
                          model_output_id, now, one_per_request, reused_or_computed)
from ttseval.audio import Audio
from ttseval.config import Settings
from ttseval.ids import digest
from ttseval.registry import Spec


def score_work(settings: Settings, run_id: str, work: list[dict[str, Any]], *, label: str = "") -> StageResult:
    """Predict MOS for each clip in `work` with settings.quality; one part per call."""
    started = time.perf_counter()
    store = get_store(settings.store)
    spec = Spec.parse(settings.quality)
    quality_id = model_output_id("quality", spec, settings)
    base = {"quality_id": quality_id, "quality_spec": spec.canonical}
    try:
        predictor = get_provider("quality", spec.canonical, settings)
        version = str(getattr(predictor, "version", "unknown"))

        def predict(todo: list[int]) -> list[dict[str, Any]]:
            audios = [Audio.from_wav_bytes(store.get_audio(work[i]["audio_sha256"])) for i in todo]
            return [{"mos": s.mos, "details": s.details}
                    for s in one_per_request(predictor.score(audios), todo, spec.canonical)]

        scores, hits = reused_or_computed(
            store, "quality", [digest({"audio": w["audio_sha256"], "quality": quality_id, "version": version})
                               for w in work], predict, reuse=settings.reuse_scores)
        rows = [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now(), "mos": s["mos"],
                 "details": json.dumps(s["details"], sort_keys=True), "status": "ok", "retryable": False,
                 "attempt": 1, "cache_hit": hit} for w, s, hit in zip(work, scores, hits)]
    # The batch fails as rows, never as a lost shard; retryable unless documented permanent (tasks.common).
    except Exception as e:  # noqa: BLE001
        failed = error_row(e, attempt=1, stage=f"quality {spec.canonical}",
                           keys=[(w["item_id"], w["system_id"], quality_id) for w in work])
        rows = [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now()} | failed
                for w in work]
    part, statuses = commit(store, run_id, "quality", rows, label=label,
                            replaces={(w["item_id"], w["system_id"], quality_id) for w in work if w.get("replaces")})
    return StageResult("quality", label, len(rows), statuses, part, time.perf_counter() - started)


@task(name="score-quality", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def quality_task(settings: Settings, run_id: str, source: StageResult | list[dict[str, Any]], label: str) -> StageResult:
    work = source.work if isinstance(source, StageResult) else source
    result = score_work(settings, run_id, work, label=label)
    logger().info(result.describe())
    return result
