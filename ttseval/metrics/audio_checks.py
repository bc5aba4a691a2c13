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

`truncated` is judged against the run itself, not a fixed speaking rate (`truncated`): a clip with fewer seconds
per character than TRUNCATED_SHARE of the median of the run's clips in its language (every system's, at least
MIN_PEERS of them). A third of a fixed 14 characters a second lets a clip cut to 40% pass (9 words in 1.1 s); the
run's own clips are the speaking-rate model, per language, so one system or one clip cut short stands out. What
it cannot see: every clip of a language cut alike (then the nightly series' comparison with earlier nights does).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

CHARS_PER_SECOND = 14.0
CLIP_LEVEL, CLIP_SHARE = 0.999, 0.001
DURATION_FACTOR = 3.0
MIN_CHARS = 20  # below this the prediction is too rough to judge a duration by
TRUNCATED_SHARE = 0.6  # under this share of the run's median seconds per character: truncated
MIN_PEERS = 10  # clips of a language the run's median is taken over; fewer: no clip of it is judged


def text_chars(text: str) -> int:
    """The characters a duration is predicted from: letters and single spaces (runs of whitespace count once)."""
    return len(" ".join(text.split()))


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
    chars = text_chars(text)
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


def truncated(durations_s: ArrayLike, chars: ArrayLike, languages: ArrayLike) -> NDArray[np.bool_]:
    """Which clips are truncated by the run's own speaking rate (module doc): seconds per character under
    TRUNCATED_SHARE of the median over the clips of the same language with at least MIN_CHARS characters, where
    there are MIN_PEERS of them. Clips under MIN_CHARS characters, or with a missing duration, are never flagged."""
    d = np.asarray(durations_s, dtype=np.float64)
    c = np.asarray(chars, dtype=np.float64)
    lang = np.asarray(languages, dtype=object)
    if not d.shape == c.shape == lang.shape:
        raise ValueError(f"durations, chars and languages differ in length: {d.size}, {c.size}, {lang.size}")
    judged = np.isfinite(d) & (c >= MIN_CHARS)
    per_char = np.divide(d, c, out=np.full_like(d, np.nan), where=judged)
    out = np.zeros(d.shape, dtype=bool)
    for language in set(lang[judged].tolist()):
        mine = judged & (lang == language)
        if mine.sum() >= MIN_PEERS:
            out[mine] = per_char[mine] < TRUNCATED_SHARE * float(np.median(per_char[mine]))
    return out
