"""Every LLM call goes through here: answered by the store's call cache when the same request was made before.

Cache key = sha256 of (llm_id, the request's identity: text parts, audio sha256, output schema, system text,
temperature, sample). An entry is written the moment its call returns, so a run interrupted mid-way resumes
with only the unfinished calls. Answers are cached whatever they were (valid, refused, unparseable): the model
said it, and re-asking is a new request (bump `sample`); a judge's unparseable answers are the exception
(`keep_unparseable`). Transport failures are not cached, so the next run tries them again. Entries are documents
of the store's one request cache (ttseval.core.cache), namespace `llm/<llm_id>`:

    cache/llm/<llm_id>/<key[:2]>/<key>.json
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from ttseval.core.cache import RequestCache
from ttseval.core.ids import digest
from ttseval.core.protocols import LLM, LLMRequest, LLMResult
from ttseval.core.store import ArtifactStore
from ttseval.tasks.logs import logger
from ttseval.tasks.parts import now

_RESULT_FIELDS = (
    "ok",
    "raw",
    "failure",
    "error",
    "finish_reason",
    "attempts",
    "retries",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "model",
    "served_model",  # absent from entries cached before it was recorded: None
)


def request_key(llm: LLM, request: LLMRequest) -> str:
    return digest({"llm_id": llm.llm_id, "request": request.identity()})


def call_cache(store: ArtifactStore, llm: LLM) -> RequestCache:
    """The answered calls of one model (its `llm_id`) in this store."""
    return RequestCache(store, f"llm/{llm.llm_id}")


@dataclass
class CallStats:
    """Calls made and answered from the cache; tokens and cost of the calls actually made."""

    made: int = 0
    cached: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, result: LLMResult) -> None:
        with self._lock:
            if result.cached:
                self.cached += 1
                return
            self.made += 1
            self.failed += not result.ok
            self.input_tokens += result.input_tokens or 0
            self.output_tokens += result.output_tokens or 0
            self.cost_usd += result.cost_usd or 0.0

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("made", "cached", "failed", "input_tokens", "output_tokens", "cost_usd")}


def _load(cache: RequestCache, key: str, request: LLMRequest) -> LLMResult | None:
    """The cached answer, or None: absent, or unreadable (a damaged entry is asked again and rewritten)."""
    entry = cache.get(key)
    if entry is None:
        return None
    try:
        fields = entry["result"]
        data = entry.get("data")
        if fields["ok"] and request.schema is not None:
            data = request.schema.model_validate(data)
        return LLMResult(**{k: fields.get(k) for k in _RESULT_FIELDS}, data=data, cached=True, extra={"key": key})
    except (ValueError, KeyError, TypeError) as e:
        logger().warning("LLM cache entry %s is unreadable (%s); asking again", cache.path(key), e)
        return None


def _save(cache: RequestCache, llm: LLM, key: str, request: LLMRequest, result: LLMResult) -> None:
    data = result.data.model_dump(mode="json") if hasattr(result.data, "model_dump") else result.data
    entry = {
        "key": key,
        "llm_id": llm.llm_id,
        "spec": llm.spec,
        "request": request.identity(),
        "result": {k: getattr(result, k) for k in _RESULT_FIELDS},
        "data": data,
        "created_at": now().isoformat(),
    }
    cache.put(key, entry)


def cached_generate(
    store: ArtifactStore,
    llm: LLM,
    requests: list[LLMRequest],
    stats: CallStats | None = None,
    *,
    keep_unparseable: bool = True,
) -> list[LLMResult]:
    """One result per request, in order, each with its cache key in `extra["key"]`. Cache lookups and calls run
    with the client's concurrency; identical requests in one batch are asked once. `keep_unparseable` False: an
    answer in the wrong shape is not cached, so the next run asks again (a judge's samples: a server answering in
    the wrong shape, once fixed, heals the run)."""
    keys = [request_key(llm, r) for r in requests]
    cache = call_cache(store, llm)
    first = {k: i for i, k in reversed(list(enumerate(keys)))}

    def answer(i: int) -> LLMResult:
        result = _load(cache, keys[i], requests[i])
        if result is None:
            result = llm.generate([requests[i]])[0]
            result.extra["key"] = keys[i]
            kept = result.failure != "transport" and (keep_unparseable or result.failure != "unparseable")
            if kept:  # saved here, at once: a crash elsewhere loses no finished call
                _save(cache, llm, keys[i], requests[i], result)
        return result

    todo = sorted(first.values())
    workers = max(1, min(getattr(getattr(llm, "options", None), "concurrency", 1), len(todo) or 1))
    answered: dict[int, LLMResult] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-call") as pool:
        futures = {pool.submit(answer, i): i for i in todo}
        try:
            for future in as_completed(futures):
                answered[futures[future]] = future.result()
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # interrupted: calls not yet started are not made
            raise
    results = [answered[first[k]] for k in keys]
    made = sum(not r.cached for r in answered.values())
    if made:
        logger().info("%s: %d call(s) made, %d answered from the cache", llm.spec, made, len(answered) - made)
    if stats is not None:
        for r in answered.values():
            stats.add(r)
    return results
