"""What the transformers audio models that read clips through a feature extractor share (an audio classifier for
LID, an x-vector model for speaker similarity): the spec's model path, loading with local_files_only=True (never
a download), the device, and one padded batch of clips with its attention mask."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.providers import TorchDevice, canonical_spec, out_of_memory, package_version, parse_options, torch_device
from ttseval.providers._local_models import resolve_local_model
from ttseval.providers.local_model import LazyModel, model_source


class TransformersAudioOptions(BaseModel):
    """Options of `<provider>:<path or hub id>:key=value`."""

    model: str | None = Field(None, description="local directory or hub id; use this when the path contains ':'")
    device: TorchDevice = "auto"


class TransformersAudioModel:
    """Base of a provider whose model is `transformers.<auto_class>` plus AutoFeatureExtractor. Subclasses set
    `name`, `auto_class` (e.g. 'AutoModelForAudioClassification') and `model_kind` (for messages)."""

    name: ClassVar[str]
    auto_class: ClassVar[str]
    model_kind: ClassVar[str]

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(TransformersAudioOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        source = model_source(self.name, voice, self.options.model)
        self.voice = voice or source
        self.model_path = resolve_local_model(source, who=self.name)
        self.device = self.options.device
        self._model: LazyModel[tuple[Any, Any]] = LazyModel(self._build)

    def _load(self) -> tuple[Any, Any]:
        """(model, feature extractor), loaded once per instance."""
        return self._model.get()

    @property
    def _loaded(self) -> tuple[Any, Any] | None:
        """(model, feature extractor) when loaded, else None, without loading (subclasses' metadata reads it)."""
        return self._model.get() if self._model.loaded else None

    def _build(self) -> tuple[Any, Any]:
        try:
            import torch  # noqa: F401
            import transformers
        except ImportError as e:
            raise ImportError(f"{self.name} needs torch: pip install 'ttseval[models]'") from e
        path = str(self.model_path)
        try:
            model = getattr(transformers, self.auto_class).from_pretrained(path, local_files_only=True)
            # transformers leaves the Auto classes' from_pretrained unannotated
            extractor = transformers.AutoFeatureExtractor.from_pretrained(  # type: ignore[no-untyped-call]
                path, local_files_only=True
            )
        except (OSError, ValueError, KeyError) as e:
            raise PermanentProviderError(
                f"transformers could not load {self.model_kind} from {path!r}: {e}", spec=self.spec
            ) from e
        self.device = torch_device(self.options.device)
        model.to(self.device).eval()
        return model, extractor

    def _forward(self, clips: list[Audio]) -> Any:
        """The model's output for `clips` as one batch: each resampled to the extractor's rate and padded to at
        least 0.1 s (the convolutional front end's receptive field), the batch padded with the attention mask, so
        padding does not change a clip's answer.

        Raises:
            PermanentProviderError: torch fails on the batch (shape, device, memory).
        """
        import torch

        model, extractor = self._load()
        rate_hz = int(extractor.sampling_rate)
        min_samples = rate_hz // 10
        arrays = [
            np.pad(s := clip.resampled(rate_hz).samples.astype(np.float32), (0, max(0, min_samples - len(s))))
            for clip in clips
        ]
        try:
            inputs = extractor(
                arrays, sampling_rate=rate_hz, return_tensors="pt", padding=True, return_attention_mask=True
            )
            inputs = {k: v.to(self.device) for k, v in inputs.items()}
            with torch.inference_mode():
                return model(**inputs)
        except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
            if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                raise
            raise PermanentProviderError(f"{self.name} failed on a batch of {len(clips)}: {e}", spec=self.spec) from e

    def _model_metadata(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "version": package_version("transformers"),
            "torch_version": package_version("torch"),
            "model": self.voice,
            "model_path": str(self.model_path),
            "device": str(self.device),
        }
