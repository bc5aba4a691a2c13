"""A toy MOS predictor: 1 + 4 x the share of a clip's 10 ms frames louder than -40 dBFS. Not a model of quality;
it is the smallest real predictor a plugin can ship, so the plugin mechanism is tested end to end."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ttseval.core.audio import Audio
from ttseval.core.protocols import ANY_LANGUAGE, QualityScore

FRAME_S = 0.010
SILENCE_DBFS = -40.0


class ToyMOS:
    name: ClassVar[str] = "toy-mos"
    languages: ClassVar[str] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False
    extra: ClassVar[str | None] = None
    output_sample_rate_hz: ClassVar[int | None] = None
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "0.1.0"

    def __init__(self, voice: str | None = None, **options: str) -> None:
        if voice or options:
            raise ValueError(f"toy-mos takes no voice or options (got {voice!r}, {options!r})")

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        """The score of each clip, in order; a clip shorter than one frame is refused."""
        out = []
        for clip in batch:
            frame = max(1, round(FRAME_S * clip.sample_rate_hz))
            n = len(clip.samples) // frame
            if n == 0:
                out.append(QualityScore(mos=float("nan"), refused="shorter than one 10 ms frame"))
                continue
            frames = np.asarray(clip.samples[: n * frame], dtype=np.float64).reshape(n, frame)
            rms = np.sqrt(np.mean(frames**2, axis=1))
            loud = float(np.mean(20 * np.log10(np.maximum(rms, 1e-12)) > SILENCE_DBFS))
            out.append(QualityScore(mos=1 + 4 * loud, details={"loud_share": loud}))
        return out

    def metadata(self) -> dict[str, Any]:
        return {"engine": "toy-mos", "frame_s": FRAME_S, "silence_dbfs": SILENCE_DBFS}
