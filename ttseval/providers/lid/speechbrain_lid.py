"""Spoken language identification with SpeechBrain's VoxLingua107 ECAPA model (`speechbrain-lid:model=DIR`, the files
of speechbrain/lang-id-voxlingua107-ecapa: embedding_model.ckpt, classifier.ckpt, label_encoder.txt) from a local
folder, never downloaded; a LID model INSV-A's V gate counts like any other in settings `lid`.

SpeechBrain's own `EncoderClassifier.classify_batch` runs the model card's modules, built in
ttseval.providers._speechbrain (which says why the card's hyperparams.yaml is not read): Fbank with 60 mels, sentence
mean normalisation, ECAPA-TDNN with a 256-d embedding, and the x-vector classifier (one 512-unit block, LeakyReLU,
log-softmax over 107 languages). The answer is the top label's code ('ps: Pashto' -> 'ps') and its probability.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, LanguageGuess, Languages
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
from ttseval.providers.lid.transformers_lid import label_language
from ttseval.providers.local_model import LazyModel, refuse_model_name, required_path

ECAPA = {"input_size": 60, **ECAPA_SIZES, "lin_neurons": 256}
CLASSIFIER = {"input_shape": [None, None, 256], "lin_blocks": 1, "lin_neurons": 512, "out_neurons": 107}
"""lang-id-voxlingua107-ecapa's embedding_model and classifier, as its hyperparams.yaml declares them."""
FILES = ("embedding_model.ckpt", "classifier.ckpt", "label_encoder.txt")


class SpeechBrainLIDOptions(BaseModel):
    """Options of `speechbrain-lid:key=value`."""

    model: str = Field(
        "",
        description="folder holding lang-id-voxlingua107-ecapa's embedding_model.ckpt, "
        "classifier.ckpt and label_encoder.txt; required, never downloaded",
    )
    device: TorchDevice = "auto"


class SpeechBrainLID:
    """VoxLingua107's most likely language per clip (resampled to 16 kHz), batched only by equal length; a clip
    under 40 ms (or empty) has nothing to hear: language and probability None."""

    name: ClassVar[str] = "speechbrain-lid"
    languages: ClassVar[Languages] = ANY_LANGUAGE  # it tells languages apart; it speaks none
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
            self.name, voice, instead="give its folder: speechbrain-lid:model=/path/lang-id-voxlingua107-ecapa"
        )
        self.options = parse_options(SpeechBrainLIDOptions, options, provider=self.name)
        self.folder = required_path(
            self.name,
            "model",
            self.options.model,
            folder=True,
            markers=FILES,
            what="the folder of speechbrain/lang-id-voxlingua107-ecapa's files",
            example="/path/lang-id-voxlingua107-ecapa",
        )
        self.spec = canonical_spec(self.name, voice, options)
        self.device = self.options.device
        self._model: LazyModel[Any] = LazyModel(self._build)

    def _load(self) -> Any:
        return self._model.get()

    def _build(self) -> Any:
        sb = speechbrain_modules()
        self.device = torch_device(self.options.device)
        what = "lang-id-voxlingua107-ecapa's"
        embedding = load_checkpoint(
            sb["ECAPA_TDNN"](**ECAPA), self.folder / "embedding_model.ckpt", what=f"{what} ECAPA-TDNN", spec=self.spec
        )
        classifier = load_checkpoint(
            sb["Classifier"](**CLASSIFIER), self.folder / "classifier.ckpt", what=f"{what} classifier", spec=self.spec
        )
        labels = sb["CategoricalEncoder"]()
        labels.expect_len(CLASSIFIER["out_neurons"])
        try:
            labels.load(self.folder / "label_encoder.txt")
        except Exception as e:
            raise PermanentProviderError(
                f"{str(self.folder / 'label_encoder.txt')!r} is not a SpeechBrain label encoder: {e}", spec=self.spec
            ) from e
        if len(labels) != CLASSIFIER["out_neurons"]:
            raise PermanentProviderError(
                f"label_encoder.txt has {len(labels)} labels; the classifier has {CLASSIFIER['out_neurons']}",
                spec=self.spec,
            )
        modules = {
            "compute_features": sb["Fbank"](n_mels=60),
            "mean_var_norm": sb["InputNormalization"](norm_type="sentence", std_norm=False),
            "embedding_model": embedding,
            "classifier": classifier,
        }
        model = sb["EncoderClassifier"](
            modules=modules, hparams={"label_encoder": labels}, run_opts={"device": self.device}
        )
        model.mods.eval()
        return model

    def identify(self, batch: list[Audio]) -> list[LanguageGuess]:
        """The most likely language of each clip, in order.

        Raises:
            PermanentProviderError: torch fails on a batch.
        """
        import torch

        classifier = self._load()
        samples = [clip.resampled(SAMPLE_RATE_HZ).samples.astype(np.float32) for clip in batch]
        heard = [i for i, s in enumerate(samples) if len(s) >= MIN_SAMPLES]

        def run(rows: np.ndarray) -> list[tuple[str, float]]:
            with torch.inference_mode():
                _, score, _, labels = classifier.classify_batch(torch.from_numpy(rows))
            return [(str(label), float(np.exp(s))) for label, s in zip(labels, score.float().cpu().numpy())]

        try:
            answers = by_equal_length([samples[i] for i in heard], self.batch_size, run)
        except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
            if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                raise
            raise PermanentProviderError(
                f"speechbrain-lid failed on a batch of {len(batch)}: {e}", spec=self.spec
            ) from e
        out = [LanguageGuess(language=None, prob=None)] * len(batch)
        for i, (label, prob) in zip(heard, answers):
            out[i] = LanguageGuess(language=label_language(label), prob=prob)
        return out

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "speechbrain",
            "version": self.version,
            "model": "VoxLingua107 ECAPA (lang-id-voxlingua107-ecapa)",
            "model_files": list(FILES),
            "classes": CLASSIFIER["out_neurons"],
            "sample_rate_hz": SAMPLE_RATE_HZ,
            "device": str(self.device),
        }
