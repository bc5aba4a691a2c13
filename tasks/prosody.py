"""Prosody stage: F0, speech time, silences and pauses of every stored clip (metrics/prosody.py), when the
`prosody` setting is on."""

from __future__ import annotations

import time
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from ttseval.metrics.prosody import f0_stats, speech_segments, timing
from ttseval.tasks.common import StageResult, commit, error_row, get_store, is_transient_task_error, logger, now, reused_or_computed
from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.ids import digest

PROSODY_ID = "prosody-v1"  # Praat pitch (ac) 65-500 Hz, Silero VAD (silero-vad 6), pauses >= 0.5 s: a new rule is a new id


def measure(audio: Audio) -> dict[str, Any]:
    """Every prosody and timing figure of one clip."""
    samples = audio.samples
    return f0_stats(samples, audio.sample_rate_hz) | timing(
        speech_segments(samples, audio.sample_rate_hz), len(samples) / audio.sample_rate_hz).as_dict()


def prosody_work(settings: Settings, run_id: str, work: list[dict[str, Any]], *, label: str = "") -> StageResult:
    started = time.perf_counter()
    store = get_store(settings.store)
    keys = [(w["item_id"], w["system_id"], PROSODY_ID) for w in work]
    base = {"prosody_id": PROSODY_ID}
    try:
        def compute(todo: list[int]) -> list[dict[str, Any]]:
            return [measure(Audio.from_wav_bytes(store.get_audio(work[i]["audio_sha256"]))) for i in todo]

        figures, hits = reused_or_computed(store, "prosody", [digest({"audio": w["audio_sha256"], "prosody": PROSODY_ID})
                                                              for w in work], compute, reuse=settings.reuse_scores)
        rows = [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now(), **f,
                 "status": "ok", "retryable": False, "attempt": 1, "cache_hit": hit}
                for w, f, hit in zip(work, figures, hits)]
    # The batch fails as rows, never as a lost shard; retryable unless documented permanent (ttseval.tasks.common).
    except Exception as e:  # noqa: BLE001
        failed = error_row(e, attempt=1, stage="prosody", keys=keys)
        rows = [{"item_id": w["item_id"], "system_id": w["system_id"], **base, "created_at": now()} | failed
                for w in work]
    part, statuses = commit(store, run_id, "prosody", rows, label=label,
                            replaces={k for w, k in zip(work, keys) if w.get("replaces")})
    return StageResult("prosody", label, sum(statuses.values()), statuses, part, time.perf_counter() - started)


@task(name="measure-prosody", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def prosody_task(settings: Settings, run_id: str, source: StageResult | list[dict[str, Any]], label: str) -> StageResult:
    work = source.work if isinstance(source, StageResult) else source
    result = prosody_work(settings, run_id, work, label=label)
    logger().info(result.describe())
    return result
