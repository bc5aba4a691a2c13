"""Gemini as a pairwise and instruction-following judge, through google-genai's generate_content.

Spec: `gemini[:MODEL][:key=value ...]`, e.g. `gemini:gemini-2.5-pro:temperature=0:thinking_budget=1024`.

Each judgement is one user turn: the prompt, then "Clip 1:", the first WAV inline, "Clip 2:", the second WAV
(instruction judging: the prompt, then the one WAV). The output is constrained to JSON by response_schema (the
pydantic answer model) and parsed tolerantly (json-repair, then pydantic), so a MAX_TOKENS stop that cut the
JSON short can still yield a verdict.

Two budgets, counted apart and both per judgement:
  retries   transport retries: 408, 429, 5xx, timeouts and connection errors, up to `max_retries`, with
            exponential backoff from `backoff_s` (Retry-After or Google's RetryInfo honoured, capped at
            `max_backoff_s`). google-genai's own retry is left off so each retry is seen and counted.
  attempts  successful HTTP responses used: 1 + re-asks after output that does not parse, up to `max_attempts`.
A judgement never raises for a failed call: it becomes a verdict with parse_ok False and `error` set. Errors
from the transport start with "Gemini HTTP <code>" or "Gemini transport"; unparseable output with
"unparseable output".
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from providers import canonical_spec, package_version, parse_options
from providers.judges.prompts import (
    INSTRUCTION_PROMPT_VERSION,
    PAIRWISE_PROMPT_VERSION,
    WINNER_FROM_ANSWER,
    InstructionAnswer,
    PairwiseAnswer,
    instruction_prompt,
    pairwise_prompt,
    parse_instruction,
    parse_pairwise,
)
from ttseval.ids import stable_id
from ttseval.judging import InstructionRequest, InstructionVerdict, PairwiseRequest, PairwiseVerdict

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "gemini-2.5-pro"
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class GeminiOptions(BaseModel):
    """Options of `gemini:<model>:key=value`. Values arrive as strings and are converted here."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.0, ge=0, le=2, description="sampling temperature")
    thinking_budget: int | None = Field(
        None, ge=-1, description="thinking tokens; None = the model's default, -1 = dynamic, 0 = off where allowed"
    )
    max_output_tokens: int = Field(2048, gt=0, description="output cap; on 2.5 models it includes thinking tokens")
    max_attempts: int = Field(3, ge=1, description="answers asked for per judgement (re-asks on unparseable output)")
    max_retries: int = Field(5, ge=0, description="transport retries per judgement (408/429/5xx/timeouts)")
    backoff_s: float = Field(1.0, ge=0, description="first retry delay; doubles on each retry")
    max_backoff_s: float = Field(60.0, ge=0, description="cap on one retry delay, Retry-After included")
    concurrency: int = Field(4, ge=1, description="requests in flight at once within one batch")
    input_usd_per_mtok: float = Field(1.25, ge=0, description="price of a million prompt tokens (audio included)")
    output_usd_per_mtok: float = Field(10.0, ge=0, description="price of a million output tokens (thinking included)")
    base_url: str | None = Field(None, description="API endpoint; None = Google's")
    api_version: str = Field("v1beta", description="API version path segment")
    timeout_s: float = Field(300.0, gt=0, description="per-request HTTP timeout")


@dataclass
class _Outcome:
    """What one judgement's calls came to: the parsed answer (or None), the last text, counts, and why not."""

    answer: Any
    raw: str | None
    attempts: int
    retries: int
    input_tokens: int | None
    output_tokens: int | None
    error: str | None


class _CallFailed(Exception):
    """The transport gave up on one call (non-retryable status or retries exhausted)."""


def _transient_transport_errors() -> tuple[type[BaseException], ...]:
    """Timeouts and connection failures of whichever httpx flavour google-genai runs on (it prefers httpx2 when
    installed, whose exceptions do not subclass httpx's)."""
    found: list[type[BaseException]] = []
    for module_name in ("httpx", "httpx2"):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        for name in ("TimeoutException", "NetworkError", "RemoteProtocolError"):
            cls = getattr(module, name, None)
            if isinstance(cls, type):
                found.append(cls)
    return tuple(found)


def _retry_delay_s(response: Any, details: Any) -> float | None:
    """Server-requested wait: the Retry-After header (seconds or HTTP date), else Google's RetryInfo detail."""
    headers = getattr(response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    if value:
        value = value.strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                if when.tzinfo is None:
                    when = when.replace(tzinfo=timezone.utc)
                return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    error = details.get("error", details) if isinstance(details, dict) else None
    for item in (error or {}).get("details", []) if isinstance(error, dict) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            match = re.fullmatch(r"\s*([0-9.]+)s\s*", str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


class GeminiJudge:
    """A Gemini model judging pairs of clips and instruction following.

    Args:
        voice: the model name (the spec's voice slot); default gemini-2.5-pro.
        api_key: the key; when None, GEMINI_API_KEY then GOOGLE_API_KEY are read once, here.
        **options: `GeminiOptions` fields as strings.

    Raises:
        ValueError: an unknown or invalid option, or no API key.
        ImportError: google-genai is not installed.
    """

    name: ClassVar[str] = "gemini"
    prompt_version: ClassVar[str] = PAIRWISE_PROMPT_VERSION
    instruction_prompt_version: ClassVar[str] = INSTRUCTION_PROMPT_VERSION

    def __init__(self, voice: str | None = None, *, api_key: str | SecretStr | None = None, **options: str) -> None:
        self.options = parse_options(GeminiOptions, options, provider=self.name)
        self.model = voice or DEFAULT_MODEL
        self.spec = canonical_spec(self.name, voice, options)
        if api_key is None:
            api_key = next((os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
        secret = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key or "")
        if not secret.get_secret_value():
            raise ValueError(
                f"gemini judge needs an API key: set {' or '.join(KEY_VARIABLES)} in the environment "
                "(or pass api_key=)"
            )
        self._api_key = secret
        try:
            import google.genai  # noqa: F401 (fail at build time, not on the first batch)
        except ImportError as e:
            raise ImportError("gemini judge needs google-genai: pip install google-genai") from e
        self.version = package_version("google-genai")
        o = self.options
        self.judge_id = stable_id(
            f"gemini-{self.model}",
            {
                "model": self.model,
                "prompt_version": self.prompt_version,
                "instruction_prompt_version": self.instruction_prompt_version,
                "temperature": o.temperature,
                "thinking_budget": o.thinking_budget,
                "max_output_tokens": o.max_output_tokens,
            },
        )
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._transient = _transient_transport_errors()

    # -- identity ----------------------------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        o = self.options
        endpoint = urlsplit(o.base_url).netloc if o.base_url else "generativelanguage.googleapis.com"
        return {
            "provider": self.name,
            "judge_id": self.judge_id,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "instruction_prompt_version": self.instruction_prompt_version,
            "temperature": o.temperature,
            "thinking_budget": o.thinking_budget,
            "max_output_tokens": o.max_output_tokens,
            "max_attempts": o.max_attempts,
            "max_retries": o.max_retries,
            "input_usd_per_mtok": o.input_usd_per_mtok,
            "output_usd_per_mtok": o.output_usd_per_mtok,
            "api_version": o.api_version,
            "endpoint_host": endpoint,
            "sdk": f"google-genai {self.version}",
        }

    def __repr__(self) -> str:
        return f"GeminiJudge(model={self.model!r}, judge_id={self.judge_id!r})"

    def __getstate__(self) -> dict[str, Any]:
        # The SDK client holds sockets and locks; a copy sent to another process builds its own.
        state = self.__dict__.copy()
        state["_client"] = None
        state["_client_lock"] = None
        state["_transient"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client_lock = threading.Lock()
        self._transient = _transient_transport_errors()

    # -- judging -----------------------------------------------------------------------------------------------
    def judge_pairs(self, batch: list[PairwiseRequest]) -> list[PairwiseVerdict]:
        """One verdict per request, in order; `winner` is in presentation order (first / second / tie)."""
        return self._map(self._judge_pair, batch)

    def judge_instructions(self, batch: list[InstructionRequest]) -> list[InstructionVerdict]:
        """One verdict per request, in order; `follows` is None when the output did not parse."""
        return self._map(self._judge_instruction, batch)

    def _map(self, fn: Callable[[Any], Any], batch: list[Any]) -> list[Any]:
        if not batch:
            return []
        workers = min(self.options.concurrency, len(batch))
        if workers == 1:
            return [fn(r) for r in batch]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gemini-judge") as pool:
            return list(pool.map(fn, batch))

    def _judge_pair(self, req: PairwiseRequest) -> PairwiseVerdict:
        from google.genai import types

        parts = [
            types.Part.from_text(text=pairwise_prompt(req.text, req.category, req.rubric)),
            types.Part.from_text(text="Clip 1:"),
            types.Part.from_bytes(data=req.first.to_wav_bytes(), mime_type="audio/wav"),
            types.Part.from_text(text="Clip 2:"),
            types.Part.from_bytes(data=req.second.to_wav_bytes(), mime_type="audio/wav"),
        ]
        out = self._judge([types.Content(role="user", parts=parts)], PairwiseAnswer, parse_pairwise)
        cost = self._cost(out)
        a = out.answer
        if a is None:
            return PairwiseVerdict(winner=None, parse_ok=False, raw_response=out.raw, attempts=out.attempts,
                                   retries=out.retries, input_tokens=out.input_tokens,
                                   output_tokens=out.output_tokens, cost_usd=cost, error=out.error)
        return PairwiseVerdict(
            winner=WINNER_FROM_ANSWER[a.winner], parse_ok=True, score_first=a.clip_1_score,
            score_second=a.clip_2_score, reasoning_first=a.clip_1_reasoning or None,
            reasoning_second=a.clip_2_reasoning or None, comparison=a.comparison or None, raw_response=out.raw,
            attempts=out.attempts, retries=out.retries, input_tokens=out.input_tokens,
            output_tokens=out.output_tokens, cost_usd=cost,
        )

    def _judge_instruction(self, req: InstructionRequest) -> InstructionVerdict:
        from google.genai import types

        parts = [
            types.Part.from_text(text=instruction_prompt(req.text, req.instruction, req.task)),
            types.Part.from_bytes(data=req.audio.to_wav_bytes(), mime_type="audio/wav"),
        ]
        out = self._judge([types.Content(role="user", parts=parts)], InstructionAnswer, parse_instruction)
        a = out.answer
        return InstructionVerdict(
            follows=a.follows if a is not None else None, parse_ok=a is not None,
            reasoning=(a.reasoning or None) if a is not None else None, raw_response=out.raw, attempts=out.attempts,
            retries=out.retries, input_tokens=out.input_tokens, output_tokens=out.output_tokens,
            cost_usd=self._cost(out), error=out.error,
        )

    def _cost(self, out: _Outcome) -> float | None:
        if out.input_tokens is None and out.output_tokens is None:
            return None
        o = self.options
        return ((out.input_tokens or 0) * o.input_usd_per_mtok + (out.output_tokens or 0) * o.output_usd_per_mtok) / 1e6

    # -- one judgement: re-asks around transport retries ---------------------------------------------------------
    def _judge(self, contents: list[Any], schema: type[BaseModel],
               parse: Callable[[str | None], tuple[Any, str | None]]) -> _Outcome:
        config = self._config(schema)
        out = _Outcome(answer=None, raw=None, attempts=0, retries=0, input_tokens=None, output_tokens=None,
                       error=None)
        why = "no answer"
        for _ in range(self.options.max_attempts):
            try:
                response = self._call(contents, config, out)
            except _CallFailed as e:
                out.error = self._scrub(str(e))
                return out
            out.attempts += 1
            self._add_usage(out, response)
            text, finish = self._text_of(response)
            out.raw = text
            answer, why = parse(text)
            if answer is not None:
                out.answer = answer
                return out
            if finish and finish not in ("STOP", "MAX_TOKENS"):
                why = f"finish_reason={finish}; {why}"
            elif finish == "MAX_TOKENS":
                why = f"finish_reason=MAX_TOKENS (raise max_output_tokens); {why}"
            logger.info("gemini %s: unparseable output on attempt %d: %s", self.model, out.attempts, why)
        out.error = self._scrub(f"unparseable output after {out.attempts} attempt(s): {why}")
        return out

    def _config(self, schema: type[BaseModel]) -> Any:
        from google.genai import types

        o = self.options
        return types.GenerateContentConfig(
            temperature=o.temperature,
            max_output_tokens=o.max_output_tokens,
            response_mime_type="application/json",
            response_schema=schema,
            thinking_config=(
                types.ThinkingConfig(thinking_budget=o.thinking_budget) if o.thinking_budget is not None else None
            ),
        )

    def _client_or_new(self) -> Any:
        with self._client_lock:
            if self._client is None:
                from google import genai
                from google.genai import types

                o = self.options
                self._client = genai.Client(
                    api_key=self._api_key.get_secret_value(),
                    http_options=types.HttpOptions(
                        base_url=o.base_url, api_version=o.api_version, timeout=int(o.timeout_s * 1000)
                    ),
                )
            return self._client

    def _call(self, contents: list[Any], config: Any, out: _Outcome) -> Any:
        """One successful generate_content response, retrying transient failures (each counted in out.retries).

        Raises:
            _CallFailed: a non-retryable status, or the retry budget spent.
        """
        from google.genai import errors

        client = self._client_or_new()
        o = self.options
        while True:
            try:
                return client.models.generate_content(model=self.model, contents=contents, config=config)
            except errors.APIError as e:
                status = f"Gemini HTTP {e.code} {e.status or ''}".rstrip()
                detail = f"{status}: {(e.message or '')[:300]}"
                if e.code not in RETRYABLE_STATUS:
                    raise _CallFailed(f"{detail} (not retried)") from e
                requested = _retry_delay_s(getattr(e, "response", None), e.details)
            except errors.UnknownApiResponseError as e:
                detail = f"Gemini transport: a 200 response that is not JSON ({str(e)[:200]})"
                requested = None
            except self._transient as e:
                detail = f"Gemini transport: {type(e).__name__}: {str(e)[:200]}"
                requested = None
            if out.retries >= o.max_retries:
                raise _CallFailed(f"{detail} (gave up after {out.retries} retries)")
            delay = requested if requested is not None else o.backoff_s * 2**out.retries * (1 + 0.25 * random.random())
            delay = min(delay, o.max_backoff_s)
            out.retries += 1
            logger.info("gemini %s: %s; retry %d/%d in %.2f s", self.model, self._scrub(detail), out.retries,
                        o.max_retries, delay)
            time.sleep(delay)

    @staticmethod
    def _text_of(response: Any) -> tuple[str | None, str | None]:
        """The answer text (thought parts excluded) and the finish reason of the first candidate."""
        candidates = response.candidates or []
        if not candidates:
            return None, None
        candidate = candidates[0]
        finish = candidate.finish_reason.value if candidate.finish_reason is not None else None
        parts = candidate.content.parts if candidate.content is not None and candidate.content.parts else []
        texts = [p.text for p in parts if p.text is not None and not p.thought]
        return ("".join(texts) if texts else None), finish

    @staticmethod
    def _add_usage(out: _Outcome, response: Any) -> None:
        usage = response.usage_metadata
        if usage is None:
            return
        # Thinking tokens are billed as output tokens, so they count as output here.
        if usage.prompt_token_count is not None:
            out.input_tokens = (out.input_tokens or 0) + usage.prompt_token_count
        generated = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
        if usage.candidates_token_count is not None or usage.thoughts_token_count is not None:
            out.output_tokens = (out.output_tokens or 0) + generated

    def _scrub(self, text: str) -> str:
        key = self._api_key.get_secret_value()
        return text.replace(key, "***") if key else text
