"""ASR round-trip stage: transcribe stored clips, normalize both sides, count word and character errors."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from metrics.normalize import normalizer_for
from metrics.wer import error_counts
from tasks.common import StageResult, commit, error_row, get_provider, get_store, logger, now, is_transient_task_error
from ttseval.audio import Audio
from ttseval.config import Settings
from ttseval.registry import Spec


def _score(w: dict[str, Any], text: str, detected: str | None, prob: float | None) -> dict[str, Any]:
    normalizer = normalizer_for(w["language"])
    ref, hyp = normalizer(w["text"]), normalizer(text)
    counts = error_counts(ref, hyp, key=f"{w['item_id']}/{w['system_id']}")
    return {
        "hypothesis": text, "detected_language": detected, "language_prob": prob, "normalizer": normalizer.name,
        "ref_norm": ref, "hyp_norm": hyp, "word_errors": counts.word_errors, "ref_words": counts.ref_words,
        "char_errors": counts.char_errors, "ref_chars": counts.ref_chars,
        "wer": counts.word_errors / counts.ref_words, "cer": counts.char_errors / counts.ref_chars,
        "status": "ok", "retryable": False, "attempt": 1,
    }


def transcribe_work(settings: Settings, run_id: str, work: list[dict[str, Any]], *, label: str = "") -> StageResult:
    """Transcribe each clip with the recogniser its language routes to (settings.asr); one part per call."""
    started = time.perf_counter()
    store = get_store(settings.store)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for w in work:
        groups[Spec.parse(settings.asr_for(w["language"])).canonical].append(w)
    rows: list[dict[str, Any]] = []
    replaces: set[tuple] = set()
    for asr_spec, batch in groups.items():
        spec = Spec.parse(asr_spec)
        base = {"asr_id": spec.id, "asr_spec": spec.canonical}
        replaces |= {(w["item_id"], w["system_id"], spec.id) for w in batch if w.get("replaces")}
        try:
            asr = get_provider("asr", asr_spec, settings)
            audios = [Audio.from_wav_bytes(store.get_audio(w["audio_sha256"])) for w in batch]
            transcripts = asr.transcribe(audios, [w["language"] for w in batch])
        except Exception as e:  # noqa: BLE001 - the batch fails as rows, never as a lost shard
            rows += [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now()}
                     | error_row(e, attempt=1) for w in batch]
            continue
        for w, t in zip(batch, transcripts):
            row = {"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now()}
            try:
                rows.append(row | _score(w, t.text, t.detected_language, t.language_prob))
            except ValueError as e:  # e.g. a reference that normalizes to nothing
                rows.append(row | {"hypothesis": t.text} | error_row(e, attempt=1))
    part, statuses = commit(store, run_id, "transcripts", rows, label=label, replaces=replaces)
    return StageResult("transcripts", label, len(rows), statuses, part, time.perf_counter() - started)


@task(name="transcribe", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def transcribe_task(settings: Settings, run_id: str, source: StageResult | list[dict[str, Any]], label: str) -> StageResult:
    work = source.work if isinstance(source, StageResult) else source
    result = transcribe_work(settings, run_id, work, label=label)
    logger().info(result.describe())
    return result
