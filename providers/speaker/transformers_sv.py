"""Speaker verification with a transformers x-vector model (`transformers-sv`) from a local directory or the local
Hugging Face cache: WavLMForXVector (microsoft/wavlm-base-plus-sv), UniSpeechSatForXVector, Wav2Vec2ForXVector."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from providers import EngineVersion, TorchDevice, canonical_spec, package_version, parse_options, torch_device
from providers._local_models import resolve_local_model
from ttseval.audio import Audio
from ttseval.errors import PermanentProviderError
from ttseval.protocols import ANY_LANGUAGE, Languages


class TransformersSVOptions(BaseModel):
    """Options of `transformers-sv:<path or hub id>:key=value`."""

    model: str | None = Field(None, description="local directory or hub id; use this when the path contains ':'")
    device: TorchDevice = "auto"


class TransformersSpeakerEncoder:
    """AutoModelForAudioXVector with its feature extractor, loaded with local_files_only=True: never downloads.
    Clips are resampled to the extractor's rate, padded to at least 0.1 s (the convolutional front end's receptive
    field), and run as one padded batch with the attention mask: the x-vector's statistics pooling counts only
    each clip's own frames, so a clip's embedding in a batch equals its embedding alone (checked in the tests to
    1e-6). The embedding is the model's `embeddings` output (before any normalisation; the metric normalises)."""

    name: ClassVar[str] = "transformers-sv"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=auto / cuda
    extra: ClassVar[str | None] = "models"
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[str] = EngineVersion(lambda: package_version("transformers"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("torch",)

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(TransformersSVOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        source = self.options.model or voice
        if not source:
            raise ValueError("transformers-sv needs a model: transformers-sv:<local dir or hub id> or model=PATH")
        self.voice = voice or source
        self.model_path = resolve_local_model(source, who="transformers-sv")
        self.device = self.options.device
        self._loaded: tuple[Any, Any] | None = None
        self._load_lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        with self._load_lock:
            if self._loaded is None:
                try:
                    import torch  # noqa: F401
                    from transformers import AutoFeatureExtractor, AutoModelForAudioXVector
                except ImportError as e:
                    raise ImportError("transformers-sv needs torch: pip install 'ttseval[models]'") from e
                path = str(self.model_path)
                try:
                    model = AutoModelForAudioXVector.from_pretrained(path, local_files_only=True)
                    extractor = AutoFeatureExtractor.from_pretrained(path, local_files_only=True)
                except (OSError, ValueError, KeyError) as e:
                    raise PermanentProviderError(
                        f"transformers could not load a speaker-verification (x-vector) model from {path!r}: {e}",
                        spec=self.spec) from e
                self.device = torch_device(self.options.device)
                model.to(self.device).eval()
                self._loaded = (model, extractor)
            return self._loaded

    def embed(self, batch: list[Audio]) -> list[np.ndarray]:
        """The x-vector of each clip, in order.

        Raises:
            PermanentProviderError: an empty clip (no speaker to embed), or torch fails on the batch.
        """
        import torch

        model, extractor = self._load()
        if not batch:
            return []
        if any(not len(clip.samples) for clip in batch):
            raise PermanentProviderError("transformers-sv cannot embed a clip with no samples", spec=self.spec)
        rate_hz = int(extractor.sampling_rate)
        min_samples = rate_hz // 10
        arrays = [np.pad(s := clip.resampled(rate_hz).samples.astype(np.float32), (0, max(0, min_samples - len(s))))
                  for clip in batch]
        try:
            inputs = extractor(arrays, sampling_rate=rate_hz, return_tensors="pt", padding=True,
                               return_attention_mask=True)
            inputs = {k: v.to(self.device) for k, v in inputs.items()}
            with torch.inference_mode():
                vectors = model(**inputs).embeddings.float().cpu().numpy()
        except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
            raise PermanentProviderError(f"transformers-sv failed on a batch of {len(batch)}: {e}",
                                         spec=self.spec) from e
        return list(vectors)

    def metadata(self) -> dict[str, Any]:
        return {"engine": "transformers-sv", "version": self.version, "torch_version": package_version("torch"),
                "model": self.voice, "model_path": str(self.model_path), "device": str(self.device),
                "embedding_size": int(self._loaded[0].config.xvector_output_dim) if self._loaded else None}
