"""ASR round-trip stage: transcribe stored clips, normalize both sides, count word and character errors."""

from __future__ import annotations

import time
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from ttseval.metrics.normalize import normalizer_for
from ttseval.metrics.wer import error_counts
from ttseval.tasks.common import (StageResult, by_model, commit, error_row, get_provider, get_store, is_transient_task_error, logger,
                          model_output_id, now, one_per_request, reused_or_computed)
from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.ids import digest
from ttseval.core.registry import Spec


class EmptyReference(ValueError):
    """The item's text normalizes to nothing, so WER and CER are undefined for every clip of it."""


def _score(w: dict[str, Any], text: str, detected: str | None, prob: float | None) -> dict[str, Any]:
    normalizer = normalizer_for(w["language"])
    ref, hyp = normalizer(w["text"]), normalizer(text)
    if not ref.strip():
        raise EmptyReference(f"the reference of {w['item_id']!r} is empty after {normalizer.name} normalization: "
                             "WER/CER is undefined; fix the item text so it keeps at least one word")
    counts = error_counts(ref, hyp, key=f"{w['item_id']}/{w['system_id']}")
    return {
        "hypothesis": text, "detected_language": detected, "language_prob": prob, "normalizer": normalizer.name,
        "ref_norm": ref, "hyp_norm": hyp, "word_errors": counts.word_errors, "ref_words": counts.ref_words,
        "char_errors": counts.char_errors, "ref_chars": counts.ref_chars,
        "wer": counts.word_errors / counts.ref_words, "cer": counts.char_errors / counts.ref_chars,
        "status": "ok", "retryable": False, "attempt": 1,
    }


def transcribe_work(settings: Settings, run_id: str, work: list[dict[str, Any]], *, label: str = "") -> StageResult:
    """Transcribe each clip with the recogniser its work item names (`model_spec`, from the planner), else with
    every recogniser its language routes to (settings.asr: clips just synthesized); one part per call."""
    started = time.perf_counter()
    store = get_store(settings.store)
    groups = by_model(work, lambda w: settings.asrs_for(w["language"]))
    rows: list[dict[str, Any]] = []
    replaces: set[tuple] = set()
    for asr_spec, batch in groups.items():
        spec = Spec.parse(asr_spec)
        asr_id = model_output_id("asr", spec, settings)
        base = {"asr_id": asr_id, "asr_spec": spec.canonical}
        replaces |= {(w["item_id"], w["system_id"], asr_id) for w in batch if w.get("replaces")}
        keys = [(w["item_id"], w["system_id"], asr_id) for w in batch]
        try:
            asr = get_provider("asr", asr_spec, settings)
            version = str(getattr(asr, "version", "unknown"))

            def recognise(todo: list[int], batch=batch, asr=asr) -> list[dict[str, Any]]:
                audios = [Audio.from_wav_bytes(store.get_audio(batch[i]["audio_sha256"])) for i in todo]
                found = one_per_request(asr.transcribe(audios, [batch[i]["language"] for i in todo]), todo, asr_spec)
                return [{"text": t.text, "detected_language": t.detected_language, "language_prob": t.language_prob}
                        for t in found]

            transcripts, hits = reused_or_computed(
                store, "transcripts",
                [digest({"audio": w["audio_sha256"], "asr": asr_id, "version": version, "language": w["language"]})
                 for w in batch], recognise, reuse=settings.reuse_scores)
        # The batch fails as rows, never as a lost shard; retryable unless documented permanent (ttseval.tasks.common).
        except Exception as e:  # noqa: BLE001
            failed = error_row(e, attempt=1, stage=f"transcripts {spec.canonical}", keys=keys)
            rows += [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now()} | failed
                     for w in batch]
            continue
        for w, t, hit, key in zip(batch, transcripts, hits, keys):
            row = {"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now(), "cache_hit": hit}
            try:
                rows.append(row | _score(w, t["text"], t["detected_language"], t["language_prob"]))
            # Final: the item text decides it, so every later run would fail the same way (after a new ASR call).
            except EmptyReference as e:
                rows.append(row | {"hypothesis": t["text"], "status": "failed", "error_type": "EmptyReference",
                                   "error_message": str(e), "retryable": False, "attempt": 1})
            # Any other scoring error (a null hypothesis, a normalizer bug) is not the data's fault: retryable.
            except Exception as e:  # noqa: BLE001
                rows.append(row | {"hypothesis": t["text"]}
                            | error_row(e, attempt=1, stage=f"transcripts {spec.canonical} (scoring)", keys=[key]))
    part, statuses = commit(store, run_id, "transcripts", rows, label=label, replaces=replaces)
    return StageResult("transcripts", label, sum(statuses.values()), statuses, part, time.perf_counter() - started)


@task(name="transcribe", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def transcribe_task(settings: Settings, run_id: str, source: StageResult | list[dict[str, Any]], label: str) -> StageResult:
    work = source.work if isinstance(source, StageResult) else source
    result = transcribe_work(settings, run_id, work, label=label)
    logger().info(result.describe())
    return result
