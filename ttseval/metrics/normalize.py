"""Named, versioned text normalizers applied to reference and hypothesis before WER/CER.

A normalizer's ``name`` goes into every output row, so a rule change means a new name
(``-v2``), never an edit of an existing one.

- ``english-v1``: Whisper's ``EnglishTextNormalizer`` (transformers).
- ``basic-v1``: Whisper's ``BasicTextNormalizer`` rules with combining marks kept.
- ``whisper-basic-v1``: Whisper's ``BasicTextNormalizer`` unchanged, for comparison
  with published Whisper-style numbers only (it splits Brahmic words, see below).
- ``perso-arabic-v1``: PashtoTTS-Bench §4.2.4 (NFC, kashida, punctuation, diacritics).
- ``seedtts-en-v1``, ``seedtts-zh-v1``: Seed-TTS-eval's ``run_wer.py`` (``process_one``), to the character,
  so WER figures can be set beside its published table (``normalizer_for(language, "seed-tts-eval")``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import langcodes

__all__ = [
    "NORMALIZERS",
    "Normalizer",
    "basic_v1",
    "english_v1",
    "get_normalizer",
    "normalizer_for",
    "perso_arabic_v1",
    "seedtts_en_v1",
    "seedtts_zh_v1",
    "whisper_basic_v1",
]


@dataclass(frozen=True)
class Normalizer:
    """A named text normalizer; call it on a string.

    Attributes:
        name: Versioned name written into output rows, e.g. ``"perso-arabic-v1"``.
        fn: The normalizing function ``str -> str``.
    """

    name: str
    fn: Callable[[str], str]

    def __call__(self, text: str) -> str:
        if not isinstance(text, str):
            # ValueError, not TypeError: this is usually a null cell (None/NaN) in a row.
            message = f"normalizer {self.name!r} expects str, got {type(text).__name__}: {text!r}"
            raise ValueError(message)
        return self.fn(text)


_WHITESPACE_RE = re.compile(r"\s+")


def _collapse_whitespace(text: str) -> str:
    return _WHITESPACE_RE.sub(" ", text).strip()


def _whisper_normalizers() -> Any:
    # Imported lazily: importing transformers costs about a second, and transformers is in
    # the optional "models" extra. This module itself needs only `regex`, not torch.
    try:
        from transformers.models.whisper import english_normalizer
    except ImportError as e:
        raise ImportError(
            "the english-v1 and whisper-basic-v1 normalizers need transformers; "
            "install it with: pip install 'ttseval[models]'"
        ) from e
    return english_normalizer


@functools.lru_cache(maxsize=1)
def _whisper_english() -> Any:
    # The British->American spelling mapping is not shipped in transformers (it lives in each
    # Whisper model repo's normalizer.json), so english-v1 uses an empty mapping.
    return _whisper_normalizers().EnglishTextNormalizer({})


@functools.lru_cache(maxsize=1)
def _whisper_basic() -> Any:
    return _whisper_normalizers().BasicTextNormalizer(remove_diacritics=False)


def english_v1(text: str) -> str:
    """Whisper's English normalizer (transformers), outer whitespace stripped.

    Lowercases; drops bracketed/parenthesised spans and fillers (hmm, uh, um); expands
    titles and contractions ("Dr." -> "doctor", "won't" -> "will not", and also any
    "'s" -> " is", so possessives become "is"); removes diacritics and punctuation; and
    standardizes numbers to digits: "twenty-one" -> "21", "first" -> "1st", "3rd" stays
    "3rd", "five dollars and twenty cents" -> "$5.20", "$5.20" stays "$5.20", "1,000" ->
    "1000", "zero"/"oh" -> "0". Spelling variants are not unified (empty mapping).
    Examples: "Dr. Smith's 3rd car" -> "doctor smith is 3rd car".
    """
    return _collapse_whitespace(_whisper_english()(text))


def whisper_basic_v1(text: str) -> str:
    """Whisper's ``BasicTextNormalizer`` unchanged (after NFC), outer whitespace stripped.

    Caveat: it replaces every Unicode mark (category M*) with a space, so Devanagari and
    other Brahmic words are split at each vowel sign or virama ("नमस्ते" -> "नमस त"), which
    inflates word counts and makes WER near-character-level (Manohar et al., EMNLP 2024,
    arXiv:2409.02449). Use only to reproduce numbers computed this way.
    """
    return _collapse_whitespace(_whisper_basic()(unicodedata.normalize("NFC", text)))


_BRACKETED_RE = re.compile(r"[<\[][^>\]]*[>\]]")
_PARENTHESISED_RE = re.compile(r"\(([^)]+?)\)")


def basic_v1(text: str) -> str:
    """Whisper ``BasicTextNormalizer`` rules, but combining marks are kept.

    NFC, lowercase, drop ``[...]``/``<...>``/``(...)`` spans, NFKC, replace symbols (S*)
    and punctuation (P*) with a space, collapse whitespace. Unlike Whisper, marks (M*)
    such as Devanagari vowel signs and virama are kept, so words are not split:
    "नमस्ते, दुनिया!" -> "नमस्ते दुनिया". Latin accents are kept too ("café").
    """
    # Same steps and order as transformers' BasicTextNormalizer (checked against it in the
    # tests on mark-free text); only the mark handling differs, see whisper_basic_v1.
    text = unicodedata.normalize("NFC", text).lower()
    text = _BRACKETED_RE.sub("", text)
    text = _PARENTHESISED_RE.sub("", text)
    text = "".join(" " if unicodedata.category(ch)[0] in "SP" else ch for ch in unicodedata.normalize("NFKC", text))
    return _collapse_whitespace(text.lower())


_KASHIDA = "\u0640"
_ARABIC_DIACRITICS = frozenset([chr(cp) for cp in range(0x064B, 0x0660)] + ["\u0670"])


def perso_arabic_v1(text: str) -> str:
    """PashtoTTS-Bench §4.2.4 normalization for Perso-Arabic scripts.

    In order: NFC; remove kashida U+0640; replace every punctuation character (Unicode
    category P*, e.g. U+060C "،", U+061B "؛", U+061F "؟", U+06D4 "۔", ASCII punctuation)
    with a space; remove diacritics U+064B–U+065F and U+0670; collapse whitespace; strip.
    No case folding, digit mapping or letter unification (e.g. ي/ی) is done.
    """
    # Hand-written: no library implements this exact protocol. Punctuation becomes a space
    # rather than being deleted so that "word،word" (no space after the Arabic comma)
    # splits into two words. Diacritics are removed after NFC, as the protocol orders it,
    # so NFC-composed hamza letters (أ ؤ ئ ۀ) are kept as letters.
    text = unicodedata.normalize("NFC", text)
    text = text.replace(_KASHIDA, "")
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    text = "".join(ch for ch in text if ch not in _ARABIC_DIACRITICS)
    return _collapse_whitespace(text)


@functools.lru_cache(maxsize=1)
def _seedtts_deletions() -> dict[int, None]:
    # Seed-TTS-eval's set, as a str.translate table that deletes it: zhon's Chinese punctuation and
    # string.punctuation, less the ASCII apostrophe it keeps.
    import string

    from zhon.hanzi import punctuation

    return {ord(ch): None for ch in punctuation + string.punctuation if ch != "'"}


def _seedtts_common(text: str) -> str:
    # Seed-TTS-eval's steps exactly: each punctuation character deleted (no space put in its place, so
    # "state-of-the-art" -> "stateoftheart"), then ONE pass of "  " -> " " (three spaces leave two; jiwer's
    # own transform collapses the rest before counting). No Unicode normalization, no number normalization:
    # "fifty" against "50" stays an error, as in its published figures (Seed-TTS-eval issue #12).
    return text.translate(_seedtts_deletions()).replace("  ", " ")


def seedtts_en_v1(text: str) -> str:
    """Seed-TTS-eval's English WER normalization (``run_wer.py``, lang ``en``): punctuation deleted except the
    apostrophe, one pass of double spaces to single, lowercased. ``"It's 50%, OK?"`` -> ``"it's 50 ok"``."""
    return _seedtts_common(text).lower()


def seedtts_zh_v1(text: str) -> str:
    """Seed-TTS-eval's Chinese WER normalization (``run_wer.py``, lang ``zh``): punctuation deleted except the
    apostrophe, one pass of double spaces to single, then every character (spaces and Latin letters included)
    joined by a space, so its WER counts characters; no lowercasing. ``"你好，世界！"`` -> ``"你 好 世 界"``.
    (Its script also converts the Paraformer hypothesis to simplified characters with zhconv before this; that
    is the recogniser's side and not done here.)"""
    return " ".join(_seedtts_common(text))


NORMALIZERS: Mapping[str, Normalizer] = MappingProxyType(
    {
        n.name: n
        for n in (
            Normalizer("english-v1", english_v1),
            Normalizer("basic-v1", basic_v1),
            Normalizer("whisper-basic-v1", whisper_basic_v1),
            Normalizer("perso-arabic-v1", perso_arabic_v1),
            Normalizer("seedtts-en-v1", seedtts_en_v1),
            Normalizer("seedtts-zh-v1", seedtts_zh_v1),
        )
    }
)

# Base languages written in Perso-Arabic script by default. langcodes canonicalizes some
# codes (prs -> fa); 639-3 codes for Pashto (pbt, pbu, pst) and Iranian Persian (pes)
# are listed because datasets use them.
_PERSO_ARABIC_LANGUAGES = frozenset({"ps", "pbt", "pbu", "pst", "fa", "pes", "ur", "ar", "sd", "ckb", "ug"})


def get_normalizer(name: str) -> Normalizer:
    """Return the normalizer registered under ``name``.

    Raises:
        ValueError: unknown name; the message lists the available names.
    """
    try:
        return NORMALIZERS[name]
    except KeyError:
        raise ValueError(f"unknown normalizer {name!r}; available: {', '.join(sorted(NORMALIZERS))}") from None


PROTOCOLS = ("ttseval", "seed-tts-eval")
"""The WER protocols a run can follow (the setting `wer_protocol`): ttseval's normalizers, or Seed-TTS-eval's."""


def normalizer_for(language: str, protocol: str = "ttseval") -> Normalizer:
    """Pick the default normalizer for a BCP-47 language tag.

    ``en`` -> english-v1; ps, fa, ur, ar, sd, ckb, ug (and pbt, pbu, pst, prs, pes)
    -> perso-arabic-v1; anything else -> basic-v1. An explicit script subtag wins:
    ``pa-Arab`` -> perso-arabic-v1, ``sd-Deva`` -> basic-v1. With ``protocol``
    ``"seed-tts-eval"``: ``en`` -> seedtts-en-v1, ``zh`` -> seedtts-zh-v1, and any other
    language is refused (Seed-TTS-eval defines WER for those two only).

    Args:
        language: BCP-47 tag such as ``"ps-AF"`` or ``"en"`` (``_`` accepted for ``-``),
            parsed with langcodes.

    Returns:
        The ``Normalizer``.

    Raises:
        ValueError: empty, non-string or malformed tag.
    """
    if not isinstance(language, str) or not language.strip():
        raise ValueError(f"language must be a non-empty BCP-47 tag such as 'ps-AF', got {language!r}")
    try:
        tag = langcodes.Language.get(language.strip().replace("_", "-"))
    except ValueError as e:
        raise ValueError(f"language {language!r} is not a valid BCP-47 tag (e.g. 'ps-AF', 'en')") from e
    if protocol == "seed-tts-eval":
        if tag.language not in ("en", "zh"):
            raise ValueError(
                f"language {language!r}: the Seed-TTS-eval WER protocol is defined for en and zh only; "
                'set wer_protocol = "ttseval" for other languages'
            )
        return NORMALIZERS[f"seedtts-{tag.language}-v1"]
    if protocol != "ttseval":
        raise ValueError(f"unknown WER protocol {protocol!r}; valid: {', '.join(PROTOCOLS)}")
    if tag.script == "Arab":
        return NORMALIZERS["perso-arabic-v1"]
    if tag.language == "en":
        return NORMALIZERS["english-v1"]
    if tag.language in _PERSO_ARABIC_LANGUAGES and tag.script is None:
        return NORMALIZERS["perso-arabic-v1"]
    return NORMALIZERS["basic-v1"]
