"""ElevenLabs, Deepgram and Cartesia against loopback fakes that speak (and check) each vendor's wire format."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.support.fake_cartesia import FakeCartesia
from tests.support.fake_deepgram import FakeDeepgram
from tests.support.fake_elevenlabs import FakeElevenLabs
from tests.support.fake_tts import TTSReply
from tests.support.vendors import VENDORS
from ttseval.core.config import load_settings
from ttseval.core.errors import DeferredProviderError, PermanentProviderError, TransientProviderError
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore
from ttseval.providers.tts import TTS
from ttseval.providers.tts.cartesia import CartesiaTTS
from ttseval.providers.tts.deepgram import DeepgramTTS
from ttseval.providers.tts.elevenlabs import ElevenLabsTTS
from ttseval.tasks.synthesize import synthesize_rows

KEY = "vendor-secret-key-0123456789abcdef"
TEXT = "Hello there, how are you?"  # 25 characters: 0.5 s of the fakes' speech


@pytest.fixture(scope="module")
def fakes():
    with FakeElevenLabs(api_key=KEY) as el, FakeDeepgram(api_key=KEY) as dg, FakeCartesia(api_key=KEY) as ca:
        yield {"elevenlabs": el, "deepgram": dg, "cartesia": ca}


@pytest.fixture
def env(monkeypatch):
    for vendor in VENDORS.values():
        monkeypatch.setenv(vendor.env, KEY)


def build(fake, vendor: str, tail: str = "", *, voice: str | None = None, timeout_s: float = 2) -> tuple[Spec, Any]:
    spec = Spec.parse(f"{vendor}:{voice or VENDORS[vendor].voice}{tail}:base_url={fake.base_url}:timeout_s={timeout_s}")
    return spec, TTS.build(spec)


def rows_for(tmp_path, spec, provider, texts, language="en-US", **settings):
    items = [
        {"item_id": f"i{n}", "text": t, "language": language, "instruction": None, "category": "questions"}
        for n, t in enumerate(texts)
    ]
    s = load_settings(store=str(tmp_path), retry_backoff_s=0.01, **settings)
    return synthesize_rows(provider, spec, items, s, ArtifactStore(str(tmp_path)))


# -- the documented request shapes, and every audio format at its rate ---------------------------------------------


def test_elevenlabs_request_is_the_documented_shape_and_each_format_decodes(fakes, env) -> None:
    fake = fakes["elevenlabs"]
    settings = {"stability": 0.5, "similarity_boost": 0.75, "style": 0.0, "use_speaker_boost": True, "speed": 1.0}
    for fmt, rate in (
        ("pcm_24000", 24000),
        ("pcm_16000", 16000),
        ("mp3_44100_128", 44100),
        ("wav_22050", 22050),
        ("opus_48000_64", 48000),
    ):
        _, tts = build(fake, "elevenlabs", f":output_format={fmt}")
        before = len(fake.requests)
        audio = tts.synthesize(TEXT, "en-US")
        request = fake.requests[before]
        assert (request.method, request.path, request.query) == (
            "POST",
            "/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb",
            {"output_format": [fmt]},
        )
        assert request.body == {"text": TEXT, "model_id": "eleven_multilingual_v2", "voice_settings": settings}
        assert request.headers["xi-api-key"] == KEY and "authorization" not in request.headers
        assert request.headers["content-type"] == "application/json"
        assert audio.sample_rate_hz == rate, fmt
        assert audio.duration_s == pytest.approx(0.5, abs=0.1), fmt
    _, flash = build(
        fake, "elevenlabs", ":model=eleven_flash_v2_5:stability=0.3:style=0.2:speed=1.1:seed=7:use_speaker_boost=false"
    )
    flash.synthesize("Hola, ¿qué tal?", "es-MX")
    assert fake.requests[-1].body == {
        "text": "Hola, ¿qué tal?",
        "model_id": "eleven_flash_v2_5",
        "language_code": "es",
        "seed": 7,
        "voice_settings": {
            "stability": 0.3,
            "similarity_boost": 0.75,
            "style": 0.2,
            "use_speaker_boost": False,
            "speed": 1.1,
        },
    }
    with pytest.raises(ValueError, match="output_format"):
        ElevenLabsTTS("v", api_key="k", output_format="ulaw_8000")
    assert not ElevenLabsTTS("v", api_key="k", model="eleven_flash_v2").supports_language("de")
    assert ElevenLabsTTS("v", api_key="k").supports_language("pt-BR")
    assert not ElevenLabsTTS("v", api_key="k").supports_language("ps")
    assert ElevenLabsTTS("v", api_key="k", model="eleven_v3").supports_language("ps")


def test_elevenlabs_voice_named_instead_of_its_id_is_refused_with_the_id(fakes, env) -> None:
    with pytest.raises(ValueError, match="'George' is 'JBFqnCBsd6RMkjVDRZzb'"):
        ElevenLabsTTS("George", base_url=fakes["elevenlabs"].base_url).check_voice()


def test_elevenlabs_pcm_answer_that_is_a_cut_wav_is_caught(fakes, env) -> None:
    _, tts = build(fakes["elevenlabs"], "elevenlabs")  # pcm_24000: raw samples, unless a WAV comes back
    fakes["elevenlabs"].script("pcm cut", [TTSReply.truncated()])
    with pytest.raises(TransientProviderError, match="truncated WAV"):
        tts.synthesize("pcm cut", "en")


def test_deepgram_request_is_the_documented_shape_and_each_format_decodes(fakes, env) -> None:
    fake = fakes["deepgram"]
    model = {"model": ["aura-2-thalia-en"]}
    for tail, query, rate in (
        ("", {"encoding": ["linear16"], "container": ["wav"], "sample_rate": ["24000"]}, 24000),
        (
            ":container=none:sample_rate=16000",
            {"encoding": ["linear16"], "container": ["none"], "sample_rate": ["16000"]},
            16000,
        ),
        (":encoding=mp3", {"encoding": ["mp3"]}, 22050),
        (":encoding=mp3:bit_rate=48000", {"encoding": ["mp3"], "bit_rate": ["48000"]}, 22050),
        (":encoding=flac:sample_rate=16000", {"encoding": ["flac"], "sample_rate": ["16000"]}, 16000),
        (":encoding=opus", {"encoding": ["opus"]}, 48000),
    ):
        _, tts = build(fake, "deepgram", tail)
        before = len(fake.requests)
        audio = tts.synthesize(TEXT, "en-US")
        request = fake.requests[before]
        assert (request.method, request.path, request.query) == ("POST", "/v1/speak", model | query)
        assert request.body == {"text": TEXT}
        assert request.headers["authorization"] == f"Token {KEY}"
        assert audio.sample_rate_hz == rate, tail
        assert audio.duration_s == pytest.approx(0.5, abs=0.1), tail
    with pytest.raises(ValueError, match="fixed sample rate"):
        DeepgramTTS("aura-2-thalia-en", api_key="k", encoding="mp3", sample_rate="24000")
    by_model = DeepgramTTS(api_key="k", model="aura-2-celeste-es")  # the model may name the voice
    assert (by_model.voice, by_model.model) == ("aura-2-celeste-es", "aura-2-celeste-es")
    assert by_model.supports_language("es-ES") and not by_model.supports_language("en-US")
    assert DeepgramTTS("aura-asteria-en", api_key="k").supports_language("en-GB")
    with pytest.raises(ValueError, match="the voice is the model"):
        DeepgramTTS("aura-2-thalia-en", api_key="k", model="aura-2-andromeda-en")


def test_cartesia_request_is_the_documented_shape_and_each_format_decodes(fakes, env) -> None:
    fake = fakes["cartesia"]
    voice = {"mode": "id", "id": VENDORS["cartesia"].voice}
    for tail, output_format, rate in (
        ("", {"container": "wav", "encoding": "pcm_s16le", "sample_rate": 24000}, 24000),
        (
            ":container=raw:sample_rate=16000",
            {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000},
            16000,
        ),
        (
            ":container=raw:encoding=pcm_f32le:sample_rate=44100",
            {"container": "raw", "encoding": "pcm_f32le", "sample_rate": 44100},
            44100,
        ),
        (
            ":encoding=pcm_f32le:sample_rate=48000",
            {"container": "wav", "encoding": "pcm_f32le", "sample_rate": 48000},
            48000,
        ),
        (":container=mp3:sample_rate=44100", {"container": "mp3", "sample_rate": 44100, "bit_rate": 128000}, 44100),
    ):
        _, tts = build(fake, "cartesia", tail)
        before = len(fake.requests)
        audio = tts.synthesize(TEXT, "en-US")
        request = fake.requests[before]
        assert (request.method, request.path) == ("POST", "/tts/bytes")
        assert request.body == {
            "model_id": "sonic-3",
            "transcript": TEXT,
            "voice": voice,
            "output_format": output_format,
            "language": "en",
        }
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert request.headers["cartesia-version"] == "2026-03-01"
        assert audio.sample_rate_hz == rate, tail
        assert audio.duration_s == pytest.approx(0.5, abs=0.1), tail
    _, styled = build(fake, "cartesia", ":speed=1.2:emotion=excited")
    styled.synthesize("Bonjour", "fr-FR")
    assert fake.requests[-1].body["generation_config"] == {"speed": 1.2, "emotion": "excited"}
    assert fake.requests[-1].body["language"] == "fr"
    _, older = build(fake, "cartesia", ":model=sonic-2:speed=1.2")
    older.synthesize("Hallo", "de")
    assert "generation_config" not in fake.requests[-1].body and fake.requests[-1].body["model_id"] == "sonic-2"
    assert CartesiaTTS("v", api_key="k").supports_language("uk-UA")
    assert not CartesiaTTS("v", api_key="k", model="sonic-2").supports_language("uk-UA")


# -- every vendor: failures become rows, with the vendor's reason and never the key --------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
def test_failures_become_rows_with_the_vendors_reason(vendor, fakes, env, tmp_path) -> None:
    fake, v = fakes[vendor], VENDORS[vendor]
    # ElevenLabs' default is raw pcm, where a body that is not audio cannot be told from samples: ask for mp3.
    spec, tts = build(fake, vendor, ":output_format=mp3_44100_128" if vendor == "elevenlabs" else "")
    fake.script("rate limited", [TTSReply.error(429, "Too many requests", retry_after="0")])
    fake.script("server down", [TTSReply.error(503, "overloaded")] * 3)
    fake.script("quota gone", [fake.quota()])
    fake.script("forbidden words", [fake.refusal()])
    fake.script("nothing back", [TTSReply.empty()])
    fake.script("cut short", [TTSReply.truncated()] * 3)
    fake.script("not audio", [TTSReply.not_audio()] * 3)
    fake.script("streamed", [TTSReply(stream=True)])
    fake.script("reset mid body", [TTSReply(cut_after=100), TTSReply()])
    fake.script("leaky upstream", [TTSReply.error(500, f"upstream rejected key {KEY}")] * 3)
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
        "leaky upstream",
    ]
    rows = {r["item_id"]: r for r in rows_for(tmp_path, spec, tts, texts, item_retries=2)}
    assert [rows[f"i{n}"]["status"] for n in range(10)] == [
        "ok",
        "failed",
        "failed",
        "failed",
        "empty",
        "empty",
        "failed",
        "ok",
        "ok",
        "failed",
    ]
    assert rows["i0"]["attempt"] == 2  # the 429 was retried after its Retry-After
    assert (
        rows["i1"]["error_type"] == "TransientProviderError"
        and rows["i1"]["retryable"]
        and "overloaded" in rows["i1"]["error_message"]
        and rows["i1"]["attempt"] == 3
    )
    assert rows["i2"]["error_type"] == "DeferredProviderError" and rows["i2"]["retryable"]
    assert v.quota_reason in rows["i2"]["error_message"]
    assert rows["i3"]["error_type"] == "PermanentProviderError" and not rows["i3"]["retryable"]
    assert rows["i5"]["error_type"] == "TruncatedAudioError" and rows["i5"]["retryable"]
    assert v.refusal_reason in rows["i3"]["error_message"]
    assert "truncated WAV" in rows["i5"]["error_message"]
    assert re.search(r"the response is not \w+ audio", rows["i6"]["error_message"])
    assert rows["i8"]["attempt"] == 2  # the reset was retried
    assert "***" in rows["i9"]["error_message"]
    assert fake.pending() == {}
    for row in rows.values():
        assert KEY not in json.dumps(row, default=str)
    for n in (0, 7, 8):
        text = texts[n]
        assert rows[f"i{n}"]["billable_chars"] == len(text)
        assert rows[f"i{n}"]["cost_usd"] == pytest.approx(len(text) * v.price / 1e6)
    meta = json.loads(rows["i7"]["provider_metadata"])
    assert meta["engine"] == vendor and meta["voice"] == v.voice and meta["api_version"] == tts.version
    assert meta["model"] == tts.model and KEY not in json.dumps(meta)


@pytest.mark.parametrize("vendor", VENDORS)
def test_timeout_and_refused_key(vendor, fakes, env) -> None:
    fake, v = fakes[vendor], VENDORS[vendor]
    _, tts = build(fake, vendor, timeout_s=0.3)
    fake.script("slow answer", [TTSReply(delay_s=0.8)])
    with pytest.raises(TransientProviderError, match="no answer within 0.3 s"):
        tts.synthesize("slow answer", "en")
    wrong = v.cls(v.voice, api_key="wrong-key-9876543210", base_url=fake.base_url, timeout_s="2")
    with pytest.raises(DeferredProviderError, match=v.env) as refused:
        wrong.synthesize("who am I", "en")
    assert "wrong-key-9876543210" not in str(refused.value)


@pytest.mark.parametrize("vendor", VENDORS)
def test_unknown_voice_is_refused_with_the_close_match(vendor, fakes, env) -> None:
    fake, v = fakes[vendor], VENDORS[vendor]
    v.cls(v.voice, base_url=fake.base_url).check_voice()
    with pytest.raises(ValueError, match=f"no voice '{v.near_miss}'; did you mean '{v.voice}'"):
        v.cls(v.near_miss, base_url=fake.base_url).check_voice()
    # asked anyway, the vendor's own answer is final and names where the voices are listed
    with pytest.raises(PermanentProviderError, match=f"ttseval voices {vendor}"):
        v.cls(v.near_miss, base_url=fake.base_url).synthesize("hello", "en")


@pytest.mark.parametrize("vendor", ["elevenlabs", "cartesia"])
def test_a_vendor_without_a_default_voice_built_without_one_is_a_final_failure_naming_the_fix(
    vendor, fakes, env
) -> None:
    # These vendors have no default voice: asked to speak without one, the provider says so (a permanent failure,
    # a row with its reason), and the vendor is not called.
    fake, v = fakes[vendor], VENDORS[vendor]
    before = fake.total_requests
    with pytest.raises(PermanentProviderError) as missing:
        v.cls(None, base_url=fake.base_url).synthesize("hello", "en")
    assert str(missing.value).startswith(f"{vendor} needs a voice: {vendor}:<voice>; `ttseval voices {vendor}`")
    assert fake.total_requests == before


def test_cartesia_voice_list_is_paged_through(env) -> None:
    with FakeCartesia(api_key=KEY, page_size=1) as fake:
        tts = CartesiaTTS("e07c00bc-4134-4eae-9ea4-1a55fb45746b", base_url=fake.base_url)
        assert [v["name"] for v in tts.voices()] == ["Sarah", "Barbershop Man", "Brooke"]
        tts.check_voice()
        assert fake.calls == 6  # three one-voice pages, twice


@pytest.mark.parametrize("vendor", VENDORS)
def test_missing_key_names_the_variable(vendor, monkeypatch) -> None:
    v = VENDORS[vendor]
    monkeypatch.delenv(v.env, raising=False)
    with pytest.raises(ValueError, match=v.env):
        v.cls(v.voice)
    with pytest.raises(ValueError, match=v.env):  # a custom endpoint of a paid API still needs the key
        v.cls(v.voice, base_url="http://127.0.0.1:9")


def test_price_tables() -> None:
    assert ElevenLabsTTS("v", api_key="k").usd_per_mchar == 100.0
    assert ElevenLabsTTS("v", api_key="k", model="eleven_flash_v2_5").usd_per_mchar == 50.0
    assert DeepgramTTS("aura-2-thalia-en", api_key="k").usd_per_mchar == 30.0
    assert DeepgramTTS("aura-asteria-en", api_key="k").usd_per_mchar == 15.0
    assert CartesiaTTS("v", api_key="k", model="sonic-2").usd_per_mchar == 50.0
    assert all(
        cls(VENDORS[n].voice, api_key="k").billable_chars("Twelve chars", "ignored") == 12
        for n, cls in (("elevenlabs", ElevenLabsTTS), ("deepgram", DeepgramTTS), ("cartesia", CartesiaTTS))
    )
