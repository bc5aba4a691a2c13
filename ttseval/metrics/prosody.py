"""Prosody and timing of a clip, as functions of its samples.

- F0: Praat's autocorrelation pitch tracker through parselmouth (To Pitch (ac), 65-500 Hz): the mean F0 of
  voiced frames in Hz, and its range as the 5th to 95th percentile span in semitones (12 log2(p95 / p5)), robust
  to octave slips at the edges. (librosa's pYIN was the first choice; its numba kernels segfaulted in a fresh
  install when two test processes compiled them at once, so F0 comes from Praat, which needs no JIT.)
- Speech segments: Silero VAD, whose weights ship inside the silero-vad wheel (the JIT model, run with torch;
  never downloaded), at 16 kHz with its default threshold (0.5) and a 100 ms minimum silence.
- Timing from the segments: leading and trailing silence, speech time, internal pauses of at least `pause_s`
  (0.5 s by default) counted with the longest one; these flag clips padded with silence or cut short.
- Speaking rate: words per second of speech (the transcript's words over the VAD's speech time).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ttseval.core.audio import resample

__all__ = ["Timing", "audio_gates", "f0_stats", "speaking_rate", "speech_segments", "timing"]

VAD_RATE_HZ = 16000


def f0_stats(samples: np.ndarray, rate_hz: int, *, fmin: float = 65.0, fmax: float = 500.0) -> dict[str, float]:
    """{f0_mean_hz, f0_range_st, voiced_share}; NaN F0 figures when no frame is voiced."""
    import parselmouth

    y = np.asarray(samples, dtype=np.float64)
    if len(y) < rate_hz // 10:
        return {"f0_mean_hz": float("nan"), "f0_range_st": float("nan"), "voiced_share": 0.0}
    track = parselmouth.Sound(y, sampling_frequency=rate_hz).to_pitch_ac(pitch_floor=fmin, pitch_ceiling=fmax)
    f0 = track.selected_array["frequency"]
    hz = f0[f0 > 0]  # Praat marks unvoiced frames 0
    if not len(hz):
        return {"f0_mean_hz": float("nan"), "f0_range_st": float("nan"), "voiced_share": 0.0}
    low, high = np.percentile(hz, [5, 95])
    return {
        "f0_mean_hz": float(hz.mean()),
        "f0_range_st": float(12 * np.log2(high / low)),
        "voiced_share": float(len(hz) / len(f0)),
    }


@functools.cache
def _vad() -> Any:
    try:
        from silero_vad import load_silero_vad
    except ImportError as e:
        raise ImportError(
            "speech segments need silero-vad (its weights ship in the wheel): pip install 'ttseval[engines]'"
        ) from e
    return load_silero_vad()


def speech_segments(samples: np.ndarray, rate_hz: int) -> list[tuple[float, float]]:
    """(start_s, end_s) of each stretch of speech, from Silero VAD."""
    import torch
    from silero_vad import get_speech_timestamps

    y = resample(samples, rate_hz, VAD_RATE_HZ)
    if len(y) < VAD_RATE_HZ // 20:
        return []
    found = get_speech_timestamps(
        torch.from_numpy(np.ascontiguousarray(y)),
        _vad(),
        sampling_rate=VAD_RATE_HZ,
        return_seconds=True,
        min_silence_duration_ms=100,
    )
    return [(float(s["start"]), float(s["end"])) for s in found]


@dataclass(frozen=True)
class Timing:
    """Seconds, from a clip's speech segments and its duration."""

    speech_s: float
    leading_silence_s: float
    trailing_silence_s: float
    n_long_pauses: int
    longest_pause_s: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def timing(segments: list[tuple[float, float]], duration_s: float, *, pause_s: float = 0.5) -> Timing:
    """Timing of a clip: no segment means no speech (all silence)."""
    if not segments:
        return Timing(0.0, duration_s, duration_s, 0, 0.0)
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(segments)]
    long = [g for g in gaps if g >= pause_s]
    return Timing(
        speech_s=float(sum(e - s for s, e in segments)),
        leading_silence_s=float(segments[0][0]),
        trailing_silence_s=float(max(0.0, duration_s - segments[-1][1])),
        n_long_pauses=len(long),
        longest_pause_s=float(max(gaps, default=0.0)),
    )


def speaking_rate(n_words: int, speech_s: float) -> float:
    """Words per second of speech; NaN without speech."""
    return n_words / speech_s if speech_s > 0 else float("nan")


def audio_gates(leading_s: float, trailing_s: float, *, padded_s: float = 1.0, cut_s: float = 0.03) -> list[str]:
    """The timing gates a clip fails: 'padded' (more than `padded_s` of silence before or after the speech) and
    'cut short' (speech running to within `cut_s` of the end: the clip may end mid-word)."""
    gates = []
    if leading_s > padded_s or trailing_s > padded_s:
        gates.append("padded")
    if trailing_s < cut_s:
        gates.append("cut short")
    return gates
