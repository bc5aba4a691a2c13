"""The core's one retry policy (ttseval.core.retry) and one request cache (ttseval.core.cache)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttseval.core.cache import RequestCache
from ttseval.core.errors import RetriesExhausted, TransientProviderError
from ttseval.core.retry import RetryPolicy
from ttseval.core.store import ArtifactStore


def is_transient(e: BaseException) -> bool:
    return isinstance(e, TransientProviderError)


def failing(n: int, error: Exception, calls: list[int]):
    """A call that raises `error` on its first `n` tries, then returns the number of tries."""

    def fn() -> int:
        calls.append(1)
        if len(calls) <= n:
            raise error
        return len(calls)

    return fn


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (RetryPolicy(max_retries=4, base_s=0.5, cap_s=3.0), [0.5, 1.0, 2.0, 3.0]),  # doubling, then the cap
        (RetryPolicy(max_retries=2, base_s=1.0), [1.0, 2.0]),  # settings' defaults: item_retries=2, 1 s
        (RetryPolicy(max_retries=3, base_s=0.0), [0.0, 0.0, 0.0]),  # tests' setting: no waiting
        (RetryPolicy(max_retries=0), []),
    ],
)
def test_delays_are_exponential_without_jitter_and_capped(policy: RetryPolicy, expected: list[float]) -> None:
    assert policy.delays() == expected
    assert policy.max_attempts == len(expected) + 1


def test_retry_after_replaces_the_exponential_delay_and_is_capped() -> None:
    policy = RetryPolicy(max_retries=3, base_s=1.0, cap_s=10.0)
    assert (policy.delay_s(3), policy.delay_s(3, retry_after_s=0.25), policy.delay_s(1, retry_after_s=90)) == (
        4.0,
        0.25,
        10.0,
    )
    with pytest.raises(ValueError, match="start at 1"):
        policy.delay_s(0)
    with pytest.raises(ValueError, match=">= 0"):
        RetryPolicy(max_retries=-1)


def test_call_retries_transient_errors_with_the_policy_delays() -> None:
    slept: list[float] = []
    calls: list[int] = []
    seen: list[tuple[int, float]] = []
    policy = RetryPolicy(max_retries=3, base_s=0.5)
    value, attempts = policy.call(
        failing(2, TransientProviderError("503"), calls),
        is_transient,
        on_retry=lambda e, n, d: seen.append((n, d)),
        sleep=slept.append,
    )
    assert (value, attempts, len(calls)) == (3, 3, 3)
    assert slept == [0.5, 1.0] and seen == [(1, 0.5), (2, 1.0)]


def test_call_gives_up_after_the_budget_with_the_last_error_and_the_count() -> None:
    calls: list[int] = []
    slept: list[float] = []
    error = TransientProviderError("still 503")
    with pytest.raises(RetriesExhausted) as info:
        RetryPolicy(max_retries=2, base_s=1.0).call(failing(10, error, calls), is_transient, sleep=slept.append)
    assert (info.value.last, info.value.attempts, info.value.retries, len(calls)) == (error, 3, 2, 3)
    assert info.value.__cause__ is error and slept == [1.0, 2.0]
    assert str(info.value) == "TransientProviderError: still 503 (gave up after 2 retries)"


def test_call_spends_a_budget_shared_with_earlier_calls_and_reads_retry_after() -> None:
    class Throttled(Exception):
        delay_s = 0.125

    calls: list[int] = []
    slept: list[float] = []
    with pytest.raises(RetriesExhausted) as info:
        RetryPolicy(max_retries=3, base_s=1.0).call(
            failing(10, Throttled(), calls),
            lambda e: isinstance(e, Throttled),
            retries_used=2,
            retry_after=lambda e: e.delay_s,
            sleep=slept.append,
        )
    assert (len(calls), slept, info.value.retries) == (2, [0.125], 3)  # one retry left of three


def test_call_lets_other_errors_through_at_once() -> None:
    calls: list[int] = []
    with pytest.raises(TypeError):
        RetryPolicy(max_retries=5, base_s=0.0).call(failing(1, TypeError("bug"), calls), is_transient)
    assert len(calls) == 1


def test_request_cache_round_trip_layout_and_damage(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = ArtifactStore(str(tmp_path))
    cache = RequestCache(store, "llm/gemini-abc12345")
    key = "ab" + "0" * 62
    assert (cache.get(key), cache.exists(key)) == (None, False)
    cache.put(key, {"b": 2, "a": [1, "é"]})
    path = tmp_path / "cache" / "llm" / "gemini-abc12345" / "ab" / f"{key}.json"
    assert path.read_text(encoding="utf-8") == '{"a":[1,"é"],"b":2}'  # canonical JSON, the documented layout
    assert cache.exists(key) and cache.get(key) == {"a": [1, "é"], "b": 2}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind

    path.write_text('{"a": [1,', encoding="utf-8")  # a damaged entry is a miss, said once in the log
    assert cache.get(key) is None and "is damaged" in caplog.text
    path.write_text("[1, 2]", encoding="utf-8")
    assert cache.get(key) is None


def test_an_entry_written_before_the_merge_still_hits(tmp_path: Path) -> None:
    """The synthesis reuse cache wrote json.dumps(...) at cache/synthesis/<key[:2]>/<key>.json: still read."""
    key = "cd" + "1" * 62
    old = tmp_path / "cache" / "synthesis" / "cd" / f"{key}.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"audio_sha256": "f" * 64, "status": "ok", "duration_s": 1.5}))
    assert RequestCache(ArtifactStore(str(tmp_path)), "synthesis").get(key) == {
        "audio_sha256": "f" * 64,
        "status": "ok",
        "duration_s": 1.5,
    }


@pytest.mark.parametrize("bad", ["", "/abs", "a/../b", "a//b", "."])
def test_namespaces_and_keys_cannot_leave_the_cache_folder(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="namespace"):
        RequestCache(ArtifactStore(str(tmp_path)), bad)
    with pytest.raises(ValueError, match="hex digest"):
        RequestCache(ArtifactStore(str(tmp_path)), "synthesis").path("../../x")
