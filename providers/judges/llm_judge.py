"""What every chat-model judge shares: the prompts, how a request is laid out, how an answer becomes a verdict.

A subclass (gemini.py, openai_audio.py) builds `self._llm`, a providers.llm client whose transport, retries,
re-asks, usage and cost are the client's own, and sets `name`, `model`, `spec`, `judge_id` and `metadata()`.
Each pairwise judgement is one user turn: the prompt, "Clip 1:", the first WAV, "Clip 2:", the second WAV;
instruction judging: the prompt, then the one WAV. The answer is constrained to the pydantic answer model where
the API can (structured output) and parsed tolerantly (json-repair, then pydantic). A judgement never raises
for a failed call: it becomes a verdict with parse_ok False and `error` set; `transient` when the answer never
came (the next run asks again).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from providers.judges.prompts import (
    INSTRUCTION_PROMPT_VERSION,
    PAIRWISE_PROMPT_VERSION,
    WINNER_FROM_ANSWER,
    InstructionAnswer,
    PairwiseAnswer,
    instruction_prompt,
    pairwise_prompt,
)
from ttseval.protocols import (
    ANY_LANGUAGE,
    InstructionRequest,
    InstructionVerdict,
    Languages,
    LLMRequest,
    LLMResult,
    PairwiseRequest,
    PairwiseVerdict,
)


class LLMJudge:
    """Pairwise and instruction-following judging through a chat client (`self._llm`)."""

    prompt_version: ClassVar[str] = PAIRWISE_PROMPT_VERSION
    instruction_prompt_version: ClassVar[str] = INSTRUCTION_PROMPT_VERSION
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = True  # judges instruction following as well as pairs
    gpu: ClassVar[bool] = False  # remote
    output_sample_rate_hz: ClassVar[int | None] = None
    requires: ClassVar[tuple[str, ...]] = ()
    audio_tokens_per_s: ClassVar[float] = 32.0
    """Prompt tokens per second of audio at the vendor (the dry run's judge estimate)."""

    _llm: Any

    def limit_calls(self, gate: Callable[[], AbstractContextManager[Any]]) -> None:
        """Hold `gate()` around each call to the API (tasks.limits: the vendor's limit over every worker)."""
        self._llm.limit_calls(gate)

    def prices_per_mtok(self) -> tuple[float, float, float]:
        """USD per million tokens as the client bills them: (text prompt, audio prompt, output)."""
        o = self._llm.options
        audio = o.input_usd_per_mtok if o.audio_input_usd_per_mtok is None else o.audio_input_usd_per_mtok
        return o.input_usd_per_mtok, audio, o.output_usd_per_mtok

    def judge_pairs(self, batch: list[PairwiseRequest]) -> list[PairwiseVerdict]:
        """One verdict per request, in order; `winner` is in presentation order (first / second / tie)."""
        requests = [
            LLMRequest(
                parts=(pairwise_prompt(r.text, r.category, r.rubric), "Clip 1:", r.first.to_wav_bytes(),
                       "Clip 2:", r.second.to_wav_bytes()),
                schema=PairwiseAnswer,
            )
            for r in batch
        ]
        return [self._pair_verdict(result) for result in self._llm.generate(requests)]

    def judge_instructions(self, batch: list[InstructionRequest]) -> list[InstructionVerdict]:
        """One verdict per request, in order; `follows` is None when the output did not parse."""
        requests = [
            LLMRequest(parts=(instruction_prompt(r.text, r.instruction, r.task), r.audio.to_wav_bytes()),
                       schema=InstructionAnswer)
            for r in batch
        ]
        return [self._instruction_verdict(result) for result in self._llm.generate(requests)]

    @staticmethod
    def _pair_verdict(out: LLMResult) -> PairwiseVerdict:
        usage = {"raw_response": out.raw, "attempts": out.attempts, "retries": out.retries,
                 "input_tokens": out.input_tokens, "output_tokens": out.output_tokens, "cost_usd": out.cost_usd}
        if not out.ok:
            return PairwiseVerdict(winner=None, parse_ok=False, error=out.error, transient=out.failure == "transport",
                                   **usage)
        a: PairwiseAnswer = out.data
        return PairwiseVerdict(
            winner=WINNER_FROM_ANSWER[a.winner], parse_ok=True, score_first=a.clip_1_score,
            score_second=a.clip_2_score, reasoning_first=a.clip_1_reasoning or None,
            reasoning_second=a.clip_2_reasoning or None, comparison=a.comparison or None, difference=a.difference,
            **usage,
        )

    @staticmethod
    def _instruction_verdict(out: LLMResult) -> InstructionVerdict:
        a: InstructionAnswer | None = out.data if out.ok else None
        return InstructionVerdict(
            follows=a.follows if a is not None else None, parse_ok=a is not None,
            reasoning=(a.reasoning or None) if a is not None else None, raw_response=out.raw, attempts=out.attempts,
            retries=out.retries, input_tokens=out.input_tokens, output_tokens=out.output_tokens,
            cost_usd=out.cost_usd, error=out.error, transient=out.failure == "transport",
        )
