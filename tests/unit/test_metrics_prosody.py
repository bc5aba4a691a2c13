"""Prosody and timing (metrics/prosody.py): Praat's pitch tracker on tones of known pitch, Silero VAD on real espeak-ng
speech with silence of known length added, and the timing rules worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ttseval.metrics.prosody import audio_gates, f0_stats, speaking_rate, speech_segments, timing

RATE = 16000


def _harmonic(f0_hz: np.ndarray) -> np.ndarray:
    phase = 2 * np.pi * np.cumsum(f0_hz) / RATE
    return (0.3 * np.sin(phase) + 0.15 * np.sin(2 * phase) + 0.07 * np.sin(3 * phase)).astype(np.float32)


def test_f0_of_a_steady_tone_and_the_range_of_a_glide() -> None:
    steady = f0_stats(_harmonic(np.full(RATE, 150.0)), RATE)
    assert steady["f0_mean_hz"] == pytest.approx(150.0, rel=0.01) and steady["f0_range_st"] < 0.3
    glide = f0_stats(_harmonic(np.linspace(100.0, 200.0, 2 * RATE)), RATE)
    # a linear glide's 5th and 95th percentiles are 105 and 195 Hz: 12 log2(195 / 105) = 10.72 semitones
    assert glide["f0_range_st"] == pytest.approx(12 * np.log2(195 / 105), abs=0.5)
    assert glide["f0_mean_hz"] == pytest.approx(150.0, rel=0.03)
    silent = f0_stats(np.zeros(RATE, dtype=np.float32), RATE)
    assert np.isnan(silent["f0_mean_hz"]) and silent["voiced_share"] == 0.0


def test_silence_added_around_real_speech_is_measured() -> None:
    from ttseval.providers.tts.espeak_ng import EspeakNGTTS

    clip = EspeakNGTTS("en-us").synthesize("Hello there, this is a test of the voice activity detector.", "en")
    speech = clip.resampled(RATE).samples
    plain = timing(speech_segments(speech, RATE), len(speech) / RATE)
    padded_samples = np.concatenate([np.zeros(RATE // 2, np.float32), speech, np.zeros(RATE, np.float32)])
    padded = timing(speech_segments(padded_samples, RATE), len(padded_samples) / RATE)
    # Silero decides in 32 ms windows and ends speech after 100 ms of silence: a tolerance of 0.15 s
    assert padded.leading_silence_s - plain.leading_silence_s == pytest.approx(0.5, abs=0.15)
    assert padded.trailing_silence_s - plain.trailing_silence_s == pytest.approx(1.0, abs=0.15)
    assert padded.speech_s == pytest.approx(plain.speech_s, abs=0.25) and plain.speech_s > 2.0
    # espeak-ng at 22.05 kHz gives the same segments as its 16 kHz resampling, within a frame or two
    native = speech_segments(clip.samples, clip.sample_rate_hz)
    assert native and abs(native[0][0] - speech_segments(speech, RATE)[0][0]) < 0.07
    assert speech_segments(np.zeros(RATE, np.float32), RATE) == []


def test_timing_rules_by_hand() -> None:
    t = timing([(0.4, 1.0), (1.2, 2.0), (2.8, 3.5)], 4.0, pause_s=0.5)
    assert t.as_dict() == {
        "speech_s": pytest.approx(0.6 + 0.8 + 0.7),
        "leading_silence_s": 0.4,
        "trailing_silence_s": pytest.approx(0.5),
        "n_long_pauses": 1,
        "longest_pause_s": pytest.approx(0.8),
    }
    assert timing([], 2.0).as_dict() == {
        "speech_s": 0.0,
        "leading_silence_s": 2.0,
        "trailing_silence_s": 2.0,
        "n_long_pauses": 0,
        "longest_pause_s": 0.0,
    }
    assert speaking_rate(10, 4.0) == 2.5 and np.isnan(speaking_rate(3, 0.0))


def test_audio_gates() -> None:
    assert audio_gates(0.1, 0.2) == [] and audio_gates(1.5, 0.2) == ["padded"] and audio_gates(0.0, 1.2) == ["padded"]
    assert audio_gates(0.1, 0.0) == ["cut short"] and audio_gates(2.0, 0.01) == ["padded", "cut short"]
