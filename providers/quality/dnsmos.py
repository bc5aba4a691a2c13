"""DNSMOS (Microsoft's deep noise suppression MOS predictor) from the speechmos package."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from providers import EngineVersion, canonical_spec, package_version, parse_options
from ttseval.audio import Audio
from ttseval.errors import PermanentProviderError
from ttseval.protocols import ANY_LANGUAGE, Languages, QualityScore

SAMPLE_RATE_HZ = 16000  # DNSMOS models take 16 kHz input


class DNSMOSOptions(BaseModel):
    """Options of `dnsmos:key=value`."""

    personalized: bool = Field(False, description="use the personalized DNSMOS model (penalises interfering talkers)")


class DNSMOSQuality:
    """DNSMOS P.835 (sig, bak, ovrl) and P.808 MOS from the ONNX files inside the speechmos wheel.

    `mos` is the overall score (ovrl); `details` holds sig, bak, ovrl and p808, each on 1-5. speechmos' module
    function `run` keeps one global model; this provider builds its own `speechmos.dnsmos.DNSMOS` (two ONNX
    sessions) once per instance, on first use, and calls it per clip, so features and polynomial calibration are
    speechmos' own. Audio is resampled to 16 kHz and clipped to [-1, 1] (resampling can overshoot and speechmos
    refuses values outside). Clips are scored on 9.01 s windows hopped by 1 s; a shorter clip is tiled (repeated
    end to end) up to 9.01 s, as speechmos does, so a 1 s clip is scored as that second repeated.
    """

    name: ClassVar[str] = "dnsmos"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False
    extra: ClassVar[str | None] = "engines"
    output_sample_rate_hz: ClassVar[int | None] = None  # returns scores
    version: ClassVar[str] = EngineVersion(lambda: package_version("speechmos"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("speechmos", "onnxruntime")

    def __init__(self, voice: str | None = None, **options: str) -> None:
        if voice:
            raise ValueError(f"dnsmos takes no voice (got {voice!r}); options: personalized")
        self.options = parse_options(DNSMOSOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        self._model: Any = None
        self._load_lock = threading.Lock()

    def _model_paths(self) -> tuple[Path, Path]:
        """(primary sig/bak/ovrl model, p808 model) inside the speechmos package."""
        try:
            import speechmos.dnsmos
        except ImportError as e:
            raise ImportError("dnsmos provider needs the speechmos package: pip install 'ttseval[engines]'") from e
        root = Path(speechmos.dnsmos.__file__).parent
        primary_dir = "pdnsmos_models" if self.options.personalized else "dnsmos_models"
        return root / primary_dir / "sig_bak_ovr.onnx", root / "dnsmos_models" / "model_v8.onnx"

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                primary, p808 = self._model_paths()
                from speechmos.dnsmos import DNSMOS

                # DNSMOS.__init__ creates both onnxruntime sessions; __call__ only runs them.
                self._model = DNSMOS(str(primary), str(p808))
            return self._model

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        """Predict MOS for each clip, in order.

        Raises:
            PermanentProviderError: a clip has no samples (speechmos would loop forever tiling an empty array)
                or onnxruntime fails.
        """
        model = self._load()
        return [self._score_one(model, clip) for clip in batch]

    def _score_one(self, model: Any, clip: Audio) -> QualityScore:
        if len(clip.samples) == 0:
            raise PermanentProviderError("dnsmos cannot score a clip with no samples", spec=self.spec)
        samples = np.clip(clip.resampled(SAMPLE_RATE_HZ).samples, -1.0, 1.0).astype(np.float32)
        from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, RuntimeException

        try:
            result = model(samples, SAMPLE_RATE_HZ, self.options.personalized)
        # onnxruntime's errors derive from Exception directly, not RuntimeError.
        except (Fail, InvalidArgument, RuntimeException) as e:
            raise PermanentProviderError(f"dnsmos failed on a {clip.duration_s:.2f} s clip: {e}", spec=self.spec) from e
        details = {
            "sig": float(result["sig_mos"]),
            "bak": float(result["bak_mos"]),
            "ovrl": float(result["ovrl_mos"]),
            "p808": float(result["p808_mos"]),
        }
        if not all(np.isfinite(v) for v in details.values()):
            raise PermanentProviderError(f"dnsmos returned a non-finite score {details}", spec=self.spec)
        return QualityScore(mos=details["ovrl"], details=details)

    def metadata(self) -> dict[str, Any]:
        primary, p808 = self._model_paths()
        return {
            "engine": "dnsmos",
            "version": self.version,
            "options": self.options.model_dump(),
            "sample_rate_hz": SAMPLE_RATE_HZ,
            "model_files": [f"{primary.parent.name}/{primary.name}", f"{p808.parent.name}/{p808.name}"],
            "onnxruntime_version": package_version("onnxruntime"),
        }
