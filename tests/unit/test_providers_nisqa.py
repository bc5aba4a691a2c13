"""NISQA through torchmetrics 1.9 with random weights of the real architecture (checkpoints built by
tests/support/tiny_models.py in nisqa.tar's format): scores equal torchmetrics' own functional call
`non_intrusive_speech_quality_assessment` (its loader pointed at a folder holding the same file, so it downloads
nothing), clips are resampled to 48 kHz, too short and too long clips are refusals at exactly the lengths where
torchmetrics raises, and nisqa_tts.tar's single-head model loads into the same modules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.support.tiny_models import NISQA_ARGS, build_random_nisqa
from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, SpecError
from ttseval.core.protocols import QualityProvider
from ttseval.providers.quality import QUALITY


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    return build_random_nisqa(tmp_path_factory.mktemp("nisqa") / "nisqa.tar")


@pytest.fixture(scope="module")
def nisqa(weights):
    return QUALITY.build(f"nisqa:weights={weights}")


@pytest.fixture()
def torchmetrics_nisqa(weights, tmp_path, monkeypatch):
    """torchmetrics' functional NISQA, reading `weights` from its own folder layout (NISQA_DIR/nisqa.tar)."""
    import torchmetrics.functional.audio.nisqa as module

    folder = tmp_path / "NISQA"
    folder.mkdir()
    shutil.copy(weights, folder / "nisqa.tar")
    monkeypatch.setattr(module, "NISQA_DIR", str(folder))
    monkeypatch.setattr(module, "_download_weights", lambda: pytest.fail("torchmetrics tried to download"))
    module._load_nisqa_model.cache_clear()
    yield module.non_intrusive_speech_quality_assessment
    module._load_nisqa_model.cache_clear()


def _speechlike(rate_hz: int, seconds: float, seed: int) -> Audio:
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate_hz * seconds)) / rate_hz
    f0 = 110 + 50 * seed
    wave = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 8)) * (0.5 + 0.5 * np.sin(2 * np.pi * 2 * t))
    return Audio((0.2 * wave + 0.02 * rng.standard_normal(t.size)).astype(np.float32), rate_hz)


def test_scores_and_dimensions_equal_torchmetrics_functional_call(nisqa, torchmetrics_nisqa) -> None:
    import librosa
    import torch

    # two 1 s clips at 48 kHz (one equal-length batch), one of 1.5 s, one at 22.05 kHz resampled to 48 kHz
    clips = [
        _speechlike(48000, 1.0, 0),
        _speechlike(48000, 1.5, 1),
        _speechlike(48000, 1.0, 2),
        _speechlike(22050, 1.2, 3),
    ]
    scores = nisqa.score(clips)
    for clip, score in zip(clips, scores):
        samples = librosa.resample(clip.samples, orig_sr=clip.sample_rate_hz, target_sr=48000)
        want = torchmetrics_nisqa(torch.from_numpy(samples), 48000).tolist()  # mos, noi, dis, col, loud
        assert [score.details[k] for k in ("mos", "noi", "dis", "col", "loud")] == pytest.approx(want, abs=1e-4)
        assert score.mos == score.details["mos"] and score.refused is None
    assert len({round(s.mos, 3) for s in scores}) == 4 and len({round(v, 3) for v in scores[0].details.values()}) == 5
    assert isinstance(nisqa, QualityProvider)


def test_too_short_and_too_long_clips_are_refusals_where_torchmetrics_raises(nisqa, torchmetrics_nisqa) -> None:
    import torch

    shortest = (NISQA_ARGS["ms_seg_length"] - 1) * 480  # 14 hops of 10 ms at 48 kHz: 6720 samples
    rng = np.random.default_rng(0)
    noise = (0.1 * rng.standard_normal(shortest)).astype(np.float32)
    with pytest.raises(RuntimeError, match="too short"):
        torchmetrics_nisqa(torch.from_numpy(noise[:-1]), 48000)
    want = torchmetrics_nisqa(torch.from_numpy(noise), 48000)[0].item()
    longest = (1300 * 4 + 14) * 480 - 1  # 1300 segments hopped by 4 frames, the last 15 frames long
    long_noise = (0.1 * rng.standard_normal(longest + 1)).astype(np.float32)
    with pytest.raises(RuntimeError, match="Maximum number of mel spectrogram windows exceeded"):
        torchmetrics_nisqa(torch.from_numpy(long_noise), 48000)
    ok_long = torchmetrics_nisqa(torch.from_numpy(long_noise[:-1]), 48000)[0].item()

    scores = nisqa.score(
        [Audio(noise[:-1], 48000), Audio(noise, 48000), Audio(long_noise, 48000), Audio(long_noise[:-1], 48000)]
    )
    assert np.isnan(scores[0].mos) and scores[0].refused == (
        "nisqa needs at least 140 ms of audio (one 15-frame mel segment); the clip has 139.98 ms"
    )
    assert scores[1].refused is None and scores[1].mos == pytest.approx(want, abs=1e-4)
    assert np.isnan(scores[2].mos) and scores[2].refused == (
        "nisqa takes less than 52.14 s of audio (1300 mel segments); the clip has 52.14 s: cut it"
    )
    assert scores[3].refused is None and scores[3].mos == pytest.approx(ok_long, abs=1e-4)


def test_nisqa_tts_naturalness_loads_into_the_single_head_model(weights, tmp_path, nisqa) -> None:
    natural = QUALITY.build(f"nisqa:weights={build_random_nisqa(tmp_path / 'nisqa_tts.tar', naturalness=True)}")
    clips = [_speechlike(48000, 1.0, 0), _speechlike(16000, 2.0, 1)]
    got = natural.score(clips)
    # its one head is the DIM checkpoint's overall-MOS head, over the same CNN and self-attention weights
    assert [s.mos for s in got] == pytest.approx([s.mos for s in nisqa.score(clips)], abs=1e-5)
    assert [set(s.details) for s in got] == [{"naturalness"}] * 2 and got[0].details["naturalness"] == got[0].mos
    meta = json.loads(json.dumps(natural.metadata()))
    assert meta["model"] == "NISQA v2.0 (naturalness)" and meta["outputs"] == ["naturalness"]


def test_weights_are_required_local_and_checked(tmp_path: Path) -> None:
    import torch

    with pytest.raises(
        SpecError,
        match=r"nisqa needs a NISQA checkpoint \(nisqa.tar, or nisqa_tts.tar for TTS "
        r"naturalness\); it never downloads one: nisqa:weights=/path/nisqa.tar",
    ):
        QUALITY.build("nisqa")
    with pytest.raises(SpecError, match=r"nisqa weights='.*absent.tar': no such file; give the path of a NISQA"):
        QUALITY.build(f"nisqa:weights={tmp_path / 'absent.tar'}")
    clip = [_speechlike(48000, 0.5, 0)]
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.tar")
    with pytest.raises(PermanentProviderError, match="not a NISQA checkpoint"):
        QUALITY.build(f"nisqa:weights={tmp_path / 'other.tar'}").score(clip)
    torch.save({"args": NISQA_ARGS | {"td": "lstm"}, "model_state_dict": {}}, tmp_path / "lstm.tar")
    with pytest.raises(PermanentProviderError, match=r"need parts torchmetrics' port does not have: \{'td': 'lstm'\}"):
        QUALITY.build(f"nisqa:weights={tmp_path / 'lstm.tar'}").score(clip)
    torch.save({"args": NISQA_ARGS, "model_state_dict": {"pool_layers.0.x": torch.zeros(1)}}, tmp_path / "bad.tar")
    with pytest.raises(PermanentProviderError, match="do not fit NISQA's model"):
        QUALITY.build(f"nisqa:weights={tmp_path / 'bad.tar'}").score(clip)


def test_metadata_names_the_non_commercial_licence(nisqa) -> None:
    nisqa.score([_speechlike(48000, 0.5, 0)])
    assert json.loads(json.dumps(nisqa.metadata())) == {
        "engine": "torchmetrics",
        "version": "1.9.0",
        "model": "NISQA v2.0 (dimensions)",
        "model_file": "nisqa.tar",
        "sample_rate_hz": 48000,
        "outputs": ["mos", "noi", "dis", "col", "loud"],
        "weights_licence": "CC BY-NC-SA 4.0 (non-commercial)",
        "device": "cpu",
    }
