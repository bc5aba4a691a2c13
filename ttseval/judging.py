"""The judge contracts: what a pairwise or instruction-following judge receives and returns.

A pairwise judge hears two clips of the same text in a given order (it is never told which is the baseline)
and says which is better; the stage randomizes the order per (item, system, baseline) reproducibly and maps
the answer back. An instruction judge hears one clip and says whether it follows a style instruction.
`judge_id` names the judge model, the prompt version and the generation settings, so a changed prompt or
temperature is a different judge whose rows sit beside the old ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from ttseval.audio import Audio

Winner = Literal["first", "second", "tie"]


@dataclass(frozen=True)
class PairwiseRequest:
    """Two clips of `text` in presentation order. `signals` carry objective facts per clip (cer, mos) for
    judges that use them; LLM judges ignore them."""

    item_id: str
    text: str
    language: str
    category: str
    rubric: str
    first: Audio
    second: Audio
    first_signals: dict[str, float | None] = field(default_factory=dict)
    second_signals: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class PairwiseVerdict:
    """A judge's answer. `winner` is None when the output could not be parsed (`parse_ok` False)."""

    winner: Winner | None
    parse_ok: bool
    score_first: float | None = None
    score_second: float | None = None
    reasoning_first: str | None = None
    reasoning_second: str | None = None
    comparison: str | None = None
    raw_response: str | None = None
    attempts: int = 1
    retries: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class InstructionRequest:
    item_id: str
    text: str
    language: str
    instruction: str
    task: str
    audio: Audio


@dataclass(frozen=True)
class InstructionVerdict:
    """`follows` is None when the judge could not decide or its output could not be parsed."""

    follows: bool | None
    parse_ok: bool
    reasoning: str | None = None
    raw_response: str | None = None
    attempts: int = 1
    retries: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None


@runtime_checkable
class PairwiseJudge(Protocol):
    """Class attributes: `name` (registry name), `prompt_version`. Instance attribute `judge_id`."""

    name: ClassVar[str]
    judge_id: str

    def judge_pairs(self, batch: list[PairwiseRequest]) -> list[PairwiseVerdict]:
        """One verdict per request, in order. Never raises for one bad answer: parse failures are verdicts."""
        ...

    def metadata(self) -> dict[str, Any]: ...


@runtime_checkable
class InstructionJudge(Protocol):
    name: ClassVar[str]
    judge_id: str

    def judge_instructions(self, batch: list[InstructionRequest]) -> list[InstructionVerdict]:
        """One verdict per request, in order."""
        ...


def candidate_first(item_id: str, system_id: str, baseline_id: str, seed: int = 0) -> bool:
    """The presentation order of one comparison: reproducible from its key, independent of everything else."""
    digest = hashlib.sha256(f"{seed}|{item_id}|{system_id}|{baseline_id}".encode()).digest()
    return digest[0] % 2 == 0


def to_candidate_view(winner: Winner | None, cand_first: bool) -> Literal["candidate", "baseline", "tie"] | None:
    """Map a first/second answer back to candidate/baseline."""
    if winner is None or winner == "tie":
        return winner
    return "candidate" if (winner == "first") == cand_first else "baseline"
