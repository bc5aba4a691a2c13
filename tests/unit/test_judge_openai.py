"""OpenAIJudge through the official openai client against tests/support/fake_openai.py on loopback (no mocks): the
request shape of an audio chat completion, verdicts, tokens and cost worked by hand, retries, self-hosted use."""

from __future__ import annotations

import json

import pytest

from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.judge_requests import answer, instruction, pair
from ttseval.core.errors import MissingKeyError
from ttseval.providers.judges.openai_audio import OpenAIJudge
from ttseval.providers.judges.prompts import instruction_prompt, pairwise_prompt

KEY = "sk-FAKE-judge-key-0123456789abcdef"


@pytest.fixture
def fake():
    with FakeOpenAI(api_key=KEY) as server:
        yield server


def judge(fake: FakeOpenAI, model: str = "gpt-4o-audio-preview", **options: str) -> OpenAIJudge:
    return OpenAIJudge(model, api_key=KEY, base_url=fake.base_url, backoff_s="0.01", **options)


def test_pairwise_request_matches_the_documented_shape_and_audio_arrives(fake: FakeOpenAI) -> None:
    fake.script("<item-0>", [Reply.ok(answer("clip_2", 1, 3))])
    request = pair(0)
    [verdict] = judge(fake).judge_pairs([request])

    [req] = fake.requests
    body = req.body
    assert body["model"] == "gpt-4o-audio-preview" and body["temperature"] == 0.0 and body["max_tokens"] == 2048
    assert [p["type"] for p in req.user_parts()] == ["text", "text", "input_audio", "text", "input_audio"]
    assert [p.get("text") for p in req.user_parts() if p["type"] == "text"] == [
        pairwise_prompt(request.text, "questions", "intonation"),
        "Clip 1:",
        "Clip 2:",
    ]
    assert req.audio_parts() == [request.first.to_wav_bytes(), request.second.to_wav_bytes()]
    assert req.audio_formats() == ["wav", "wav"]
    schema = body["response_format"]
    assert schema["type"] == "json_schema" and schema["json_schema"]["name"] == "PairwiseAnswer"
    assert "winner" in schema["json_schema"]["schema"]["properties"]
    assert verdict.parse_ok and verdict.winner == "second"
    assert (verdict.score_first, verdict.score_second) == (1, 3)


def test_tokens_and_cost_add_up_by_hand(fake: FakeOpenAI) -> None:
    # Two 0.25 s clips: the fake counts ceil(0.25 s x 10 tokens/s) = 3 audio tokens each, beside 1000 text tokens
    # of prompt, and 50 output tokens. gpt-4o-audio-preview: USD 2.50 / 40 / 10 per million text-in / audio-in / out.
    fake.script("<item-1>", [Reply.ok(answer("clip_1", 3, 1))])
    [v] = judge(fake).judge_pairs([pair(1)])
    assert (v.input_tokens, v.output_tokens) == (1006, 50)
    assert v.cost_usd == pytest.approx((1000 * 2.50 + 6 * 40.0 + 50 * 10.0) / 1e6)  # 0.00324
    # gpt-4o-mini-audio-preview: 0.15 / 10 / 0.60
    fake.script("<item-2>", [Reply.ok(answer("clip_1", 3, 1))])
    [mini] = judge(fake, "gpt-4o-mini-audio-preview").judge_pairs([pair(2)])
    assert mini.cost_usd == pytest.approx((1000 * 0.15 + 6 * 10.0 + 50 * 0.60) / 1e6)
    # the price options win over the list
    fake.script("<item-3>", [Reply.ok(answer("tie", 2, 2))])
    [own] = judge(fake, input_usd_per_mtok="1", audio_input_usd_per_mtok="2", output_usd_per_mtok="4").judge_pairs(
        [pair(3)]
    )
    assert own.cost_usd == pytest.approx((1000 * 1 + 6 * 2 + 50 * 4) / 1e6) and own.winner == "tie"


def test_a_reset_in_the_middle_of_the_body_is_retried(fake: FakeOpenAI) -> None:
    fake.script(
        "<ins-0>",
        [
            Reply.ok({"reasoning": "calm", "follows": True}, cut_after=50),
            Reply.ok({"reasoning": "calm", "follows": True}),
        ],
    )
    (v,) = judge(fake).judge_instructions([instruction(0)])
    assert v.follows is True and v.retries == 1 and v.attempts == 1 and fake.status_counts[200] == 2


def test_instruction_verdicts_retries_and_a_refusal_asked_again(fake: FakeOpenAI) -> None:
    fake.script(
        "<ins-0>", [Reply.error(429, retry_after="0"), Reply.ok({"reasoning": "calm and slow", "follows": True})]
    )
    fake.script("<ins-1>", [Reply.refusal(), Reply.ok({"reasoning": "too fast", "follows": False})])
    fake.script("<ins-2>", [Reply.ok("not json at all")] * 3)
    verdicts = judge(fake).judge_instructions([instruction(0), instruction(1), instruction(2)])
    assert [v.follows for v in verdicts] == [True, False, None]
    assert [v.retries for v in verdicts] == [1, 0, 0] and [v.attempts for v in verdicts] == [1, 2, 3]
    assert not verdicts[2].parse_ok and "unparseable" in verdicts[2].error and not verdicts[2].transient
    first = next(r for r in fake.requests if "<ins-0>" in r.text())
    assert first.user_parts()[0]["text"] == instruction_prompt(instruction(0).text, instruction(0).instruction, "APS")
    assert first.body["response_format"]["json_schema"]["name"] == "InstructionAnswer"


def test_a_self_hosted_omni_model_needs_no_key_and_costs_nothing(fake: FakeOpenAI) -> None:
    with FakeOpenAI() as local:  # any bearer accepted, as vLLM without --api-key
        j = OpenAIJudge("Qwen2.5-Omni-7B", base_url=local.base_url, json_mode="json_object")
        local.script("<item-4>", [Reply.ok(json.dumps(answer("clip_1", 3, 2)))])
        [v] = j.judge_pairs([pair(4)])
        assert v.parse_ok and v.winner == "first" and v.cost_usd == 0.0
        assert local.requests[0].body["response_format"] == {"type": "json_object"}
        assert j.metadata()["endpoint_host"].startswith("127.0.0.1:")
    # one model name on two servers is two judges
    assert j.judge_id != OpenAIJudge("Qwen2.5-Omni-7B", base_url=fake.base_url).judge_id


def test_clear_errors_before_any_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        OpenAIJudge("gpt-4o-audio-preview")
    with pytest.raises(ValueError, match="no list price for 'gpt-9-audio'.*input_usd_per_mtok"):
        OpenAIJudge("gpt-9-audio", api_key=KEY)
    with pytest.raises(ValueError, match="temperature"):
        OpenAIJudge("gpt-4o-audio-preview", api_key=KEY, temperature="hot")


def test_built_from_a_spec_and_gated_like_every_vendor(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    from ttseval.core.config import load_settings
    from ttseval.providers.judges import JUDGES
    from ttseval.tasks.limits import limit_calls

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    built = JUDGES.build(f"openai:gpt-4o-mini-audio-preview:base_url={fake.base_url}:backoff_s=0.01")
    assert isinstance(built, OpenAIJudge) and built.model == "gpt-4o-mini-audio-preview"
    assert built.judge_id.startswith("openai-gpt-4o-mini-audio-preview-")
    limit_calls(built, load_settings(vendor_limits={"openai": {"per_second": 1000.0}}))
    assert built._llm.gate is not None
    fake.script("<item-5>", [Reply.ok(answer("clip_2", 1, 2))])
    assert built.judge_pairs([pair(5)])[0].winner == "second"


def test_dry_run_estimate_uses_each_judges_audio_rate_and_prices(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    from ttseval.core.config import load_settings
    from ttseval.core.store import ArtifactStore
    from ttseval.tasks.cost import JUDGE_PROMPT_TOKENS, estimate_judges

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", "fake-gemini-key")
    # 2 items of 133 words: one minute each at 133 words per minute; 2 candidates and a baseline: 4 pairs of
    # 2 clips, 480 s of audio in all
    items = pd.DataFrame(
        [{"item_id": f"i{k}", "text": " ".join(["word"] * 133), "instruction": None} for k in range(2)]
    )
    estimates = estimate_judges(
        items,
        ["base", "a", "b"],
        "base",
        ["openai:gpt-4o-audio-preview", "gemini"],
        [],
        ArtifactStore(str(tmp_path)),
        "r",
        load_settings(store=str(tmp_path), judge_output_tokens=300, position_audit_share=0),
    )
    openai, gemini = estimates
    assert (openai.calls, openai.audio_s) == (4, pytest.approx(480.0))
    # OpenAI: 10 audio tokens/s at USD 40, the prompt at 2.50, the output at 10, per million tokens
    assert openai.usd == pytest.approx((480 * 10 * 40.0 + 4 * JUDGE_PROMPT_TOKENS * 2.50 + 4 * 300 * 10.0) / 1e6)
    # Gemini 2.5 Pro: 32 tokens/s, all prompt tokens at 1.25, output at 10
    assert gemini.usd == pytest.approx((480 * 32 * 1.25 + 4 * JUDGE_PROMPT_TOKENS * 1.25 + 4 * 300 * 10.0) / 1e6)


def test_an_unreachable_server_is_refused_before_any_work(tmp_path) -> None:
    import socket

    from ttseval.core.config import load_settings
    from ttseval.core.errors import SpecError
    from ttseval.flows.common import check_judges

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = f"openai:Qwen2.5-Omni-7B:base_url=http://127.0.0.1:{port}/v1"
    with pytest.raises(SpecError, match=rf"cannot reach 127.0.0.1:{port}.*start the server or fix base_url"):
        check_judges([spec], load_settings(store=str(tmp_path)))
    with FakeOpenAI() as up:  # the same judge with its server up passes
        assert check_judges([f"openai:Qwen2.5-Omni-7B:base_url={up.base_url}"], load_settings(store=str(tmp_path)))


def test_each_verdict_records_the_model_the_vendor_says_answered_and_the_report_warns_when_it_changed(
    fake: FakeOpenAI,
) -> None:
    """OpenAI answers with the model version it served (`model` of the completion); under a fixed name a vendor
    may serve another version. Each verdict records it, and the report's judge section names it, or warns when a
    judge's verdicts came from more than one."""
    import pandas as pd

    from ttseval.tasks.report.judges import _served_lines

    fake.script("<item-4>", [Reply.ok(answer("clip_1", 3, 1))])
    fake.script("<item-5>", [Reply.ok(answer("clip_1", 3, 1), served_model="gpt-4o-audio-preview-2025-06-03")])
    first, second = judge(fake).judge_pairs([pair(4), pair(5)])
    assert first.served_model == "gpt-4o-audio-preview" and second.served_model == "gpt-4o-audio-preview-2025-06-03"
    one = pd.DataFrame({"served_model": ["gpt-4o-audio-preview"] * 3 + [None]})
    assert _served_lines(one)[0] == "Served model (as the vendor's answers name it): `gpt-4o-audio-preview`."
    two = pd.DataFrame({"served_model": [first.served_model, first.served_model, second.served_model]})
    [warning, _] = _served_lines(two)
    assert warning.startswith("**Warning: the served model changed under this judge's name**")
    assert "`gpt-4o-audio-preview` (2 verdicts), `gpt-4o-audio-preview-2025-06-03` (1 verdicts)" in warning
    assert _served_lines(pd.DataFrame({"served_model": [None, None]})) == []  # a judge that never says: nothing
