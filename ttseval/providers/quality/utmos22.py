"""UTMOS22 strong learner (`utmos22:weights=PATH`): the VoiceMOS Challenge 2022 MOS predictor, through utmos-pytorch
(a fairseq-free port: wav2vec 2.0 base, a domain and listener embedding, a BLSTM and a projection), with its
converted state dict read from a local file (`utmos_state_dict.pt` of the Blinorot/UTMOS-PyTorch model card).
Nothing is downloaded: without `weights` the provider refuses to build.

The padding pitfall (UTMOS22 issue #22): the model takes no padding mask and averages its frame scores over the
whole input, so a clip zero-padded to a longer clip's length in a batch gets another score. Clips are therefore
batched only with clips of exactly the same length (after resampling to 16 kHz), and every other clip runs alone;
the tests check a batch against each clip scored alone by the package's own `UTMOSScoreTorch.score`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, Languages, QualityScore
from ttseval.providers import (
    EngineVersion,
    TorchDevice,
    canonical_spec,
    out_of_memory,
    package_version,
    parse_options,
    torch_device,
)
from ttseval.providers.local_model import LazyModel, refuse_model_name, required_path

SAMPLE_RATE_HZ = 16000
MIN_SAMPLES = 400  # wav2vec 2.0's convolutional front end needs 25 ms at 16 kHz for its first frame


class UTMOS22Options(BaseModel):
    """Options of `utmos22:key=value`."""

    weights: str = Field(
        "",
        description="path of the converted UTMOS22 strong-learner state dict "
        "(utmos_state_dict.pt); required, never downloaded",
    )
    device: TorchDevice = "auto"


class UTMOS22Quality:
    """UTMOS22's MOS (about 1-5) for each clip, resampled to 16 kHz, batched only by equal length."""

    name: ClassVar[str] = "utmos22"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=auto / cuda
    extra: ClassVar[str | None] = "models"
    output_sample_rate_hz: ClassVar[int | None] = None  # returns scores
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("utmos-pytorch"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("utmos_pytorch", "torch")
    batch_size: ClassVar[int] = 8

    def __init__(self, voice: str | None = None, **options: str) -> None:
        refuse_model_name(self.name, voice, instead="give its weights file: utmos22:weights=/path/utmos_state_dict.pt")
        self.options = parse_options(UTMOS22Options, options, provider=self.name)
        self.weights = required_path(
            self.name,
            "weights",
            self.options.weights,
            example="/path/utmos_state_dict.pt",
            what="the converted UTMOS22 strong-learner state dict (utmos_state_dict.pt)",
        )
        self.spec = canonical_spec(self.name, voice, options)
        self.device = self.options.device
        self._model: LazyModel[Any] = LazyModel(self._build)

    def _load(self) -> Any:
        return self._model.get()

    def _build(self) -> Any:
        import torch
        from utmos_pytorch import UTMOSScoreTorch
        from utmos_pytorch.utmos_torch import UTMOSModel

        # The package loads with strict=False and says nothing of missing keys: a wrong file would give
        # scores from random weights. Its keys are read (memory-mapped, no copy) and checked first.
        try:
            stored = torch.load(self.weights, map_location="cpu", weights_only=True, mmap=True)
        except Exception as e:
            raise PermanentProviderError(
                f"utmos22 weights {str(self.weights)!r} are not a torch state dict: {e}", spec=self.spec
            ) from e
        with torch.device("meta"):
            expected = set(UTMOSModel().state_dict())
        missing = sorted(expected - set(stored if isinstance(stored, dict) else ()))
        del stored
        if missing:
            raise PermanentProviderError(
                f"utmos22 weights {str(self.weights)!r} lack {len(missing)} of the model's {len(expected)} "
                f"tensors (first: {missing[:3]}); expected utmos-pytorch's utmos_state_dict.pt",
                spec=self.spec,
            )
        self.device = torch_device(self.options.device)
        return UTMOSScoreTorch(ckpt_path=str(self.weights), device=self.device)

    def _run(self, rows: np.ndarray) -> np.ndarray:
        import torch

        tensor = torch.from_numpy(rows).to(self.device)
        scores: np.ndarray = self._load().score(tensor[:, None, :]).float().numpy().reshape(-1)
        return scores

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        """The predicted MOS of each clip, in order; a clip shorter than 25 ms at 16 kHz gets a refusal (no score).

        Raises:
            PermanentProviderError: the weights file is not UTMOS22's, torch fails, or a score is not finite.
        """
        self._load()
        samples = [clip.resampled(SAMPLE_RATE_HZ).samples.astype(np.float32) for clip in batch]
        mos = np.full(len(batch), np.nan)
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, s in enumerate(samples):
            if len(s) >= MIN_SAMPLES:
                by_length[len(s)].append(i)
        try:
            for same in by_length.values():  # equal lengths only: no padding ever reaches the model
                for start in range(0, len(same), self.batch_size):
                    chunk = same[start : start + self.batch_size]
                    mos[chunk] = self._run(np.stack([samples[i] for i in chunk]))
        except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
            if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                raise
            raise PermanentProviderError(f"utmos22 failed on a batch of {len(batch)}: {e}", spec=self.spec) from e
        scored = [i for indices in by_length.values() for i in indices]
        if not np.isfinite(mos[scored]).all():
            raise PermanentProviderError(f"utmos22 returned a non-finite score {mos.tolist()}", spec=self.spec)
        return [
            QualityScore(mos=float(m), details={"utmos22": float(m)})
            if len(s) >= MIN_SAMPLES
            else QualityScore(
                mos=float("nan"),
                refused=f"utmos22 needs at least {MIN_SAMPLES / SAMPLE_RATE_HZ * 1000:g}"
                f" ms of audio (its first wav2vec 2.0 frame); the clip has {len(s) / SAMPLE_RATE_HZ * 1000:.1f} ms",
            )
            for m, s in zip(mos, samples)
        ]

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "utmos-pytorch",
            "version": self.version,
            "model": "UTMOS22 strong learner",
            "model_file": self.weights.name,
            "sample_rate_hz": SAMPLE_RATE_HZ,
            "device": str(self.device),
            "batching": "equal lengths only",
        }
