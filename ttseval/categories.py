"""Item categories: EmergentTTS-Eval's six, plus ttseval's `multilingual` screening set.

The set is data: users add their own with the `extra_categories` setting. Descriptions feed reports and,
later, strong prompting and judge rubrics.
"""

from __future__ import annotations

CATEGORIES: dict[str, str] = {
    "emotions": "Quoted dialogue whose emotion intensifies or shifts, with narrative cues",
    "paralinguistics": "Interjections, onomatopoeia, emphasis, pacing cues and stutters written in the text",
    "foreign_words": "English with foreign words and phrases in Latin script (code-switching)",
    "syntactic_complexity": "Garden paths, centre embedding, clefts, ellipsis, homographs",
    "complex_pronunciation": "Numerals, currencies, dates, URLs, addresses, STEM notation, acronyms, tongue twisters",
    "questions": "Sequences of questions and statements that need interrogative and declarative prosody",
    "instruction_following": "InstructTTSEval items: speak the text in the style the instruction describes",
    "multilingual": "ttseval addition: plain sentences in other languages and scripts (PashtoTTS-Bench-style screening)",
}

MAX_DEPTH = 3
