"""Audio language identification with a transformers audio-classification model from a local directory or the
local Hugging Face cache: MMS-LID (facebook/mms-lid-126 ... mms-lid-4017) and any fine-tune of that shape."""

from __future__ import annotations

from typing import Any, ClassVar

from ttseval.core.audio import Audio
from ttseval.core.protocols import ANY_LANGUAGE, LanguageGuess, Languages
from ttseval.providers import EngineVersion, package_version
from ttseval.providers._transformers_audio import TransformersAudioModel


def label_language(label: str) -> str:
    """The language code in a classifier's label: MMS-LID's 'pus' as is, VoxLingua107's 'ps: Pashto' -> 'ps'."""
    return label.split(":", 1)[0].strip()


class TransformersLID(TransformersAudioModel):
    """AutoModelForAudioClassification, loaded with local_files_only=True: never downloads. Clips are resampled to
    the feature extractor's rate and run as one padded batch (with the attention mask, so padding does not change a
    clip's answer; ttseval.providers._transformers_audio); the answer is the top class, its label's language code and
    its softmax probability."""

    name: ClassVar[str] = "transformers"
    auto_class: ClassVar[str] = "AutoModelForAudioClassification"
    model_kind: ClassVar[str] = "an audio-classification model"
    languages: ClassVar[Languages] = ANY_LANGUAGE  # it tells languages apart; it speaks none
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=cuda
    extra: ClassVar[str | None] = "models"
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("transformers"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("torch",)

    def identify(self, batch: list[Audio]) -> list[LanguageGuess]:
        """The most likely language of each clip, in order; an empty clip gets None (nothing to hear)."""
        todo = [i for i, clip in enumerate(batch) if len(clip.samples)]
        out = [LanguageGuess(language=None, prob=None)] * len(batch)
        if not todo:
            return out
        probs = self._forward([batch[i] for i in todo]).logits.float().softmax(dim=-1).cpu().numpy()
        labels = self._load()[0].config.id2label  # loaded by _forward
        for i, p in zip(todo, probs):
            top = int(p.argmax())
            out[i] = LanguageGuess(language=label_language(str(labels[top])), prob=float(p[top]))
        return out

    def metadata(self) -> dict[str, Any]:
        return self._model_metadata() | {"classes": len(self._loaded[0].config.id2label) if self._loaded else None}
