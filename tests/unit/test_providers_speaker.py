"""Speaker encoders: Resemblyzer's real GE2E weights on clips of two engines and voices, checked against
Resemblyzer's own calls; a tiny WavLM x-vector model built here, checked against a forward pass by hand."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.support.tiny_models import build_tiny_wavlm_xvector
from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import SpeakerEncoder
from ttseval.providers.speaker import SPEAKERS

SENTENCES = (
    "The quick brown fox jumps over the lazy dog, and then it runs away.",
    "Another sentence entirely, spoken by the same voice for comparison.",
)


def _cos(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def voices(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two sentences from each of three voices: espeak-ng's default male, espeak-ng's female variant f3, flite."""
    folder = tmp_path_factory.mktemp("voices")
    out = {}
    for i, text in enumerate(SENTENCES):
        for voice, cmd in (
            ("espeak", ["espeak-ng", "-w"]),
            ("espeak-f3", ["espeak-ng", "-v", "en+f3", "-w"]),
            ("flite", None),
        ):
            path = folder / f"{voice}-{i}.wav"
            args = ["flite", "-t", text, "-o", str(path)] if cmd is None else [*cmd, str(path), text]
            subprocess.run(args, check=True, capture_output=True)
            out[f"{voice}-{i}"] = path
    return out


def _load(path: Path) -> Audio:
    return Audio.from_wav_bytes(path.read_bytes())


@pytest.fixture(scope="module")
def resemblyzer():
    return SPEAKERS.build("resemblyzer")


def test_resemblyzer_puts_the_same_speaker_above_another_engine_or_voice(resemblyzer, voices) -> None:
    names = sorted(voices)
    vectors = dict(zip(names, resemblyzer.embed([_load(voices[n]) for n in names])))
    for voice in ("espeak", "flite"):
        same = _cos(vectors[f"{voice}-0"], vectors[f"{voice}-1"])  # one voice, two sentences
        other = "flite" if voice == "espeak" else "espeak"
        assert same > 0.85, same
        for stranger in (f"{other}-0", f"{other}-1"):
            assert same > _cos(vectors[f"{voice}-0"], vectors[stranger]) + 0.15
    # a second voice of the same engine (espeak-ng's female variant) is further than the same voice
    assert _cos(vectors["espeak-0"], vectors["espeak-1"]) > _cos(vectors["espeak-0"], vectors["espeak-f3-1"])


def test_resemblyzer_embedding_equals_resemblyzers_own_call(resemblyzer, voices) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from resemblyzer import VoiceEncoder, preprocess_wav
    own = VoiceEncoder(device="cpu", verbose=False).embed_utterance(preprocess_wav(voices["flite-0"]))
    mine = resemblyzer.embed([_load(voices["flite-0"])])[0]
    assert mine.shape == (256,) and np.abs(mine - own).max() < 1e-5
    assert isinstance(resemblyzer, SpeakerEncoder)
    assert json.loads(json.dumps(resemblyzer.metadata()))["version"] == "0.1.4"


def test_resemblyzer_refuses_clips_with_no_speech(resemblyzer) -> None:
    for clip in (Audio(np.zeros(0, np.float32), 16000), Audio(np.zeros(16000, np.float32), 16000)):
        with pytest.raises(PermanentProviderError, match="at least 0.1 s of speech"):
            resemblyzer.embed([clip])


@pytest.fixture(scope="module")
def tiny_sv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_wavlm_xvector(tmp_path_factory.mktemp("tiny-sv"))


def _tone(rate_hz: int, seconds: float, freq_hz: float) -> Audio:
    t = np.arange(int(rate_hz * seconds)) / rate_hz
    return Audio((0.4 * np.sin(2 * np.pi * freq_hz * t)).astype(np.float32), rate_hz)


def test_wavlm_xvector_equals_a_forward_pass_by_hand_alone_and_in_a_padded_batch(tiny_sv: Path) -> None:
    import librosa
    import torch
    from transformers import Wav2Vec2FeatureExtractor, WavLMForXVector

    encoder = SPEAKERS.build(f"transformers-sv:model={tiny_sv}")
    clips = [_tone(22050, 1.0, 220), _tone(16000, 2.5, 330)]
    batch = encoder.embed(clips)
    model = WavLMForXVector.from_pretrained(tiny_sv).eval()
    extractor = Wav2Vec2FeatureExtractor.from_pretrained(tiny_sv)
    for clip, got in zip(clips, batch):
        samples = librosa.resample(clip.samples, orig_sr=clip.sample_rate_hz, target_sr=16000)
        with torch.no_grad():
            want = model(**extractor(samples, sampling_rate=16000, return_tensors="pt")).embeddings[0].numpy()
        assert got.shape == (16,) and np.abs(got - want).max() < 1e-5  # padding in the batch changes nothing
        assert np.abs(encoder.embed([clip])[0] - got).max() < 1e-5
    assert json.loads(json.dumps(encoder.metadata()))["embedding_size"] == 16
    with pytest.raises(PermanentProviderError, match="no samples"):
        encoder.embed([Audio(np.zeros(0, np.float32), 16000)])


def test_transformers_sv_needs_a_model_and_never_downloads(tmp_path: Path) -> None:
    from ttseval.core.errors import SpecError

    with pytest.raises(SpecError, match="needs a model"):
        SPEAKERS.build("transformers-sv")
    with pytest.raises(SpecError):
        SPEAKERS.build(f"transformers-sv:model={tmp_path / 'absent'}")
