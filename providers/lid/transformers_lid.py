"""Audio language identification with a transformers audio-classification model from a local directory or the
local Hugging Face cache: MMS-LID (facebook/mms-lid-126 ... mms-lid-4017) and any fine-tune of that shape."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from providers import EngineVersion, TorchDevice, canonical_spec, package_version, parse_options, torch_device
from providers._local_models import resolve_local_model
from ttseval.audio import Audio
from ttseval.errors import PermanentProviderError
from ttseval.protocols import ANY_LANGUAGE, LanguageGuess, Languages


class TransformersLIDOptions(BaseModel):
    """Options of `transformers:<path or hub id>:key=value`."""

    model: str | None = Field(None, description="local directory or hub id; use this when the path contains ':'")
    device: TorchDevice = "auto"


def label_language(label: str) -> str:
    """The language code in a classifier's label: MMS-LID's 'pus' as is, VoxLingua107's 'ps: Pashto' -> 'ps'."""
    return label.split(":", 1)[0].strip()


class TransformersLID:
    """AutoModelForAudioClassification, loaded with local_files_only=True: never downloads. Clips are resampled to
    the feature extractor's rate and run as one padded batch (with the attention mask, so padding does not change a
    clip's answer); the answer is the top class, its label's language code and its softmax probability."""

    name: ClassVar[str] = "transformers"
    languages: ClassVar[Languages] = ANY_LANGUAGE  # it tells languages apart; it speaks none
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=cuda
    extra: ClassVar[str | None] = "models"
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[str] = EngineVersion(lambda: package_version("transformers"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("torch",)

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(TransformersLIDOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        source = self.options.model or voice
        if not source:
            raise ValueError("transformers LID needs a model: transformers:<local dir or hub id> or model=PATH")
        self.voice = voice or source
        self.model_path = resolve_local_model(source, who="transformers LID")
        self.device = self.options.device
        self._loaded: tuple[Any, Any] | None = None
        self._load_lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        with self._load_lock:
            if self._loaded is None:
                try:
                    import torch  # noqa: F401
                    from transformers import AutoFeatureExtractor, AutoModelForAudioClassification
                except ImportError as e:
                    raise ImportError("transformers LID needs torch: pip install 'ttseval[models]'") from e
                path = str(self.model_path)
                try:
                    model = AutoModelForAudioClassification.from_pretrained(path, local_files_only=True)
                    extractor = AutoFeatureExtractor.from_pretrained(path, local_files_only=True)
                except (OSError, ValueError, KeyError) as e:
                    raise PermanentProviderError(
                        f"transformers could not load an audio-classification model from {path!r}: {e}",
                        spec=self.spec) from e
                self.device = torch_device(self.options.device)
                model.to(self.device).eval()
                self._loaded = (model, extractor)
            return self._loaded

    def identify(self, batch: list[Audio]) -> list[LanguageGuess]:
        """The most likely language of each clip, in order; an empty clip gets None (nothing to hear)."""
        import torch

        model, extractor = self._load()
        rate_hz = int(extractor.sampling_rate)
        todo = [i for i, clip in enumerate(batch) if len(clip.samples)]
        out = [LanguageGuess(language=None, prob=None)] * len(batch)
        if not todo:
            return out
        min_samples = rate_hz // 10  # the convolutional front end needs at least its receptive field
        arrays = [np.pad(s := batch[i].resampled(rate_hz).samples.astype(np.float32), (0, max(0, min_samples - len(s))))
                  for i in todo]
        try:
            inputs = extractor(arrays, sampling_rate=rate_hz, return_tensors="pt", padding=True,
                               return_attention_mask=True)
            inputs = {k: v.to(self.device) for k, v in inputs.items()}
            with torch.inference_mode():
                probs = model(**inputs).logits.float().softmax(dim=-1).cpu().numpy()
        except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
            raise PermanentProviderError(f"transformers LID failed on a batch of {len(todo)}: {e}",
                                         spec=self.spec) from e
        labels = model.config.id2label
        for i, p in zip(todo, probs):
            top = int(p.argmax())
            out[i] = LanguageGuess(language=label_language(str(labels[top])), prob=float(p[top]))
        return out

    def metadata(self) -> dict[str, Any]:
        return {"engine": "transformers", "version": self.version, "torch_version": package_version("torch"),
                "model": self.voice, "model_path": str(self.model_path), "device": self.device,
                "classes": len(self._loaded[0].config.id2label) if self._loaded else None}
