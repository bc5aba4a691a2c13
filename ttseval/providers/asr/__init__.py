"""Speech recognisers: faster-whisper (CTranslate2) and transformers (CTC or seq2seq from a local directory)."""

from __future__ import annotations

import functools

from ttseval.core.languages import base_language
from ttseval.core.protocols import ASRProvider
from ttseval.core.registry import Registry

# Whisper's language tokens (faster_whisper.tokenizer._LANGUAGE_CODES, same as openai-whisper's LANGUAGES).
_WHISPER_CODES = (
    "af am ar as az ba be bg bn bo br bs ca cs cy da de el en es et eu fa fi fo fr gl gu ha haw he hi hr "
    "ht hu hy id is it ja jw ka kk km kn ko la lb ln lo lt lv mg mi mk ml mn mr ms mt my ne nl nn no oc "
    "pa pl ps pt ro ru sa sd si sk sl sn so sq sr su sv sw ta te tg th tk tl tr tt uk ur uz vi yi yo yue "
    "zh"
)
WHISPER_LANGUAGES = frozenset(_WHISPER_CODES.split())

# Base languages (ttseval.core.languages.base_language) that Whisper spells differently.
_WHISPER_ALIASES = {"cmn": "zh", "jv": "jw", "nb": "no", "fil": "tl"}


def whisper_language(language: str | None) -> str | None:
    """Whisper's code for a language tag ('fr-FR' -> 'fr', 'eng' -> 'en', 'pus' -> 'ps', 'cmn' -> 'zh', 'nb-NO'
    -> 'no'), or None when Whisper has no token for it."""
    if not language:
        return None
    base = base_language(language)
    base = _WHISPER_ALIASES.get(base, base)
    return base if base in WHISPER_LANGUAGES else None


@functools.cache
def whisper_base_languages() -> frozenset[str]:
    """The base languages a multilingual Whisper model transcribes: those `whisper_language` maps to a token."""
    return frozenset(
        base_language(code) for code in WHISPER_LANGUAGES | set(_WHISPER_ALIASES) if whisper_language(code)
    )


ASR = Registry[ASRProvider](
    "asr",
    ASRProvider,
    {
        "faster-whisper": "ttseval.providers.asr.faster_whisper:FasterWhisperASR",
        "transformers": "ttseval.providers.asr.transformers_asr:TransformersASR",
        "command": "ttseval.providers.asr.command:CommandASR",
    },
)
