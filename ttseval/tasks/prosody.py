"""Prosody stage (declared in tasks/stages.py): F0, speech time, silences and pauses of every stored clip
(metrics/prosody.py), when the `prosody` setting is on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ttseval.core.audio import Audio
from ttseval.metrics.prosody import f0_stats, speech_segments, timing

PROSODY_ID = (
    "prosody-v1"  # Praat pitch (ac) 65-500 Hz, Silero VAD (silero-vad 6), pauses >= 0.5 s: a new rule is a new id
)


def measure(audio: Audio) -> dict[str, Any]:
    """Every prosody and timing figure of one clip."""
    samples = audio.samples
    return (
        f0_stats(samples, audio.sample_rate_hz)
        | timing(speech_segments(samples, audio.sample_rate_hz), len(samples) / audio.sample_rate_hz).as_dict()
    )


def measure_clips(
    model: None, clips: list[dict[str, Any]], audio: Callable[[str], Audio], spec: str
) -> list[dict[str, Any]]:
    """The figures of each clip (no model: metrics/prosody.py, versioned by PROSODY_ID)."""
    return [measure(audio(w["audio_sha256"])) for w in clips]
