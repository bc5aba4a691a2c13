"""What the `files` provider tests share (tests/unit/test_files_provider.py, tests/e2e/test_files_provider_runs.py):
tones written as audio files of a given format, rate and channel count, and the rows of a tiny EmergentTTS-Eval
release."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf


def tone(rate: int, hz: float, channels: int = 1, seconds: float = 0.5) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    x = (0.4 * np.sin(2 * np.pi * hz * t)).astype(np.float32)
    return np.stack([x] * channels, axis=1) if channels > 1 else x


def write_clip(path: Path, fmt: str, subtype: str, rate: int, hz: float, channels: int = 1) -> Path:
    sf.write(path, tone(rate, hz, channels), rate, format=fmt, subtype=subtype)
    return path


ETTE_ROWS = [
    {
        "category": "Questions",
        "text_to_synthesize": "Did you really see it there?",
        "evolution_depth": 0,
        "language": "en",
    },
    {
        "category": "Questions",
        "text_to_synthesize": "Is it going to rain again tomorrow?",
        "evolution_depth": 1,
        "language": "en",
    },
    {
        "category": "Emotions",
        "text_to_synthesize": "I cannot believe you finally came back home!",
        "evolution_depth": 0,
        "language": "en",
    },
]
