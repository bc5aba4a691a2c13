"""The OpenAI-compatible speech provider against a fake /v1/audio/speech that speaks OpenAI's wire format."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from tests.support.fake_tts import FakeOpenAISpeech, TTSReply
from ttseval.core.config import load_settings
from ttseval.core.errors import DeferredProviderError, PermanentProviderError, TransientProviderError
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore
from ttseval.providers.tts import TTS
from ttseval.providers.tts.openai_speech import OpenAISpeechTTS
from ttseval.tasks.synthesize import synthesize_rows

KEY = "sk-test-secret-0123456789"


@pytest.fixture(scope="module")
def fake():
    with FakeOpenAISpeech(api_key=KEY, voices=None) as server:
        yield server


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def build(fake, spec_tail: str = "alloy", timeout_s: float = 2) -> tuple[Spec, OpenAISpeechTTS]:
    spec = Spec.parse(f"openai:{spec_tail}:base_url={fake.base_url}:timeout_s={timeout_s:g}")
    return spec, TTS.build(spec)


def rows_for(tmp_path, spec, provider, texts, **settings):
    items = [
        {"item_id": f"i{n}", "text": t, "language": "en-US", "instruction": None, "category": "questions"}
        for n, t in enumerate(texts)
    ]
    s = load_settings(store=str(tmp_path), retry_backoff_s=0.01, **settings)
    return synthesize_rows(provider, spec, items, s, ArtifactStore(str(tmp_path)))


def test_request_body_matches_the_documented_shape_and_each_format_decodes(fake, env) -> None:
    for fmt, rate in (("wav", 24000), ("pcm", 24000), ("mp3", 24000)):
        _, tts = build(fake, f"alloy:model=gpt-4o-mini-tts:response_format={fmt}")
        before = len(fake.requests)
        audio = tts.synthesize("Hello there, how are you?", "en-US", instruction="whisper it, slowly")
        body = fake.requests[before].body
        assert body == {
            "model": "gpt-4o-mini-tts",
            "voice": "alloy",
            "input": "Hello there, how are you?",
            "response_format": fmt,
            "speed": 1.0,
            "instructions": "whisper it, slowly",
        }
        assert fake.requests[before].headers["authorization"] == f"Bearer {KEY}"
        assert audio.sample_rate_hz == rate
        assert audio.duration_s == pytest.approx(0.02 * 25, abs=0.06)  # mp3 frames pad a little
    _, tts1 = build(fake, "nova:model=tts-1")
    tts1.synthesize("Plain.", "en", instruction="ignored by tts-1")
    assert "instructions" not in fake.requests[-1].body  # tts-1 refuses the field


def test_failures_become_rows_with_the_vendors_reason(fake, env, tmp_path) -> None:
    spec, tts = build(fake)
    fake.script("rate limited", [TTSReply.error(429, "Rate limit reached", retry_after="0")])
    fake.script("server down", [TTSReply.error(503, "overloaded")] * 3)
    fake.script("quota gone", [TTSReply.error(429, "You exceeded your current quota (insufficient_quota)")])
    fake.script("forbidden words", [TTSReply.error(400, "This request was rejected by our content policy")])
    fake.script("nothing back", [TTSReply.empty()])
    fake.script("cut short", [TTSReply.truncated()] * 3)
    fake.script("not audio", [TTSReply.not_audio()] * 3)
    fake.script("streamed", [TTSReply(stream=True)])
    fake.script("reset mid body", [TTSReply(cut_after=100), TTSReply()])
    texts = [
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
    rows = {r["item_id"]: r for r in rows_for(tmp_path, spec, tts, texts, item_retries=2)}
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
    assert rows["i0"]["attempt"] == 2
    assert (
        rows["i1"]["error_type"] == "TransientProviderError"
        and rows["i1"]["retryable"]
        and "overloaded" in rows["i1"]["error_message"]
        and rows["i1"]["attempt"] == 3
    )
    assert rows["i2"]["error_type"] == "DeferredProviderError" and rows["i2"]["retryable"]
    assert rows["i3"]["error_type"] == "PermanentProviderError" and not rows["i3"]["retryable"]
    assert "content policy" in rows["i3"]["error_message"]
    assert rows["i5"]["error_type"] == "TruncatedAudioError" and rows["i5"]["retryable"]  # asked again next run
    assert rows["i4"]["error_type"] == "SilentAudio" and not rows["i4"]["retryable"]
    assert "truncated WAV" in rows["i5"]["error_message"] and "not wav audio" in rows["i6"]["error_message"]
    assert rows["i8"]["attempt"] == 2  # the reset was retried
    assert fake.pending() == {}
    for row in rows.values():
        assert KEY not in json.dumps(row, default=str)


def test_cost_is_recorded_per_row_from_the_price_table(fake, env, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with FakeOpenAISpeech(api_key=None) as selfhosted:  # self-hosted (base_url) and keyless: free
        spec, tts = build(selfhosted, "alloy:model=tts-1")
        [row] = rows_for(tmp_path, spec, tts, ["Twelve chars"])
        assert (row["billable_chars"], row["cost_usd"]) == (12, 0.0)
        [row] = rows_for(tmp_path / "priced", spec, tts, ["Twelve chars"], tts_prices={"openai:tts-1": 15.0})
        assert (row["billable_chars"], row["cost_usd"]) == (12, pytest.approx(12 * 15.0 / 1e6))
    official = OpenAISpeechTTS("alloy", api_key="sk-x", model="tts-1-hd")
    assert official.usd_per_mchar == 30.0 and official.billable_chars("Twelve chars", None) == 12


def test_missing_key_names_the_variable_and_unknown_voice_is_refused(monkeypatch, fake) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAISpeechTTS("alloy")
    tts = OpenAISpeechTTS("alloyy", api_key="sk-x")
    with pytest.raises(ValueError, match="did you mean 'alloy'"):
        tts.check_voice()
    with FakeOpenAISpeech(api_key=None, voices=["af_bella", "am_adam"]) as kokoro:
        OpenAISpeechTTS("af_bella", base_url=kokoro.base_url).check_voice()
        with pytest.raises(ValueError, match="no voice 'af_bela'"):
            OpenAISpeechTTS("af_bela", base_url=kokoro.base_url).check_voice()


def test_error_classes(fake, env) -> None:
    _, tts = build(fake)
    fake.script("e401", [TTSReply.error(401, "bad key")])
    with pytest.raises(DeferredProviderError):
        tts.synthesize("e401", "en")
    fake.script("e404", [TTSReply.error(404, "voice not found")])
    with pytest.raises(PermanentProviderError):
        tts.synthesize("e404", "en")
    fake.script("slow", [TTSReply(delay_s=3)])
    with pytest.raises(TransientProviderError, match="no answer within"):
        tts.synthesize("slow", "en")


def test_a_key_in_a_spec_is_refused_without_repeating_it() -> None:
    from ttseval.core.errors import SpecError

    with pytest.raises(SpecError) as raised:
        TTS.build("openai:alloy:api_key=sk-leaked-123")
    assert "environment variable" in str(raised.value) and "sk-leaked-123" not in str(raised.value)


def test_strong_prompting_and_item_instructions_reach_the_instructions_field(fake, env, tmp_path) -> None:
    from ttseval.core.categories import CATEGORIES

    spec = Spec.parse(f"openai:coral:base_url={fake.base_url}:model=gpt-4o-mini-tts:prompt=category")
    tts = TTS.build(spec)
    before = len(fake.requests)
    items = [
        {
            "item_id": "q",
            "text": "You did lock it, didn't you?",
            "language": "en",
            "category": "questions",
            "instruction": None,
        },
        {
            "item_id": "s",
            "text": "Fine.",
            "language": "en",
            "category": "questions",
            "instruction": "Speak like a tired pirate.",
        },
    ]
    rows = synthesize_rows(tts, spec, items, load_settings(store=str(tmp_path)), ArtifactStore(str(tmp_path)))
    assert [r["status"] for r in rows] == ["ok", "ok"]
    sent = [r.body.get("instructions") for r in fake.requests[before:]]
    assert sent == [CATEGORIES["questions"], "Speak like a tired pirate."]


def test_broken_audio_is_flagged_a_timeout_retried_and_no_paid_call_made_twice(fake, env, tmp_path) -> None:
    """Provider faults through the real client: audio that is silent, clipped or NaN (a float WAV),
    a reply slower than the client's timeout; every item ends as a row, and a second pass over the same keys
    (a resumed run) pays for nothing again, counted at the fake."""
    import io

    import numpy as np
    import soundfile as sf

    from tests.support.fake_tts import tone

    def wav(samples: np.ndarray, subtype: str = "PCM_16") -> bytes:
        buf = io.BytesIO()
        sf.write(buf, samples, 24000, format="WAV", subtype=subtype)
        return buf.getvalue()

    loud = np.clip(8 * tone(2.0, 24000), -1, 1)
    nan = tone(2.0, 24000)
    nan[1000:1100] = np.nan
    # The timing is made deterministic: the audio faults go through a client that waits up to 60 s (no loaded
    # machine makes a local answer that slow), the slow answer through one that waits 2 s for a reply the fake
    # holds 6 s. The first attempt of the slow text always times out, its retry is answered at once.
    patient, hasty = build(fake, timeout_s=60), build(fake, timeout_s=2)
    faults = {
        "silence please": TTSReply(audio=wav(np.zeros(24000, dtype=np.float32))),
        "too loud a voice here": TTSReply(audio=wav(loud)),
        "not a number in here": TTSReply(audio=wav(nan, "FLOAT")),
    }
    slow = {"a slow answer now": TTSReply(delay_s=6.0)}
    for text, reply in (faults | slow).items():
        fake.script(text, [reply])
    before, billed_before = fake.paid_calls, len(fake.paid_keys)

    def both_passes() -> dict[str, dict]:
        rows = rows_for(tmp_path / "faults", *patient, list(faults), item_retries=1)
        rows += [r | {"item_id": "i3"} for r in rows_for(tmp_path / "slow", *hasty, list(slow), item_retries=1)]
        return {r["item_id"]: r for r in rows}

    rows = both_passes()
    assert [rows[f"i{n}"]["status"] for n in range(4)] == ["empty", "ok", "ok", "ok"]
    assert rows["i0"]["error_type"] == "SilentAudio"
    assert rows["i1"]["audio_flags"] == "clipped" and rows["i2"]["audio_flags"] == "nan"
    assert rows["i3"]["attempt"] == 2 and rows["i3"]["audio_flags"] is None  # the timeout, then the answer
    deadline = time.monotonic() + 15
    while fake.in_flight and time.monotonic() < deadline:  # the fake finishes the call the client gave up on
        time.sleep(0.05)
    assert fake.in_flight == 0
    # Billed per text at the fake, exactly: each audio fault once (the silence too: a 200 with audio is billed), the
    # slow text twice: the fake finished the call the client had given up on (what a timeout costs) and answered
    # the retry. Counted on this test's texts only, so an earlier test's late call cannot land in the count.
    billed = Counter(t for t in fake.paid_keys[billed_before:] if t in faults | slow)
    assert billed == Counter({**dict.fromkeys(faults, 1), "a slow answer now": 2}), billed
    paid = fake.paid_calls - before
    again = both_passes()  # the request cache answers every key: nothing paid again
    assert fake.paid_calls - before == paid and all(r["cache_hit"] for r in again.values())
    assert fake.pending() == {}


def test_each_request_records_its_time_to_first_byte_and_its_attempts(fake, env, tmp_path) -> None:
    # A streamed answer held back 0.3 s before its first byte; a 503 then an answer (2 requests, 1 error). The first
    # byte cannot come before the server's wait, nor after the whole call.
    spec, tts = build(fake)
    fake.script("held back", [TTSReply(stream=True, delay_s=0.3)])
    fake.script("flaky", [TTSReply.error(503, "overloaded"), TTSReply()])
    rows = {r["item_id"]: r for r in rows_for(tmp_path, spec, tts, ["held back", "flaky"], item_retries=2)}
    held = rows["i0"]
    assert held["status"] == "ok" and 0.3 <= held["first_byte_s"] <= held["latency_s"]
    assert (rows["i1"]["status"], rows["i1"]["attempt"]) == ("ok", 2) and rows["i1"]["first_byte_s"] is not None
    from ttseval.core.schemas import SYNTHESIS

    assert "first_byte_s" in SYNTHESIS.names
    [local] = rows_for(tmp_path / "local", Spec.parse("espeak-ng"), TTS.build(Spec.parse("espeak-ng")), ["Hello."])
    assert local["status"] == "ok" and local.get("first_byte_s") is None
