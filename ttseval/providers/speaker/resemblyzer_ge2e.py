"""Resemblyzer's GE2E speaker encoder (`resemblyzer`): the offline default for speaker similarity.

The weights (a 3-layer LSTM over 40-band mel frames, 256-d output, trained with the generalized end-to-end loss on
VoxCeleb and LibriSpeech) ship inside the Resemblyzer wheel, so nothing is downloaded. Resemblyzer is installed
without its declared dependencies (requirements-nodeps.txt: its `webrtcvad` sdist imports pkg_resources, gone
from setuptools 81+; the engines extra installs the same module from webrtcvad-wheels).
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, Languages
from ttseval.providers import EngineVersion, TorchDevice, canonical_spec, package_version, parse_options, torch_device
from ttseval.providers.local_model import LazyModel, refuse_model_name

MIN_SPEECH_S = 0.1  # less than this left after Resemblyzer's silence trimming: nothing to embed


class ResemblyzerOptions(BaseModel):
    """Options of `resemblyzer:key=value`."""

    device: TorchDevice = "auto"


def _resemblyzer() -> Any:
    """The resemblyzer package, imported without the DeprecationWarning of its `scipy.ndimage.morphology`
    import (a namespace scipy 2.0 removes; the function it imports lives on in scipy.ndimage)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*scipy.ndimage.morphology.*")
        try:
            import resemblyzer
        except ImportError as e:
            raise ImportError(
                "the resemblyzer encoder needs Resemblyzer: run scripts/setup.sh install (it installs "
                "requirements-nodeps.txt)"
            ) from e
    return resemblyzer


class ResemblyzerEncoder:
    """One GE2E embedding per clip, as Resemblyzer computes it: `preprocess_wav` (resample to 16 kHz, normalise
    the volume up to -30 dBFS, trim silences longer than Resemblyzer's VAD window with webrtcvad) then
    `VoiceEncoder.embed_utterance` (1.6 s partial windows at 1.3 per second, their embeddings averaged and
    L2-normalised). Clips of different lengths make different numbers of windows, so clips are embedded one at a
    time; the model is loaded once per instance."""

    name: ClassVar[str] = "resemblyzer"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=auto / cuda
    extra: ClassVar[str | None] = "engines"
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("resemblyzer"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("resemblyzer", "webrtcvad", "torch")

    def __init__(self, voice: str | None = None, **options: str) -> None:
        refuse_model_name(self.name, voice, instead="its weights ship in the wheel")
        self.options = parse_options(ResemblyzerOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        self.device = self.options.device
        self._model: LazyModel[Any] = LazyModel(self._build)

    def _load(self) -> Any:
        return self._model.get()

    def _build(self) -> Any:
        resemblyzer = _resemblyzer()
        self.device = torch_device(self.options.device)
        return resemblyzer.VoiceEncoder(device=self.device, verbose=False)

    def embed(self, batch: list[Audio]) -> list[np.ndarray]:
        """The 256-d embedding of each clip, in order.

        Raises:
            PermanentProviderError: a clip with less than MIN_SPEECH_S of audio once silences are trimmed.
        """
        encoder = self._load()
        preprocess = _resemblyzer().preprocess_wav
        out = []
        for clip in batch:
            samples = clip.samples.astype(np.float32)
            # silence has no volume to normalise (Resemblyzer would divide by zero): it is a clip with no speech
            wav = preprocess(samples, source_sr=clip.sample_rate_hz) if np.any(samples) else samples[:0]
            if len(wav) < MIN_SPEECH_S * 16000:
                raise PermanentProviderError(
                    f"resemblyzer: a {clip.duration_s:.2f} s clip has {len(wav) / 16000:.2f} s left after silence "
                    f"trimming; at least {MIN_SPEECH_S} s of speech is needed",
                    spec=self.spec,
                )
            out.append(np.asarray(encoder.embed_utterance(wav), dtype=np.float32))
        return out

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "resemblyzer",
            "version": self.version,
            "model": "GE2E (resemblyzer/pretrained.pt)",
            "device": str(self.device),
            "embedding_size": 256,
        }
