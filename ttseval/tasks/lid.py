"""Language-identification stage (declared in tasks/stages.py): each voting LID model's answer per stored clip
(INSV-A's V gate)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ttseval.core.audio import Audio


def identify(model: Any, clips: list[dict[str, Any]], audio: Callable[[str], Audio], spec: str) -> list[dict[str, Any]]:
    return [{"language": g.language, "prob": g.prob} for g in model.identify([audio(w["audio_sha256"]) for w in clips])]
