"""DNSMOS (Microsoft's deep noise suppression MOS predictor) from the speechmos package."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, Languages, QualityScore
from ttseval.providers import (
    EngineVersion,
    canonical_spec,
    onnx_providers,
    onnx_session_options,
    package_version,
    parse_options,
)
from ttseval.providers.local_model import LazyModel, refuse_model_name

SAMPLE_RATE_HZ = 16000  # DNSMOS models take 16 kHz input
WINDOWS_PER_CALL = 4  # windows per ONNX run (measured: 95 ms/window at 1-4, 110 at 16; scores do not depend on it)
SR_P808 = 16000  # speechmos' audio_melspec defaults: 120 mels, 320-sample frames (n_fft 321), hop 160


class DNSMOSOptions(BaseModel):
    """Options of `dnsmos:key=value`."""

    personalized: bool = Field(False, description="use the personalized DNSMOS model (penalises interfering talkers)")


def _windows(audio: np.ndarray) -> list[np.ndarray]:
    """The 9.01 s windows speechmos' `DNSMOS.__call__` scores, cut by its own arithmetic: a clip shorter than a
    window is doubled until it is long enough; windows hop by 1 s; a window that comes out one sample short
    is skipped, as speechmos skips it. (Its float arithmetic makes every window from the 8th on one sample short,
    so clips over 16 s are scored on their first 7 windows; kept, so scores match speechmos and DNSMOS' script.)"""
    from speechmos.dnsmos import INPUT_LENGTH, SR

    length = int(INPUT_LENGTH * SR)
    while len(audio) < length:
        audio = np.append(audio, audio)
    hops = int(np.floor(len(audio) / SR) - INPUT_LENGTH) + 1
    cut = [audio[int(i * SR) : int((i + INPUT_LENGTH) * SR)] for i in range(hops)]
    return [w for w in cut if len(w) >= length]


def _p808_features(windows: np.ndarray) -> np.ndarray:
    """speechmos' `audio_melspec` of each window minus its last 160 samples, for a stack of windows at once:
    librosa's mel spectrogram over the batch axis, then `power_to_db(ref=np.max, top_db=80)` taken per window
    (librosa's own function would take the max over the whole batch), scaled by (db + 40) / 40."""
    import librosa

    mel = librosa.feature.melspectrogram(y=windows[:, :-160], sr=SR_P808, n_fft=321, hop_length=160, n_mels=120)
    amin, top_db = 1e-10, 80.0
    db = 10.0 * np.log10(np.maximum(amin, mel))
    db -= 10.0 * np.log10(np.maximum(amin, mel.max(axis=(1, 2), keepdims=True)))
    db = np.maximum(db, db.max(axis=(1, 2), keepdims=True) - top_db)
    features: np.ndarray = ((db + 40) / 40).transpose(0, 2, 1).astype(np.float32)
    return features


class DNSMOSQuality:
    """DNSMOS P.835 (sig, bak, ovrl) and P.808 MOS from the ONNX files inside the speechmos wheel.

    `mos` is the overall score (ovrl); `details` holds sig, bak, ovrl and p808, each on 1-5. speechmos' module
    function `run` keeps one global model; this provider builds its own `speechmos.dnsmos.DNSMOS` (two ONNX
    sessions) once per instance, on first use. Scoring follows speechmos' `DNSMOS.__call__` (its windows, mel
    features, polynomial calibration and means) but batches: the windows of every clip in a call go through each
    ONNX session together instead of one run per window (tests check the scores equal speechmos' own per-clip
    call). Audio is resampled to 16 kHz and clipped to [-1, 1] (resampling can overshoot and speechmos
    refuses values outside). Clips are scored on 9.01 s windows hopped by 1 s; a shorter clip is tiled (repeated
    end to end) up to 9.01 s, as speechmos does, so a 1 s clip is scored as that second repeated.
    """

    name: ClassVar[str] = "dnsmos"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False
    extra: ClassVar[str | None] = "engines"
    output_sample_rate_hz: ClassVar[int | None] = None  # returns scores
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("speechmos"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("speechmos", "onnxruntime")

    def __init__(self, voice: str | None = None, **options: str) -> None:
        refuse_model_name(self.name, voice, instead="options: personalized")
        self.options = parse_options(DNSMOSOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        self._model: LazyModel[Any] = LazyModel(self._build)

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
        return self._model.get()

    def _build(self) -> Any:
        primary, p808 = self._model_paths()
        import onnxruntime as ort
        from speechmos.dnsmos import DNSMOS

        # What DNSMOS.__init__ does (it sets these three attributes), with this process's session options
        # (providers.onnx_session_options: one thread per worker on a Dask worker).
        model = DNSMOS.__new__(DNSMOS)
        model.primary_model_path = str(primary)
        model.onnx_sess = ort.InferenceSession(str(primary), onnx_session_options(), providers=onnx_providers())
        model.p808_onnx_sess = ort.InferenceSession(str(p808), onnx_session_options(), providers=onnx_providers())
        return model

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        """Predict MOS for each clip, in order: every 9.01 s window of every clip in the batch goes through each
        ONNX model in calls of up to WINDOWS_PER_CALL windows, and a clip's scores are the means over its windows.

        Raises:
            PermanentProviderError: a clip has no samples (speechmos would loop forever tiling an empty array)
                or onnxruntime fails.
        """
        model = self._load()
        windows: list[np.ndarray] = []
        owner: list[int] = []
        for i, clip in enumerate(batch):
            if len(clip.samples) == 0:
                raise PermanentProviderError("dnsmos cannot score a clip with no samples", spec=self.spec)
            samples = np.clip(clip.resampled(SAMPLE_RATE_HZ).samples, -1.0, 1.0).astype(np.float32)
            mine = _windows(samples)
            windows += mine
            owner += [i] * len(mine)
        if not windows:
            return []
        from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, RuntimeException

        raw, p808 = [], []
        try:
            for start in range(0, len(windows), WINDOWS_PER_CALL):
                chunk = np.stack(windows[start : start + WINDOWS_PER_CALL])
                raw.append(model.onnx_sess.run(None, {"input_1": chunk})[0])
                p808.append(model.p808_onnx_sess.run(None, {"input_1": _p808_features(chunk)})[0][:, 0])
        # onnxruntime's errors derive from Exception directly, not RuntimeError.
        except (Fail, InvalidArgument, RuntimeException) as e:
            raise PermanentProviderError(f"dnsmos failed on a batch of {len(batch)} clips: {e}", spec=self.spec) from e
        sig_raw, bak_raw, ovr_raw = np.concatenate(raw).astype(np.float64).T
        sig, bak, ovr = model.get_polyfit_val(sig_raw, bak_raw, ovr_raw, self.options.personalized)
        per_window = {"sig": sig, "bak": bak, "ovrl": ovr, "p808": np.concatenate(p808).astype(np.float64)}
        owners = np.asarray(owner)
        scores = []
        for i in range(len(batch)):
            details = {name: float(np.mean(values[owners == i])) for name, values in per_window.items()}
            if not all(np.isfinite(v) for v in details.values()):
                raise PermanentProviderError(f"dnsmos returned a non-finite score {details}", spec=self.spec)
            scores.append(QualityScore(mos=details["ovrl"], details=details))
        return scores

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
