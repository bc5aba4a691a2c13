"""GeminiJudge through the real google-genai client against tests/support/fake_gemini.py on loopback (no mocks)."""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

import pytest
import soundfile as sf

from tests.support.fake_gemini import INSTRUCTION_OK, PAIRWISE_OK, REFUSAL_TEXT, FakeGemini, Reply
from tests.support.judge_requests import KEY, answer, instruction, judge, pair
from ttseval.core.audio import Audio
from ttseval.core.errors import MissingKeyError, SpecError
from ttseval.providers.judges.gemini import GeminiJudge
from ttseval.providers.judges.prompts import instruction_prompt, pairwise_prompt

HOLD_S = 120  # a generous bound on any one wait of the concurrency test; reached only when something is wrong


@pytest.fixture
def fake():
    with FakeGemini() as server:
        yield server


# (1) ------------------------------------------------------------------------------------------------------------
def test_batch_with_injected_errors_and_malformed_output(fake: FakeGemini) -> None:
    # Per item: (script, expected winner or None, transport retries, re-asks)
    plan = {
        0: ([Reply.ok(answer("clip_1", 3, 1))], "first", 0, 0),
        1: ([Reply.rate_limited("0"), Reply.ok(answer("clip_2", 1, 2))], "second", 1, 0),
        2: ([Reply.error(500), Reply.error(503), Reply.ok(answer("tie", 2, 2))], "tie", 2, 0),
        3: ([Reply.malformed(), Reply.ok(answer("clip_1", 2.5, 0.5))], "first", 0, 1),
        4: ([Reply.malformed(), Reply.malformed(), Reply.malformed()], None, 0, 2),
        5: (
            [Reply.rate_limited("0"), Reply.malformed(), Reply.error(500), Reply.ok(answer("clip_2", 0, 3))],
            "second",
            2,
            1,
        ),
    }
    for i, (script, *_rest) in plan.items():
        fake.script(f"<item-{i}>", script)

    verdicts = judge(fake, max_attempts="3").judge_pairs([pair(i) for i in plan])

    assert len(verdicts) == len(plan)
    assert fake.pending() == {}  # every scripted reply was used, none twice
    for i, v in enumerate(verdicts):
        _script, winner, retries, reasks = plan[i]
        assert v.winner == winner, i
        assert v.retries == retries, i
        assert v.attempts == 1 + reasks, i
        if winner is None:
            assert not v.parse_ok and v.error.startswith("unparseable output after 3 attempt(s)")
            assert v.raw_response == Reply.malformed().text
        else:
            assert v.parse_ok and v.error is None
            assert json.loads(v.raw_response)["winner"] == {"first": "clip_1", "second": "clip_2"}.get(winner, winner)
    assert verdicts[3].score_first == 2.5 and verdicts[3].score_second == 0.5
    assert {v.served_model for v in verdicts} == {"fake"}  # the fake's modelVersion, as Gemini's answers name it
    n_reasks = sum(p[3] for p in plan.values())
    assert fake.ok_responses == len(plan) + n_reasks
    injected = fake.status_counts[429] + fake.status_counts[500] + fake.status_counts[503]
    assert injected == 5
    assert sum(v.retries for v in verdicts) == injected
    assert fake.total_requests == fake.ok_responses + injected


def test_retries_exhausted_and_non_retryable_statuses(fake: FakeGemini) -> None:
    fake.script("<item-0>", [Reply.error(503)] * 3)
    fake.script("<item-1>", [Reply.error(400, message="Invalid value at 'contents'")])
    fake.script("<item-2>", [Reply.error(403, message="Permission denied")])
    v0, v1, v2 = judge(fake, max_retries="2").judge_pairs([pair(0), pair(1), pair(2)])

    assert (v0.parse_ok, v0.winner, v0.retries, v0.attempts) == (False, None, 2, 0)
    assert v0.error.startswith("Gemini HTTP 503 UNAVAILABLE") and "gave up after 2 retries" in v0.error
    assert (v1.parse_ok, v1.retries, v1.attempts) == (False, 0, 0)
    assert v1.error.startswith("Gemini HTTP 400 INVALID_ARGUMENT") and "not retried" in v1.error
    assert v2.error.startswith("Gemini HTTP 403 PERMISSION_DENIED") and v2.retries == 0
    assert fake.status_counts == {503: 3, 400: 1, 403: 1}
    # No answer came for any of them: the stage records failed rows that the next run asks again.
    assert (v0.transient, v1.transient, v2.transient) == (True, True, True)


def test_retry_after_and_retry_info_are_honoured(fake: FakeGemini) -> None:
    retry_info = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "quota",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.3s"}],
        }
    }
    fake.script("<item-0>", [Reply.rate_limited("0.3")])
    fake.script("<item-1>", [Reply(status=429, body=retry_info)])
    j = judge(fake, concurrency="1")
    for i in (0, 1):
        start = time.monotonic()
        (v,) = j.judge_pairs([pair(i)])
        assert v.parse_ok and v.retries == 1
        assert time.monotonic() - start >= 0.3  # backoff_s alone would wait ~0.01 s


def test_timeout_is_retried(fake: FakeGemini) -> None:
    fake.script("<item-0>", [Reply.ok(PAIRWISE_OK, delay_s=1.5)])
    (v,) = judge(fake, timeout_s="0.5").judge_pairs([pair(0)])
    assert v.parse_ok and v.retries == 1 and v.attempts == 1


def test_a_reset_in_the_middle_of_the_body_is_retried(fake: FakeGemini) -> None:
    fake.script("<item-0>", [Reply.ok(PAIRWISE_OK, cut_after=60), Reply.ok(PAIRWISE_OK)])
    (v,) = judge(fake).judge_pairs([pair(0)])
    assert v.parse_ok and v.retries == 1 and v.attempts == 1 and fake.status_counts[200] == 2


# (2) ------------------------------------------------------------------------------------------------------------
def _camel(obj: Any, *, in_properties: bool = False) -> Any:
    """Field names in the REST docs' lowerCamelCase (the API accepts proto field names in either spelling; the
    SDK sends some nested ones snake_case). Property names inside a schema's `properties` are data, kept."""
    if isinstance(obj, list):
        return [_camel(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        name = k if in_properties else re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k)
        out[name] = _camel(v, in_properties=(name == "properties" and not in_properties))
    return out


def _inline(audio: Audio) -> dict[str, Any]:
    # google-genai encodes bytes as URL-safe base64; proto JSON accepts both alphabets.
    return {"inlineData": {"mimeType": "audio/wav", "data": base64.urlsafe_b64encode(audio.to_wav_bytes()).decode()}}


def test_pairwise_payload_matches_documented_shape(fake: FakeGemini) -> None:
    req = pair(0)
    judge(fake, temperature="0.2", thinking_budget="1024", max_output_tokens="4096").judge_pairs([req])

    (sent,) = fake.requests
    assert sent.path == "/v1beta/models/gemini-2.5-pro:generateContent"
    assert sent.headers["x-goog-api-key"] == KEY
    body = _camel(sent.body)
    schema = body["generationConfig"].pop("responseSchema")
    assert body == {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": pairwise_prompt(req.text, req.category, req.rubric)},
                    {"text": "Clip 1:"},
                    _inline(req.first),
                    {"text": "Clip 2:"},
                    _inline(req.second),
                ],
            }
        ],
        "generationConfig": {
            "temperature": 0.2,
            "maxOutputTokens": 4096,
            "responseMimeType": "application/json",
            "thinkingConfig": {"thinkingBudget": 1024},
        },
    }
    assert schema["type"] == "OBJECT"
    assert schema["required"] == ["clip_1_score", "clip_2_score", "winner"]
    assert schema["properties"]["winner"]["enum"] == ["clip_1", "clip_2", "tie"]
    assert schema["propertyOrdering"][-1] == "winner"  # reasoning is generated before the verdict
    # The audio is a real 16-bit WAV of the clip, one per clip, in presentation order.
    (mime1, wav1), (mime2, wav2) = sent.audio_parts()
    assert mime1 == mime2 == "audio/wav" and wav1[:4] == b"RIFF" and wav1[8:12] == b"WAVE"
    data, rate = sf.read(io.BytesIO(wav1), dtype="float32")
    assert rate == 16000 and len(data) == len(req.first.samples)
    assert wav1 != wav2 and wav2 == req.second.to_wav_bytes()


def test_instruction_payload_matches_documented_shape(fake: FakeGemini) -> None:
    req = instruction(0)
    judge(fake, api_version="v1").judge_instructions([req])

    (sent,) = fake.requests
    assert sent.path == "/v1/models/gemini-2.5-pro:generateContent"
    assert _camel(sent.body) == {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": instruction_prompt(req.text, req.instruction, req.task)},
                    _inline(req.audio),
                ],
            }
        ],
        "generationConfig": {
            "temperature": 0.0,
            "maxOutputTokens": 2048,
            "responseMimeType": "application/json",
            "responseSchema": {
                "type": "OBJECT",
                "title": "InstructionAnswer",
                "properties": {
                    "reasoning": {"type": "STRING", "title": "Reasoning", "default": ""},
                    "follows": {"type": "BOOLEAN", "title": "Follows"},
                },
                "propertyOrdering": ["reasoning", "follows"],
                "required": ["follows"],
            },
        },
    }


# (3) ------------------------------------------------------------------------------------------------------------
def test_truncated_json_is_repaired(fake: FakeGemini) -> None:
    full = json.dumps(answer("clip_2", 1, 3))
    assert full.endswith('"clip_2"}')
    cut_in_verdict = len(full) - 2  # '..."winner": "clip_2' : the closing quote and brace are lost
    fake.script("<item-0>", [Reply.truncated(answer("clip_2", 1, 3), cut_in_verdict)])
    # Cut before the winner: not repairable into a verdict, so the judge asks again.
    fake.script("<item-1>", [Reply.truncated(PAIRWISE_OK, 60), Reply.ok(answer("tie", 2, 2))])
    fake.script("<item-2>", [Reply.truncated(PAIRWISE_OK, 60)] * 2)
    v0, v1, v2 = judge(fake, max_attempts="2").judge_pairs([pair(0), pair(1), pair(2)])

    assert (v0.parse_ok, v0.winner, v0.attempts, v0.score_second) == (True, "second", 1, 3.0)
    assert v0.raw_response == full[:cut_in_verdict]
    assert (v1.parse_ok, v1.winner, v1.attempts) == (True, "tie", 2)
    assert not v2.parse_ok and "MAX_TOKENS" in v2.error and v2.attempts == 2


# (4) ------------------------------------------------------------------------------------------------------------
def test_token_usage_and_cost(fake: FakeGemini) -> None:
    fake.script(
        "<item-0>",
        [
            Reply.malformed(prompt_tokens=1000, output_tokens=50),
            Reply.ok(PAIRWISE_OK, prompt_tokens=12345, output_tokens=678, thoughts_tokens=1000),
        ],
    )
    (v,) = judge(fake, input_usd_per_mtok="2.0", output_usd_per_mtok="12.0").judge_pairs([pair(0)])
    assert v.attempts == 2
    assert v.input_tokens == 13345  # 1000 + 12345
    assert v.output_tokens == 1728  # 50 + 678 + 1000 thinking tokens (billed as output)
    # 13345 * 2.0 = 26690; 1728 * 12.0 = 20736; (26690 + 20736) / 1e6
    assert v.cost_usd == pytest.approx(0.047426, abs=1e-12)


def test_cost_unknown_without_usage(fake: FakeGemini) -> None:
    body = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": json.dumps(PAIRWISE_OK)}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ]
    }
    fake.script("<item-0>", [Reply(body=body)])
    (v,) = judge(fake).judge_pairs([pair(0)])
    assert v.parse_ok and v.input_tokens is None and v.output_tokens is None and v.cost_usd is None


# (5) ------------------------------------------------------------------------------------------------------------
def test_api_key_never_leaks(fake: FakeGemini) -> None:
    fake.script("<item-1>", [Reply.error(403, message=f"API key {KEY} is not allowed here")])
    fake.script("<item-2>", [Reply.malformed()] * 3)
    j = judge(fake)
    verdicts = j.judge_pairs([pair(0), pair(1), pair(2)])
    assert verdicts[1].error and "***" in verdicts[1].error
    surfaces = [json.dumps(j.metadata()), j.judge_id, repr(j), str(j), j.spec, repr(j.options)]
    surfaces += [json.dumps(asdict(v)) for v in verdicts] + [repr(v) for v in verdicts]
    for text in surfaces:
        assert KEY not in text
    assert j.metadata()["endpoint_host"] == fake.base_url.removeprefix("http://")
    assert all(r.headers["x-goog-api-key"] == KEY for r in fake.requests)


def test_api_key_from_environment_read_once(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "from-google-var")
    j = GeminiJudge(base_url=fake.base_url)
    monkeypatch.setenv("GOOGLE_API_KEY", "changed-later")
    j.judge_pairs([pair(0)])
    assert fake.requests[0].headers["x-goog-api-key"] == "from-google-var"

    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini-var")  # GEMINI_API_KEY wins
    GeminiJudge(base_url=fake.base_url).judge_pairs([pair(1)])
    assert fake.requests[1].headers["x-goog-api-key"] == "from-gemini-var"


def test_missing_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiJudge()


# (6) ------------------------------------------------------------------------------------------------------------
def test_judge_id_tracks_prompt_and_generation_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    base = GeminiJudge(api_key=KEY, temperature="0").judge_id
    assert base.startswith("gemini-gemini-2-5-pro-")
    assert GeminiJudge(api_key=KEY).judge_id == base  # "0", "0.0" and the default are one setting
    assert GeminiJudge(api_key="another-key", temperature="0.0", concurrency="9", max_retries="1").judge_id == base
    assert GeminiJudge(api_key=KEY, temperature="0.7").judge_id != base
    assert GeminiJudge(api_key=KEY, thinking_budget="1024").judge_id != base
    assert GeminiJudge(api_key=KEY, max_output_tokens="4096").judge_id != base
    assert GeminiJudge("gemini-2.5-flash", api_key=KEY).judge_id != base
    monkeypatch.setattr(GeminiJudge, "prompt_version", "pairwise-v2")
    assert GeminiJudge(api_key=KEY).judge_id != base


def test_built_from_a_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    from ttseval.providers.judges import JUDGES

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    j = JUDGES.build("gemini:gemini-2.5-pro:temperature=0:thinking_budget=1024")
    assert isinstance(j, GeminiJudge) and j.options.thinking_budget == 1024 and j.model == "gemini-2.5-pro"
    assert j.spec == "gemini:gemini-2.5-pro:temperature=0:thinking_budget=1024"
    with pytest.raises(SpecError, match="valid options: .*thinking_budget"):
        JUDGES.build("gemini:gemini-2.5-pro:temprature=0")
    with pytest.raises(SpecError, match="concurrency='none'"):
        JUDGES.build("gemini:concurrency=none")


# (7) ------------------------------------------------------------------------------------------------------------
def test_instruction_verdicts_and_refusal(fake: FakeGemini) -> None:
    fake.script("<ins-0>", [Reply.ok(INSTRUCTION_OK | {"follows": True})])
    fake.script("<ins-1>", [Reply.ok({"reasoning": "pitch is high, not low", "follows": False})])
    fake.script("<ins-2>", [Reply.refusal()] * 2)
    safety = {
        "candidates": [{"finishReason": "SAFETY", "index": 0}],
        "usageMetadata": {"promptTokenCount": 900, "totalTokenCount": 900},
    }
    fake.script("<ins-3>", [Reply(body=safety)] * 2)
    v0, v1, v2, v3 = judge(fake, max_attempts="2").judge_instructions([instruction(i) for i in range(4)])

    assert (v0.follows, v0.parse_ok, v0.reasoning) == (True, True, INSTRUCTION_OK["reasoning"])
    assert (v1.follows, v1.parse_ok, v1.reasoning) == (False, True, "pitch is high, not low")
    assert (v2.follows, v2.parse_ok, v2.attempts, v2.raw_response) == (None, False, 2, REFUSAL_TEXT)
    assert v2.error.startswith("unparseable output after 2 attempt(s)")
    assert (v3.follows, v3.parse_ok, v3.raw_response) == (None, False, None)
    assert "finish_reason=SAFETY" in v3.error and v3.input_tokens == 1800 and v3.output_tokens is None
    # A refusal and a blocked answer are the model's answers, final; only a transport failure is transient.
    assert [v.transient for v in (v0, v1, v2, v3)] == [False, False, False, False]


# (8) ------------------------------------------------------------------------------------------------------------
def test_concurrency_limit() -> None:
    """Replies are held until three requests are in flight at once, so reaching the limit does not depend on how
    fast the fake answers; the fourth can only be sent once one of the three is answered."""
    release = threading.Event()

    def hold(request: object) -> None:  # runs in the fake's handler thread, before the default reply is chosen
        if not release.wait(HOLD_S):
            raise AssertionError(f"the test did not release the held replies within {HOLD_S} s")
        return None

    with FakeGemini(responder=hold) as held, ThreadPoolExecutor(1) as pool:
        run = pool.submit(judge(held, concurrency="3").judge_pairs, [pair(i) for i in range(6)])
        try:
            deadline = time.monotonic() + HOLD_S
            while held.in_flight < 3:
                assert time.monotonic() < deadline, f"only {held.in_flight} request(s) in flight after {HOLD_S} s"
                assert not run.done(), f"the batch ended before 3 requests were in flight: {run.result()}"
                time.sleep(0.01)  # polls a condition, with the deadline above
            # three requests received and none answered: the limit is reached whatever the speed of either side
            assert (held.in_flight, len(held.requests), held.calls) == (3, 3, 0)
        finally:
            release.set()  # also on a failure above, so the pool's thread can end
        verdicts = run.result(timeout=HOLD_S)
        assert all(v.parse_ok for v in verdicts)
        assert held.max_in_flight == 3
        assert held.total_requests == 6  # one request per comparison, each item asked once
        assert sorted(r.texts()[0] for r in held.requests) == sorted(
            pairwise_prompt(pair(i).text, "questions", "intonation") for i in range(6)
        )


def test_order_empty_batch_and_pickling(fake: FakeGemini) -> None:
    for i in range(5):
        fake.script(f"<item-{i}>", [Reply.ok(answer("clip_1" if i % 2 else "clip_2", 1, 1), delay_s=0.05 * (5 - i))])
    j = judge(fake)
    assert j.judge_pairs([]) == []
    verdicts = j.judge_pairs([pair(i) for i in range(5)])
    assert [v.winner for v in verdicts] == ["second", "first", "second", "first", "second"]
    copy = pickle.loads(pickle.dumps(j))
    assert copy.judge_id == j.judge_id and copy.judge_pairs([pair(9)])[0].parse_ok


def test_a_gate_is_held_around_every_call_retries_included_and_not_pickled(fake: FakeGemini) -> None:
    import contextlib
    import threading

    entered, exited, lock = [0], [0], threading.Lock()

    @contextlib.contextmanager
    def gate():
        with lock:
            entered[0] += 1
        try:
            yield
        finally:
            with lock:
                exited[0] += 1

    fake.script("<item-0>", [Reply.error(503), Reply.rate_limited("0"), Reply.ok(answer("clip_1", 3, 1))])
    j = judge(fake, concurrency="4")
    j.limit_calls(gate)
    verdicts = j.judge_pairs([pair(i) for i in range(4)])
    assert [v.parse_ok for v in verdicts] == [True] * 4 and verdicts[0].retries == 2
    # 3 first-time calls + 1 call made 3 times: every HTTP exchange held the gate, and released it
    assert entered[0] == exited[0] == fake.total_requests == 6
    copy = pickle.loads(pickle.dumps(j))  # the gate belongs to the process that set it
    assert copy._llm.gate is None and copy.judge_pairs([pair(5)])[0].parse_ok and entered[0] == 6


def test_self_consistency_majority_agreement_and_samples_cached_by_index(fake: FakeGemini, tmp_path) -> None:
    from ttseval.core.store import ArtifactStore
    from ttseval.tasks.llm import cached_generate

    with pytest.raises(ValueError, match="samples=3 needs temperature > 0"):
        judge(fake, samples="3")
    one, two, tie = (Reply.ok(answer(w, s, 3 - s)) for w, s in (("clip_1", 3), ("clip_2", 1), ("tie", 2)))
    fake.script("<item-0>", [one, two, one, one, two])  # samples 0-2 now, 3-4 later
    fake.script("<item-1>", [one, tie, two])
    store = ArtifactStore(str(tmp_path))
    j = judge(fake, samples="3", temperature="0.7")
    j.route_calls(lambda llm, requests: cached_generate(store, llm, requests))
    first, split = j.judge_pairs([pair(0), pair(1)])
    assert (first.winner, first.samples, first.sample_agreement) == ("first", 3, pytest.approx(2 / 3))
    assert first.score_first == pytest.approx((3 + 1 + 3) / 3)  # the mean of the parsed samples' scores
    assert (split.winner, split.sample_agreement) == ("tie", pytest.approx(1 / 3))  # 1-1-1: no majority
    assert fake.total_requests == 6 and first.cost_usd == pytest.approx(3 * (1000 * 1.25 + 50 * 10.0) / 1e6)
    # five samples: 0-2 come from the store, only 3 and 4 are asked (and paid)
    more = judge(fake, samples="5", temperature="0.7")
    more.route_calls(lambda llm, requests: cached_generate(store, llm, requests))
    [v] = more.judge_pairs([pair(0)])
    assert fake.total_requests == 8 and v.samples == 5 and v.winner == "first"
    assert v.sample_agreement == pytest.approx(3 / 5) and v.cost_usd == pytest.approx(2 * (1000 * 1.25 + 500) / 1e6)
    assert more.judge_id != j.judge_id != judge(fake, temperature="0.7").judge_id
    assert judge(fake).judge_id == judge(fake, samples="1").judge_id  # one sample keeps the ids judges had


def test_sampled_scores_average_only_the_samples_that_scored_both_clips(fake: FakeGemini) -> None:
    # The answer schema lets a sample score one clip and give null for the other: such a sample counts for the
    # winner but not for the mean scores, which average the samples that scored both (by hand: (2 + 3) / 2 = 2.5 and
    # (1 + 2) / 2 = 1.5), rather than failing on the null.
    fake.script(
        "<item-0>",
        [Reply.ok(answer("clip_1", 3, None)), Reply.ok(answer("clip_1", 2, 1)), Reply.ok(answer("clip_1", 3, 2))],
    )
    fake.script("<item-1>", [Reply.ok(answer("clip_2", None, 3))] * 3)
    both, none = judge(fake, samples="3", temperature="0.7").judge_pairs([pair(0), pair(1)])
    assert (both.winner, both.samples, both.sample_agreement) == ("first", 3, pytest.approx(1.0))
    assert (both.score_first, both.score_second) == (pytest.approx(2.5), pytest.approx(1.5))
    assert (none.winner, none.score_first, none.score_second) == ("second", None, None)


def test_self_consistency_of_instruction_verdicts(fake: FakeGemini) -> None:
    yes, no = Reply.ok(INSTRUCTION_OK), Reply.ok(INSTRUCTION_OK | {"follows": False})
    fake.script("<ins-0>", [yes, no, yes])
    fake.script("<ins-1>", [yes, no, Reply.ok("no verdict here")] + [Reply.ok("still none")] * 2)
    first, split = judge(fake, samples="3", temperature="1").judge_instructions([instruction(0), instruction(1)])
    assert (first.follows, first.sample_agreement, first.samples) == (True, pytest.approx(2 / 3), 3)
    assert split.follows is None and split.sample_agreement == pytest.approx(1 / 2)  # 1 yes, 1 no, 1 unparsed
