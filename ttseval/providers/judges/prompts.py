"""ttseval's own judge prompts, response schemas and tolerant parsing (json-repair, then pydantic).

Bump PAIRWISE_PROMPT_VERSION / INSTRUCTION_PROMPT_VERSION whenever a word of a prompt changes: the version is
part of every judge_id, so old and new judgments never mix.
"""

from __future__ import annotations

import re
from typing import Literal, TypeVar

from pydantic import BaseModel, Field

from ttseval.core.instructtts import FEATURES_BY_TIER
from ttseval.core.protocols import Winner

AnswerT = TypeVar("AnswerT", bound=BaseModel)
ClipWinner = Literal["clip_1", "clip_2", "tie"]
"""The winner as a judge names it: by the clips' labels in the prompt."""

PAIRWISE_PROMPT_VERSION = "pairwise-v1"
INSTRUCTION_PROMPT_VERSION = "instruction-v1"

# What a careful listener checks in each category (our wording).
RUBRICS: dict[str, str] = {
    "emotions": "Does the voice carry the emotion the narration implies for each quoted line, and change it where "
    "the text shifts? Flat delivery of emotional dialogue is a failure even when every word is right.",
    "paralinguistics": "Are interjections, onomatopoeia, stutters, elongations (sooo), capitalised emphasis and "
    "ellipsis pauses performed as sounds, stress and timing, rather than read out or skipped?",
    "foreign_words": "Are the foreign words and phrases pronounced as a fluent speaker of that language would, "
    "with natural switching back into English?",
    "syntactic_complexity": "Do phrasing, pauses and stress make the sentence structure clear (nested clauses, "
    "garden paths, ellipsis), and are homographs pronounced with the meaning the context needs?",
    "complex_pronunciation": "Are numbers, currencies, dates, times, URLs, e-mail addresses, formulas and acronyms "
    "expanded the way a person would read them aloud, without slips in repeated sounds?",
    "questions": "Does the intonation distinguish questions from statements (rising or falling as the question "
    "type needs) across every sentence, including the later ones?",
    "multilingual": "Is the sentence spoken intelligibly in its own language, with correct pronunciation and "
    "natural rhythm?",
}
DEFAULT_RUBRIC = "Which clip speaks the text more accurately, naturally and expressively, as the text requires?"


def rubric_for(category: str) -> str:
    return RUBRICS.get(category, DEFAULT_RUBRIC)


def pairwise_prompt(text: str, category: str, rubric: str) -> str:
    """The instruction sent with two clips (the first clip, then a separator, then the second)."""
    return (
        "You are an expert listener judging text-to-speech output. Two recordings of the same text follow: "
        "Clip 1, then Clip 2. They come from different systems in random order.\n\n"
        f"Text to be spoken:\n<<<\n{text}\n>>>\n\n"
        f"Category: {category}\nWhat to listen for: {rubric}\n\n"
        "Listen to each clip in full. For each, note with timestamps where it succeeds and where it fails on this "
        "category's demands; ignore audio quality differences that do not affect them. Then compare the two, say "
        "whether the difference is none, subtle or significant, and score each clip from 0 (fails the category's "
        "demands) to 3 (a skilled human reading). Prefer a decision when one clip is better in a way a listener "
        "would notice; answer tie only when you cannot tell them apart on what matters.\n\n"
        "Answer with JSON only, in this shape:\n"
        '{"clip_1_reasoning": "...", "clip_2_reasoning": "...", "comparison": "...", '
        '"difference": "none|subtle|significant", "clip_1_score": 0-3, "clip_2_score": 0-3, '
        '"winner": "clip_1|clip_2|tie"}'
    )


def instruction_prompt(text: str, instruction: str, task: str) -> str:
    return (
        "You are an expert listener checking whether a synthesized recording follows a style instruction.\n\n"
        f"Text spoken:\n<<<\n{text}\n>>>\n\nInstruction ({task}):\n<<<\n{instruction}\n>>>\n\n"
        f"Consider every style dimension the instruction constrains among: {', '.join(FEATURES_BY_TIER)}. "
        "The recording follows the instruction only if no constrained dimension is clearly violated.\n\n"
        'Answer with JSON only: {"reasoning": "...", "follows": true|false}'
    )


_CLIP = r"clip[\s_-]*(1|2|one|two|#1|#2)(?!\s*\|)"  # not the "clip_1|clip_2|tie" of an echoed shape
_PAIRWISE_PROSE = [  # the last resort, after structured output and re-asks: a verdict stated in words
    re.compile(r"winner[\"']?\s*(?:[:=]|is)\s*[\"']?\s*(?:" + _CLIP + r"|(tie))", re.I),
    re.compile(
        r"\b" + _CLIP + r"\s+(?:is|was|sounds|performs|comes out)\s+(?:clearly\s+|slightly\s+|much\s+|"
        r"noticeably\s+)?(?:better|stronger|the\s+winner|preferable|superior|ahead)",
        re.I,
    ),
    re.compile(r"\b" + _CLIP + r"\s+wins\b", re.I),
    re.compile(r"\bprefer\s+" + _CLIP, re.I),
    re.compile(r"\b(?:it'?s|call it|this is|a)\s+(tie)\b|\b(?:equally good|indistinguishable)\b", re.I),
]
_CLIP_WORDS: dict[str, ClipWinner] = {
    "1": "clip_1",
    "one": "clip_1",
    "#1": "clip_1",
    "2": "clip_2",
    "two": "clip_2",
    "#2": "clip_2",
}


class PairwiseAnswer(BaseModel):
    clip_1_reasoning: str = ""
    clip_2_reasoning: str = ""
    comparison: str = ""
    difference: Literal["none", "subtle", "significant"] | None = None
    clip_1_score: float | None = Field(ge=0, le=3)  # required; None only in a verdict extracted from prose
    clip_2_score: float | None = Field(ge=0, le=3)
    winner: ClipWinner

    @classmethod
    def from_text(cls, text: str) -> PairwiseAnswer | None:
        """A verdict stated in words ("Clip 2 is better", "Winner: clip one", "it's a tie"), when every statement
        found names the same winner; None when there is none or they disagree. No scores: none were given."""
        found: set[ClipWinner] = set()
        for pattern in _PAIRWISE_PROSE:
            for match in pattern.finditer(text):
                word = next((g for g in match.groups() if g), None)
                found.add(_CLIP_WORDS.get((word or "tie").lower(), "tie"))
        if len(found) != 1:
            return None
        return cls(winner=found.pop(), clip_1_score=None, clip_2_score=None, comparison=text.strip()[:500])


class InstructionAnswer(BaseModel):
    reasoning: str = ""
    follows: bool

    @classmethod
    def from_text(cls, text: str) -> InstructionAnswer | None:
        """`follows` stated in words ("follows": false, "does not follow the instruction"), when unambiguous."""
        said = {m.group(1).lower() == "true" for m in re.finditer(r"follows[\"']?\s*[:=]\s*(true|false)", text, re.I)}
        said |= {False for _ in re.finditer(r"\b(?:does\s+not|doesn'?t|fails\s+to)\s+follow", text, re.I)}
        said |= {
            True for _ in re.finditer(r"\b(?:it|the recording|the clip)\s+follows\s+the\s+instruction", text, re.I)
        }
        return cls(follows=said.pop(), reasoning=text.strip()[:500]) if len(said) == 1 else None


def _parse(text: str | None, model: type[AnswerT]) -> tuple[AnswerT | None, str | None]:
    """(answer, None) when `text` holds a valid `model` (json-repair, then pydantic), else (None, why)."""
    from ttseval.providers.llm.base import parse_answer

    return parse_answer(text, model)


def parse_pairwise(text: str | None) -> tuple[PairwiseAnswer | None, str | None]:
    return _parse(text, PairwiseAnswer)


def parse_instruction(text: str | None) -> tuple[InstructionAnswer | None, str | None]:
    return _parse(text, InstructionAnswer)


WINNER_FROM_ANSWER: dict[ClipWinner, Winner] = {"clip_1": "first", "clip_2": "second", "tie": "tie"}
