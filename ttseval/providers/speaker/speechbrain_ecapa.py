"""SpeechBrain's ECAPA-TDNN speaker encoder (`speechbrain-ecapa:model=DIR`), the model of
speechbrain/spkrec-ecapa-voxceleb, from a local folder holding its `embedding_model.ckpt`; never downloaded.

SpeechBrain's own `EncoderClassifier.encode_batch` runs the model card's modules (Fbank with 80 mels, sentence mean
normalisation, ECAPA-TDNN with a 192-d output), built in ttseval.providers._speechbrain (which says why the card's
hyperparams.yaml is not read) with the checkpoint loaded strictly.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, Languages
from ttseval.providers import (
    EngineVersion,
    TorchDevice,
    canonical_spec,
    out_of_memory,
    package_version,
    parse_options,
    torch_device,
)
from ttseval.providers._speechbrain import (
    ECAPA_SIZES,
    MIN_SAMPLES,
    SAMPLE_RATE_HZ,
    by_equal_length,
    load_checkpoint,
    speechbrain_modules,
)
from ttseval.providers.local_model import LazyModel, refuse_model_name, required_path

ECAPA = {"input_size": 80, **ECAPA_SIZES, "lin_neurons": 192}
"""spkrec-ecapa-voxceleb's embedding_model, as its hyperparams.yaml declares it."""


class SpeechBrainECAPAOptions(BaseModel):
    """Options of `speechbrain-ecapa:key=value`."""

    model: str = Field(
        "", description="folder holding spkrec-ecapa-voxceleb's embedding_model.ckpt; required, never downloaded"
    )
    device: TorchDevice = "auto"


class SpeechBrainECAPAEncoder:
    """ECAPA-TDNN's 192-d embedding per clip (resampled to 16 kHz), through SpeechBrain's encode_batch. Clips are
    batched only with clips of the same length: ECAPA's convolutions pad by reflection at the ends, so a clip
    zero-padded in a batch would get another embedding."""

    name: ClassVar[str] = "speechbrain-ecapa"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=auto / cuda
    extra: ClassVar[str | None] = "engines"
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("speechbrain"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("speechbrain", "hyperpyyaml", "torch")
    batch_size: ClassVar[int] = 8

    def __init__(self, voice: str | None = None, **options: str) -> None:
        refuse_model_name(
            self.name, voice, instead="give its folder: speechbrain-ecapa:model=/path/spkrec-ecapa-voxceleb"
        )
        self.options = parse_options(SpeechBrainECAPAOptions, options, provider=self.name)
        self.folder = required_path(
            self.name,
            "model",
            self.options.model,
            folder=True,
            markers=("embedding_model.ckpt",),
            what="the folder of speechbrain/spkrec-ecapa-voxceleb's files",
            example="/path/spkrec-ecapa-voxceleb",
        )
        self.spec = canonical_spec(self.name, voice, options)
        self.device = self.options.device
        self._model: LazyModel[Any] = LazyModel(self._build)

    def _load(self) -> Any:
        return self._model.get()

    def _build(self) -> Any:
        sb = speechbrain_modules()
        self.device = torch_device(self.options.device)
        model = load_checkpoint(
            sb["ECAPA_TDNN"](**ECAPA),
            self.folder / "embedding_model.ckpt",
            what="spkrec-ecapa-voxceleb's ECAPA-TDNN",
            spec=self.spec,
        )
        modules = {
            "compute_features": sb["Fbank"](n_mels=80),
            "mean_var_norm": sb["InputNormalization"](norm_type="sentence", std_norm=False),
            "embedding_model": model,
        }
        encoder = sb["EncoderClassifier"](modules=modules, hparams={}, run_opts={"device": self.device})
        encoder.mods.eval()
        return encoder

    def embed(self, batch: list[Audio]) -> list[np.ndarray]:
        """The embedding of each clip, in order.

        Raises:
            PermanentProviderError: a clip under 40 ms, or torch fails on a batch.
        """
        import torch

        encoder = self._load()
        samples = [clip.resampled(SAMPLE_RATE_HZ).samples.astype(np.float32) for clip in batch]
        for position, s in enumerate(samples):
            if len(s) < MIN_SAMPLES:
                raise PermanentProviderError(
                    f"speechbrain-ecapa cannot embed clip {position} of the batch: "
                    f"{len(s) / SAMPLE_RATE_HZ * 1000:.1f} ms is under 40 ms (five feature frames)",
                    spec=self.spec,
                )

        def run(rows: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                embeddings: np.ndarray = encoder.encode_batch(torch.from_numpy(rows))[:, 0].float().cpu().numpy()
            return embeddings

        try:
            return by_equal_length(samples, self.batch_size, run)
        except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
            if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                raise
            raise PermanentProviderError(
                f"speechbrain-ecapa failed on a batch of {len(batch)}: {e}", spec=self.spec
            ) from e

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "speechbrain",
            "version": self.version,
            "model": "ECAPA-TDNN (spkrec-ecapa-voxceleb)",
            "model_file": "embedding_model.ckpt",
            "embedding_size": ECAPA["lin_neurons"],
            "sample_rate_hz": SAMPLE_RATE_HZ,
            "device": str(self.device),
        }
