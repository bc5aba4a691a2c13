"""Text-to-speech providers: espeak-ng and flite (command-line engines) and Piper (neural, ONNX)."""

from __future__ import annotations

import re


def base_language(language: str) -> str:
    """The primary subtag of a BCP-47 tag, lower-cased: 'en-GB' -> 'en', 'pt_BR' -> 'pt', 'CMN' -> 'cmn'."""
    return re.split(r"[-_]", language.strip(), maxsplit=1)[0].lower()
