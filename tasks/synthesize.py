"""Synthesis stage: speak each item with one TTS system, store the audio once, record a row per item."""

from __future__ import annotations

import json
import time
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.common import (StageResult, call_with_retries, commit, error_row, get_provider, get_store,
                          is_transient_task_error, logger, now)
from ttseval.audio import sha256_hex
from ttseval.cache import RequestCache
from ttseval.config import Settings
from ttseval.ids import digest
from ttseval.registry import Spec
from ttseval.store import ArtifactStore

_CACHED_COLUMNS = ("audio_uri", "audio_sha256", "duration_s", "sample_rate_hz", "latency_s", "status", "error_type",
                   "error_message", "provider_metadata")
"""What a reused answer carries into a new run's row (the audio itself is a content-addressed blob)."""


def instruction_for(spec: Spec, item: dict[str, Any]) -> str | None:
    """The item's own instruction, else, for a strongly prompted system (`prompt=category`), the category's."""
    if item.get("instruction"):
        return item["instruction"]
    if spec.option("prompt") == "category":
        from ttseval.categories import CATEGORIES

        return CATEGORIES.get(item.get("category") or "")
    return None


def request_key(spec: Spec, provider: Any, item: dict[str, Any], instruction: str | None) -> str:
    """Cache key of one synthesis request: what the audio depends on, the engine version included."""
    return digest({"spec": spec.canonical, "version": str(getattr(provider, "version", "")), "text": item["text"],
                   "language": item["language"], "instruction": instruction})


def synthesis_cache(store: ArtifactStore) -> RequestCache:
    """Answered synthesis requests of every run in the store: cache/synthesis/<key[:2]>/<key>.json."""
    return RequestCache(store, "synthesis")


def synthesize_one(provider: Any, spec: Spec, item: dict[str, Any], settings: Settings,
                   store: ArtifactStore) -> dict[str, Any]:
    """One synthesis row. Provider failures become the row's status; they never escape (store errors do, so
    Prefect retries the task).

    With `reuse_audio`, a request already answered in any run of this store (same spec, engine version, text,
    language and instruction) reuses that audio: nightly re-runs of unchanged engines cost nothing, and a
    sampling engine (Piper) gives the same clip each night.
    """
    row: dict[str, Any] = {
        "item_id": item["item_id"], "system_id": spec.id, "system_spec": spec.canonical,
        "provider_version": str(getattr(provider, "version", "") or ""), "created_at": now(),
    }
    language = item["language"]
    try:
        supported = provider.supports_language(language)
    except Exception as e:  # noqa: BLE001 - a bug in the provider's language check fails this row, retryably
        return row | error_row(e, attempt=1, stage=f"synthesis {spec.canonical}", keys=[(item["item_id"], spec.id)])
    if not supported:
        return row | {"status": "unsupported", "error_type": "UnsupportedLanguage", "retryable": False, "attempt": 0,
                      "error_message": f"{spec.canonical} does not speak {language!r}"}
    instruction = instruction_for(spec, item) if getattr(provider, "accepts_instruction", False) else None
    key = request_key(spec, provider, item, instruction)
    cache = synthesis_cache(store)
    if settings.reuse_audio and (hit := cache.get(key)) is not None:
        return row | {k: hit[k] for k in _CACHED_COLUMNS if k in hit} | {"cache_hit": True, "retryable": False,
                                                                          "attempt": 0}
    started = time.perf_counter()
    try:
        audio, attempt = call_with_retries(
            lambda: provider.synthesize(item["text"], language, instruction=instruction), settings)
        wav = audio.to_wav_bytes()  # a provider's malformed audio or metadata is its failure, not the shard's
        metadata = json.dumps(provider.metadata(), sort_keys=True, default=str)
    # A provider may raise anything on one bad item: the item's row records it and the shard goes on. Only a
    # PermanentProviderError is final; anything else (a bug included) is retryable, so a fixed provider heals it.
    except Exception as e:  # noqa: BLE001
        return row | error_row(e, attempt=1, stage=f"synthesis {spec.canonical}",
                               keys=[(item["item_id"], spec.id)]) | {"latency_s": time.perf_counter() - started}
    latency = time.perf_counter() - started
    sha = sha256_hex(wav)
    row |= {
        "audio_uri": store.put_audio(wav, sha), "audio_sha256": sha, "duration_s": audio.duration_s,
        "sample_rate_hz": audio.sample_rate_hz, "latency_s": latency, "attempt": attempt, "retryable": False,
        "provider_metadata": metadata,
    }
    if audio.is_silent():
        row |= {"status": "empty", "error_type": "SilentAudio",
                "error_message": f"{audio.duration_s:.3f} s of audio with no signal"}
    else:
        row |= {"status": "ok"}
    cache.put(key, {k: row[k] for k in _CACHED_COLUMNS if k in row})
    return row | {"cache_hit": False}


def synthesize_items(settings: Settings, run_id: str, shard: dict[str, Any]) -> StageResult:
    """Synthesize `shard['items']` with `shard['system']`, commit one part, and hand ok clips to the next stages."""
    started = time.perf_counter()
    spec = Spec.parse(shard["system"])
    store = get_store(settings.store)
    try:
        provider = get_provider("tts", spec.canonical, settings)
    # The engine cannot start (a missing extra or program, a voice not installed, a model that fails to load):
    # every item says why. Retryable unless the provider calls it permanent, because the fix (install the extra,
    # the voice) changes nothing in the rows' keys, so only a retryable row lets the next run pick the items up.
    except Exception as e:  # noqa: BLE001
        failed = error_row(e, attempt=1, stage=f"synthesis {spec.canonical} (engine start)",
                           keys=[(i["item_id"], spec.id) for i in shard["items"]])
        rows = [{"item_id": i["item_id"], "system_id": spec.id, "system_spec": spec.canonical, "created_at": now()}
                | failed for i in shard["items"]]
    else:
        rows = [synthesize_one(provider, spec, item, settings, store) for item in shard["items"]]
    part, statuses = commit(store, run_id, "synthesis", rows, label=f"{spec.id}-{shard['index']}",
                            replaces={(i["item_id"], spec.id) for i in shard["items"] if i.get("replaces")})
    by_id = {i["item_id"]: i for i in shard["items"]}
    work = [{"item_id": r["item_id"], "system_id": r["system_id"], "audio_sha256": r["audio_sha256"],
             "language": by_id[r["item_id"]]["language"], "text": by_id[r["item_id"]]["text"]}
            for r in rows if r["status"] == "ok"]
    return StageResult("synthesis", f"{spec.canonical} shard {shard['index']}/{shard['of']}", len(rows), statuses,
                       part, time.perf_counter() - started, work)


@task(name="synthesize", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def synthesize_task(settings: Settings, run_id: str, shard: dict[str, Any]) -> StageResult:
    result = synthesize_items(settings, run_id, shard)
    logger().info(result.describe())
    return result
