"""SpeechBrain's ECAPA-TDNN from a local folder with random weights of the real architecture
(tests/support/tiny_models.py): embeddings equal SpeechBrain's own EncoderClassifier.encode_batch on each clip alone and
a forward pass written out here (Fbank, sentence mean normalisation, ECAPA_TDNN), a zero-padded batch would not, and no
torchaudio is left."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.tiny_models import build_random_ecapa
from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, SpecError
from ttseval.core.protocols import SpeakerEncoder
from ttseval.providers.speaker import SPEAKERS


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return build_random_ecapa(tmp_path_factory.mktemp("spkrec-ecapa-voxceleb"))


@pytest.fixture(scope="module")
def ecapa(folder):
    return SPEAKERS.build(f"speechbrain-ecapa:model={folder}:device=cpu")


def _voice(rate_hz: int, seconds: float, f0: float, seed: int) -> Audio:
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate_hz * seconds)) / rate_hz
    wave = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6)) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    return Audio((0.2 * wave + 0.01 * rng.standard_normal(t.size)).astype(np.float32), rate_hz)


def test_embeddings_equal_encode_batch_alone_and_a_forward_written_out(ecapa, folder) -> None:
    import librosa
    import torch

    from ttseval.providers.speaker.speechbrain_ecapa import ECAPA, speechbrain_modules

    clips = [
        _voice(16000, 1.0, 120, 0),
        _voice(16000, 1.5, 200, 1),
        _voice(16000, 1.0, 160, 2),
        _voice(22050, 1.2, 140, 3),
    ]
    got = ecapa.embed(clips)
    sb = speechbrain_modules()
    model = sb["ECAPA_TDNN"](**ECAPA).eval()
    model.load_state_dict(torch.load(folder / "embedding_model.ckpt", weights_only=True))
    fbank = sb["Fbank"](n_mels=80)
    for clip, vector in zip(clips, got):
        samples = torch.from_numpy(librosa.resample(clip.samples, orig_sr=clip.sample_rate_hz, target_sr=16000))
        with torch.no_grad():
            own = ecapa._load().encode_batch(samples)[0, 0].numpy()  # SpeechBrain's call, the clip alone
            feats = fbank(samples[None])
            feats = feats - feats.mean(dim=1, keepdim=True)  # InputNormalization(sentence, std_norm=False), by hand
            by_hand = model(feats, torch.ones(1))[0, 0].numpy()
        assert vector.shape == (192,) and np.abs(vector - own).max() < 1e-5 and np.abs(vector - by_hand).max() < 1e-4
    assert np.abs(got[0] - got[1]).max() > 1e-2
    assert isinstance(ecapa, SpeakerEncoder) and "torchaudio" not in sys.modules


def test_a_zero_padded_batch_would_change_the_embedding_so_clips_are_batched_by_equal_length(ecapa) -> None:
    import torch

    short, long = _voice(16000, 1.0, 120, 0), _voice(16000, 1.5, 200, 1)
    [mine, _] = ecapa.embed([short, long])
    padded = torch.zeros(2, long.samples.size)
    padded[0, : short.samples.size] = torch.from_numpy(short.samples)
    padded[1] = torch.from_numpy(long.samples)
    with torch.no_grad():  # relative lengths given, as SpeechBrain documents: the padding still moves the embedding
        in_batch = ecapa._load().encode_batch(padded, torch.tensor([short.samples.size / long.samples.size, 1.0]))
    assert np.abs(in_batch[0, 0].numpy() - mine).max() > 1e-2


def test_short_clips_missing_and_wrong_weights_are_refused(ecapa, tmp_path: Path) -> None:
    import torch

    assert ecapa.embed([Audio(np.full(640, 0.1, np.float32), 16000)])[0].shape == (192,)  # five frames: enough
    with pytest.raises(PermanentProviderError, match="clip 1 of the batch: 39.9 ms is under 40 ms"):
        ecapa.embed([_voice(16000, 0.5, 120, 0), Audio(np.full(639, 0.1, np.float32), 16000)])
    with pytest.raises(
        SpecError,
        match="speechbrain-ecapa needs the folder of .*; it never downloads one: "
        "speechbrain-ecapa:model=/path/spkrec-ecapa-voxceleb",
    ):
        SPEAKERS.build("speechbrain-ecapa")
    with pytest.raises(
        SpecError,
        match=r"speechbrain-ecapa model='.*': no embedding_model.ckpt in that folder; "
        r"give the path of the folder",
    ):
        SPEAKERS.build(f"speechbrain-ecapa:model={tmp_path}")
    torch.save({"weight": torch.zeros(2)}, tmp_path / "embedding_model.ckpt")
    with pytest.raises(PermanentProviderError, match="is not spkrec-ecapa-voxceleb's ECAPA-TDNN"):
        SPEAKERS.build(f"speechbrain-ecapa:model={tmp_path}:device=cpu").embed([_voice(16000, 0.5, 120, 0)])
    assert json.loads(json.dumps(ecapa.metadata())) == {
        "engine": "speechbrain",
        "version": "1.1.2",
        "model": "ECAPA-TDNN (spkrec-ecapa-voxceleb)",
        "model_file": "embedding_model.ckpt",
        "embedding_size": 192,
        "sample_rate_hz": 16000,
        "device": "cpu",
    }
