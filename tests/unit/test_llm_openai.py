"""OpenAICompatLLM through the real openai client against tests/support/fake_openai.py on loopback (no mocks)."""

from __future__ import annotations

import logging
import pickle
import time

import pytest
from pydantic import BaseModel

from tests.support.fake_http import wav
from tests.support.fake_openai import REFUSAL_TEXT, FakeOpenAI, Reply
from ttseval.core.errors import MissingKeyError
from ttseval.core.protocols import LLM, LLMRequest
from ttseval.providers.llm.base import retry_after_s as retry_delay_s
from ttseval.providers.llm.openai_compat import OpenAICompatLLM

KEY = "sk-FAKE-secret-key-0123456789abcdef"


class Questions(BaseModel):
    questions: list[str]
    language: str = "en"


def llm(fake: FakeOpenAI, model: str = "gpt-4.1-mini", **options: str) -> OpenAICompatLLM:
    opts = {"backoff_s": "0.01", "base_url": fake.base_url} | options
    return OpenAICompatLLM(model, api_key=KEY, **opts)


def ask(marker: str, schema: type[BaseModel] | None = Questions, **kw) -> LLMRequest:
    return LLMRequest(parts=(f"<{marker}> Write three questions about the weather.",), schema=schema, **kw)


ANSWER = {"questions": ["Is it raining?", "Will it snow?", "How warm is it?"], "language": "en"}


@pytest.fixture
def fake():
    with FakeOpenAI(api_key=KEY) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


# -- the request on the wire, the answer parsed --------------------------------------------------------------------
def test_structured_output_and_request_on_the_wire(fake: FakeOpenAI) -> None:
    fake.script("<q0>", [Reply.ok(ANSWER, prompt_tokens=120, completion_tokens=30)])
    client = llm(fake, temperature="0.3", max_output_tokens="512", seed="7")
    assert isinstance(client, LLM)

    [result] = client.generate([ask("q0", system="You write quiz questions.")])

    assert result.ok, result.error
    assert isinstance(result.data, Questions)
    assert result.data == Questions(**ANSWER)
    assert (result.attempts, result.retries, result.failure, result.error) == (1, 0, None, None)
    assert (result.input_tokens, result.output_tokens, result.finish_reason) == (120, 30, "stop")
    assert result.model == "gpt-4.1-mini"

    [req] = fake.requests
    assert req.model == "gpt-4.1-mini"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.system_text() == "You write quiz questions."
    assert req.text() == "<q0> Write three questions about the weather."
    assert req.body["temperature"] == 0.3
    assert req.body["max_tokens"] == 512
    assert req.body["seed"] == 7
    assert req.body.get("stream") in (None, False)
    assert req.response_format() == {
        "type": "json_schema",
        "json_schema": {"name": "Questions", "schema": Questions.model_json_schema(), "strict": False},
    }
    assert req.messages[0] == {"role": "system", "content": "You write quiz questions."}


def test_model_option_holds_colons_and_token_limit_field_is_chosen(fake: FakeOpenAI) -> None:
    from ttseval.providers.llm import LLMS

    # An Ollama-style name cannot sit in the spec's model slot (':' splits it); model= carries it.
    fake.script("<q9>", [Reply.ok(ANSWER)])
    client = LLMS.build(
        f"openai:model=qwen2.5:7b:base_url={fake.base_url}:token_limit_field=max_completion_tokens"
        ":max_output_tokens=256",
        api_key=KEY,
    )
    [result] = client.generate([ask("q9")])
    assert result.ok and client.model == "qwen2.5:7b" and result.model == "qwen2.5:7b"
    [req] = fake.requests
    assert req.model == "qwen2.5:7b"
    assert req.body["max_completion_tokens"] == 256 and "max_tokens" not in req.body
    assert client.llm_id != LLMS.build(f"openai:model=qwen2.5:14b:base_url={fake.base_url}", api_key=KEY).llm_id


def test_request_temperature_overrides_default_and_no_schema_means_free_text(fake: FakeOpenAI) -> None:
    fake.script("<free>", [Reply.ok("Just some prose.")])
    [result] = llm(fake, temperature="1.0").generate([ask("free", schema=None, temperature=0.0)])
    assert result.ok and result.data == "Just some prose."
    [req] = fake.requests
    assert req.body["temperature"] == 0.0
    assert req.response_format() is None
    assert "seed" not in req.body
    assert [m["role"] for m in req.messages] == ["user"]


def test_json_object_and_none_modes(fake: FakeOpenAI) -> None:
    fake.script("<jo>", [Reply.ok(ANSWER)])
    [result] = llm(fake, json_mode="json_object").generate([ask("jo")])
    assert result.ok and result.data.questions == ANSWER["questions"]
    assert fake.requests[-1].response_format() == {"type": "json_object"}

    fake.script("<nm>", [Reply.ok("```json\n" + '{"questions": ["a?"]}' + "\n```")])
    [result] = llm(fake, json_mode="none").generate([ask("nm")])
    assert result.ok and result.data == Questions(questions=["a?"])
    assert fake.requests[-1].response_format() is None


def test_audio_arrives_as_input_audio_byte_identical(fake: FakeOpenAI) -> None:
    clip1, clip2 = wav(440), wav(660, duration_s=0.3)
    fake.script("<cap>", [Reply.ok({"questions": ["What is the pitch?"]})])
    request = LLMRequest(parts=("<cap> Caption these.", "Clip 1:", clip1, "Clip 2:", clip2), schema=Questions)

    [result] = llm(fake).generate([request])

    assert result.ok, result.error
    [req] = fake.requests
    assert req.audio_parts() == [clip1, clip2]
    assert req.audio_formats() == ["wav", "wav"]
    assert [p["type"] for p in req.user_parts()] == ["text", "text", "input_audio", "text", "input_audio"]
    assert req.text() == "<cap> Caption these.\nClip 1:\nClip 2:"


# -- transport retries -------------------------------------------------------------------------------------------
def test_429_with_retry_after_then_ok(fake: FakeOpenAI) -> None:
    fake.script("<rl>", [Reply.error(429, retry_after="0.2"), Reply.ok(ANSWER)])
    start = time.monotonic()
    [result] = llm(fake).generate([ask("rl")])
    assert result.ok and (result.retries, result.attempts) == (1, 1)
    assert time.monotonic() - start >= 0.2  # the server's Retry-After, not the 0.01 s backoff
    assert fake.status_counts[429] == 1 and fake.ok_responses == 1


def test_retry_after_ms_is_honoured(fake: FakeOpenAI) -> None:
    fake.script("<ms>", [Reply.error(429, retry_after_ms="150"), Reply.ok(ANSWER)])
    start = time.monotonic()
    [result] = llm(fake).generate([ask("ms")])
    assert result.ok and result.retries == 1
    assert time.monotonic() - start >= 0.15


def test_retry_delay_parsing() -> None:
    assert retry_delay_s({"retry-after-ms": "250"}) == 0.25
    assert retry_delay_s({"retry-after": "3"}) == 3.0
    assert retry_delay_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # a date in the past
    assert retry_delay_s({"retry-after": "soon"}) is None
    assert retry_delay_s({}) is None and retry_delay_s(None) is None


@pytest.mark.parametrize("statuses", [[500], [502], [503], [500, 502, 503], [408, 504]])
def test_server_errors_then_ok(fake: FakeOpenAI, statuses: list[int]) -> None:
    fake.script("<5xx>", [Reply.error(s) for s in statuses] + [Reply.ok(ANSWER)])
    [result] = llm(fake).generate([ask("5xx")])
    assert result.ok, result.error
    assert (result.retries, result.attempts) == (len(statuses), 1)
    assert fake.calls == len(statuses) + 1
    assert fake.pending() == {}


def test_400_is_a_transport_failure_without_retry(fake: FakeOpenAI) -> None:
    fake.script("<bad>", [Reply.error(400, message="Invalid schema for response_format 'Questions'.")])
    [result] = llm(fake).generate([ask("bad")])
    assert not result.ok and result.failure == "transport"
    assert result.error.startswith("OpenAI HTTP 400: Invalid schema for response_format")
    assert result.error.endswith("(not retried)")
    assert (result.retries, result.attempts, fake.calls) == (0, 0, 1)


def test_retries_exhausted(fake: FakeOpenAI) -> None:
    fake.script("<down>", [Reply.error(503)] * 10)
    [result] = llm(fake, max_retries="3").generate([ask("down")])
    assert not result.ok and result.failure == "transport"
    assert "OpenAI HTTP 503" in result.error and "gave up after 3 retries" in result.error
    assert result.retries == 3 and fake.calls == 4


def test_connection_refused_is_retried_then_gives_up() -> None:
    with FakeOpenAI() as server:
        base_url = server.base_url  # a port nothing listens on once the server stops
    client = OpenAICompatLLM("m", api_key=KEY, base_url=base_url, backoff_s="0.01", max_retries="2")
    [result] = client.generate([ask("gone")])
    assert not result.ok and result.failure == "transport"
    assert "OpenAI transport: APIConnectionError" in result.error and "gave up after 2 retries" in result.error


def test_timeout_is_retried(fake: FakeOpenAI) -> None:
    fake.script("<slow>", [Reply.ok(ANSWER, delay_s=1.0), Reply.ok(ANSWER)])
    [result] = llm(fake, timeout_s="0.3").generate([ask("slow")])
    assert result.ok, result.error
    assert result.retries == 1


def test_a_reset_in_the_middle_of_the_body_is_retried(fake: FakeOpenAI) -> None:
    fake.script("<reset>", [Reply.ok(ANSWER, cut_after=40), Reply.ok(ANSWER)])
    [result] = llm(fake).generate([ask("reset")])
    assert result.ok, result.error
    assert result.retries == 1 and fake.status_counts[200] == 2


def test_a_200_that_is_not_json_is_retried(fake: FakeOpenAI) -> None:
    fake.script(
        "<html>",
        [
            Reply(raw_body=b"<html>gateway</html>", content_type="text/html"),
            Reply(raw_body=b'{"choices": [', content_type="application/json"),
            Reply.ok(ANSWER),
        ],
    )
    [result] = llm(fake).generate([ask("html")])
    assert result.ok, result.error
    assert (result.retries, result.attempts) == (2, 1)


# -- re-asks and refusals -------------------------------------------------------------------------------------------
def test_malformed_twice_then_valid(fake: FakeOpenAI) -> None:
    fake.script("<mal>", [Reply.malformed(), Reply.malformed(), Reply.ok(ANSWER)])
    [result] = llm(fake, max_attempts="3").generate([ask("mal")])
    assert result.ok, result.error
    assert (result.attempts, result.retries) == (3, 0)


def test_always_malformed_is_unparseable(fake: FakeOpenAI) -> None:
    fake.script("<junk>", [Reply.malformed()] * 5)
    [result] = llm(fake, max_attempts="3").generate([ask("junk")])
    assert not result.ok and result.failure == "unparseable"
    assert result.error.startswith("unparseable output after 3 attempt(s)")
    assert result.attempts == 3 and fake.calls == 3
    assert result.raw == Reply.malformed().content


def test_refusal_field_is_final(fake: FakeOpenAI) -> None:
    fake.script("<ref>", [Reply.refusal("I can't assist with that request."), Reply.ok(ANSWER)])
    [result] = llm(fake).generate([ask("ref")])
    assert not result.ok and result.failure == "refusal"
    assert "I can't assist with that request." in result.error
    assert result.attempts == 1 and fake.calls == 1
    assert fake.pending() == {"<ref>": 1}


def test_content_filter_is_a_refusal(fake: FakeOpenAI) -> None:
    fake.script("<cf>", [Reply.content_filter()])
    [result] = llm(fake).generate([ask("cf")])
    assert not result.ok and result.failure == "refusal"
    assert "content_filter" in result.error
    assert result.finish_reason == "content_filter" and fake.calls == 1


def test_plain_apology_is_a_refusal(fake: FakeOpenAI) -> None:
    fake.script("<sorry>", [Reply.apology(), Reply.ok(ANSWER)])
    [result] = llm(fake).generate([ask("sorry")])
    assert not result.ok and result.failure == "refusal"
    assert REFUSAL_TEXT in result.error
    assert fake.calls == 1


# -- usage and cost -------------------------------------------------------------------------------------------------
def test_tokens_summed_over_attempts_and_cost(fake: FakeOpenAI) -> None:
    fake.script(
        "<cost>",
        [
            Reply.malformed(prompt_tokens=1000, completion_tokens=200),
            Reply.error(500),
            Reply.ok(ANSWER, prompt_tokens=1500, completion_tokens=300),
        ],
    )
    client = llm(fake, input_usd_per_mtok="0.4", output_usd_per_mtok="1.6")
    [result] = client.generate([ask("cost")])
    assert result.ok
    assert (result.input_tokens, result.output_tokens) == (2500, 500)
    # 2500 * 0.4 / 1e6 + 500 * 1.6 / 1e6 = 0.001 + 0.0008
    assert result.cost_usd == pytest.approx(0.0018)
    assert (result.attempts, result.retries) == (2, 1)


# -- the key -----------------------------------------------------------------------------------------------------
def test_key_never_leaks(fake: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    fake.script("<leak>", [Reply.error(400, message="rejected", echo_auth=True)])
    fake.script("<leak-retry>", [Reply.error(503, message="busy", echo_auth=True)] * 3)
    client = llm(fake, max_retries="2")
    results = client.generate([ask("leak"), ask("leak-retry")])
    for r in results:
        assert not r.ok and r.failure == "transport"
        # the fake echoed "Bearer <key>" into the error message; what comes out has it masked
        assert KEY not in r.error and "Bearer ***" in r.error, r.error
    assert fake.calls == 4
    assert "retry 1/2" in caplog.text and KEY not in caplog.text
    assert KEY not in repr(client) and KEY not in str(client.metadata())
    assert KEY not in str(client.__dict__.get("options"))
    assert KEY not in repr(client._api_key)


def test_key_from_environment(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = OpenAICompatLLM("m", base_url=fake.base_url)
    [result] = client.generate([ask("env", schema=None)])
    assert result.ok and result.data == "ok"
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_no_key_with_base_url_sends_placeholder() -> None:
    with FakeOpenAI() as server:
        client = OpenAICompatLLM("Qwen2.5-7B-Instruct", base_url=server.base_url, backoff_s="0.01")
        [result] = client.generate([ask("local", schema=None)])
        assert result.ok and result.data == "ok"
        assert server.requests[0].headers["authorization"] == "Bearer EMPTY"
        assert server.requests[0].model == "Qwen2.5-7B-Instruct"


def test_wrong_key_is_401_not_retried(fake: FakeOpenAI) -> None:
    client = OpenAICompatLLM("m", api_key="sk-wrong-key-42", base_url=fake.base_url, backoff_s="0.01")
    [result] = client.generate([ask("auth")])
    assert not result.ok and result.failure == "transport"
    assert result.error.startswith("OpenAI HTTP 401: Incorrect API key provided.")
    assert "sk-wrong-key-42" not in result.error and fake.calls == 1


def test_responder_after_scripts_before_default() -> None:
    def responder(request):
        text = request.text()
        if "<dict>" in text:
            return {"questions": ["from a dict?"]}
        if "<str>" in text:
            return '{"questions": ["from a str?"]}'
        if "<reply>" in text:
            return Reply.error(400, message="from a Reply")
        return None

    with FakeOpenAI(responder) as server:
        server.script("<dict>", [Reply.ok({"questions": ["scripted?"]})])
        client = OpenAICompatLLM(base_url=server.base_url, backoff_s="0.01", max_attempts="1", concurrency="1")
        results = client.generate([ask("dict"), ask("dict"), ask("str"), ask("reply"), ask("other", schema=None)])
    assert [r.data.questions[0] for r in results[:3]] == ["scripted?", "from a dict?", "from a str?"]
    assert results[3].failure == "transport" and "from a Reply" in results[3].error
    assert results[4].data == "ok"


def test_no_key_without_base_url_is_an_error() -> None:
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        OpenAICompatLLM("gpt-4.1-mini")


def test_default_json_answer_needs_defaults_to_validate() -> None:
    class Loose(BaseModel):
        note: str = ""

    with FakeOpenAI() as server:
        client = OpenAICompatLLM(base_url=server.base_url, backoff_s="0.01", max_attempts="1", concurrency="1")
        [loose, strict] = client.generate([ask("a", schema=Loose), ask("b", schema=Questions)])
    assert loose.ok and loose.data == Loose()
    assert not strict.ok and strict.failure == "unparseable"  # `{}` lacks the required `questions`


# -- options, identity, pickling -------------------------------------------------------------------------------------
def test_unknown_or_invalid_option() -> None:
    with pytest.raises(ValueError, match="unknown openai option.*'colour'"):
        OpenAICompatLLM("m", api_key=KEY, colour="blue")
    with pytest.raises(ValueError, match="json_mode"):
        OpenAICompatLLM("m", api_key=KEY, json_mode="xml")


def test_identity_and_metadata() -> None:
    a = OpenAICompatLLM(api_key=KEY)
    assert a.model == "gpt-4.1-mini" and a.spec == "openai"
    assert a.llm_id.startswith("openai-gpt-4-1-mini-")
    b = OpenAICompatLLM("gpt-4.1-mini", api_key=KEY, temperature="0")
    c = OpenAICompatLLM("gpt-4.1-mini", api_key=KEY, concurrency="16", max_retries="9")
    other_server = OpenAICompatLLM("gpt-4.1-mini", api_key=KEY, base_url="http://h:1/v1")
    d = OpenAICompatLLM("gpt-4.1-mini", api_key=KEY, json_mode="json_object")
    e = OpenAICompatLLM("gpt-4.1-mini", api_key=KEY, seed="1")
    assert a.llm_id != b.llm_id and a.llm_id != d.llm_id and a.llm_id != e.llm_id
    assert a.llm_id == c.llm_id  # plumbing options do not change answers
    assert a.llm_id != other_server.llm_id  # another server may serve other weights under the same name
    assert c.spec.startswith("openai:gpt-4.1-mini:")

    # The URL goes into the spec, and so into tables and logs: credentials in it are refused.
    with pytest.raises(ValueError, match="base_url must not hold credentials"):
        OpenAICompatLLM("Qwen2.5-7B-Instruct", base_url="http://user:pw@10.0.0.5:8000/v1")
    local = OpenAICompatLLM("Qwen2.5-7B-Instruct", base_url="http://10.0.0.5:8000/v1")
    meta = local.metadata()
    assert meta["endpoint_host"] == "10.0.0.5:8000"
    assert meta["sdk"].startswith("openai ") and meta["provider"] == "openai"
    assert meta["llm_id"] == local.llm_id and meta["json_mode"] == "json_schema"
    assert a.metadata()["endpoint_host"] == "api.openai.com"


def test_an_unexpected_sdk_error_fails_that_request_only(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    client = llm(fake)
    real = client._send

    def flaky(request: LLMRequest):
        if "<boom>" in request.text:
            raise AttributeError("'NoneType' object has no attribute 'content'")
        return real(request)

    monkeypatch.setattr(client, "_send", flaky)
    fake.script("<ok>", [Reply.ok(ANSWER)])
    boom, ok = client.generate([ask("boom"), ask("ok")])
    assert (boom.ok, boom.failure) == (False, "transport")
    assert boom.error == "unexpected AttributeError: 'NoneType' object has no attribute 'content'"
    assert ok.ok and ok.data == Questions(**ANSWER)


def test_pickle_round_trip(fake: FakeOpenAI) -> None:
    client = llm(fake)
    [_first] = client.generate([ask("p1")])  # builds the SDK client
    assert client._client is not None
    copy = pickle.loads(pickle.dumps(client))
    assert copy._client is None and copy.llm_id == client.llm_id and copy.spec == client.spec
    fake.script("<p2>", [Reply.ok(ANSWER)])
    [result] = copy.generate([ask("p2")])
    assert result.ok and fake.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_concurrency_is_bounded() -> None:
    with FakeOpenAI(api_key=KEY, delay_s=0.1) as server:
        client = OpenAICompatLLM(api_key=KEY, base_url=server.base_url, concurrency="3")
        results = client.generate([ask(f"c{i}", schema=None) for i in range(9)])
    assert all(r.ok for r in results)
    assert 1 < server.max_in_flight <= 3
    assert server.calls == 9


def test_results_in_request_order_with_mixed_outcomes(fake: FakeOpenAI) -> None:
    fake.script("<m0>", [Reply.ok({"questions": ["zero?"]})])
    fake.script("<m1>", [Reply.error(429, retry_after="0"), Reply.ok({"questions": ["one?"]})])
    fake.script("<m2>", [Reply.error(404, message="The model `x` does not exist")])
    fake.script("<m3>", [Reply.malformed(), Reply.ok({"questions": ["three?"]})])
    results = llm(fake, concurrency="4").generate([ask(f"m{i}") for i in range(4)])
    assert [r.data.questions[0] if r.ok else r.failure for r in results] == ["zero?", "one?", "transport", "three?"]
    assert "OpenAI HTTP 404" in results[2].error
    assert fake.pending() == {}
    assert llm(fake).generate([]) == []
