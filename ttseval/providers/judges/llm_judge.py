"""What every chat-model judge shares: the prompts, how a request is laid out, how an answer becomes a verdict.

A subclass (gemini.py, openai_audio.py) builds `self._llm`, a ttseval.providers.llm client whose transport, retries,
re-asks, usage and cost are the client's own, and sets `name`, `model`, `spec`, `judge_id` and `metadata()`.
Each pairwise judgement is one user turn: the prompt, "Clip 1:", the first WAV, "Clip 2:", the second WAV;
instruction judging: the prompt, then the one WAV. The answer is constrained to the pydantic answer model where
the API can (structured output) and parsed tolerantly (json-repair, then pydantic). A judgement never raises
for a failed call: it becomes a verdict with parse_ok False and `error` set; `transient` when the answer never
came (the next run asks again).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, ClassVar, TypedDict

from pydantic import BaseModel, Field

from ttseval.core.protocols import (
    ANY_LANGUAGE,
    InstructionRequest,
    InstructionVerdict,
    Languages,
    LLMRequest,
    LLMResult,
    PairwiseRequest,
    PairwiseVerdict,
)
from ttseval.providers.judges.prompts import (
    INSTRUCTION_PROMPT_VERSION,
    PAIRWISE_PROMPT_VERSION,
    WINNER_FROM_ANSWER,
    InstructionAnswer,
    PairwiseAnswer,
    instruction_prompt,
    pairwise_prompt,
)


class SamplingOptions(BaseModel):
    """Self-consistency, an option of every chat judge."""

    samples: int = Field(
        1,
        ge=1,
        description="answers per judgement at temperature > 0; the verdict is their "
        "majority (a split top is a tie), and the share agreeing is recorded",
    )


def check_sampling(samples: int, temperature: float, spec: str) -> None:
    if samples > 1 and temperature <= 0:
        raise ValueError(
            f"{spec}: samples={samples} needs temperature > 0 (at 0 every sample is the same answer); "
            "add :temperature=0.7 or drop samples"
        )


def llm_options(options: BaseModel) -> dict[str, str]:
    """A judge's options as its chat client takes them: the client's own fields only, as strings."""
    return {
        k: str(v) for k, v in options.model_dump(exclude=set(SamplingOptions.model_fields)).items() if v is not None
    }


class _CallUsage(TypedDict):
    """What a verdict records of the call that produced it."""

    raw_response: str | None
    attempts: int
    retries: int
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    served_model: str | None


class LLMJudge:
    """Pairwise and instruction-following judging through a chat client (`self._llm`)."""

    # set by the subclass (see the module docstring)
    name: ClassVar[str]
    model: str
    spec: str
    judge_id: str
    prompt_version: ClassVar[str] = PAIRWISE_PROMPT_VERSION
    instruction_prompt_version: ClassVar[str] = INSTRUCTION_PROMPT_VERSION
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = True  # judges instruction following as well as pairs
    gpu: ClassVar[bool] = False  # remote
    output_sample_rate_hz: ClassVar[int | None] = None
    requires: ClassVar[tuple[str, ...]] = ()
    audio_tokens_per_s: ClassVar[float] = 32.0
    """Prompt tokens per second of audio at the vendor (the dry run's judge estimate)."""
    run_settings: ClassVar[tuple[str, ...]] = ("allowed_endpoints",)
    """Built by a stage, the judge's client sends its key only where the run's settings allow."""

    _llm: Any
    options: Any
    _route: Callable[[Any, list[LLMRequest]], list[LLMResult]] | None = None

    def own_settings(self) -> dict[str, Any]:
        """A subclass's settings that can change a verdict, beside those every chat judge has."""
        return {}

    def client_metadata(self) -> dict[str, Any]:
        """A subclass's client facts for `metadata` (its SDK and version)."""
        return {}

    def verdict_settings(self) -> dict[str, Any]:
        """Everything that can change a verdict: hashed into `judge_id`, listed in `metadata`. One sample keeps
        the ids judges had before self-consistency existed."""
        o = self.options
        return {
            "model": self.model,
            "prompt_version": self.prompt_version,
            "instruction_prompt_version": self.instruction_prompt_version,
            "temperature": o.temperature,
            "max_output_tokens": o.max_output_tokens,
            **self.own_settings(),
            **({"samples": o.samples} if o.samples > 1 else {}),
        }

    def metadata(self) -> dict[str, Any]:
        o = self.options
        text, audio, out = self.prices_per_mtok()
        return {
            "provider": self.name,
            "judge_id": self.judge_id,
            **self.verdict_settings(),
            "max_attempts": o.max_attempts,
            "max_retries": o.max_retries,
            "input_usd_per_mtok": text,
            "audio_input_usd_per_mtok": audio,
            "output_usd_per_mtok": out,
            "endpoint_host": self._llm.endpoint_host,
            **self.client_metadata(),
        }

    def unreachable(self, timeout_s: float = 5.0) -> str | None:
        """Why a `base_url` endpoint (a server of the user's own) cannot be reached, or None: a TCP connection,
        no request, nothing paid. The vendors' public endpoints are not probed."""
        import socket
        from urllib.parse import urlsplit

        url = self.options.base_url
        if not url:
            return None
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
                return None
        except OSError as e:
            return f"cannot reach {parts.hostname}:{port} ({e.strerror or e})"

    @property
    def samples(self) -> int:
        return int(getattr(self.options, "samples", 1))

    def route_calls(self, generate: Callable[[Any, list[LLMRequest]], list[LLMResult]]) -> None:
        """Send requests through `generate(client, requests)` instead of the client (tasks: the store's call cache,
        so a judgement's samples are kept by index and more samples ask only the new ones)."""
        self._route = generate

    def _generate(self, requests: list[LLMRequest]) -> list[LLMResult]:
        return self._route(self._llm, requests) if self._route is not None else self._llm.generate(requests)

    def _sampled(self, requests: list[LLMRequest]) -> list[list[LLMResult]]:
        """`samples` results per request (sample k asks with `sample=k`), in order."""
        n = self.samples
        results = self._generate([dataclasses.replace(r, sample=k) for r in requests for k in range(n)])
        return [results[i * n : (i + 1) * n] for i in range(len(requests))]

    def limit_calls(self, gate: Callable[[], AbstractContextManager[Any]]) -> None:
        """Hold `gate()` around each call to the API (ttseval.tasks.limits: the vendor's limit over every worker)."""
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
                parts=(
                    pairwise_prompt(r.text, r.category, r.rubric),
                    "Clip 1:",
                    r.first.to_wav_bytes(),
                    "Clip 2:",
                    r.second.to_wav_bytes(),
                ),
                schema=PairwiseAnswer,
            )
            for r in batch
        ]
        return [
            self._pair_majority([self._pair_verdict(r) for r in results], results)
            for results in self._sampled(requests)
        ]

    def judge_instructions(self, batch: list[InstructionRequest]) -> list[InstructionVerdict]:
        """One verdict per request, in order; `follows` is None when the output did not parse."""
        requests = [
            LLMRequest(
                parts=(instruction_prompt(r.text, r.instruction, r.task), r.audio.to_wav_bytes()),
                schema=InstructionAnswer,
            )
            for r in batch
        ]
        return [
            self._instruction_majority([self._instruction_verdict(r) for r in results], results)
            for results in self._sampled(requests)
        ]

    @staticmethod
    def _usage(verdicts: list[Any], results: list[LLMResult]) -> dict[str, Any]:
        """Tokens and cost of the samples asked now (a sample from the cache cost this run nothing)."""
        made = [v for v, r in zip(verdicts, results) if not r.cached]
        return {
            "input_tokens": sum(v.input_tokens or 0 for v in made),
            "output_tokens": sum(v.output_tokens or 0 for v in made),
            "cost_usd": sum(v.cost_usd or 0.0 for v in made),
            "attempts": sum(v.attempts for v in verdicts),
            "retries": sum(v.retries for v in verdicts),
            "samples": len(verdicts),
        }

    def _pair_majority(self, verdicts: list[PairwiseVerdict], results: list[LLMResult]) -> PairwiseVerdict:
        if len(verdicts) == 1:
            return verdicts[0]
        parsed = [v for v in verdicts if v.parse_ok]
        usage = self._usage(verdicts, results)
        if not parsed:
            return dataclasses.replace(verdicts[0], **usage)
        counts = Counter(v.winner for v in parsed).most_common()
        top = [w for w, c in counts if c == counts[0][1]]
        winner = top[0] if len(top) == 1 else "tie"  # a split majority is no decision
        like = next((v for v in parsed if v.winner == winner), parsed[0])
        # the samples that scored both clips (an answer may give one score and null for the other)
        scores = [
            (v.score_first, v.score_second) for v in parsed if v.score_first is not None and v.score_second is not None
        ]

        def mean(i: int) -> float | None:
            return sum(s[i] for s in scores) / len(scores) if scores else None

        return dataclasses.replace(
            like,
            winner=winner,
            score_first=mean(0),
            score_second=mean(1),
            sample_agreement=counts[0][1] / len(parsed),
            **usage,
        )

    def _instruction_majority(self, verdicts: list[InstructionVerdict], results: list[LLMResult]) -> InstructionVerdict:
        if len(verdicts) == 1:
            return verdicts[0]
        decided = [v for v in verdicts if v.parse_ok and v.follows is not None]
        usage = self._usage(verdicts, results)
        if not decided:
            return dataclasses.replace(verdicts[0], **usage)
        yes = sum(1 for v in decided if v.follows)
        follows = None if 2 * yes == len(decided) else 2 * yes > len(decided)  # a split is undecidable
        like = next((v for v in decided if v.follows == follows), decided[0])
        return dataclasses.replace(
            like, follows=follows, sample_agreement=max(yes, len(decided) - yes) / len(decided), **usage
        )

    @staticmethod
    def _pair_verdict(out: LLMResult) -> PairwiseVerdict:
        usage: _CallUsage = {
            "raw_response": out.raw,
            "attempts": out.attempts,
            "retries": out.retries,
            "input_tokens": out.input_tokens,
            "output_tokens": out.output_tokens,
            "cost_usd": out.cost_usd,
            "served_model": out.served_model,
        }
        if not out.ok:
            return PairwiseVerdict(
                winner=None, parse_ok=False, error=out.error, transient=out.failure == "transport", **usage
            )
        a: PairwiseAnswer = out.data
        return PairwiseVerdict(
            winner=WINNER_FROM_ANSWER[a.winner],
            parse_ok=True,
            score_first=a.clip_1_score,
            score_second=a.clip_2_score,
            reasoning_first=a.clip_1_reasoning or None,
            reasoning_second=a.clip_2_reasoning or None,
            comparison=a.comparison or None,
            difference=a.difference,
            **usage,
        )

    @staticmethod
    def _instruction_verdict(out: LLMResult) -> InstructionVerdict:
        a: InstructionAnswer | None = out.data if out.ok else None
        return InstructionVerdict(
            follows=a.follows if a is not None else None,
            parse_ok=a is not None,
            reasoning=(a.reasoning or None) if a is not None else None,
            raw_response=out.raw,
            attempts=out.attempts,
            retries=out.retries,
            input_tokens=out.input_tokens,
            output_tokens=out.output_tokens,
            cost_usd=out.cost_usd,
            error=out.error,
            transient=out.failure == "transport",
            served_model=out.served_model,
        )
