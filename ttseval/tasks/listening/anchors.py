"""The anchors of a MUSHRA page, made from clips of the run (Rethinking MUSHRA's Anchor-X and Anchor-Y), and
a page's clips padded to one length."""

from __future__ import annotations

import numpy as np

from ttseval.core.audio import Audio


def anchor_x(reference: Audio, bandwidth_hz: float) -> Audio:
    """Anchor-X: the reference band-limited to `bandwidth_hz` (resampled to twice it and back, soxr's
    anti-aliasing filter doing the low-pass), as BS.1534's 3.5 kHz anchor."""
    return reference.resampled(round(2 * bandwidth_hz)).resampled(reference.sample_rate_hz)


def anchor_y(clip: Audio, *, slowdown: float, edit: str | None, n_words: int, rng: np.random.Generator) -> Audio:
    """Anchor-Y in the spirit of the paper's (an ST2 output made worse): pitch flattened to the clip's mean F0 and
    the clip slowed `slowdown` times (Praat's PSOLA resynthesis, through parselmouth), and with `edit` 'skip' or
    'repeat' one word-long stretch of speech cut or said twice. A word's length is the voiced time over the
    text's word count; the stretch starts at a random point of a voiced region. (The paper also lowered ST2's
    diffusion steps and misspelt its input: those need the system itself, not its audio.)"""
    import librosa
    import parselmouth
    from parselmouth.praat import call

    samples = clip.samples.astype(np.float64)
    if edit:
        regions = librosa.effects.split(clip.samples, top_db=35)
        voiced = int(sum(e - s for s, e in regions))
        length = max(1, voiced // max(1, n_words))
        start, end = regions[int(np.argmax([e - s for s, e in regions]))] if len(regions) else (0, len(samples))
        at = int(rng.integers(start, max(start + 1, end - length)))
        chunk = samples[at : at + length]
        samples = (
            np.concatenate([samples[:at], samples[at + length :]])
            if edit == "skip"
            else np.concatenate([samples[: at + length], chunk, samples[at + length :]])
        )
    sound = parselmouth.Sound(samples, sampling_frequency=clip.sample_rate_hz)
    manipulation = call(sound, "To Manipulation", 0.01, 75, 600)
    pitch = call(manipulation, "Extract pitch tier")
    mean_f0 = call(pitch, "Get mean (curve)", 0, 0)
    if np.isfinite(mean_f0):  # no voiced frame: nothing to flatten
        call(pitch, "Remove points between", 0, sound.duration)
        call(pitch, "Add point", sound.duration / 2, mean_f0)
        call([pitch, manipulation], "Replace pitch tier")
    duration = call(manipulation, "Extract duration tier")
    call(duration, "Add point", 0, slowdown)
    call([duration, manipulation], "Replace duration tier")
    out = call(manipulation, "Get resynthesis (overlap-add)")
    return Audio(np.asarray(out.values[0], dtype=np.float32), clip.sample_rate_hz)


def pad_to_longest(clips: list[Audio]) -> list[Audio]:
    """Every clip zero-padded at its end to the longest (webMUSHRA refuses a page of unequal lengths)."""
    longest = max(len(c.samples) for c in clips)
    return [Audio(np.pad(c.samples, (0, longest - len(c.samples))), c.sample_rate_hz) for c in clips]
