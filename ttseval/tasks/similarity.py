"""Similarity stage (declared in tasks/stages.py): speaker similarity (SIM) of each clip to its item's voice
prompt, or else to its system's reference voice (ttseval.tasks.voices), from every speaker encoder in
settings.similarity (ttseval.metrics.similarity). Clips with neither are not compared."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ttseval.core.audio import Audio
from ttseval.metrics.similarity import cosine_similarity
from ttseval.tasks.failures import one_per_request
from ttseval.tasks.voices import References


def reference_of(references: References, item_id: str, system_id: str) -> dict[str, Any] | None:
    """What the clip is compared with (reference, reference_sha256: columns of its rows), or None: not compared."""
    found = references.of(item_id, system_id)
    return None if found is None else {"reference": found[0], "reference_sha256": found[1]}


def compare(
    encoder: Any, clips: list[dict[str, Any]], audio: Callable[[str], Audio], spec: str
) -> list[dict[str, Any]]:
    """Each clip's cosine similarity to its reference; each distinct clip is embedded once per batch."""
    pairs = [(w["audio_sha256"], w["context"]["reference_sha256"]) for w in clips]
    shas = list(dict.fromkeys(s for pair in pairs for s in pair))
    vectors = dict(zip(shas, one_per_request(encoder.embed([audio(s) for s in shas]), shas, spec)))
    return [{"similarity": cosine_similarity(vectors[clip], vectors[reference])} for clip, reference in pairs]
