"""Quality stage (declared in tasks/stages.py): a reference-free MOS prediction per stored clip from each MOS
predictor in settings.quality."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import MOS_BOUNDS
from ttseval.core.registry import Spec
from ttseval.tasks.failures import error_row
from ttseval.tasks.provider_cache import model_output_id


def predict(
    predictor: Any, clips: list[dict[str, Any]], audio: Callable[[str], Audio], spec: str
) -> list[dict[str, Any]]:
    return [
        {"mos": None, "details": {}, "refused": s.refused} if s.refused else {"mos": s.mos, "details": s.details}
        for s in predictor.score([audio(w["audio_sha256"]) for w in clips])
    ]


def mos_row(
    w: dict[str, Any], s: dict[str, Any], settings: Settings, where: str, key: tuple[str, str, str]
) -> dict[str, Any]:
    if s.get("refused"):  # the predictor cannot score this clip (too short): a final failed row with its reason
        return error_row(PermanentProviderError(s["refused"]), attempt=1, stage=where, keys=[key])
    mos = s["mos"]
    if not isinstance(mos, (int, float)) or not math.isfinite(mos) or not MOS_BOUNDS[0] <= mos <= MOS_BOUNDS[1]:
        # the model's own answer, the same on every try: a final row with the value, not a run stopped by the table's
        # expectation (random or mismatched weights do this: NISQA with random weights gave 7-ish on espeak-ng clips)
        return error_row(
            PermanentProviderError(
                f"the predictor's score {mos!r} is off the MOS scale ({MOS_BOUNDS[0]:g}-{MOS_BOUNDS[1]:g}): its "
                "weights or this clip are not what the model was made for, so the clip is left unscored"
            ),
            attempt=1,
            stage=where,
            keys=[key],
        )
    return {
        "mos": s["mos"],
        "details": json.dumps(s["details"], sort_keys=True),
        "status": "ok",
        "retryable": False,
        "attempt": 1,
    }


def primary_quality_id(settings: Settings) -> str:
    """The quality_id of the first MOS predictor: the summary's MOS, the objective judge's and the leaderboard's."""
    return model_output_id("quality", Spec.parse(settings.qualities[0]), settings)
