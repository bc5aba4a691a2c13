"""DistillMOS with its real weights (inside the distillmos wheel): batched scores equal the package's own model
called on each clip alone, speech above noise, and no torchaudio left behind in the process."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import QualityProvider
from ttseval.providers.quality import QUALITY
from ttseval.providers.quality.distillmos import WINDOW


@pytest.fixture(scope="module")
def distillmos():
    return QUALITY.build("distillmos")


@pytest.fixture(scope="module")
def clips() -> list[Audio]:
    """Piper's neural voice (22.05 kHz), the same with white noise added, noise alone, a 15 s clip (several of the
    model's windows) and a 0.3 s one."""
    from ttseval.providers.tts import TTS

    speech = TTS.build("piper:joe").synthesize(
        "The quick brown fox jumps over the lazy dog, and then it runs away.", "en-US"
    )
    rng = np.random.default_rng(0)
    noisy = Audio(
        (speech.samples + 0.05 * rng.standard_normal(speech.samples.size)).astype(np.float32), speech.sample_rate_hz
    )
    noise = Audio((0.1 * rng.standard_normal(3 * 16000)).astype(np.float32), 16000)
    long = Audio(np.tile(speech.samples, 4), speech.sample_rate_hz)
    return [speech, noisy, noise, long, Audio(speech.samples[:6600], speech.sample_rate_hz)]


def test_batched_scores_equal_the_packages_model_on_each_clip_alone(distillmos, clips) -> None:
    import librosa
    import torch

    assert clips[3].duration_s * 16000 > WINDOW  # the long clip is scored on its own
    got = [s.mos for s in distillmos.score(clips)]
    model = distillmos._load()  # the package's ConvTransformerSQAModel, its own forward (padding and windows)
    for clip, mos in zip(clips, got):
        samples = np.clip(librosa.resample(clip.samples, orig_sr=clip.sample_rate_hz, target_sr=16000), -1, 1)
        with torch.no_grad():
            assert mos == pytest.approx(model(torch.tensor(samples)[None]).item(), abs=1e-4)
    assert all(1 <= m <= 5 for m in got)
    assert got[0] > 3.5 and got[0] > max(got[1], got[2]) + 1.5  # measured 4.38 against 1.83 (noisy) and 1.89 (noise)


def test_no_torchaudio_is_left_in_the_process(distillmos, clips) -> None:
    from transformers.utils import is_torchaudio_available

    distillmos.score(clips[:1])
    assert "torchaudio" not in sys.modules and importlib.util.find_spec("torchaudio") is None
    assert not is_torchaudio_available()


def test_empty_clip_metadata_and_protocol(distillmos) -> None:
    with pytest.raises(PermanentProviderError, match="no samples"):
        distillmos.score([Audio(np.zeros(0, np.float32), 16000)])
    assert isinstance(distillmos, QualityProvider)
    meta = json.loads(json.dumps(distillmos.metadata()))
    assert meta["model_file"].endswith("distill_mos_v7.pt") and meta["version"] == "0.9.1"
