"""VoxLingua107 LID (SpeechBrain) from a local folder with random weights of its real modules
(tests/support/tiny_models.py): answers equal SpeechBrain's own classify_batch on each clip alone and a forward pass
written out here, labels are read from its label_encoder.txt, a clip under 40 ms has nothing to hear, and a broken
folder is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.support.tiny_models import VOXLINGUA_LABELS, build_random_voxlingua107
from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, SpecError
from ttseval.core.protocols import LanguageGuess, LanguageIdentifier
from ttseval.providers.lid import LIDS


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return build_random_voxlingua107(tmp_path_factory.mktemp("lang-id-voxlingua107-ecapa"))


@pytest.fixture(scope="module")
def lid(folder):
    return LIDS.build(f"speechbrain-lid:model={folder}:device=cpu")


def _voice(rate_hz: int, seconds: float, f0: float, seed: int) -> Audio:
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate_hz * seconds)) / rate_hz
    wave = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6)) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    return Audio((0.2 * wave + 0.05 * rng.standard_normal(t.size)).astype(np.float32), rate_hz)


def test_answers_equal_classify_batch_alone_and_a_forward_written_out(lid, folder) -> None:
    import librosa
    import torch

    from ttseval.providers._speechbrain import speechbrain_modules
    from ttseval.providers.lid.speechbrain_lid import CLASSIFIER, ECAPA

    clips = [
        _voice(16000, 1.0, 100, 0),
        _voice(16000, 1.5, 300, 1),
        _voice(16000, 1.0, 180, 2),
        _voice(22050, 1.2, 240, 3),
    ]
    got = lid.identify(clips)
    sb = speechbrain_modules()
    embedding = sb["ECAPA_TDNN"](**ECAPA).eval()
    embedding.load_state_dict(torch.load(folder / "embedding_model.ckpt", weights_only=True))
    classifier = sb["Classifier"](**CLASSIFIER).eval()
    classifier.load_state_dict(torch.load(folder / "classifier.ckpt", weights_only=True))
    fbank = sb["Fbank"](n_mels=60)
    for clip, guess in zip(clips, got):
        samples = torch.from_numpy(librosa.resample(clip.samples, orig_sr=clip.sample_rate_hz, target_sr=16000))
        with torch.no_grad():
            _, score, index, labels = lid._load().classify_batch(samples[None])  # SpeechBrain's call, alone
            feats = fbank(samples[None])
            feats = feats - feats.mean(dim=1, keepdim=True)  # sentence mean normalisation, by hand
            log_probs = classifier(embedding(feats, torch.ones(1)))[0, 0]
        top = int(log_probs.argmax())
        assert int(index[0]) == top and guess.language == VOXLINGUA_LABELS[top].split(":")[0]
        assert labels[0] == VOXLINGUA_LABELS[top]  # the label encoder read from label_encoder.txt
        assert guess.prob == pytest.approx(float(torch.exp(score[0])), abs=1e-5)
        assert guess.prob == pytest.approx(float(log_probs.exp().max()), abs=1e-4) and 0 < guess.prob <= 1
    assert len({g.language for g in got}) > 1  # the answers differ between clips: the weights were loaded
    assert isinstance(lid, LanguageIdentifier)


def test_a_clip_under_40_ms_has_nothing_to_hear_and_the_others_are_answered(lid) -> None:
    guesses = lid.identify(
        [Audio(np.full(639, 0.1, np.float32), 16000), _voice(16000, 0.5, 150, 0), Audio(np.zeros(0, np.float32), 16000)]
    )
    assert guesses[0] == LanguageGuess(None, None) == guesses[2]
    assert guesses[1].language is not None and guesses[1] == lid.identify([_voice(16000, 0.5, 150, 0)])[0]


def test_a_broken_folder_is_refused(folder, tmp_path: Path) -> None:
    with pytest.raises(
        SpecError,
        match="speechbrain-lid needs the folder of .*; it never downloads one: "
        "speechbrain-lid:model=/path/lang-id-voxlingua107-ecapa",
    ):
        LIDS.build("speechbrain-lid")
    with pytest.raises(
        SpecError,
        match=r"speechbrain-lid model='.*': no embedding_model.ckpt, "
        r"classifier.ckpt, label_encoder.txt in that folder",
    ):
        LIDS.build(f"speechbrain-lid:model={tmp_path}")
    for name in ("embedding_model.ckpt", "classifier.ckpt"):
        shutil.copy(folder / name, tmp_path / name)
    (tmp_path / "label_encoder.txt").write_text("'ps: Pashto' => 0\n================\n'starting_index' => 0\n")
    with pytest.raises(PermanentProviderError, match="label_encoder.txt has 1 labels; the classifier has 107"):
        LIDS.build(f"speechbrain-lid:model={tmp_path}:device=cpu").identify([_voice(16000, 0.5, 150, 0)])
    (tmp_path / "classifier.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(PermanentProviderError, match="is not lang-id-voxlingua107-ecapa's classifier"):
        LIDS.build(f"speechbrain-lid:model={tmp_path}:device=cpu").identify([_voice(16000, 0.5, 150, 0)])


def test_metadata(lid) -> None:
    assert json.loads(json.dumps(lid.metadata())) == {
        "engine": "speechbrain",
        "version": "1.1.2",
        "model": "VoxLingua107 ECAPA (lang-id-voxlingua107-ecapa)",
        "model_files": ["embedding_model.ckpt", "classifier.ckpt", "label_encoder.txt"],
        "classes": 107,
        "sample_rate_hz": 16000,
        "device": "cpu",
    }
