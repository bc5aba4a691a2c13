"""Audio as it moves between stages: mono float32 samples plus a sample rate.

Stored audio is 16-bit PCM WAV; its SHA-256 is the blob's address, so identical audio is stored once.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Audio:
    """Mono audio. `samples` are float32 in [-1, 1]; `sample_rate_hz` is samples per second."""

    samples: np.ndarray
    sample_rate_hz: int

    @property
    def duration_s(self) -> float:
        return float(len(self.samples)) / float(self.sample_rate_hz) if self.sample_rate_hz else 0.0

    def is_silent(self, *, min_duration_s: float = 0.05, min_peak: float = 1e-4) -> bool:
        """True when the clip is too short or has no signal: INSV-A's F1 'returns silence'."""
        return self.duration_s < min_duration_s or float(np.max(np.abs(self.samples), initial=0.0)) < min_peak

    def to_wav_bytes(self) -> bytes:
        import soundfile as sf

        buf = io.BytesIO()
        sf.write(buf, np.clip(self.samples, -1.0, 1.0), self.sample_rate_hz, format="WAV", subtype="PCM_16")
        return buf.getvalue()

    @classmethod
    def from_wav_bytes(cls, data: bytes) -> Audio:
        import soundfile as sf

        samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
        return cls(samples=samples.mean(axis=1).astype(np.float32), sample_rate_hz=int(rate))

    def resampled(self, sample_rate_hz: int) -> Audio:
        """This audio at another rate (`resample`); returns self when the rate already matches."""
        if sample_rate_hz == self.sample_rate_hz:
            return self
        return Audio(samples=resample(self.samples, self.sample_rate_hz, sample_rate_hz), sample_rate_hz=sample_rate_hz)


def resample(samples: np.ndarray, from_hz: int, to_hz: int) -> np.ndarray:
    """Mono samples at another rate, as float32: soxr's high-quality mode, then cut or zero-padded to
    ceil(n * (to / from)) samples. This is exactly what `librosa.resample` does by default (res_type 'soxr_hq',
    fix=True; tests/unit/test_core.py compares the two), without importing librosa, whose first resample costs 1.7 s
    of imports and numba set-up in a command that only exports a listening test."""
    import soxr

    y = np.asarray(samples, dtype=np.float32)
    if from_hz == to_hz:
        return y
    if y.ndim != 1:
        raise ValueError(f"resample takes mono samples (one dimension), got shape {y.shape}")
    if not np.isfinite(y).all():  # librosa refused these too: one NaN would spread over the whole clip
        raise ValueError("resample takes finite samples; these have NaN or infinite values")
    n = int(np.ceil(len(y) * (float(to_hz) / from_hz)))  # the ratio first, as librosa: 22050 -> 48000 gives one more
    out = soxr.resample(y, from_hz, to_hz, quality="soxr_hq")[:n]
    return np.pad(out, (0, n - len(out))).astype(np.float32, copy=False)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
