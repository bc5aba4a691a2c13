"""Synthesis stage: speak each item with one TTS system, store the audio once, record a row per item."""

from __future__ import annotations

import json
import time
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.common import (StageResult, call_with_retries, commit, error_row, get_provider, get_store, logger, now,
                          is_transient_task_error)
from ttseval.audio import sha256_hex
from ttseval.ids import digest
from ttseval.config import Settings
from ttseval.registry import Spec


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


def _cached(store: Any, key: str) -> dict[str, Any] | None:
    rel = f"cache/synthesis/{key[:2]}/{key}.json"
    return json.loads(store.read_bytes(rel)) if store.exists(rel) else None


def synthesize_one(provider: Any, spec: Spec, item: dict[str, Any], settings: Settings, store: Any) -> dict[str, Any]:
    """One synthesis row. Provider failures become the row's status; they never escape.

    With `reuse_audio`, a request already answered in any run of this store (same spec, engine version, text,
    language and instruction) reuses that audio: nightly re-runs of unchanged engines cost nothing, and a
    sampling engine (Piper) gives the same clip each night.
    """
    row: dict[str, Any] = {
        "item_id": item["item_id"], "system_id": spec.id, "system_spec": spec.canonical,
        "provider_version": str(getattr(provider, "version", "") or ""), "created_at": now(),
    }
    language = item["language"]
    if not provider.supports_language(language):
        return row | {"status": "unsupported", "error_type": "UnsupportedLanguage", "retryable": False, "attempt": 0,
                      "error_message": f"{spec.canonical} does not speak {language!r}"}
    instruction = instruction_for(spec, item) if getattr(provider, "accepts_instruction", False) else None
    key = request_key(spec, provider, item, instruction)
    if settings.reuse_audio and (hit := _cached(store, key)) is not None:
        return row | hit | {"cache_hit": True, "retryable": False, "attempt": 0}
    started = time.perf_counter()
    try:
        audio, attempt = call_with_retries(
            lambda: provider.synthesize(item["text"], language, instruction=instruction), settings)
    # A provider may raise anything on one bad item; the run records it in that item's row and goes on.
    except Exception as e:  # noqa: BLE001
        return row | error_row(e, attempt=getattr(e, "attempts", 1)) | {"latency_s": time.perf_counter() - started}
    latency = time.perf_counter() - started
    wav = audio.to_wav_bytes()
    sha = sha256_hex(wav)
    row |= {
        "audio_uri": store.put_audio(wav, sha), "audio_sha256": sha, "duration_s": audio.duration_s,
        "sample_rate_hz": audio.sample_rate_hz, "latency_s": latency, "attempt": attempt, "retryable": False,
        "provider_metadata": json.dumps(provider.metadata(), sort_keys=True, default=str),
    }
    if audio.is_silent():
        row |= {"status": "empty", "error_type": "SilentAudio",
                "error_message": f"{audio.duration_s:.3f} s of audio with no signal"}
    else:
        row |= {"status": "ok"}
    cached = {k: row[k] for k in ("audio_uri", "audio_sha256", "duration_s", "sample_rate_hz", "latency_s", "status",
                                  "error_type", "error_message", "provider_metadata") if k in row}
    store.write_bytes(f"cache/synthesis/{key[:2]}/{key}.json", json.dumps(cached).encode())
    return row | {"cache_hit": False}


def synthesize_items(settings: Settings, run_id: str, shard: dict[str, Any]) -> StageResult:
    """Synthesize `shard['items']` with `shard['system']`, commit one part, and hand ok clips to the next stages."""
    started = time.perf_counter()
    spec = Spec.parse(shard["system"])
    store = get_store(settings.store)
    try:
        provider = get_provider("tts", spec.canonical, settings)
        rows = [synthesize_one(provider, spec, item, settings, store) for item in shard["items"]]
    except (ImportError, ValueError, OSError) as e:  # the engine itself cannot start: every item says why
        rows = [{"item_id": i["item_id"], "system_id": spec.id, "system_spec": spec.canonical, "created_at": now()}
                | error_row(e, attempt=1) for i in shard["items"]]
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
