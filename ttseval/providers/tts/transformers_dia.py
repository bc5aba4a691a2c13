"""Dia through transformers (`transformers-dia`): a dialogue TTS model that clones a voice from an audio prompt.

    transformers-dia:<local dir or hub id>            e.g. nari-labs/Dia-1.6B-0626 from the local HF cache
    transformers-dia:model=PATH:max_new_tokens=1024   options below

The model and its processor (Dia's byte tokenizer, feature extractor and the DAC codec it names) load with
local_files_only=True: nothing is downloaded. Dia speaks English.

Voice prompts (`clones_voice`): for an item with a prompt, the prompt clip is resampled to the processor's rate
and given as the audio prompt, and the text becomes `[S1] <prompt text> [S1] <text>`, as Dia's authors prescribe
(the transcript of the prompt first, then what to say); the generated audio is returned without the prompt's
frames. Without a prompt transcript only `[S1] <text>` is sent with the audio, which Dia's authors say clones
less faithfully. Without a prompt Dia picks a voice itself.

Sampling: Dia's model card generates with classifier-free guidance 3.0, temperature 1.8, top-p 0.90 and top-k 45;
those are the defaults. Each call seeds torch's generator with (seed, text, prompt), under a lock, so the same
request gives the same clip; `do_sample=false` decodes greedily.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.languages import base_language
from ttseval.core.protocols import Languages, VoicePrompt
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
from ttseval.providers.local_model import LazyModel, model_source


class DiaOptions(BaseModel):
    """Options of `transformers-dia:<path or hub id>:key=value`."""

    model: str | None = Field(None, description="local directory or hub id; use this when the path contains ':'")
    device: TorchDevice = "auto"
    max_new_tokens: int = Field(3072, ge=1, description="most audio frames to generate (86 per second)")
    guidance_scale: float = Field(3.0, ge=0, description="classifier-free guidance")
    do_sample: bool = True
    temperature: float = Field(1.8, gt=0)
    top_p: float = Field(0.90, gt=0, le=1)
    top_k: int = Field(45, ge=1)
    seed: int = Field(0, ge=0, description="seeds each call's sampling, with the text and the prompt")


class TransformersDiaTTS:
    """DiaForConditionalGeneration with its DiaProcessor; one clip per call (prompts differ per item)."""

    name: ClassVar[str] = "transformers-dia"
    languages: ClassVar[Languages] = frozenset({"en"})
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=auto / cuda
    extra: ClassVar[str | None] = "models"
    output_sample_rate_hz: ClassVar[int | None] = None  # the processor's rate (44100 for Dia-1.6B)
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("transformers"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("torch", "transformers")
    clones_voice: ClassVar[bool] = True

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(DiaOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        source = model_source(self.name, voice, self.options.model)
        self.voice = voice or source
        self.model_path = resolve_local_model(source, who=self.name)
        self.device = self.options.device
        self._model: LazyModel[tuple[Any, Any]] = LazyModel(self._build)
        self._run_lock = threading.Lock()  # torch's global generator is seeded per call

    def _load(self) -> tuple[Any, Any]:
        return self._model.get()

    def _build(self) -> tuple[Any, Any]:
        try:
            from transformers import DiaForConditionalGeneration, DiaProcessor
        except ImportError as e:
            raise ImportError("transformers-dia needs torch: pip install 'ttseval[models]'") from e
        path = str(self.model_path)
        try:
            processor = DiaProcessor.from_pretrained(path, local_files_only=True)
            model = DiaForConditionalGeneration.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError, KeyError) as e:
            raise PermanentProviderError(
                f"transformers could not load a Dia model and processor from {path!r}: {e}", spec=self.spec
            ) from e
        self.device = torch_device(self.options.device)
        # transformers wraps PreTrainedModel.to in functools.wraps(Module.to), which mypy types as an unbound function
        model.to(self.device).eval()  # type: ignore[arg-type]
        # ProcessorMixin.__init__ sets the sub-processors as attributes; transformers declares none of them
        processor.audio_tokenizer.to(self.device)  # type: ignore[attr-defined]
        return model, processor

    def supports_language(self, language: str) -> bool:
        return base_language(language) == "en"

    def _seed(self, text: str, prompt: VoicePrompt | None) -> int:
        h = hashlib.sha256(f"{self.options.seed}\0{text}".encode())
        if prompt is not None:
            h.update(np.ascontiguousarray(prompt.audio.samples).tobytes())
        return int.from_bytes(h.digest()[:4], "little")

    def synthesize(
        self,
        text: str,
        language: str,
        voice: str | None = None,
        instruction: str | None = None,
        *,
        prompt: VoicePrompt | None = None,
    ) -> Audio:
        """Speak `text` in the prompt's voice (when given), at the processor's sample rate.

        Raises:
            PermanentProviderError: another voice asked for, an empty prompt clip, or torch fails.
        """
        import torch

        if voice is not None and voice != self.voice:
            raise PermanentProviderError(
                f"transformers-dia instance holds model {self.voice!r}; build another provider for {voice!r}",
                spec=self.spec,
            )
        model, processor = self._load()
        rate_hz = int(processor.feature_extractor.sampling_rate)
        kwargs: dict[str, Any] = {"padding": True, "return_tensors": "pt"}
        if prompt is None:
            script = f"[S1] {text}"
        else:
            if not len(prompt.audio.samples):
                raise PermanentProviderError("transformers-dia: the voice prompt has no samples", spec=self.spec)
            script = f"[S1] {prompt.text.strip()} [S1] {text}" if prompt.text else f"[S1] {text}"
            kwargs |= {"audio": [prompt.audio.resampled(rate_hz).samples.astype(np.float32)], "sampling_rate": rate_hz}
        sampling = (
            {
                "do_sample": True,
                "temperature": self.options.temperature,
                "top_p": self.options.top_p,
                "top_k": self.options.top_k,
            }
            if self.options.do_sample
            else {"do_sample": False}
        )
        try:
            inputs = {k: v.to(self.device) for k, v in processor(text=[script], **kwargs).items()}
            with self._run_lock, torch.inference_mode():
                torch.manual_seed(self._seed(text, prompt))
                out = model.generate(
                    **inputs,
                    max_new_tokens=self.options.max_new_tokens,
                    guidance_scale=self.options.guidance_scale,
                    **sampling,
                )
                prompt_len = processor.get_audio_prompt_len(inputs["decoder_attention_mask"]) if prompt else None
                waves = processor.batch_decode(out, audio_prompt_len=prompt_len)
        except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
            if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                raise
            raise PermanentProviderError(f"transformers-dia failed: {e}", spec=self.spec) from e
        return Audio(
            samples=np.asarray(waves[0].float().cpu().numpy(), dtype=np.float32).reshape(-1), sample_rate_hz=rate_hz
        )

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "transformers-dia",
            "version": self.version,
            "torch_version": package_version("torch"),
            "model": self.voice,
            "model_path": str(self.model_path),
            "device": str(self.device),
            "options": self.options.model_dump(exclude={"model", "device"}),
        }
