"""ASR round-trip stage (declared in tasks/stages.py): transcribe stored clips, normalize both sides, count word
and character errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.metrics.normalize import normalizer_for
from ttseval.metrics.wer import error_counts
from ttseval.tasks.failures import error_row


class EmptyReference(ValueError):
    """The item's text normalizes to nothing, so WER and CER are undefined for every clip of it."""


def recognise(asr: Any, clips: list[dict[str, Any]], audio: Callable[[str], Audio], spec: str) -> list[dict[str, Any]]:
    """Each clip's transcript, the clip's language as the hint."""
    return [
        {"text": t.text, "detected_language": t.detected_language, "language_prob": t.language_prob}
        for t in asr.transcribe([audio(w["audio_sha256"]) for w in clips], [w["language"] for w in clips])
    ]


def _score(w: dict[str, Any], text: str, detected: str | None, prob: float | None, protocol: str) -> dict[str, Any]:
    normalizer = normalizer_for(w["language"], protocol)
    ref, hyp = normalizer(w["text"]), normalizer(text)
    if not ref.strip():
        raise EmptyReference(
            f"the reference of {w['item_id']!r} is empty after {normalizer.name} normalization: "
            "WER/CER is undefined; fix the item text so it keeps at least one word"
        )
    counts = error_counts(ref, hyp, key=f"{w['item_id']}/{w['system_id']}")
    return {
        "hypothesis": text,
        "detected_language": detected,
        "language_prob": prob,
        "normalizer": normalizer.name,
        "ref_norm": ref,
        "hyp_norm": hyp,
        "word_errors": counts.word_errors,
        "ref_words": counts.ref_words,
        "char_errors": counts.char_errors,
        "ref_chars": counts.ref_chars,
        "wer": counts.word_errors / counts.ref_words,
        "cer": counts.char_errors / counts.ref_chars,
        "status": "ok",
        "retryable": False,
        "attempt": 1,
    }


def scored_row(
    w: dict[str, Any], t: dict[str, Any], settings: Settings, where: str, key: tuple[str, str, str]
) -> dict[str, Any]:
    """A transcript's row: normalized (the run's WER protocol), scored against the item's text."""
    try:
        return _score(w, t["text"], t["detected_language"], t["language_prob"], settings.wer_protocol)
    # Final: the item text decides it, so every later run would fail the same way (after a new ASR call).
    except EmptyReference as e:
        return {
            "hypothesis": t["text"],
            "status": "failed",
            "error_type": "EmptyReference",
            "error_message": str(e),
            "retryable": False,
            "attempt": 1,
        }
    # Any other scoring error (a null hypothesis, a normalizer bug) is not the data's fault: retryable.
    except Exception as e:  # noqa: BLE001
        return {"hypothesis": t["text"]} | error_row(e, attempt=1, stage=f"{where} (scoring)", keys=[key])
