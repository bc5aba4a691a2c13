"""Synthesis stage: speak each item with one TTS system, store the audio once, record a row per item."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from ttseval.core.audio import Audio, sha256_hex
from ttseval.core.cache import RequestCache
from ttseval.core.config import Settings
from ttseval.core.errors import PermanentProviderError
from ttseval.core.ids import digest
from ttseval.core.protocols import VoicePrompt
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore
from ttseval.metrics.audio_checks import audio_flags
from ttseval.tasks.failures import error_row, one_per_request
from ttseval.tasks.limits import vendor_gate
from ttseval.tasks.logs import logger
from ttseval.tasks.parts import StageResult, attempt_label, commit, earlier_attempt, get_store, now
from ttseval.tasks.provider_cache import get_provider
from ttseval.tasks.retries import call_with_retries, is_transient_task_error

_CACHED_COLUMNS = (
    "audio_uri",
    "audio_sha256",
    "duration_s",
    "sample_rate_hz",
    "latency_s",
    "first_byte_s",
    "status",
    "error_type",
    "error_message",
    "provider_metadata",
    "audio_flags",
)
"""What a reused answer carries into a new run's row (the audio itself is a content-addressed blob)."""


def instruction_for(spec: Spec, item: dict[str, Any]) -> str | None:
    """The item's own instruction, else, for a strongly prompted system (`prompt=category`), the category's."""
    own: str | None = item.get("instruction")
    if own:
        return own
    if spec.option("prompt") == "category":
        from ttseval.core.categories import CATEGORIES

        return CATEGORIES.get(item.get("category") or "")
    return None


def clones(provider: Any) -> bool:
    """Whether the provider imitates voice prompts (`clones_voice`, ttseval.core.protocols.TTSProvider)."""
    return bool(getattr(provider, "clones_voice", False))


def request_key(spec: Spec, provider: Any, item: dict[str, Any], instruction: str | None) -> str:
    """Cache key of one synthesis request: what the audio depends on, the engine version included."""
    request = {
        "spec": spec.canonical,
        "version": str(getattr(provider, "version", "")),
        "text": item["text"],
        "language": item["language"],
        "instruction": instruction,
    }
    if clones(provider) and item.get("prompt_audio_sha256"):  # only then: the keys of every other request are kept
        request |= {"prompt": item["prompt_audio_sha256"], "prompt_text": item.get("prompt_text")}
    return digest(request)


def synthesis_cache(store: ArtifactStore) -> RequestCache:
    """Answered synthesis requests of every run in the store: cache/synthesis/<key[:2]>/<key>.json."""
    return RequestCache(store, "synthesis")


def price_per_mchar(provider: Any, settings: Settings) -> float:
    """USD per million billable characters: the setting `tts_prices` for `provider:model` or `provider`, else
    the provider's own list price (`usd_per_mchar`), else 0 (a local engine)."""
    name, model = getattr(provider, "name", ""), getattr(provider, "model", None)
    for key in (f"{name}:{model}", name):
        if key in settings.tts_prices:
            return float(settings.tts_prices[key])
    return float(getattr(provider, "usd_per_mchar", 0.0))


def call_cost(provider: Any, text: str, instruction: str | None, settings: Settings) -> tuple[int, float]:
    """(billable characters, USD) of one call; (0, 0.0) for a provider that bills nothing (local engines, audio
    made elsewhere: they have no `billable_chars`)."""
    billable = getattr(provider, "billable_chars", None)
    if billable is None:
        return 0, 0.0
    chars = int(billable(text, instruction))
    return chars, chars * price_per_mchar(provider, settings) / 1e6


def cacheable(provider: Any) -> bool:
    """Whether a synthesis answer may be reused for an identical request: not for audio looked up by item id,
    where two items with the same text have different clips."""
    return not getattr(provider, "keyed_by_item", False)


def reuses_audio(provider: Any, item_id: str, settings: Settings) -> bool:
    """Whether this item's clip may come from an earlier run's answer: `reuse_audio` is on, the provider is
    cacheable, and the item is not one a remote voice must speak afresh tonight (setting `fresh_items`)."""
    fresh = getattr(provider, "remote", False) and item_id in settings.fresh_items
    return settings.reuse_audio and cacheable(provider) and not fresh


@dataclass
class _Call:
    """An item that needs a provider call: its row so far, what to ask, and the cache key of the answer."""

    row: dict[str, Any]
    item: dict[str, Any]
    instruction: str | None
    key: str
    prompt: VoicePrompt | None = None  # set by synthesize_rows for a cloning provider and an item with a prompt


def _prepare(
    provider: Any, spec: Spec, item: dict[str, Any], settings: Settings, cache: RequestCache
) -> dict[str, Any] | _Call:
    """A finished row (unsupported language, a failing language check, reused audio) or the call still to make."""
    row: dict[str, Any] = {
        "item_id": item["item_id"],
        "system_id": spec.id,
        "system_spec": spec.canonical,
        "provider_version": str(getattr(provider, "version", "") or ""),
        "created_at": now(),
        "billable_chars": 0,
        "cost_usd": 0.0,
    }
    language = item["language"]
    try:
        supported = provider.supports_language(language)
    except Exception as e:  # noqa: BLE001 - a bug in the provider's language check fails this row, retryably
        return row | error_row(e, attempt=1, stage=f"synthesis {spec.canonical}", keys=[(item["item_id"], spec.id)])
    if not supported and settings.role_of(spec.id) != "control":  # a negative control speaks every item
        return row | {
            "status": "unsupported",
            "error_type": "UnsupportedLanguage",
            "retryable": False,
            "attempt": 0,
            "error_message": f"{spec.canonical} does not speak {language!r}",
        }
    instruction = instruction_for(spec, item) if getattr(provider, "accepts_instruction", False) else None
    key = request_key(spec, provider, item, instruction)
    if reuses_audio(provider, item["item_id"], settings) and (hit := cache.get(key)) is not None:
        return (
            row
            | {k: hit[k] for k in _CACHED_COLUMNS if k in hit}
            | {"cache_hit": True, "retryable": False, "attempt": 0}
        )
    return _Call(row, item, instruction, key)


def first_byte_s(provider: Any) -> float | None:
    """A remote voice's time to the first byte of its answer to this thread's last call (CloudTTS.first_byte_s);
    None for a local engine."""
    timing = getattr(provider, "first_byte_s", None)
    return timing() if callable(timing) else None


def _speak(provider: Any, call: _Call) -> Any:
    """One provider call for one item; audio looked up by item id gets the item id."""
    extra: dict[str, Any] = {"item_id": call.item["item_id"]} if not cacheable(provider) else {}
    if call.prompt is not None:
        extra["prompt"] = call.prompt
    return provider.synthesize(call.item["text"], call.item["language"], instruction=call.instruction, **extra)


def _finish(
    call: _Call,
    spec: Spec,
    provider: Any,
    audio: Any,
    attempt: int,
    latency_s: float,
    settings: Settings,
    store: ArtifactStore,
    cache: RequestCache,
) -> dict[str, Any]:
    """The row of a call that returned `audio`: the clip stored once by content, its status, its cost."""
    if audio.duration_s > settings.max_clip_s:  # not stored: a runaway voice, or an answer that is no clip
        too_long = PermanentProviderError(
            f"the clip is {audio.duration_s:.1f} s long, over the setting max_clip_s ({settings.max_clip_s:g} s); "
            "not stored"
        )
        keys = [(call.item["item_id"], spec.id)]
        return (
            call.row
            | error_row(too_long, attempt=attempt, stage=f"synthesis {spec.canonical}", keys=keys)
            | {"latency_s": latency_s}
        )
    try:
        wav = audio.to_wav_bytes()  # a provider's malformed audio or metadata is its failure, not the shard's
        metadata = json.dumps(provider.metadata(), sort_keys=True, default=str)
    except Exception as e:  # noqa: BLE001
        return (
            call.row
            | error_row(e, attempt=attempt, stage=f"synthesis {spec.canonical}", keys=[(call.item["item_id"], spec.id)])
            | {"latency_s": latency_s}
        )
    chars, usd = call_cost(provider, call.item["text"], call.instruction, settings)
    sha = sha256_hex(wav)
    flags = audio_flags(
        audio.samples, audio.sample_rate_hz, call.item["text"], getattr(provider, "output_sample_rate_hz", None)
    )
    row = call.row | {
        "audio_uri": store.put_audio(wav, sha),
        "audio_sha256": sha,
        "duration_s": audio.duration_s,
        "sample_rate_hz": audio.sample_rate_hz,
        # audio made elsewhere (files:, pushed:) was looked up, not synthesized: no time to put beside its length
        "latency_s": None if getattr(provider, "keyed_by_item", False) else latency_s,
        "first_byte_s": first_byte_s(provider),
        "attempt": attempt,
        "retryable": False,
        "provider_metadata": metadata,
        "billable_chars": chars,
        "cost_usd": usd,
        "audio_flags": ",".join(flags) or None,
    }
    if audio.is_silent():
        row |= {
            "status": "empty",
            "error_type": "SilentAudio",
            "error_message": f"{audio.duration_s:.3f} s of audio with no signal",
        }
    else:
        row |= {"status": "ok"}
    if cacheable(provider):
        cache.put(call.key, {k: row[k] for k in _CACHED_COLUMNS if k in row})
    return row | {"cache_hit": False}


def _one_at_a_time(
    provider: Any,
    spec: Spec,
    call: _Call,
    settings: Settings,
    store: ArtifactStore,
    cache: RequestCache,
    slot: Callable[[], Any],
) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        with slot():
            audio, attempt = call_with_retries(lambda: _speak(provider, call), settings)
    # A provider may raise anything on one bad item: the item's row records it and the shard goes on. Only a
    # PermanentProviderError is final; anything else (a bug included) is retryable, so a fixed provider heals it.
    except Exception as e:  # noqa: BLE001
        failed = error_row(e, attempt=1, stage=f"synthesis {spec.canonical}", keys=[(call.item["item_id"], spec.id)])
        return call.row | failed | {"latency_s": time.perf_counter() - started}
    return _finish(call, spec, provider, audio, attempt, time.perf_counter() - started, settings, store, cache)


def _batched(
    provider: Any,
    spec: Spec,
    calls: list[_Call],
    settings: Settings,
    store: ArtifactStore,
    cache: RequestCache,
    slot: Callable[[], Any],
) -> list[dict[str, Any]]:
    """Calls of a provider that speaks batches (`synthesize_batch`, e.g. a transformers model on a GPU), in
    batches of its `batch_size`. A batch that fails is asked again one item at a time, so each item's row says
    what happened to it."""
    size = max(1, int(getattr(provider, "batch_size", 8)))
    rows = []
    for start in range(0, len(calls), size):
        chunk = calls[start : start + size]
        started = time.perf_counter()
        try:
            with slot():
                audios = one_per_request(
                    provider.synthesize_batch(
                        [c.item["text"] for c in chunk],
                        [c.item["language"] for c in chunk],
                        [c.instruction for c in chunk],
                    ),
                    chunk,
                    spec.canonical,
                )
        except Exception as e:  # noqa: BLE001 - each item is tried on its own below and gets its own row
            logger().warning(
                f"synthesis {spec.canonical}: a batch of {len(chunk)} failed ({type(e).__name__}: "
                f"{str(e)[:200]}); trying its items one at a time"
            )
            rows += [_one_at_a_time(provider, spec, c, settings, store, cache, slot) for c in chunk]
            continue
        latency = (time.perf_counter() - started) / len(chunk)  # the batch's wall time, shared evenly
        rows += [_finish(c, spec, provider, a, 1, latency, settings, store, cache) for c, a in zip(chunk, audios)]
    return rows


def synthesize_rows(
    provider: Any,
    spec: Spec,
    items: list[dict[str, Any]],
    settings: Settings,
    store: ArtifactStore,
    slot: Callable[[], Any] = contextlib.nullcontext,
) -> list[dict[str, Any]]:
    """One synthesis row per item, in order. Provider failures become the rows' status; they never escape (store
    errors do, so Prefect retries the task). `slot` is entered around every provider call (a vendor's shared
    concurrency and rate limit).

    With `reuse_audio`, a request already answered in any run of this store (same spec, engine version, text,
    language and instruction) reuses that audio: nightly re-runs of unchanged engines cost nothing, and a
    sampling engine (Piper) gives the same clip each night.
    """
    cache = synthesis_cache(store)
    prepared = [_prepare(provider, spec, item, settings, cache) for item in items]
    calls = [p for p in prepared if isinstance(p, _Call)]
    if clones(provider):
        for call in calls:
            if call.item.get("prompt_audio_sha256"):
                call.prompt = VoicePrompt(
                    Audio.from_wav_bytes(store.get_audio(call.item["prompt_audio_sha256"])),
                    call.item.get("prompt_text"),
                )
    prompted = any(c.prompt is not None for c in calls)  # batches carry no prompts: those go one at a time
    if callable(getattr(provider, "synthesize_batch", None)) and len(calls) > 1 and not prompted:
        made = iter(_batched(provider, spec, calls, settings, store, cache, slot))
    else:
        made = iter([_one_at_a_time(provider, spec, c, settings, store, cache, slot) for c in calls])
    return [next(made) if isinstance(p, _Call) else p for p in prepared]


def synthesize_items(settings: Settings, run_id: str, shard: dict[str, Any]) -> StageResult:
    """Synthesize `shard['items']` with `shard['system']`, commit one part, and hand ok clips to the next stages.

    A shard whose rows an earlier attempt already committed (its worker died before the next stage took the
    result, so Dask ran it again) is answered from that part: no provider call, no second part."""
    started = time.perf_counter()
    spec = Spec.parse(shard["system"])
    store = get_store(settings.store, settings.store_wait_s)
    label = attempt_label(spec.id, [(i["item_id"], spec.id) for i in shard["items"]])
    attempted = earlier_attempt(store, run_id, "synthesis", label)
    earlier = {r["item_id"]: r for r in attempted if not r["retryable"]}
    again = {(r["item_id"], spec.id) for r in attempted if r["retryable"] and r["item_id"] not in earlier}
    items = [i for i in shard["items"] if i["item_id"] not in earlier]
    rows: list[dict[str, Any]] = []
    if items and settings.lease_token is not None:
        store.check_fence(run_id, settings.lease_token)  # a writer that lost its lease calls no (paid) provider
    if items:
        try:
            provider = get_provider("tts", spec.canonical, settings)
        # The engine cannot start (a missing extra or program, a voice not installed, a model that fails to load):
        # every item says why. Retryable unless the provider calls it permanent, because the fix (install the
        # extra, the voice) changes nothing in the rows' keys, so only a retryable row lets the next run pick the
        # items up.
        except Exception as e:  # noqa: BLE001
            failed = error_row(
                e,
                attempt=1,
                stage=f"synthesis {spec.canonical} (engine start)",
                keys=[(i["item_id"], spec.id) for i in items],
            )
            rows = [
                {"item_id": i["item_id"], "system_id": spec.id, "system_spec": spec.canonical, "created_at": now()}
                | failed
                for i in items
            ]
        else:
            rows = synthesize_rows(provider, spec, items, settings, store, slot=vendor_gate(settings, spec.provider))
    part, statuses = commit(
        store,
        run_id,
        "synthesis",
        rows,
        label=label,
        looked=True,
        replaces={(i["item_id"], spec.id) for i in items if i.get("replaces")} | again,
        fence=settings.lease_token,
    )
    if earlier:
        logger().info(
            f"synthesis {spec.canonical} shard {shard['index']}/{shard['of']}: {len(earlier)} row(s) "
            "committed by an earlier attempt of this shard, taken as they are (no call)"
        )
    by_id = {i["item_id"]: i for i in shard["items"]}
    work = [
        {
            "item_id": r["item_id"],
            "system_id": r["system_id"],
            "audio_sha256": r["audio_sha256"],
            "language": by_id[r["item_id"]]["language"],
            "text": by_id[r["item_id"]]["text"],
        }
        for r in [*earlier.values(), *rows]
        if r["status"] == "ok"
    ]
    return StageResult(
        "synthesis",
        f"{spec.canonical} shard {shard['index']}/{shard['of']}",
        len(rows),
        statuses,
        part,
        time.perf_counter() - started,
        work,
    )


@task(name="synthesize", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def synthesize_task(settings: Settings, run_id: str, shard: dict[str, Any]) -> StageResult:
    result = synthesize_items(settings, run_id, shard)
    logger().info(result.describe())
    return result
