"""Similarity stage: speaker similarity (SIM) of each clip to its item's voice prompt, or else to its system's
reference voice (ttseval.tasks.voices), from every speaker encoder in settings.similarity (ttseval.metrics.similarity)."""

from __future__ import annotations

import time
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from ttseval.metrics.similarity import cosine_similarity
from ttseval.tasks.common import (StageResult, by_model, commit, error_row, get_provider, get_store, is_transient_task_error,
                          logger, model_output_id, now, one_per_request, reused_or_computed)
from ttseval.tasks.voices import References
from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.ids import digest
from ttseval.core.registry import Spec


def similarity_work(settings: Settings, run_id: str, work: list[dict[str, Any]], *, label: str = "") -> StageResult:
    """Compare each clip that has a reference with it, with the encoder its work item names (`model_spec`, from the
    planner), else with every encoder in settings.similarity (clips just synthesized; those without a reference
    are not compared). Each distinct clip is embedded once per batch; one part per call."""
    started = time.perf_counter()
    store = get_store(settings.store)
    references = References.read(store, run_id)
    compared = []
    for w in work:
        found = references.of(w["item_id"], w["system_id"])
        if found is not None:
            compared.append(w | {"reference": found[0], "reference_sha256": found[1]})
    work = compared
    rows: list[dict[str, Any]] = []
    replaces: set[tuple] = set()
    for encoder_spec, batch in by_model(work, lambda w: settings.similarity).items():
        spec = Spec.parse(encoder_spec)
        encoder_id = model_output_id("speaker", spec, settings)
        base = {"encoder_id": encoder_id, "encoder_spec": spec.canonical}
        keys = [(w["item_id"], w["system_id"], encoder_id) for w in batch]
        replaces |= {k for w, k in zip(batch, keys) if w.get("replaces")}
        try:
            encoder = get_provider("speaker", encoder_spec, settings)
            version = str(getattr(encoder, "version", "unknown"))

            def compare(todo: list[int], batch=batch, encoder=encoder) -> list[dict[str, Any]]:
                shas = list(dict.fromkeys(s for i in todo for s in (batch[i]["audio_sha256"],
                                                                    batch[i]["reference_sha256"])))
                vectors = dict(zip(shas, one_per_request(
                    encoder.embed([Audio.from_wav_bytes(store.get_audio(s)) for s in shas]), shas, encoder_spec)))
                return [{"similarity": cosine_similarity(vectors[batch[i]["audio_sha256"]],
                                                         vectors[batch[i]["reference_sha256"]])} for i in todo]

            figures, hits = reused_or_computed(
                store, "similarity", [digest({"audio": w["audio_sha256"], "reference": w["reference_sha256"],
                                              "encoder": encoder_id, "version": version}) for w in batch],
                compare, reuse=settings.reuse_scores)
            rows += [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now(),
                      "reference": w["reference"], "reference_sha256": w["reference_sha256"], **f, "status": "ok",
                      "retryable": False, "attempt": 1, "cache_hit": hit} for w, f, hit in zip(batch, figures, hits)]
        # The batch fails as rows, never as a lost shard; retryable unless documented permanent (ttseval.tasks.common).
        except Exception as e:  # noqa: BLE001
            failed = error_row(e, attempt=1, stage=f"similarity {spec.canonical}", keys=keys)
            rows += [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now(),
                      "reference": w["reference"], "reference_sha256": w["reference_sha256"]} | failed for w in batch]
    part, statuses = commit(store, run_id, "similarity", rows, label=label, replaces=replaces)
    return StageResult("similarity", label, sum(statuses.values()), statuses, part, time.perf_counter() - started)


@task(name="speaker-similarity", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def similarity_task(settings: Settings, run_id: str, source: StageResult | list[dict[str, Any]],
                    label: str) -> StageResult:
    work = source.work if isinstance(source, StageResult) else source
    result = similarity_work(settings, run_id, work, label=label)
    logger().info(result.describe())
    return result
