"""Language-identification stage: each voting LID model's answer per stored clip (INSV-A's V gate)."""

from __future__ import annotations

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


def identify_work(settings: Settings, run_id: str, work: list[dict[str, Any]], *, label: str = "") -> StageResult:
    """Identify the language of each clip with the LID model its work item names (`model_spec`, from the planner),
    else with every model in settings.lid (clips just synthesized); one part per call."""
    started = time.perf_counter()
    store = get_store(settings.store)
    groups = by_model(work, lambda w: settings.lid)
    rows: list[dict[str, Any]] = []
    replaces: set[tuple] = set()
    for lid_spec, batch in groups.items():
        spec = Spec.parse(lid_spec)
        lid_id = model_output_id("lid", spec, settings)
        base = {"lid_id": lid_id, "lid_spec": spec.canonical}
        keys = [(w["item_id"], w["system_id"], lid_id) for w in batch]
        replaces |= {k for w, k in zip(batch, keys) if w.get("replaces")}
        try:
            model = get_provider("lid", lid_spec, settings)
            version = str(getattr(model, "version", "unknown"))

            def identify(todo: list[int], batch=batch, model=model) -> list[dict[str, Any]]:
                audios = [Audio.from_wav_bytes(store.get_audio(batch[i]["audio_sha256"])) for i in todo]
                return [{"language": g.language, "prob": g.prob}
                        for g in one_per_request(model.identify(audios), todo, lid_spec)]

            guesses, hits = reused_or_computed(
                store, "lid", [digest({"audio": w["audio_sha256"], "lid": lid_id, "version": version})
                               for w in batch], identify, reuse=settings.reuse_scores)
            rows += [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now(), **g,
                      "status": "ok", "retryable": False, "attempt": 1, "cache_hit": hit}
                     for w, g, hit in zip(batch, guesses, hits)]
        # The batch fails as rows, never as a lost shard; retryable unless documented permanent (ttseval.tasks.common).
        except Exception as e:  # noqa: BLE001
            failed = error_row(e, attempt=1, stage=f"lid {spec.canonical}", keys=keys)
            rows += [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now()} | failed
                     for w in batch]
    part, statuses = commit(store, run_id, "lid", rows, label=label, replaces=replaces)
    return StageResult("lid", label, sum(statuses.values()), statuses, part, time.perf_counter() - started)


@task(name="identify-language", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def lid_task(settings: Settings, run_id: str, source: StageResult | list[dict[str, Any]], label: str) -> StageResult:
    work = source.work if isinstance(source, StageResult) else source
    result = identify_work(settings, run_id, work, label=label)
    logger().info(result.describe())
    return result
