"""sherpa-onnx speaker embeddings from a local ONNX file built in the test (tests/support/tiny_models.py: an
x-vector-shaped network with random weights and sherpa-onnx's metadata): embeddings equal sherpa-onnx's own
SpeakerEmbeddingExtractor called on each clip, and a file sherpa-onnx would exit the process on is refused first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.tiny_models import build_tiny_sherpa_speaker
from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, SpecError
from ttseval.core.protocols import SpeakerEncoder
from ttseval.providers.speaker import SPEAKERS


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tiny_sherpa_speaker(tmp_path_factory.mktemp("sherpa") / "campplus_tiny.onnx")


def _voice(rate_hz: int, seconds: float, f0: float, seed: int) -> Audio:
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate_hz * seconds)) / rate_hz
    wave = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6))
    return Audio((0.2 * wave + 0.01 * rng.standard_normal(t.size)).astype(np.float32), rate_hz)


def test_embeddings_equal_sherpa_onnx_own_extractor_on_each_clip(model: Path) -> None:
    import sherpa_onnx

    encoder = SPEAKERS.build(f"sherpa-onnx:model={model}")
    clips = [_voice(16000, 1.0, 120, 0), _voice(22050, 1.5, 210, 1), _voice(16000, 0.7, 120, 2)]
    got = encoder.embed(clips)
    extractor = sherpa_onnx.SpeakerEmbeddingExtractor(sherpa_onnx.SpeakerEmbeddingExtractorConfig(model=str(model)))
    for clip, vector in zip(clips, got):
        stream = extractor.create_stream()
        stream.accept_waveform(sample_rate=clip.sample_rate_hz, waveform=clip.samples)
        stream.input_finished()
        assert extractor.is_ready(stream)
        want = np.array(extractor.compute(stream))
        assert vector.shape == (16,) and np.abs(vector - want).max() < 1e-5
    assert np.abs(got[0] - got[1]).max() > 1e-2  # different clips, different embeddings: the model ran
    assert isinstance(encoder, SpeakerEncoder)
    assert json.loads(json.dumps(encoder.metadata())) == {
        "engine": "sherpa-onnx",
        "version": "2.0.1",
        "model_file": "campplus_tiny.onnx",
        "framework": "3d-speaker",
        "embedding_size": 16,
        "sample_rate_hz": 16000,
        "language": "English",
        "device": "cpu",
    }


def test_wespeaker_metadata_runs_and_an_empty_clip_is_refused(tmp_path: Path) -> None:
    encoder = SPEAKERS.build(
        f"sherpa-onnx:model={build_tiny_sherpa_speaker(tmp_path / 'w.onnx', framework='wespeaker')}"
    )
    assert encoder.embed([_voice(16000, 0.5, 150, 0)])[0].shape == (16,)
    with pytest.raises(PermanentProviderError, match="clip 1 of the batch: its 0.0 ms give no feature frame"):
        encoder.embed([_voice(16000, 0.5, 150, 0), Audio(np.zeros(0, np.float32), 16000)])


def test_metadata_sherpa_onnx_would_exit_on_is_refused_before_it_loads(tmp_path: Path) -> None:
    build_tiny_sherpa_speaker(tmp_path / "a.onnx", metadata={"framework": None})
    build_tiny_sherpa_speaker(tmp_path / "b.onnx", metadata={"output_dim": None})
    # sherpa-onnx itself ends the process on such files, no Python exception: exit(-1) when it loads a model
    # without output_dim, a segmentation fault on the first embedding of one without framework (measured: 255, 139)
    for name in ("a.onnx", "b.onnx"):
        code = (
            "import numpy, sherpa_onnx; e = sherpa_onnx.SpeakerEmbeddingExtractor(sherpa_onnx."
            f"SpeakerEmbeddingExtractorConfig(model={str(tmp_path / name)!r})); s = e.create_stream(); "
            "s.accept_waveform(sample_rate=16000, waveform=numpy.full(16000, 0.1, numpy.float32)); "
            "s.input_finished(); e.compute(s); print('embedded')"
        )
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert child.returncode != 0 and "embedded" not in child.stdout, name
    cases = {
        "a.onnx": r"framework='' in its metadata; sherpa-onnx takes \['3d-speaker', 'nemo', 'wespeaker'\]",
        "b.onnx": r"\(3d-speaker\) lacks metadata \['output_dim'\]",
        "c.onnx": r"lacks metadata \[\] and has non-integer \['sample_rate'\]",
        "d.onnx": "feature_normalize_type='per-utterance'; sherpa-onnx takes only 'global-mean' or none",
    }
    build_tiny_sherpa_speaker(tmp_path / "c.onnx", metadata={"sample_rate": "16k"})
    build_tiny_sherpa_speaker(tmp_path / "d.onnx", metadata={"feature_normalize_type": "per-utterance"})
    for name, message in cases.items():
        with pytest.raises(SpecError, match=message):
            SPEAKERS.build(f"sherpa-onnx:model={tmp_path / name}")
    (tmp_path / "e.onnx").write_bytes(b"not onnx")
    with pytest.raises(SpecError, match="is not an ONNX model onnxruntime can open"):
        SPEAKERS.build(f"sherpa-onnx:model={tmp_path / 'e.onnx'}")
    with pytest.raises(
        SpecError,
        match="sherpa-onnx needs a sherpa-onnx speaker-embedding .onnx file; it never "
        "downloads one: sherpa-onnx:model=",
    ):
        SPEAKERS.build("sherpa-onnx")
    with pytest.raises(SpecError, match=r"sherpa-onnx model='.*absent.onnx': no such file; give the path of a sherpa"):
        SPEAKERS.build(f"sherpa-onnx:model={tmp_path / 'absent.onnx'}")
