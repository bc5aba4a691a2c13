"""GeminiLLM through the real google-genai client against tests/support/fake_gemini.py on loopback (no mocks)."""

from __future__ import annotations

import io
import json
import pickle
import time
from dataclasses import asdict

import pytest
import soundfile as sf
from pydantic import BaseModel

from tests.support.fake_gemini import REFUSAL_TEXT, FakeGemini, GeminiRequest, Reply
from tests.support.fake_http import wav
from ttseval.core.errors import MissingKeyError
from ttseval.core.protocols import LLM, LLMRequest
from ttseval.providers.llm.gemini import GeminiLLM, retry_delay_s

KEY = "AIzaFAKE-llm-secret-key-0123456789"


class Questions(BaseModel):
    questions: list[str]
    language: str = "en"


ANSWER = {"questions": ["Is it raining?", "Will it snow?", "How warm is it?"], "language": "en"}


def llm(fake: FakeGemini, model: str = "gemini-2.5-flash", **options: str) -> GeminiLLM:
    opts = {"backoff_s": "0.01", "base_url": fake.base_url} | options
    return GeminiLLM(model, api_key=KEY, **opts)


def ask(marker: str, schema: type[BaseModel] | None = Questions, **kw) -> LLMRequest:
    return LLMRequest(parts=(f"<{marker}> Write three questions about the weather.",), schema=schema, **kw)


@pytest.fixture
def fake():
    with FakeGemini(
        responder=lambda r: ANSWER if "questions" in (r.response_schema() or {}).get("properties", {}) else None
    ) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)


# -- the request on the wire, the answer parsed --------------------------------------------------------------------
def test_structured_output_and_request_on_the_wire(fake: FakeGemini) -> None:
    fake.script("<q0>", [Reply.ok(ANSWER, prompt_tokens=120, output_tokens=30)])
    client = llm(fake, thinking_budget="512", max_output_tokens="1000")
    assert isinstance(client, LLM)
    (r,) = client.generate([ask("q0", system="You write short questions.", temperature=0.25)])

    assert r.ok and r.failure is None and r.error is None
    assert isinstance(r.data, Questions) and r.data.questions == ANSWER["questions"]
    assert json.loads(r.raw) == ANSWER and r.finish_reason == "STOP" and r.model == "gemini-2.5-flash"
    assert (r.attempts, r.retries, r.input_tokens, r.output_tokens) == (1, 0, 120, 30)

    (sent,) = fake.requests
    assert sent.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent.headers["x-goog-api-key"] == KEY
    assert sent.text() == "<q0> Write three questions about the weather."
    assert sent.system_text() == "You write short questions."
    config = sent.generation_config
    assert config["temperature"] == 0.25  # the request's temperature beats the client's default
    assert config["maxOutputTokens"] == 1000
    assert config["responseMimeType"] == "application/json"
    # The SDK sends some nested field names snake_case; the API accepts either spelling.
    assert config["thinkingConfig"] in ({"thinkingBudget": 512}, {"thinking_budget": 512})
    schema = sent.response_schema()
    assert schema["type"] == "OBJECT" and schema["title"] == "Questions"
    assert schema["properties"]["questions"]["type"] == "ARRAY" and schema["required"] == ["questions"]


def test_free_text_request_sends_no_schema_and_default_temperature(fake: FakeGemini) -> None:
    (r,) = llm(fake, temperature="0.7", api_version="v1").generate([ask("t0", schema=None)])
    assert r.ok and r.data == "ok"  # the fake's default answer for a request without a schema
    (sent,) = fake.requests
    assert sent.path == "/v1/models/gemini-2.5-flash:generateContent"
    assert sent.system_text() is None and sent.response_schema() is None
    assert sent.generation_config == {"temperature": 0.7, "maxOutputTokens": 4096}


def test_audio_parts_arrive_inline_and_identical(fake: FakeGemini) -> None:
    clip1, clip2 = wav(440), wav(660, duration_s=0.3)
    req = LLMRequest(parts=("Describe clip 1:", clip1, "and clip 2:", clip2), schema=Questions)
    (r,) = llm(fake).generate([req])
    assert r.ok
    (sent,) = fake.requests
    assert sent.texts() == ["Describe clip 1:", "and clip 2:"]
    assert [p.get("inlineData", p.get("inline_data")) is not None for p in sent.parts] == [False, True, False, True]
    (mime1, got1), (mime2, got2) = sent.audio_parts()
    assert mime1 == mime2 == "audio/wav"
    assert got1 == clip1 and got2 == clip2
    data, rate = sf.read(io.BytesIO(got2), dtype="float32")
    assert rate == 16000 and len(data) == int(0.3 * 16000)


# -- transport retries -------------------------------------------------------------------------------------------
def test_rate_limit_with_retry_after_is_waited_and_counted(fake: FakeGemini) -> None:
    fake.script("<r0>", [Reply.rate_limited("0.3"), Reply.ok(ANSWER)])
    start = time.monotonic()
    (r,) = llm(fake).generate([ask("r0")])
    assert r.ok and (r.retries, r.attempts) == (1, 1)
    assert time.monotonic() - start >= 0.3  # backoff_s alone would wait ~0.01 s
    assert fake.status_counts == {429: 1, 200: 1}


def test_a_reset_in_the_middle_of_the_body_is_retried(fake: FakeGemini) -> None:
    fake.script("<reset>", [Reply.ok(ANSWER, cut_after=40), Reply.ok(ANSWER)])
    (r,) = llm(fake).generate([ask("reset")])
    assert r.ok, r.error
    assert r.retries == 1 and fake.status_counts[200] == 2


def test_server_errors_are_retried(fake: FakeGemini) -> None:
    fake.script("<r1>", [Reply.error(500), Reply.error(503), Reply.ok(ANSWER)])
    (r,) = llm(fake).generate([ask("r1")])
    assert r.ok and (r.retries, r.attempts) == (2, 1)
    assert fake.status_counts == {500: 1, 503: 1, 200: 1}


def test_client_error_is_not_retried(fake: FakeGemini) -> None:
    fake.script("<r2>", [Reply.error(400, message="Invalid value at 'contents'"), Reply.ok(ANSWER)])
    (r,) = llm(fake).generate([ask("r2")])
    assert not r.ok and r.failure == "transport" and (r.retries, r.attempts) == (0, 0)
    assert r.error.startswith("Gemini HTTP 400 INVALID_ARGUMENT") and "not retried" in r.error
    assert fake.total_requests == 1 and fake.pending() == {"<r2>": 1}


def test_retries_exhausted(fake: FakeGemini) -> None:
    fake.script("<r3>", [Reply.error(503)] * 3)
    (r,) = llm(fake, max_retries="2").generate([ask("r3")])
    assert not r.ok and r.failure == "transport" and r.retries == 2
    assert r.error.startswith("Gemini HTTP 503 UNAVAILABLE") and "gave up after 2 retries" in r.error


def test_retry_delay_from_retry_info_detail() -> None:
    details = {
        "error": {"code": 429, "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}
    }
    assert retry_delay_s(None, details) == 1.5
    assert retry_delay_s(None, {"error": {"code": 429}}) is None


# -- re-asks, refusals ---------------------------------------------------------------------------------------------
def test_malformed_twice_then_ok(fake: FakeGemini) -> None:
    fake.script("<m0>", [Reply.malformed(), Reply.malformed(), Reply.ok(ANSWER)])
    (r,) = llm(fake).generate([ask("m0")])
    assert r.ok and (r.attempts, r.retries) == (3, 0) and r.data.questions == ANSWER["questions"]


def test_malformed_three_times_is_unparseable(fake: FakeGemini) -> None:
    fake.script("<m1>", [Reply.malformed()] * 3)
    (r,) = llm(fake).generate([ask("m1")])
    assert not r.ok and r.failure == "unparseable" and r.attempts == 3 and r.data is None
    assert r.error.startswith("unparseable output after 3 attempt(s)") and "no JSON object" in r.error
    assert r.raw == Reply.malformed().text and fake.ok_responses == 3


def test_plain_text_apology_is_a_final_refusal(fake: FakeGemini) -> None:
    fake.script("<f0>", [Reply.refusal()] * 3)
    (r,) = llm(fake).generate([ask("f0")])
    assert not r.ok and r.failure == "refusal" and r.attempts == 1 and r.raw == REFUSAL_TEXT
    assert r.error.startswith("refusal: I'm sorry")
    assert fake.total_requests == 1


def test_blocked_prompt_is_a_refusal(fake: FakeGemini) -> None:
    fake.script("<f1>", [Reply.blocked("PROHIBITED_CONTENT", prompt_tokens=77)] * 2)
    (r,) = llm(fake).generate([ask("f1")])
    assert not r.ok and r.failure == "refusal" and r.attempts == 1 and r.raw is None
    assert "prompt blocked: PROHIBITED_CONTENT" in r.error
    assert (r.input_tokens, r.output_tokens) == (77, None) and fake.total_requests == 1


def test_safety_finish_is_a_refusal(fake: FakeGemini) -> None:
    fake.script("<f2>", [Reply.ok("", finish_reason="SAFETY", output_tokens=0)] * 2)
    (r,) = llm(fake).generate([ask("f2")])
    assert not r.ok and r.failure == "refusal" and r.finish_reason == "SAFETY"
    assert r.error == "refusal: finish_reason=SAFETY" and fake.total_requests == 1


# -- usage and cost ------------------------------------------------------------------------------------------------
def test_tokens_summed_across_attempts_and_priced(fake: FakeGemini) -> None:
    fake.script(
        "<u0>",
        [
            Reply.malformed(prompt_tokens=1000, output_tokens=50),
            Reply.ok(ANSWER, prompt_tokens=2000, output_tokens=300, thoughts_tokens=700),
        ],
    )
    (r,) = llm(fake, input_usd_per_mtok="0.5", output_usd_per_mtok="4").generate([ask("u0")])
    assert r.ok and r.attempts == 2
    assert r.input_tokens == 3000  # 1000 + 2000
    assert r.output_tokens == 1050  # 50 + 300 + 700 thinking tokens (billed as output)
    # 3000 * 0.5 = 1500; 1050 * 4 = 4200; (1500 + 4200) / 1e6
    assert r.cost_usd == pytest.approx(0.0057, abs=1e-12)


def test_default_prices_are_flash_list_prices(fake: FakeGemini) -> None:
    fake.script("<u1>", [Reply.ok(ANSWER, prompt_tokens=1_000_000, output_tokens=1_000_000)])
    (r,) = llm(fake).generate([ask("u1")])
    assert r.cost_usd == pytest.approx(0.30 + 2.50)


# -- secrets, identity, pickling, concurrency ------------------------------------------------------------------------
def test_api_key_never_in_error_text_or_metadata(fake: FakeGemini) -> None:
    def echo_key(request: GeminiRequest) -> Reply:
        return Reply.error(403, message=f"API key {request.headers['x-goog-api-key']} is not allowed here")

    with FakeGemini(responder=echo_key) as echo:
        client = llm(echo)
        (r,) = client.generate([ask("k0")])
        assert echo.requests[0].headers["x-goog-api-key"] == KEY  # the fake did see (and echo) the key
    assert r.failure == "transport" and r.error.startswith("Gemini HTTP 403") and "***" in r.error
    surfaces = [
        r.error,
        json.dumps(asdict(r), default=str),
        repr(r),
        json.dumps(client.metadata()),
        client.llm_id,
        repr(client),
        client.spec,
        repr(client.options),
    ]
    for text in surfaces:
        assert KEY not in text


def test_key_from_environment_and_missing_key(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingKeyError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiLLM()
    monkeypatch.setenv("GOOGLE_API_KEY", "from-google-var")
    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini-var")  # GEMINI_API_KEY wins
    GeminiLLM(base_url=fake.base_url).generate([ask("e0")])
    assert fake.requests[0].headers["x-goog-api-key"] == "from-gemini-var"


def test_llm_id_tracks_generation_settings_only() -> None:
    base = GeminiLLM(api_key=KEY)
    assert base.model == "gemini-2.5-flash" and base.llm_id.startswith("gemini-gemini-2-5-flash-")
    assert GeminiLLM(api_key="other", temperature="1.0", concurrency="9", max_retries="1").llm_id == base.llm_id
    assert GeminiLLM(api_key=KEY, temperature="0.2").llm_id != base.llm_id
    assert GeminiLLM(api_key=KEY, thinking_budget="0").llm_id != base.llm_id
    assert GeminiLLM(api_key=KEY, max_output_tokens="100").llm_id != base.llm_id
    assert GeminiLLM("gemini-2.5-pro", api_key=KEY).llm_id != base.llm_id
    meta = base.metadata()
    assert meta["endpoint_host"] == "generativelanguage.googleapis.com" and meta["llm_id"] == base.llm_id
    assert (meta["input_usd_per_mtok"], meta["output_usd_per_mtok"]) == (0.30, 2.50)
    with pytest.raises(ValueError, match="valid options: .*thinking_budget"):
        GeminiLLM(api_key=KEY, thinking_budjet="1")


def test_pickle_round_trip_then_call(fake: FakeGemini) -> None:
    client = llm(fake)
    assert client.generate([ask("p0")])[0].ok  # builds the SDK client
    copy = pickle.loads(pickle.dumps(client))
    assert copy.llm_id == client.llm_id and copy._client is None
    (r,) = copy.generate([ask("p1")])
    assert r.ok and r.data.questions == ANSWER["questions"] and fake.total_requests == 2


def test_concurrency_limit_and_order() -> None:
    with FakeGemini(delay_s=0.3, responder=lambda r: {"questions": [r.text()[:4]]}) as slow:
        results = llm(slow, concurrency="3").generate([ask(f"c{i}") for i in range(7)])
        assert [r.data.questions for r in results] == [[f"<c{i}>"] for i in range(7)]  # answers in request order
        assert 1 < slow.max_in_flight <= 3
        assert slow.total_requests == 7
        assert llm(slow).generate([]) == [] and slow.total_requests == 7
