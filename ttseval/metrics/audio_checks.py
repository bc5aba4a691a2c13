"""Quality gates on every synthesized clip: what makes audio broken rather than merely worse, as pure checks.

A clip that fails one is still stored and scored (a lower MOS says how bad it sounds); its row names each failed
gate in `audio_flags`, so a provider returning broken audio shows in the report as such. Silence is not here:
a silent clip is already an `empty` row (ttseval.core.audio.Audio.is_silent).

- `nan`: non-finite samples (they become 0 in the stored 16-bit WAV, so only the provider's output shows them);
- `clipped`: more than 0.1% of samples at full scale (|x| >= 0.999), the point where clipping is audible as
  distortion on speech;
- `too_short` / `too_long`: a duration under a third or over three times what the text predicts at 14
  characters a second (a typical speaking rate of read English, letters and spaces counted; wide enough for
  slow and fast voices and for other scripts), i.e. truncated audio or audio that runs on;
- `sample_rate`: not the rate the provider declares it returns (`output_sample_rate_hz`), a wrong header or a
  resampling bug.
"""

from __future__ import annotations

import numpy as np

CHARS_PER_SECOND = 14.0
CLIP_LEVEL, CLIP_SHARE = 0.999, 0.001
DURATION_FACTOR = 3.0
MIN_CHARS = 20  # below this the prediction is too rough to judge a duration by


def audio_flags(samples: np.ndarray, sample_rate_hz: int, text: str, declared_rate_hz: int | None = None) -> list[str]:
    """The gates a clip fails, in a fixed order; [] when it passes them all."""
    flags = []
    x = np.asarray(samples, dtype=np.float64)
    finite = np.isfinite(x)
    if not finite.all():
        flags.append("nan")
    x = x[finite]
    if x.size and float(np.mean(np.abs(x) >= CLIP_LEVEL)) > CLIP_SHARE:
        flags.append("clipped")
    chars = len(" ".join(text.split()))
    if chars >= MIN_CHARS and sample_rate_hz > 0:
        expected = chars / CHARS_PER_SECOND
        duration = len(samples) / sample_rate_hz
        if duration < expected / DURATION_FACTOR:
            flags.append("too_short")
        elif duration > expected * DURATION_FACTOR:
            flags.append("too_long")
    if declared_rate_hz and sample_rate_hz != declared_rate_hz:
        flags.append("sample_rate")
    return flags
