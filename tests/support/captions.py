"""What the instruction-generation tests share (tests/unit/test_instruction_dropout.py,
tests/e2e/test_generate_instructions.py): a reference clip as WAV bytes, and a caption whose every value names its
feature and reference, so a prompt's content can be checked exactly."""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf

from ttseval.corpus import instructions as ins


def wav_bytes(freq_hz: float, duration_s: float = 0.25, sample_rate_hz: int = 16000) -> bytes:
    t = np.arange(int(duration_s * sample_rate_hz)) / sample_rate_hz
    buf = io.BytesIO()
    sf.write(
        buf, (0.3 * np.sin(2 * np.pi * freq_hz * t)).astype(np.float32), sample_rate_hz, format="WAV", subtype="PCM_16"
    )
    return buf.getvalue()


def value(feature: str, ref: str) -> str:
    """A caption value unique to (feature, reference), so a prompt's content can be checked exactly."""
    return f"{feature}-val-{ref} with a slight shift"


def caption_of(ref: str) -> dict[str, str]:
    return {f: value(f, ref) for f in ins.FEATURES}
