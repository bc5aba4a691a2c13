"""Speaker verification with a transformers x-vector model (`transformers-sv`) from a local directory or the local
Hugging Face cache: WavLMForXVector (microsoft/wavlm-base-plus-sv), UniSpeechSatForXVector, Wav2Vec2ForXVector."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, Languages
from ttseval.providers import EngineVersion, package_version
from ttseval.providers._transformers_audio import TransformersAudioModel


class TransformersSpeakerEncoder(TransformersAudioModel):
    """AutoModelForAudioXVector with its feature extractor, loaded with local_files_only=True: never downloads.
    Clips run as one padded batch with the attention mask (ttseval.providers._transformers_audio): the x-vector's
    statistics pooling counts only each clip's own frames, so a clip's embedding in a batch equals its embedding
    alone (checked in the tests to 1e-5). The embedding is the model's `embeddings` output (not normalised; the
    metric normalises)."""

    name: ClassVar[str] = "transformers-sv"
    auto_class: ClassVar[str] = "AutoModelForAudioXVector"
    model_kind: ClassVar[str] = "a speaker-verification (x-vector) model"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=auto / cuda
    extra: ClassVar[str | None] = "models"
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("transformers"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("torch",)

    def embed(self, batch: list[Audio]) -> list[np.ndarray]:
        """The x-vector of each clip, in order.

        Raises:
            PermanentProviderError: an empty clip (no speaker to embed), or torch fails on the batch.
        """
        if not batch:
            return []
        if any(not len(clip.samples) for clip in batch):
            raise PermanentProviderError("transformers-sv cannot embed a clip with no samples", spec=self.spec)
        return list(self._forward(batch).embeddings.float().cpu().numpy())

    def metadata(self) -> dict[str, Any]:
        size = int(self._loaded[0].config.xvector_output_dim) if self._loaded else None
        return self._model_metadata() | {"embedding_size": size}
