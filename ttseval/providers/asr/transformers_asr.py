"""Speech recognition with a transformers model from a local directory or the local Hugging Face cache."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import PER_VOICE, Languages, Transcript
from ttseval.providers import (
    EngineVersion,
    TorchDevice,
    canonical_spec,
    out_of_memory,
    package_version,
    parse_options,
    torch_device,
)
from ttseval.providers._local_models import resolve_local_model
from ttseval.providers.asr import whisper_language
from ttseval.providers.local_model import LazyModel, model_source


class TransformersASROptions(BaseModel):
    """Options of `transformers:<path or hub id>:key=value`."""

    model: str | None = Field(None, description="local directory or hub id; use this when the path contains ':'")
    device: TorchDevice = "auto"
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto",
        description="the model's weights and activations: auto = float16 for a Whisper-style model on a "
        "GPU, else float32; a CTC model on a GPU with shards of 32 runs faster in float16, one clip at a time "
        "slower (docs/performance.md, batched model stages)",
    )
    max_new_tokens: int = Field(128, ge=1, description="generation limit for seq2seq models")
    force_language: bool = Field(
        True,
        description="Whisper: transcribe in the item's language (true) or in the "
        "language it detects (false); the detection is reported either way",
    )


class TransformersASR:
    """A transformers speech recogniser, loaded with local_files_only=True: never downloads.

    The model comes from the spec's voice or option `model=`: a local directory written by save_pretrained, or a
    hub id already in the local Hugging Face cache. The kind is read from the config: encoder-decoder models
    (Whisper-style) run AutoModelForSpeechSeq2Seq.generate; the others (wav2vec2-style) run AutoModelForCTC with
    greedy (argmax) CTC decoding. Audio is resampled to the feature extractor's rate and run as one padded batch;
    CTC logits of padded frames are cut off per clip before decoding. A multilingual Whisper model reports the
    language it detects (the most likely language token after the start token, and its probability among the
    language tokens: Whisper's own detection) and transcribes in the clip's language hint when Whisper knows it
    (`force_language=false`: in the detected one). CTC models detect nothing: detected_language is None.
    """

    name: ClassVar[str] = "transformers"
    languages: ClassVar[Languages] = PER_VOICE  # the model's
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=cuda
    extra: ClassVar[str | None] = "models"  # torch; transformers itself is a base dependency
    output_sample_rate_hz: ClassVar[int | None] = None  # returns text
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("transformers"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("torch",)

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(TransformersASROptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        source = model_source(self.name, voice, self.options.model)
        self.voice = voice or source
        self.model_path = resolve_local_model(source, who="transformers")
        self.device = self.options.device  # "auto" is resolved when the model loads
        self.dtype = self.options.dtype  # likewise
        self._model: LazyModel[tuple[Any, Any, str]] = LazyModel(self._build)

    def _load(self) -> tuple[Any, Any, str]:
        """(model, processor, kind) with kind 'ctc' or 'seq2seq', loaded once."""
        return self._model.get()

    def _build(self) -> tuple[Any, Any, str]:
        try:
            import torch
            from transformers import AutoConfig, AutoModelForCTC, AutoModelForSpeechSeq2Seq, AutoProcessor
        except ImportError as e:
            raise ImportError(
                "transformers ASR needs the transformers and torch packages: pip install 'ttseval[models]'"
            ) from e
        path = str(self.model_path)
        try:
            config = AutoConfig.from_pretrained(path, local_files_only=True)
            kind = "seq2seq" if getattr(config, "is_encoder_decoder", False) else "ctc"
            model_class = AutoModelForSpeechSeq2Seq if kind == "seq2seq" else AutoModelForCTC
            model = model_class.from_pretrained(path, local_files_only=True)
            # transformers leaves the Auto classes' from_pretrained unannotated
            processor = AutoProcessor.from_pretrained(path, local_files_only=True)  # type: ignore[no-untyped-call]
        except (OSError, ValueError, KeyError) as e:
            raise PermanentProviderError(
                f"transformers could not load an ASR model from {path!r}: {e}", spec=self.spec
            ) from e
        self.device = torch_device(self.options.device)
        dtype = self.options.dtype
        if dtype == "auto":
            dtype = "float16" if self.device.startswith("cuda") and kind == "seq2seq" else "float32"
        self.dtype = dtype
        model.to(self.device, dtype=getattr(torch, self.dtype)).eval()
        return model, processor, kind

    def transcribe(self, batch: list[Audio], languages: list[str | None]) -> list[Transcript]:
        """Transcribe each clip in order; `languages[i]` is a hint used by Whisper-style models only.

        Raises:
            ValueError: batch and languages differ in length.
            PermanentProviderError: the model cannot be loaded or inference fails.
        """
        if len(batch) != len(languages):
            raise ValueError(f"{len(batch)} clips but {len(languages)} languages")
        model, processor, kind = self._load()
        rate_hz = int(processor.feature_extractor.sampling_rate)
        # Zero-length clips get an empty text without the model (a feature extractor cannot normalise nothing).
        todo = [i for i, clip in enumerate(batch) if len(clip.samples)]
        texts = [""] * len(batch)
        detected: list[tuple[str | None, float | None]] = [(None, None)] * len(batch)
        if todo:
            # The convolutional front end needs at least its receptive field (400 samples for wav2vec2);
            # zero-pad clips shorter than 100 ms so they yield at least one frame.
            min_samples = rate_hz // 10
            arrays = []
            for i in todo:
                samples = batch[i].resampled(rate_hz).samples.astype(np.float32)
                arrays.append(np.pad(samples, (0, max(0, min_samples - len(samples)))))
            found: Sequence[tuple[str | None, float | None]]
            try:
                if kind == "ctc":
                    decoded = self._run_ctc(model, processor, arrays, rate_hz)
                    found = [(None, None)] * len(todo)
                else:
                    decoded, found = self._run_seq2seq(model, processor, arrays, rate_hz, [languages[i] for i in todo])
            except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
                if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                    raise
                raise PermanentProviderError(
                    f"transformers ASR failed on a batch of {len(todo)}: {e}", spec=self.spec
                ) from e
            for i, text, language in zip(todo, decoded, found):
                texts[i], detected[i] = text.strip(), language
        return [
            Transcript(text=text, detected_language=lang, language_prob=prob)
            for text, (lang, prob) in zip(texts, detected)
        ]

    def _to_model(self, inputs: Any) -> dict[str, Any]:
        """The processor's tensors on the model's device, the floating-point ones in its dtype."""
        import torch

        dtype = getattr(torch, self.dtype)
        return {
            k: v.to(self.device, dtype=dtype) if v.is_floating_point() else v.to(self.device) for k, v in inputs.items()
        }

    def _run_ctc(self, model: Any, processor: Any, arrays: list[np.ndarray], rate_hz: int) -> list[str]:
        import torch

        inputs = processor(arrays, sampling_rate=rate_hz, return_tensors="pt", padding=True)
        inputs = self._to_model(inputs)
        with torch.inference_mode():
            logits = model(**inputs).logits
        # Frames beyond each clip's own length come from padding: cut them so a batch decodes like single clips.
        frames = model._get_feat_extract_output_lengths(torch.tensor([len(a) for a in arrays]))
        ids = logits.argmax(dim=-1).cpu()
        return [processor.decode(ids[j, : int(frames[j])]) for j in range(len(arrays))]

    def _run_seq2seq(
        self, model: Any, processor: Any, arrays: list[np.ndarray], rate_hz: int, languages: list[str | None]
    ) -> tuple[list[str], Sequence[tuple[str | None, float | None]]]:
        import torch

        whisper = getattr(model.config, "model_type", "") == "whisper"
        if whisper:  # Whisper's encoder takes 30 s windows: pad to one, or to the longest clip for long-form decoding
            long_form = max(len(a) for a in arrays) > 30 * rate_hz
            inputs = processor(
                arrays,
                sampling_rate=rate_hz,
                return_tensors="pt",
                return_attention_mask=True,
                padding="longest" if long_form else "max_length",
                truncation=not long_form,
            )
        else:
            inputs = processor(arrays, sampling_rate=rate_hz, return_tensors="pt", padding=True)
        inputs = self._to_model(inputs)
        kwargs: dict[str, Any] = {"max_new_tokens": self.options.max_new_tokens}
        found: Sequence[tuple[str | None, float | None]] = [(None, None)] * len(arrays)
        lang_to_id = getattr(model.generation_config, "lang_to_id", None)
        if whisper and lang_to_id:
            found = self._detect(model, inputs, lang_to_id)
            hints = {whisper_language(lang) for lang in languages}
            # generate takes one language per call; pass it only when the whole batch agrees.
            if self.options.force_language and len(hints) == 1 and None not in hints:
                kwargs.update(language=hints.pop(), task="transcribe")
            elif not self.options.force_language:
                kwargs.update(task="transcribe")  # Whisper detects each clip's language itself
        with torch.inference_mode():
            generated = model.generate(**inputs, **kwargs)
        return list(processor.batch_decode(generated, skip_special_tokens=True)), found

    @staticmethod
    def _detect(model: Any, inputs: dict[str, Any], lang_to_id: dict[str, int]) -> list[tuple[str, float]]:
        """Whisper's language detection: after the start token, the most likely language token and its
        probability among the language tokens (what WhisperForConditionalGeneration.detect_language argmaxes)."""
        import torch

        features = inputs["input_features"][:, :, :3000]  # the first 30 s, as Whisper detects
        start = torch.full(
            (features.shape[0], 1),
            model.generation_config.decoder_start_token_id,
            dtype=torch.long,
            device=features.device,
        )
        with torch.inference_mode():
            logits = model(input_features=features, decoder_input_ids=start, use_cache=False).logits[:, -1]
        tokens, ids = list(lang_to_id), list(lang_to_id.values())
        probs = logits[:, ids].float().softmax(dim=-1).cpu()
        top = probs.argmax(dim=-1)
        return [(tokens[int(k)].strip("<|>"), float(probs[j, int(k)])) for j, k in enumerate(top)]

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "transformers",
            "version": self.version,
            "torch_version": package_version("torch"),
            "model": self.voice,
            "model_path": str(self.model_path),
            "kind": self._load()[2] if self._model.loaded else None,
            "device": self.device,
            "dtype": self.dtype,
            "options": self.options.model_dump(),
        }
