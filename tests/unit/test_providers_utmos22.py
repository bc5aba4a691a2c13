"""UTMOS22 (utmos-pytorch) with random weights of the real architecture, saved as the package's state dict by
tests/support/tiny_models.py: scores equal the package's own `UTMOSScoreTorch.score` on each clip alone, a zero-padded
batch would not (the pitfall the provider avoids), a clip under 25 ms is a refusal, and the weights are never
downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.support.tiny_models import build_random_utmos22
from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, SpecError
from ttseval.core.protocols import QualityProvider
from ttseval.providers.quality import QUALITY


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    return build_random_utmos22(tmp_path_factory.mktemp("utmos22") / "utmos_state_dict.pt")


@pytest.fixture(scope="module")
def utmos(weights):
    return QUALITY.build(f"utmos22:weights={weights}:device=cpu")


def _speechlike(rate_hz: int, seconds: float, seed: int) -> Audio:
    """A harmonic tone with a slow amplitude envelope and a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate_hz * seconds)) / rate_hz
    f0 = 120 + 40 * seed
    wave = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6)) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return Audio((0.2 * wave + 0.01 * rng.standard_normal(t.size)).astype(np.float32), rate_hz)


def test_batch_scores_equal_the_packages_own_score_on_each_clip_alone(utmos, weights) -> None:
    import librosa
    import torch
    from utmos_pytorch import UTMOSScoreTorch

    # two clips of 1.0 s at 16 kHz (one equal-length batch), one of 1.5 s, one at 22.05 kHz (resampled)
    clips = [
        _speechlike(16000, 1.0, 0),
        _speechlike(16000, 1.5, 1),
        _speechlike(16000, 1.0, 2),
        _speechlike(22050, 1.2, 3),
    ]
    got = [s.mos for s in utmos.score(clips)]
    reference = UTMOSScoreTorch(ckpt_path=str(weights), device="cpu")  # the package's own loading and call
    want = []
    for clip in clips:
        samples = librosa.resample(clip.samples, orig_sr=clip.sample_rate_hz, target_sr=16000)
        want.append(reference.score(torch.from_numpy(samples)).item())
    assert got == pytest.approx(want, abs=1e-4)
    assert len({round(m, 3) for m in got}) == 4  # different clips, different scores: the weights were loaded
    assert [s.details for s in utmos.score(clips[:1])] == [{"utmos22": pytest.approx(got[0], abs=1e-4)}]
    assert isinstance(utmos, QualityProvider)


def test_a_zero_padded_batch_would_change_the_score_so_clips_are_batched_by_equal_length(utmos, weights) -> None:
    import torch
    from utmos_pytorch import UTMOSScoreTorch

    short, long = _speechlike(16000, 0.8, 0), _speechlike(16000, 2.0, 1)
    reference = UTMOSScoreTorch(ckpt_path=str(weights), device="cpu")
    alone = reference.score(torch.from_numpy(short.samples)).item()
    padded = torch.zeros(2, 1, long.samples.size)
    padded[0, 0, : short.samples.size] = torch.from_numpy(short.samples)
    padded[1, 0] = torch.from_numpy(long.samples)
    in_padded_batch = reference.score(padded)[0].item()
    assert abs(in_padded_batch - alone) > 1e-3  # the upstream UTMOS22 pitfall: padding moves the score
    long_alone = reference.score(torch.from_numpy(long.samples)).item()
    [mine_short, mine_long] = [s.mos for s in utmos.score([short, long])]
    # each clip of the mixed-length batch scores as the package scores it alone: neither is padded to the other
    assert mine_short == pytest.approx(alone, abs=1e-4)
    assert mine_long == pytest.approx(long_alone, abs=1e-4)
    assert abs(mine_short - mine_long) > 1e-3  # two different clips: the pair is not one score copied twice


def test_a_clip_under_25_ms_is_refused_with_its_reason_and_the_others_keep_their_scores(utmos) -> None:
    clips = [
        _speechlike(16000, 1.0, 0),
        Audio(np.full(300, 0.1, np.float32), 16000),
        Audio(np.zeros(0, np.float32), 8000),
    ]
    scores = utmos.score(clips)
    assert scores[0].refused is None and np.isfinite(scores[0].mos)
    for score, ms in zip(scores[1:], ("18.8", "0.0")):
        assert np.isnan(score.mos) and score.refused == (
            f"utmos22 needs at least 25 ms of audio (its first wav2vec 2.0 frame); the clip has {ms} ms"
        )
    assert scores[0].mos == pytest.approx(utmos.score(clips[:1])[0].mos, abs=1e-6)


def test_weights_are_required_local_and_checked(tmp_path: Path) -> None:
    import torch

    with pytest.raises(
        SpecError,
        match=r"utmos22 needs the converted UTMOS22 .*; it never downloads one: "
        r"utmos22:weights=/path/utmos_state_dict.pt",
    ):
        QUALITY.build("utmos22")
    with pytest.raises(SpecError, match=r"utmos22 weights='.*absent.pt': no such file; give the path of the converted"):
        QUALITY.build(f"utmos22:weights={tmp_path / 'absent.pt'}")
    wrong = tmp_path / "wrong.pt"
    torch.save({"linear.weight": torch.zeros(2, 2)}, wrong)
    with pytest.raises(PermanentProviderError, match=r"lack \d+ of the model's \d+ tensors"):
        QUALITY.build(f"utmos22:weights={wrong}:device=cpu").score([_speechlike(16000, 0.5, 0)])
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(PermanentProviderError, match="not a torch state dict"):
        QUALITY.build(f"utmos22:weights={garbage}:device=cpu").score([_speechlike(16000, 0.5, 0)])


def test_metadata(utmos) -> None:
    meta = json.loads(json.dumps(utmos.metadata()))
    assert meta == {
        "engine": "utmos-pytorch",
        "version": "0.1.0",
        "model": "UTMOS22 strong learner",
        "model_file": "utmos_state_dict.pt",
        "sample_rate_hz": 16000,
        "device": "cpu",
        "batching": "equal lengths only",
    }
