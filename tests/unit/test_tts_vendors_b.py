"""Azure AI Speech, Hume Octave and Gemini TTS against loopback fakes of their documented wire formats
(tests/support/fake_azure.py, tests/support/fake_hume.py, tests/support/fake_gemini_tts.py), through `synthesize_rows`
as tests/unit/test_tts_openai.py does for OpenAI."""

from __future__ import annotations

import json
import pickle

import pytest

from tests.support.fake_azure import FakeAzureSpeech
from tests.support.fake_gemini_tts import FakeGeminiTTS, blocked, google_error, refusal
from tests.support.fake_hume import FakeHume, voice_id
from tests.support.fake_tts import TTSReply
from ttseval.core.config import load_settings
from ttseval.core.errors import DeferredProviderError, PermanentProviderError, TransientProviderError
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore
from ttseval.providers.tts import TTS
from ttseval.providers.tts.azure import AzureTTS
from ttseval.providers.tts.gemini_tts import PREBUILT_VOICES, GeminiTTS
from ttseval.providers.tts.hume import HumeTTS
from ttseval.tasks.synthesize import synthesize_rows

KEY = "vendor-test-secret-0123456789"
TEXT = "Hello there, how are you?"


def rows_for(tmp_path, spec, provider, texts, language="en-US", instruction=None, **settings):
    items = [
        {"item_id": f"i{n}", "text": t, "language": language, "instruction": instruction, "category": "questions"}
        for n, t in enumerate(texts)
    ]
    s = load_settings(store=str(tmp_path), retry_backoff_s=0.01, **settings)
    return synthesize_rows(provider, spec, items, s, ArtifactStore(str(tmp_path)))


def failure_script(
    fake,
    quota: TTSReply,
    refused: TTSReply,
    truncated: TTSReply,
    not_audio: TTSReply,
    rate_limited: TTSReply | None = None,
) -> list[str]:
    """The same faults for every vendor; returns the texts in order."""
    fake.script("rate limited", [rate_limited or TTSReply.error(429, "Too many requests", retry_after="0")])
    fake.script("server down", [TTSReply.error(503, "overloaded")] * 3)
    fake.script("quota gone", [quota])
    fake.script("forbidden words", [refused])
    fake.script("nothing back", [TTSReply.empty()])
    fake.script("cut short", [truncated] * 3)
    fake.script("not audio", [not_audio] * 3)
    fake.script("streamed", [TTSReply(stream=True)])
    fake.script("reset mid body", [TTSReply(cut_after=100), TTSReply()])
    return [
        "rate limited",
        "server down",
        "quota gone",
        "forbidden words",
        "nothing back",
        "cut short",
        "not audio",
        "streamed",
        "reset mid body",
    ]


def check_failure_rows(fake, rows, refusal_words: str) -> None:
    rows = {r["item_id"]: r for r in rows}
    assert [rows[f"i{n}"]["status"] for n in range(9)] == [
        "ok",
        "failed",
        "failed",
        "failed",
        "empty",
        "empty",
        "failed",
        "ok",
        "ok",
    ]
    assert rows["i0"]["attempt"] == 2  # 429 with Retry-After: retried within the run
    assert (
        rows["i1"]["error_type"] == "TransientProviderError"
        and rows["i1"]["retryable"]
        and "overloaded" in rows["i1"]["error_message"]
        and rows["i1"]["attempt"] == 3
    )
    assert rows["i2"]["error_type"] == "DeferredProviderError" and rows["i2"]["retryable"]
    assert rows["i3"]["error_type"] == "PermanentProviderError" and not rows["i3"]["retryable"]
    assert rows["i5"]["error_type"] == "TruncatedAudioError" and rows["i5"]["retryable"]
    assert refusal_words in rows["i3"]["error_message"]
    assert rows["i6"]["error_type"] == "TransientProviderError"
    assert rows["i8"]["attempt"] == 2  # the reset was retried
    assert rows["i7"]["billable_chars"] == len("streamed") and rows["i7"]["cost_usd"] > 0
    assert fake.pending() == {}
    for row in rows.values():
        assert KEY not in json.dumps(row, default=str)


# -- Azure --------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def azure_fake():
    with FakeAzureSpeech(api_key=KEY) as server:
        yield server


@pytest.fixture
def azure_env(monkeypatch):
    monkeypatch.setenv("AZURE_SPEECH_KEY", KEY)


def azure(fake, tail: str = "ps-AF-GulNawazNeural") -> tuple[Spec, AzureTTS]:
    spec = Spec.parse(f"azure:{tail}:base_url={fake.base_url}:timeout_s=2")
    return spec, TTS.build(spec)


def test_azure_request_is_the_documented_ssml_and_each_format_decodes(azure_fake, azure_env) -> None:
    for fmt, rate in (
        ("riff-24khz-16bit-mono-pcm", 24000),
        ("raw-24khz-16bit-mono-pcm", 24000),
        ("audio-24khz-48kbitrate-mono-mp3", 24000),
        ("riff-16khz-16bit-mono-pcm", 16000),
    ):
        _, tts = azure(azure_fake, f"ps-AF-GulNawazNeural:output_format={fmt}")
        before = len(azure_fake.requests)
        audio = tts.synthesize('Tom & Jerry\'s <b>"x"</b>', "ps-AF")
        request = azure_fake.requests[before]
        assert request.raw.decode() == (
            "<speak version='1.0' xml:lang='ps-AF'><voice name='ps-AF-GulNawazNeural'>"
            'Tom &amp; Jerry\'s &lt;b&gt;"x"&lt;/b&gt;</voice></speak>'
        )
        assert request.text == 'Tom & Jerry\'s <b>"x"</b>'
        assert request.path == "/cognitiveservices/v1"
        assert {
            k: request.headers[k]
            for k in ("ocp-apim-subscription-key", "content-type", "x-microsoft-outputformat", "user-agent")
        } == {
            "ocp-apim-subscription-key": KEY,
            "content-type": "application/ssml+xml",
            "x-microsoft-outputformat": fmt,
            "user-agent": "ttseval",
        }
        assert audio.sample_rate_hz == rate
        assert audio.duration_s == pytest.approx(0.02 * 24, abs=0.06)
    meta = tts.metadata()
    assert (meta["engine"], meta["voice"], meta["api_version"], meta["locale"]) == (
        "azure",
        "ps-AF-GulNawazNeural",
        "cognitiveservices/v1",
        "ps-AF",
    )
    assert KEY not in json.dumps(meta)


def test_azure_failures_become_rows_with_the_vendors_reason(azure_fake, azure_env, tmp_path) -> None:
    spec, tts = azure(azure_fake)
    texts = failure_script(
        azure_fake,
        quota=TTSReply.error(403, "Out of call volume quota for TextToSpeech. Quota will be replenished in 2.12:00"),
        refused=TTSReply.error(400, "SSML is invalid: the text was refused for the voice"),
        truncated=TTSReply.truncated(),
        not_audio=TTSReply.not_audio(),
    )
    rows = rows_for(tmp_path, spec, tts, texts, language="ps-AF", item_retries=2)
    check_failure_rows(azure_fake, rows, "refused for the voice")
    row = {r["item_id"]: r for r in rows}
    assert "truncated WAV" in row["i5"]["error_message"] and "not wav audio" in row["i6"]["error_message"]
    assert "quota" in row["i2"]["error_message"]
    assert row["i7"]["cost_usd"] == pytest.approx(len("streamed") * 15.0 / 1e6)


def test_azure_errors_voices_keys_language_and_cost(azure_fake, azure_env, monkeypatch) -> None:
    _, tts = azure(azure_fake)
    azure_fake.script("slow", [TTSReply(delay_s=3)])
    with pytest.raises(TransientProviderError, match="no answer within"):
        tts.synthesize("slow", "ps")
    azure_fake.script("e401", [TTSReply.error(401, "Access denied due to invalid subscription key")])
    with pytest.raises(DeferredProviderError, match="AZURE_SPEECH_KEY"):
        tts.synthesize("e401", "ps")
    tts.check_voice()
    with pytest.raises(ValueError, match="no voice 'ps-AF-GulNawazNeurall'; did you mean 'ps-AF-GulNawazNeural'"):
        azure(azure_fake, "ps-AF-GulNawazNeurall")[1].check_voice()
    assert tts.supports_language("ps") and tts.supports_language("ps-AF") and not tts.supports_language("en")
    assert azure(azure_fake, "en-US-AvaMultilingualNeural")[1].supports_language("de")
    assert tts.billable_chars("abc", None) == 3 and tts.billable_chars("你好ab", "ignored") == 6
    assert tts.usd_per_mchar == 15.0
    assert (
        AzureTTS("ps-AF-GulNawazNeural", region="westeurope").base_url == "https://westeurope.tts.speech.microsoft.com"
    )
    with pytest.raises(ValueError, match="region"):
        AzureTTS("ps-AF-GulNawazNeural")
    monkeypatch.delenv("AZURE_SPEECH_KEY")
    with pytest.raises(ValueError, match="AZURE_SPEECH_KEY"):
        AzureTTS("ps-AF-GulNawazNeural", region="westeurope")


# -- Hume ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hume_fake():
    with FakeHume(
        api_key=KEY, voices=["Ava Song", "Male English Actor"] + [f"Voice {n}" for n in range(150)]
    ) as server:
        yield server


@pytest.fixture
def hume_env(monkeypatch):
    monkeypatch.setenv("HUME_API_KEY", KEY)


def hume(fake, tail: str = "Ava Song") -> tuple[Spec, HumeTTS]:
    spec = Spec.parse(f"hume:{tail}:base_url={fake.base_url}:timeout_s=2")
    return spec, TTS.build(spec)


def test_hume_request_is_the_documented_body_and_the_instruction_is_the_description(hume_fake, hume_env) -> None:
    for fmt, rate in (("wav", 48000), ("pcm", 48000), ("mp3", 48000)):
        _, tts = hume(hume_fake, f"Ava Song:format={fmt}")
        before = len(hume_fake.requests)
        audio = tts.synthesize(TEXT, "en-US", instruction="  Whisper it, slowly. ")
        request = hume_fake.requests[before]
        assert request.path == "/v0/tts/file" and request.headers["x-hume-api-key"] == KEY
        assert request.body == {
            "utterances": [
                {
                    "text": TEXT,
                    "description": "Whisper it, slowly.",
                    "voice": {"name": "Ava Song", "provider": "HUME_AI"},
                }
            ],
            "format": {"type": fmt},
        }
        assert audio.sample_rate_hz == rate
        assert audio.duration_s == pytest.approx(0.02 * len(TEXT), abs=0.06)
    vid = voice_id("Male English Actor")
    _, by_id = hume(hume_fake, f"{vid}:octave_version=2")
    by_id.synthesize("Plain.", "en")
    assert hume_fake.requests[-1].body == {
        "utterances": [{"text": "Plain.", "voice": {"id": vid}}],
        "format": {"type": "wav"},
        "version": "2",
    }
    meta = by_id.metadata()
    assert (meta["model"], meta["voice"], meta["api_version"]) == ("octave-2", vid, "v0")


def test_hume_instruction_reaches_the_description_through_the_stage(hume_fake, hume_env, tmp_path) -> None:
    spec, tts = hume(hume_fake)
    before = len(hume_fake.requests)
    [row] = rows_for(tmp_path, spec, tts, ["Quiet please."], instruction="A frightened young woman.")
    assert row["status"] == "ok"
    assert hume_fake.requests[before].body["utterances"][0]["description"] == "A frightened young woman."
    assert row["billable_chars"] == len("Quiet please.")  # the description is not billed
    assert row["cost_usd"] == pytest.approx(len("Quiet please.") * 100.0 / 1e6)


def test_hume_failures_become_rows_with_the_vendors_reason(hume_fake, hume_env, tmp_path) -> None:
    spec, tts = hume(hume_fake)
    texts = failure_script(
        hume_fake,
        quota=TTSReply.error(402, "Payment required: your usage limit has been reached"),
        refused=TTSReply.error(400, "The text violates our usage policy"),
        truncated=TTSReply.truncated(),
        not_audio=TTSReply.not_audio(),
    )
    rows = rows_for(tmp_path, spec, tts, texts, item_retries=2)
    check_failure_rows(hume_fake, rows, "usage policy")
    assert "truncated WAV" in {r["item_id"]: r for r in rows}["i5"]["error_message"]


def test_hume_errors_voices_and_keys(hume_fake, hume_env, monkeypatch) -> None:
    _, tts = hume(hume_fake)
    hume_fake.script("slow", [TTSReply(delay_s=3)])
    with pytest.raises(TransientProviderError, match="no answer within"):
        tts.synthesize("slow", "en")
    hume_fake.script("e422", [TTSReply.error(422, "field required")])
    with pytest.raises(PermanentProviderError, match="field required"):
        tts.synthesize("e422", "en")
    assert len(tts.voices()) == 152  # two pages of 100
    hume(hume_fake, "Voice 149")[1].check_voice()
    hume(hume_fake, voice_id("Voice 149"))[1].check_voice()
    with pytest.raises(ValueError, match="no voice id"):
        hume(hume_fake, voice_id("Nobody"))[1].check_voice()
    with pytest.raises(ValueError, match="no voice 'Ava Songg'; did you mean 'Ava Song'"):
        hume(hume_fake, "Ava Songg")[1].check_voice()
    monkeypatch.delenv("HUME_API_KEY")
    with pytest.raises(ValueError, match="HUME_API_KEY"):
        HumeTTS("Ava Song")


# -- Gemini -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gemini_fake():
    with FakeGeminiTTS(api_key=KEY) as server:
        yield server


@pytest.fixture
def gemini_env(monkeypatch):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)


def gemini(fake, tail: str = "Kore") -> tuple[Spec, GeminiTTS]:
    spec = Spec.parse(f"gemini:{tail}:base_url={fake.base_url}:timeout_s=2")
    return spec, TTS.build(spec)


def test_gemini_request_is_the_documented_shape_and_pcm_is_24khz(gemini_fake, gemini_env) -> None:
    _, tts = gemini(gemini_fake, "Puck")
    before = len(gemini_fake.requests)
    audio = tts.synthesize(TEXT, "en-US", instruction="Whisper it.")
    request = gemini_fake.requests[before]
    assert request.path == "/v1beta/models/gemini-2.5-flash-preview-tts:generateContent"
    assert request.headers["x-goog-api-key"] == KEY
    # google-genai spells the speechConfig fields snake_case on the wire; the API reads either spelling
    assert request.body == {
        "contents": [{"role": "user", "parts": [{"text": f"Say in this style (Whisper it.): {TEXT}"}]}],
        "generationConfig": {
            "responseModalities": ["AUDIO"],
            "speechConfig": {"voice_config": {"prebuilt_voice_config": {"voice_name": "Puck"}}},
        },
    }
    assert audio.sample_rate_hz == 24000
    assert audio.duration_s == pytest.approx(0.02 * len(request.text), abs=0.01)
    tts.synthesize("Plain.", "en")
    assert gemini_fake.requests[-1].body["contents"][0]["parts"] == [{"text": "Plain."}]
    meta = tts.metadata()
    assert (meta["model"], meta["voice"], meta["api_version"]) == ("gemini-2.5-flash-preview-tts", "Puck", "v1beta")
    assert KEY not in json.dumps(meta)


def test_gemini_failures_become_rows_with_the_vendors_reason(gemini_fake, gemini_env, tmp_path) -> None:
    spec, tts = gemini(gemini_fake)
    full = json.dumps(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"inlineData": {"mimeType": "audio/L16;codec=pcm;rate=24000", "data": "AAAA" * 500}}],
                    },
                    "finishReason": "STOP",
                }
            ]
        }
    ).encode()
    texts = failure_script(
        gemini_fake,
        quota=google_error(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            quota_id="GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            retry_delay="0s",
        ),
        refused=refusal("PROHIBITED_CONTENT"),
        truncated=TTSReply(body=full[: len(full) // 2]),
        not_audio=TTSReply(body=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
        rate_limited=google_error(
            429,
            "You exceeded your current quota.",
            retry_delay="0s",
            quota_id="GenerateRequestsPerMinutePerProjectPerModel",
        ),
    )
    gemini_fake.script("blocked text", [blocked("SAFETY")])
    rows = rows_for(tmp_path, spec, tts, [*texts, "blocked text"], item_retries=2)
    check_failure_rows(gemini_fake, rows[:9], "PROHIBITED_CONTENT")
    row = {r["item_id"]: r for r in rows}
    assert (
        row["i9"]["status"] == "failed"
        and row["i9"]["error_type"] == "PermanentProviderError"
        and "SAFETY" in row["i9"]["error_message"]
    )
    assert "daily quota" in row["i2"]["error_message"]
    assert row["i7"]["cost_usd"] == pytest.approx(len("streamed") * 16.8 / 1e6)


def test_gemini_errors_voices_and_keys(gemini_fake, gemini_env, monkeypatch) -> None:
    _, tts = gemini(gemini_fake)
    gemini_fake.script("slow", [TTSReply(delay_s=3)])
    with pytest.raises(TransientProviderError, match="no answer within"):
        tts.synthesize("slow", "en")
    gemini_fake.script("e500", [google_error(500, "Internal error encountered.")])
    with pytest.raises(TransientProviderError, match="Internal error"):
        tts.synthesize("e500", "en")
    gemini_fake.script("e403", [google_error(403, "Method doesn't allow unregistered callers.")])
    with pytest.raises(DeferredProviderError):
        tts.synthesize("e403", "en")
    assert {v["id"] for v in tts.voices()} == set(PREBUILT_VOICES) and len(PREBUILT_VOICES) == 30
    tts.check_voice()
    with pytest.raises(ValueError, match="no voice 'Koree'; did you mean 'Kore'"):
        GeminiTTS("Koree").check_voice()
    monkeypatch.delenv("GEMINI_API_KEY")
    with pytest.raises(ValueError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiTTS("Kore")
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)  # the LLM module's fallback, here too
    _, fallback = gemini(gemini_fake)
    assert fallback.synthesize("Fallback key.", "en").sample_rate_hz == 24000
    assert GeminiTTS("Kore", model="gemini-2.5-pro-preview-tts").usd_per_mchar == 33.6
    copy = pickle.loads(pickle.dumps(fallback))  # a worker process builds its own client
    assert copy.synthesize("Pickled.", "en").sample_rate_hz == 24000 and KEY not in repr(copy.metadata())
