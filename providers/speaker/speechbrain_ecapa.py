"""SpeechBrain's ECAPA-TDNN speaker encoder (`speechbrain-ecapa:model=DIR`), the model of speechbrain/spkrec-ecapa-voxceleb,
from a local folder holding its `embedding_model.ckpt`; never downloaded.

SpeechBrain 1.1 declares torchaudio (no build exists for torch 2.13) and imports it at the top of some modules, for
file loading and resampling only; `encode_batch` is pure torch. requirements-nodeps.txt installs speechbrain and
hyperpyyaml without their dependencies, and the modules are imported with an empty stand-in torchaudio that is
removed right after, as DistillMOS is. hyperpyyaml 1.2 does not load YAML beside ruamel.yaml 0.19 (Prefect's), so the
model card's hyperparams.yaml is not read: the modules it declares (Fbank with 80 mels, sentence mean normalisation,
ECAPA-TDNN with channels 1024x4 + 3072, kernels 5,3,3,3,1, dilations 1,2,3,4,1, attention 128, 192-d output) are
built here, the checkpoint is loaded into them strictly, and SpeechBrain's own `EncoderClassifier.encode_batch`
runs them.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.providers import (EngineVersion, TorchDevice, canonical_spec, import_without_torchaudio, package_version,
                               parse_options, torch_device)
from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, Languages

SAMPLE_RATE_HZ = 16000
MIN_SAMPLES = 640  # 40 ms: five 10 ms frames; the dilation-4 convolution pads 4 frames by reflection, which needs more
ECAPA = {"input_size": 80, "channels": [1024, 1024, 1024, 1024, 3072], "kernel_sizes": [5, 3, 3, 3, 1],
         "dilations": [1, 2, 3, 4, 1], "attention_channels": 128, "lin_neurons": 192}
"""spkrec-ecapa-voxceleb's embedding_model, as its hyperparams.yaml declares it."""


def speechbrain_modules() -> dict[str, Any]:
    """SpeechBrain's classes, imported with a stand-in torchaudio module that is removed after."""
    def load() -> dict[str, Any]:
        from speechbrain.inference.classifiers import EncoderClassifier
        from speechbrain.lobes.features import Fbank
        from speechbrain.lobes.models.ECAPA_TDNN import ECAPA_TDNN
        from speechbrain.processing.features import InputNormalization

        return {"EncoderClassifier": EncoderClassifier, "Fbank": Fbank, "ECAPA_TDNN": ECAPA_TDNN,
                "InputNormalization": InputNormalization}

    return import_without_torchaudio(load, missing="the speechbrain-ecapa encoder needs speechbrain and hyperpyyaml: "
                                                   "run scripts/setup.sh install (it installs requirements-nodeps.txt)")


class SpeechBrainECAPAOptions(BaseModel):
    """Options of `speechbrain-ecapa:key=value`."""

    model: str = Field("", description="folder holding spkrec-ecapa-voxceleb's embedding_model.ckpt; required, "
                                       "never downloaded")
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
    version: ClassVar[str] = EngineVersion(lambda: package_version("speechbrain"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("speechbrain", "hyperpyyaml", "torch")
    batch_size: ClassVar[int] = 8

    def __init__(self, voice: str | None = None, **options: str) -> None:
        if voice:
            raise ValueError(f"speechbrain-ecapa takes no voice (got {voice!r}); give its folder: "
                             "speechbrain-ecapa:model=/path/spkrec-ecapa-voxceleb")
        self.options = parse_options(SpeechBrainECAPAOptions, options, provider=self.name)
        if not self.options.model:
            raise ValueError("speechbrain-ecapa needs its model folder, it never downloads one: "
                             "speechbrain-ecapa:model=/path/spkrec-ecapa-voxceleb")
        self.folder = Path(self.options.model).expanduser()
        if not (self.folder / "embedding_model.ckpt").is_file():
            raise ValueError(f"speechbrain-ecapa model={self.options.model!r}: no embedding_model.ckpt in that folder; "
                             "give the folder of speechbrain/spkrec-ecapa-voxceleb's files")
        self.spec = canonical_spec(self.name, voice, options)
        self.device = self.options.device
        self._encoder: Any = None
        self._load_lock = threading.Lock()

    def _load(self) -> Any:
        with self._load_lock:
            if self._encoder is None:
                import torch

                sb = speechbrain_modules()
                self.device = torch_device(self.options.device)
                model = sb["ECAPA_TDNN"](**ECAPA)
                try:
                    state = torch.load(self.folder / "embedding_model.ckpt", map_location="cpu", weights_only=True)
                    model.load_state_dict(state, strict=True)
                except Exception as e:  # noqa: BLE001 - pickle, zip, key and shape errors alike
                    raise PermanentProviderError(f"speechbrain-ecapa: {str(self.folder / 'embedding_model.ckpt')!r} "
                                                 f"is not spkrec-ecapa-voxceleb's ECAPA-TDNN: {str(e)[:500]}",
                                                 spec=self.spec) from e
                modules = {"compute_features": sb["Fbank"](n_mels=80),
                           "mean_var_norm": sb["InputNormalization"](norm_type="sentence", std_norm=False),
                           "embedding_model": model}
                self._encoder = sb["EncoderClassifier"](modules=modules, hparams={},
                                                        run_opts={"device": self.device})
                self._encoder.mods.eval()
            return self._encoder

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
                raise PermanentProviderError(f"speechbrain-ecapa cannot embed clip {position} of the batch: "
                                             f"{len(s) / SAMPLE_RATE_HZ * 1000:.1f} ms is under 40 ms (five feature frames)",
                                             spec=self.spec)
        vectors: list[np.ndarray | None] = [None] * len(batch)
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, s in enumerate(samples):
            by_length[len(s)].append(i)
        try:
            for same in by_length.values():
                for start in range(0, len(same), self.batch_size):
                    chunk = same[start:start + self.batch_size]
                    with torch.inference_mode():
                        out = encoder.encode_batch(torch.from_numpy(np.stack([samples[i] for i in chunk])))
                    for i, vector in zip(chunk, out[:, 0].float().cpu().numpy()):
                        vectors[i] = vector
        except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
            raise PermanentProviderError(f"speechbrain-ecapa failed on a batch of {len(batch)}: {e}",
                                         spec=self.spec) from e
        return vectors  # type: ignore[return-value]

    def metadata(self) -> dict[str, Any]:
        return {"engine": "speechbrain", "version": self.version, "model": "ECAPA-TDNN (spkrec-ecapa-voxceleb)",
                "model_file": "embedding_model.ckpt", "embedding_size": ECAPA["lin_neurons"],
                "sample_rate_hz": SAMPLE_RATE_HZ, "device": str(self.device)}
