"""Script Fidelity Rate (PashtoTTS-Bench section 3.3): the share of a transcript's countable characters that are
in the target language's script.

A character is countable when it is a printable, non-whitespace codepoint that is not a combining diacritic
(Unicode canonical combining class other than 0, which covers U+064B-U+065F and U+0670), not punctuation (ASCII
punctuation and symbols, and every Unicode punctuation category, such as the Arabic comma and full stop), not a
control or format character (so not ZWNJ), not the kashida (U+0640), and, under the default digit policy, not a
digit (`digits="exclude"`: a recogniser writing "2026" for a spoken year is not a change of script;
`digits="count"` counts them, Arabic-Indic digits as Arabic script and ASCII digits as no script, the literal
reading of the paper's rule). SFR = in-script countable / countable; None (undefined, not 0) when nothing is
countable, as for an empty transcript. The corpus SFR is the mean of the defined values, with the number of
undefined transcripts beside it (the paper's "mean transcript SFR").

Script ranges and each language's scripts are data (metrics/data/languages.toml); a language not listed there
takes its likely script from CLDR through langcodes. The text is NFC-normalized first, as the paper's normalised
hypothesis is; the exclusions above are what its normalizer removes, so SFR over the raw and the normalized
hypothesis agree.
"""

from __future__ import annotations

import functools
import string
import tomllib
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

__all__ = [
    "CorpusSFR",
    "DigitPolicy",
    "LanguageData",
    "allowed_scripts",
    "corpus_sfr",
    "countable",
    "language_data",
    "script_fidelity",
    "script_of",
]

DATA = Path(__file__).parent / "data" / "languages.toml"
KASHIDA = "\u0640"
ASCII_PUNCTUATION = frozenset(string.punctuation)
DigitPolicy = Literal["exclude", "count"]
# CLDR likely scripts that name a variety of a script listed in the data
SCRIPT_ALIASES = {"Hans": "Hani", "Hant": "Hani", "Jpan": "Hani", "Kore": "Hang"}


class LanguageData(TypedDict, total=False):
    """A [languages.<code>] entry of the data: the scripts SFR allows, and the letter classes of F3 screening."""

    scripts: list[str]
    grapheme_classes: dict[str, list[str]]


@functools.cache
def _data() -> dict[str, Any]:
    with DATA.open("rb") as f:
        return tomllib.load(f)


@functools.cache
def _ranges(script: str) -> tuple[tuple[int, int], ...]:
    scripts = _data()["scripts"]
    if script not in scripts:
        raise ValueError(f"no Unicode ranges for script {script!r}: add [scripts.{script}] ranges to {DATA}")
    out = []
    for r in scripts[script]["ranges"]:
        low, _, high = r.partition("-")
        out.append((int(low, 16), int(high or low, 16)))
    return tuple(out)


def language_data(language: str) -> LanguageData:
    """The data entry of a language ('ps-AF' -> [languages.ps]); empty when it has none."""
    from ttseval.core.languages import base_language

    entry: LanguageData = _data()["languages"].get(base_language(language), {})
    return entry


@functools.cache
def allowed_scripts(language: str) -> tuple[str, ...]:
    """The scripts `language` is written in: from the data, else its likely script (CLDR, through langcodes).

    Raises:
        ValueError: the language's script has no ranges in the data (the message says what to add).
    """
    import langcodes

    scripts = language_data(language).get("scripts")
    if not scripts:
        likely = langcodes.Language.get(language).maximize().script or ""
        scripts = [SCRIPT_ALIASES.get(likely, likely)]
    for s in scripts:
        _ranges(s)  # every script must have ranges
    return tuple(scripts)


def script_of(ch: str, scripts: Iterable[str]) -> bool:
    """Whether the character lies in one of `scripts`' ranges."""
    cp = ord(ch)
    return any(low <= cp <= high for s in scripts for low, high in _ranges(s))


def countable(ch: str, digits: DigitPolicy = "exclude") -> bool:
    """Whether a character enters SFR's denominator (the rules in the module docstring, one test each)."""
    category = unicodedata.category(ch)
    return not (
        ch.isspace()
        or not ch.isprintable()
        or unicodedata.combining(ch)
        or ch == KASHIDA
        or ch in ASCII_PUNCTUATION
        or category.startswith("P")
        or (digits == "exclude" and category == "Nd")
    )


@functools.lru_cache(maxsize=1 << 16)
def _classified(ch: str, digits: DigitPolicy, scripts: tuple[str, ...]) -> tuple[bool, bool]:
    # (counted, counted and in the scripts) of one character: a transcript repeats a few dozen characters, so a
    # report of 100,000 transcripts classifies each once, not millions of times
    counted = countable(ch, digits)
    return counted, counted and script_of(ch, scripts)


def script_fidelity(text: str, language: str, *, digits: DigitPolicy = "exclude") -> float | None:
    """SFR of one transcript against `language`'s scripts; None when it has no countable character."""
    if digits not in ("exclude", "count"):
        raise ValueError(f"digits must be 'exclude' or 'count', got {digits!r}")
    scripts = allowed_scripts(language)
    counted = in_scripts = 0
    for ch, k in Counter(unicodedata.normalize("NFC", text or "")).items():
        is_counted, is_in = _classified(ch, digits, scripts)
        counted += k * is_counted
        in_scripts += k * is_in
    if not counted:
        return None
    return in_scripts / counted


@dataclass(frozen=True)
class CorpusSFR:
    """The mean of the defined per-transcript SFRs (NaN when none is defined) and how many were undefined."""

    mean: float
    n_defined: int
    n_undefined: int


def corpus_sfr(values: Iterable[float | None]) -> CorpusSFR:
    """Corpus SFR over per-transcript values, None or NaN standing for undefined."""
    vals = list(values)
    defined = [float(v) for v in vals if v is not None and v == v]
    return CorpusSFR(sum(defined) / len(defined) if defined else float("nan"), len(defined), len(vals) - len(defined))
