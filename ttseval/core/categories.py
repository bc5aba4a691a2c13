"""Item categories: EmergentTTS-Eval's six, plus ttseval's `instruction_following` and `multilingual` sets.

This module is the one place the category set is declared. A known category is accepted in any case and
spacing (`Foreign Words`, `foreign-words`, `FOREIGN_WORDS`) and stored in its canonical form
(`foreign_words`). Any other non-empty label is a user's own grouping: it is evaluated and reported as its
own group, but it has no description, so strong prompting (`prompt=category`) and judge rubrics have nothing
to say about it. Descriptions feed reports, strong prompting and judge rubrics.
"""

from __future__ import annotations

import re

CATEGORIES: dict[str, str] = {
    "emotions": "Quoted dialogue whose emotion intensifies or shifts, with narrative cues",
    "paralinguistics": "Interjections, onomatopoeia, emphasis, pacing cues and stutters written in the text",
    "foreign_words": "English with foreign words and phrases in Latin script (code-switching)",
    "syntactic_complexity": "Garden paths, centre embedding, clefts, ellipsis, homographs",
    "complex_pronunciation": "Numerals, currencies, dates, URLs, addresses, STEM notation, acronyms, tongue twisters",
    "questions": "Sequences of questions and statements that need interrogative and declarative prosody",
    "instruction_following": "InstructTTSEval items: speak the text in the style the instruction describes",
    "multilingual": (
        "ttseval addition: plain sentences in other languages and scripts (PashtoTTS-Bench-style screening)"
    ),
}

EMERGENTTTS_CATEGORIES = (
    "emotions",
    "paralinguistics",
    "foreign_words",
    "syntactic_complexity",
    "complex_pronunciation",
    "questions",
)
"""The six categories of EmergentTTS-Eval (section 3.1)."""

ALIASES = {"pronunciation": "complex_pronunciation"}
"""Other spellings seen in published releases (EmergentTTS-Eval's runner calls it `Pronunciation`)."""

MAX_DEPTH = 3


def category_key(name: str) -> str:
    """`name` folded for comparison: lower case, runs of spaces, '-' and '_' as one '_'."""
    return re.sub(r"[\s_\-]+", "_", name.strip()).strip("_").lower()


def canonical_category(name: str, known: set[str] | None = None) -> str:
    """The canonical form of a known category (`Foreign Words` -> `foreign_words`); any other label as given
    (stripped), since it is the user's own group. `known` defaults to the built-in set."""
    key = category_key(name)
    key = ALIASES.get(key, key)
    return key if key in (known if known is not None else CATEGORIES) else name.strip()
