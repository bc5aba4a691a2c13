"""TTS providers against the real engines: espeak-ng and flite (apt), Piper with the bundled 'joe' voice."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, SpecError
from ttseval.core.protocols import TTSProvider
from ttseval.providers.tts import TTS
from ttseval.providers.tts.espeak_ng import EspeakNGTTS
from ttseval.providers.tts.flite import FliteTTS, flite_voices
from ttseval.providers.tts.piper import PiperTTS

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def espeak_auto() -> EspeakNGTTS:
    return EspeakNGTTS()


@pytest.fixture(scope="module")
def espeak_en_us() -> EspeakNGTTS:
    return EspeakNGTTS("en-us")


@pytest.fixture(scope="module")
def flite() -> FliteTTS:
    return FliteTTS()


@pytest.fixture(scope="module")
def piper() -> PiperTTS:
    return PiperTTS()


def _assert_speech(audio: Audio, rate_hz: int, min_s: float = 1.5, max_s: float = 5.0) -> None:
    assert audio.sample_rate_hz == rate_hz
    assert audio.samples.dtype == np.float32 and audio.samples.ndim == 1
    assert min_s <= audio.duration_s <= max_s, audio.duration_s
    assert not audio.is_silent()
    # speech has energy spread over the clip, not one click
    rms = float(np.sqrt(np.mean(audio.samples**2)))
    assert 0.01 < rms < 0.7, rms


def test_espeak_speaks_english_deterministically(espeak_en_us: EspeakNGTTS) -> None:
    first = espeak_en_us.synthesize(SENTENCE, "en-US")
    _assert_speech(first, 22050)
    assert espeak_en_us.synthesize(SENTENCE, "en-US").to_wav_bytes() == first.to_wav_bytes()
    assert isinstance(espeak_en_us, TTSProvider)
    assert espeak_en_us.version == "1.51"


def test_flite_speaks_english_deterministically(flite: FliteTTS) -> None:
    first = flite.synthesize(SENTENCE, "en")
    _assert_speech(first, 16000)
    assert flite.synthesize(SENTENCE, "en").to_wav_bytes() == first.to_wav_bytes()
    assert flite.version.startswith("flite-2.2")


def test_flite_kal_voice_is_8khz() -> None:
    audio = FliteTTS("kal").synthesize(SENTENCE, "en")
    _assert_speech(audio, 8000)


def test_piper_speaks_english(piper: PiperTTS) -> None:
    audio = piper.synthesize(SENTENCE, "en-US")
    _assert_speech(audio, 22050)
    meta = piper.metadata()
    assert meta["version"] == "1.8.0" and meta["language"] == "en_US"
    assert meta["model_path"].endswith("en_US-joe-medium.onnx")


def test_piper_without_noise_is_repeatable() -> None:
    tts = PiperTTS(noise_scale="0", noise_w_scale="0")
    first = tts.synthesize("Hello there.", "en")
    assert tts.synthesize("Hello there.", "en").to_wav_bytes() == first.to_wav_bytes()


@pytest.mark.parametrize(("threads", "intra_op"), [("1", 1), (None, 0)])
def test_piper_builds_one_session_with_the_workers_share_of_the_cores(
    monkeypatch: pytest.MonkeyPatch, threads: str | None, intra_op: int
) -> None:
    # On a Dask worker (TTSEVAL_MODEL_THREADS set by the LocalCluster) the voice's one ONNX session uses that many
    # intra-op threads; elsewhere onnxruntime's default (0 = all cores). One session per voice, not PiperVoice.load's
    # and then a second one (as a profile of the workers showed).
    import onnxruntime

    from ttseval.providers import MODEL_THREADS_VARIABLE

    if threads is None:
        monkeypatch.delenv(MODEL_THREADS_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(MODEL_THREADS_VARIABLE, threads)
    made = []
    real = onnxruntime.InferenceSession

    def counting(*args, **kwargs):
        made.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", counting)
    tts = PiperTTS()
    _assert_speech(tts.synthesize(SENTENCE, "en"), 22050)
    assert made == [str(tts.model_path)]
    assert tts._load().session.get_session_options().intra_op_num_threads == intra_op


@pytest.mark.parametrize(
    ("fixture", "language", "expected"),
    [
        ("espeak_auto", "en", True),
        ("espeak_auto", "en-GB", True),
        ("espeak_auto", "fr-FR", True),
        ("espeak_auto", "hi", True),
        ("espeak_auto", "zh-CN", True),
        ("espeak_auto", "cmn", True),
        ("espeak_auto", "ur", True),
        ("espeak_auto", "ps", False),  # Pashto arrived in espeak-ng 1.52
        ("espeak_en_us", "en", True),
        ("espeak_en_us", "en-GB", True),
        ("espeak_en_us", "fr", False),
        ("flite", "en", True),
        ("flite", "en-US", True),
        ("flite", "fr", False),
        ("piper", "en-GB", True),
        ("piper", "de", False),
    ],
)
def test_supports_language(request: pytest.FixtureRequest, fixture: str, language: str, expected: bool) -> None:
    assert request.getfixturevalue(fixture).supports_language(language) is expected


@pytest.mark.parametrize("tag", ["eng", "en-GB", "EN", "en_US"])
def test_english_however_tagged_passes_validation_and_is_spoken(request: pytest.FixtureRequest, tag: str) -> None:
    # One reduction (ttseval.core.languages.base_language) for the dataset check and every provider: a tag the dataset
    # check accepts as English is English to flite, Piper and espeak-ng too (ISO 639-2 'eng' was 'unsupported').
    from ttseval.core.languages import base_language, is_known_language

    assert is_known_language(tag.replace("_", "-")) and base_language(tag) == "en"
    for fixture in ("flite", "piper", "espeak_en_us", "espeak_auto"):
        assert request.getfixturevalue(fixture).supports_language(tag), (fixture, tag)


def test_iso_639_2_pashto_is_pashto(espeak_auto: EspeakNGTTS, piper: PiperTTS) -> None:
    from ttseval.core.languages import base_language
    from ttseval.providers.asr import whisper_language

    assert base_language("pus") == base_language("ps-AF") == "ps"
    assert whisper_language("pus") == whisper_language("ps") == "ps"
    assert espeak_auto.supports_language("pus") is espeak_auto.supports_language("ps") is False  # espeak-ng 1.51
    assert piper.supports_language("pus") is False


def test_espeak_auto_picks_the_item_language(espeak_auto: EspeakNGTTS) -> None:
    french = espeak_auto.synthesize("Bonjour tout le monde, comment allez-vous?", "fr-FR")
    _assert_speech(french, 22050, min_s=1.0)
    forced = espeak_auto.synthesize("Bonjour tout le monde, comment allez-vous?", "fr-FR", voice="fr-fr")
    assert forced.to_wav_bytes() == french.to_wav_bytes()
    with pytest.raises(PermanentProviderError, match="'ps'") as info:
        espeak_auto.synthesize("سلام", "ps")
    assert info.value.spec == "espeak-ng"


def test_espeak_reads_text_from_stdin_not_argv(espeak_en_us: EspeakNGTTS) -> None:
    # On argv, '--help' would be an option; on stdin it is text to speak.
    audio = espeak_en_us.synthesize("--help me with this sentence", "en")
    _assert_speech(audio, 22050, min_s=0.8)


def test_flite_text_starting_with_dash(flite: FliteTTS) -> None:
    _assert_speech(flite.synthesize("-t is not an option here", "en"), 16000, min_s=0.8)


def test_espeak_speed_option_changes_duration() -> None:
    slow = EspeakNGTTS("en-us", speed="100").synthesize(SENTENCE, "en")
    fast = EspeakNGTTS("en-us", speed="300").synthesize(SENTENCE, "en")
    assert fast.duration_s < 0.6 * slow.duration_s
    assert EspeakNGTTS("en-us", speed="100").metadata()["options"]["speed"] == 100


@pytest.mark.parametrize("cls", [EspeakNGTTS, FliteTTS, PiperTTS])
def test_unknown_option_is_named(cls: type) -> None:
    with pytest.raises(ValueError, match="'bogus'") as info:
        cls(bogus="1")
    assert "valid options" in str(info.value)


def test_bad_option_value_is_named() -> None:
    with pytest.raises(ValueError, match="speed='fast'"):
        EspeakNGTTS(speed="fast")
    with pytest.raises(ValueError, match="pitch"):
        EspeakNGTTS(pitch="150")


def test_registry_builds_and_wraps_option_errors() -> None:
    built = TTS.build("espeak-ng:en-us:speed=140")
    assert isinstance(built, EspeakNGTTS) and built.options.speed == 140 and built.voice == "en-us"
    with pytest.raises(SpecError, match="bogus"):
        TTS.build("flite:slt:bogus=1")


def test_unknown_voices_list_the_choices() -> None:
    with pytest.raises(ValueError, match="slt"):
        FliteTTS("nobody")
    assert {"slt", "kal", "awb", "rms"} <= set(flite_voices())
    with pytest.raises(ValueError, match="no voice 'xx-nope'"):
        EspeakNGTTS("xx-nope")
    with pytest.raises(ValueError, match="model=PATH"):
        PiperTTS("amy")


@pytest.mark.parametrize("fixture", ["espeak_en_us", "flite", "piper"])
def test_empty_text_returns_audio_not_an_error(request: pytest.FixtureRequest, fixture: str) -> None:
    audio = request.getfixturevalue(fixture).synthesize("", "en")
    assert isinstance(audio, Audio) and audio.is_silent()


def test_metadata_is_json_safe(espeak_auto: EspeakNGTTS, flite: FliteTTS, piper: PiperTTS) -> None:
    import json

    for provider in (espeak_auto, flite, piper):
        meta = json.loads(json.dumps(provider.metadata()))
        assert meta["version"] == provider.version and meta["engine"]


def test_importing_providers_loads_no_engine_library() -> None:
    code = (
        "import sys, ttseval.providers.tts.piper, ttseval.providers.tts.espeak_ng, ttseval.providers.tts.flite, "
        "ttseval.providers.asr.faster_whisper, ttseval.providers.asr.transformers_asr, "
        "ttseval.providers.quality.dnsmos; "
        "heavy = {'piper', 'onnxruntime', 'torch', 'transformers', 'faster_whisper', 'ctranslate2', 'speechmos'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
