"""Quality stage (declared in tasks/stages.py): a reference-free MOS prediction per stored clip from each MOS
predictor in settings.quality."""

from __future__ import annotations

import json
from typing import Any, Callable

from ttseval.tasks.common import error_row, model_output_id
from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.errors import PermanentProviderError
from ttseval.core.registry import Spec


def predict(predictor: Any, clips: list[dict[str, Any]], audio: Callable[[str], Audio], spec: str) -> list[dict[str, Any]]:
    return [{"mos": None, "details": {}, "refused": s.refused} if s.refused else {"mos": s.mos, "details": s.details}
            for s in predictor.score([audio(w["audio_sha256"]) for w in clips])]


def mos_row(w: dict[str, Any], s: dict[str, Any], settings: Settings, where: str, key: tuple) -> dict[str, Any]:
    if s.get("refused"):  # the predictor cannot score this clip (too short): a final failed row with its reason
        return error_row(PermanentProviderError(s["refused"]), attempt=1, stage=where, keys=[key])
    return {"mos": s["mos"], "details": json.dumps(s["details"], sort_keys=True), "status": "ok", "retryable": False,
            "attempt": 1}


def primary_quality_id(settings: Settings) -> str:
    """The quality_id of the first MOS predictor: the summary's MOS, the objective judge's and the leaderboard's."""
    return model_output_id("quality", Spec.parse(settings.qualities[0]), settings)
