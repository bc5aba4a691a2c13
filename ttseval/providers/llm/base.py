"""The loop every HTTP LLM client shares: transport retries, re-asks on unparseable output, refusals, usage.

Two budgets, counted apart and both per request:
  retries   transport retries (408, 429, 5xx, timeouts, connection errors), up to `max_retries`, under the core's
            one RetryPolicy (ttseval.core.retry): exponential backoff from `backoff_s`, a server's Retry-After
            honoured, capped at `max_backoff_s`.
  attempts  answers received: 1 + re-asks after output that does not parse, up to `max_attempts`.
A refusal (the API says so, or the text is a plain apology instead of JSON) is final: asking again for the same
thing is paid for and rarely changes the answer. A subclass implements `_send` (one HTTP exchange) only.
"""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeGuard
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from ttseval.core.errors import RetriesExhausted
from ttseval.core.protocols import ANY_LANGUAGE, Languages, LLMRequest, LLMResult
from ttseval.core.retry import RetryPolicy
from ttseval.providers import endpoint_without_credentials

logger = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_NORMAL_FINISH = frozenset({"STOP", "END_TURN", "STOP_SEQUENCE", "TOOL_USE", "TOOL_CALLS"})
"""Finish reasons that say nothing about why output did not parse (others are named in the error)."""
_REFUSAL_RE = re.compile(
    r"^\W*(i'?m sorry|i am sorry|sorry,|i can(?:'|no)t|i cannot|i won'?t|i am unable|i'?m unable|as an ai)",
    re.IGNORECASE,
)


class LLMOptions(BaseModel):
    """Options every client takes (`provider:model:key=value`); values arrive as strings."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(1.0, ge=0, le=2, description="default sampling temperature (a request may override)")
    max_output_tokens: int = Field(4096, gt=0, description="output cap per answer")
    max_attempts: int = Field(3, ge=1, description="answers asked for per request (re-asks on unparseable output)")
    max_retries: int = Field(5, ge=0, description="transport retries per request (408/429/5xx/timeouts)")
    backoff_s: float = Field(1.0, ge=0, description="first retry delay; doubles on each retry")
    max_backoff_s: float = Field(60.0, ge=0, description="cap on one retry delay, Retry-After included")
    concurrency: int = Field(4, ge=1, description="requests in flight at once within one batch")
    input_usd_per_mtok: float = Field(0.0, ge=0, description="price of a million prompt tokens")
    output_usd_per_mtok: float = Field(0.0, ge=0, description="price of a million output tokens")
    audio_input_usd_per_mtok: float | None = Field(
        None,
        ge=0,
        description="price of a million audio prompt tokens where the API counts them apart; None = input_usd_per_mtok",
    )
    base_url: str | None = Field(None, description="API endpoint; None = the provider's public one")

    @field_validator("base_url")
    @classmethod
    def _no_credentials_in_url(cls, value: str | None) -> str | None:
        return endpoint_without_credentials(value)

    timeout_s: float = Field(300.0, gt=0, description="per-request HTTP timeout")


@dataclass
class Reply:
    """One answered HTTP exchange, in provider-neutral terms."""

    text: str | None
    finish_reason: str | None = None
    refusal: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    audio_input_tokens: int | None = None
    """Of `input_tokens`, those that encode audio, where the API says (OpenAI prices them apart)."""
    served_model: str | None = None
    """The model the answer says produced it, where the API says."""


class Transient(Exception):
    """A failure worth retrying; `delay_s` is what the server asked for, if it did."""

    def __init__(self, detail: str, delay_s: float | None = None) -> None:
        super().__init__(detail)
        self.delay_s = delay_s


class Fatal(Exception):
    """A failure not worth retrying (4xx other than 408/429, or a client-side error)."""


def retry_after_s(headers: Any) -> float | None:
    """The wait a server asked for: `retry-after-ms` (OpenAI's), else HTTP's `Retry-After` in seconds or as a date."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def parse_answer(text: str | None, schema: type[BaseModel] | None) -> tuple[Any, str | None]:
    """(answer, None) when `text` holds a valid `schema` instance (json-repair first), else (None, why)."""
    if schema is None:
        return (text, None) if text and text.strip() else (None, "empty response")
    import json_repair

    try:
        # json-repair closes truncated strings and objects, strips code fences and trailing prose.
        data = json_repair.loads(text) if text and text.strip() else None
        if not isinstance(data, dict):
            return None, f"no JSON object in the response ({(text or '')[:80]!r})"
        return schema.model_validate(data), None
    except (ValidationError, ValueError, TypeError) as e:
        return None, f"response does not match the {schema.__name__} schema: {str(e)[:300]}"


def looks_like_refusal(text: str | None) -> TypeGuard[str]:
    """A plain-text apology where JSON was asked for."""
    return text is not None and _REFUSAL_RE.match(text.strip()) is not None


REASK = (
    "Your previous answer could not be used: {why}. Answer again with the JSON object only, in the shape "
    "asked for, with no text before or after it."
)
"""Appended to a request's parts when its answer did not parse: the model is told why."""


class BaseLLM:
    """Retry, re-ask and accounting around `_send`; subclasses set `name`, build `options` and the id."""

    name: ClassVar[str] = "llm"
    # Metadata shared by every HTTP chat client (ttseval.core.protocols.ProviderMetadata); a subclass declares its own
    # `version` and `imports` (its SDK).
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False  # the model runs behind the endpoint, not in this process
    extra: ClassVar[str | None] = None  # the SDKs are base dependencies
    output_sample_rate_hz: ClassVar[int | None] = None  # returns text
    requires: ClassVar[tuple[str, ...]] = ()
    refusal_finish_reasons: ClassVar[frozenset[str]] = frozenset()
    default_base_url: ClassVar[str] = ""
    run_settings: ClassVar[tuple[str, ...]] = ("allowed_endpoints",)
    """Built by a stage, the client sends its key only where the run's settings allow (providers.confine_key)."""
    refusals_are_final: ClassVar[bool] = True
    """False: a refusal (API-reported or a plain apology) counts as unparseable output and is asked again, up to
    `max_attempts` (what the judges need: a judge's apology is not its verdict)."""

    options: LLMOptions
    model: str
    spec: str
    llm_id: str
    _api_key: SecretStr
    gate: Callable[[], AbstractContextManager[Any]] | None = None
    """Held around each HTTP exchange when set (`limit_calls`): the vendor's limit over every worker together."""

    # -- pickling: the SDK client holds sockets and locks; a copy sent to another process builds its own ---------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        state.pop("_client_lock", None)
        state.pop("gate", None)  # bound to the process that set it
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client_lock = threading.Lock()

    # -- to implement ---------------------------------------------------------------------------------------------
    def _send(self, request: LLMRequest) -> Reply:
        """One HTTP exchange. Raises Transient (retry) or Fatal (give up)."""
        raise NotImplementedError

    # -- the protocol ---------------------------------------------------------------------------------------------
    def limit_calls(self, gate: Callable[[], AbstractContextManager[Any]]) -> None:
        """Hold `gate()` around every HTTP exchange from now on, retries included (each one is a call)."""
        self.gate = gate

    def generate(self, batch: list[LLMRequest]) -> list[LLMResult]:
        """One result per request, in order; never raises for a failed call."""
        if not batch:
            return []
        workers = min(self.options.concurrency, len(batch))
        if workers == 1:
            return [self.complete(r) for r in batch]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{self.name}-llm") as pool:
            return list(pool.map(self.complete, batch))

    def complete(self, request: LLMRequest) -> LLMResult:
        """Answer one request: transport retries inside each attempt; while the output does not parse, a re-ask
        that quotes why; after the last attempt, the schema's own extraction from prose (`from_text`), if any."""
        out = LLMResult(ok=False, model=self.model)
        why = "no answer"
        asked = request
        for _ in range(self.options.max_attempts):
            try:
                reply = self._with_retries(asked, out)
            except Fatal as e:
                out.failure, out.error = "transport", self.scrub(str(e))
                return self._priced(out)
            except Exception as e:
                logger.warning("%s %s: unexpected %s", self.name, self.model, type(e).__name__, exc_info=True)
                out.failure, out.error = "transport", self.scrub(f"unexpected {type(e).__name__}: {e}"[:500])
                return self._priced(out)
            out.attempts += 1
            self._add_usage(out, reply)
            out.served_model = reply.served_model or out.served_model
            out.raw, out.finish_reason = reply.text, reply.finish_reason
            refused = reply.refusal is not None or (reply.finish_reason in self.refusal_finish_reasons)
            if refused and self.refusals_are_final:
                why = reply.refusal or f"finish_reason={reply.finish_reason}"
                out.failure, out.error = "refusal", self.scrub(f"refusal: {why}"[:500])
                return self._priced(out)
            answer, problem = parse_answer(reply.text, request.schema)
            if answer is not None:
                out.ok, out.data = True, answer
                return self._priced(out)
            why = problem or "no answer"
            if self.refusals_are_final and looks_like_refusal(reply.text):
                out.failure, out.error = "refusal", self.scrub(f"refusal: {reply.text.strip()[:300]}")
                return self._priced(out)
            if reply.refusal is not None:
                why = f"refusal: {reply.refusal}; {why}"
            finish = (reply.finish_reason or "").upper()
            if finish in ("MAX_TOKENS", "LENGTH"):
                why = f"finish_reason={reply.finish_reason} (raise max_output_tokens); {why}"
            elif finish and finish not in _NORMAL_FINISH:
                why = f"finish_reason={reply.finish_reason}; {why}"
            logger.info("%s %s: unparseable output on attempt %d: %s", self.name, self.model, out.attempts, why)
            asked = dataclasses.replace(request, parts=(*request.parts, REASK.format(why=why[:300])))
        extract = getattr(request.schema, "from_text", None)
        if extract is not None and out.raw and (answer := extract(out.raw)) is not None:
            out.ok, out.data, out.failure, out.error = True, answer, None, None
            out.extra["parsed_from"] = "prose"
            return self._priced(out)
        out.failure = "unparseable"
        out.error = self.scrub(f"unparseable output after {out.attempts} attempt(s): {why}")
        return self._priced(out)

    # -- helpers --------------------------------------------------------------------------------------------------
    @property
    def retry_policy(self) -> RetryPolicy:
        """The core's one retry policy (ttseval.core.retry) from `max_retries`, `backoff_s` and `max_backoff_s`."""
        o = self.options
        return RetryPolicy(max_retries=o.max_retries, base_s=o.backoff_s, cap_s=o.max_backoff_s)

    def _with_retries(self, request: LLMRequest, out: LLMResult) -> Reply:
        """One reply, retrying Transient under `retry_policy`; the budget spans the request's re-asks (`out.retries`).

        Raises:
            Fatal: a non-retryable failure, or a transient one that outlived the budget ("gave up after N retries").
        """

        def counted(e: BaseException, retry: int, delay_s: float) -> None:
            out.retries = retry
            logger.info(
                "%s %s: %s; retry %d/%d in %.2f s",
                self.name,
                self.model,
                self.scrub(str(e)),
                retry,
                self.options.max_retries,
                delay_s,
            )

        try:
            reply, _ = self.retry_policy.call(
                lambda: self._gated_send(request),
                lambda e: isinstance(e, Transient),
                retries_used=out.retries,
                on_retry=counted,
                retry_after=lambda e: getattr(e, "delay_s", None),
            )
        except RetriesExhausted as e:
            raise Fatal(f"{e.last} (gave up after {e.retries} retries)") from e.last
        return reply

    def _gated_send(self, request: LLMRequest) -> Reply:
        if self.gate is None:
            return self._send(request)
        with self.gate():
            return self._send(request)

    @staticmethod
    def _add_usage(out: LLMResult, reply: Reply) -> None:
        if reply.input_tokens is not None:
            out.input_tokens = (out.input_tokens or 0) + reply.input_tokens
        if reply.output_tokens is not None:
            out.output_tokens = (out.output_tokens or 0) + reply.output_tokens
        if reply.audio_input_tokens is not None:
            out.extra["audio_input_tokens"] = out.extra.get("audio_input_tokens", 0) + reply.audio_input_tokens

    def _priced(self, out: LLMResult) -> LLMResult:
        """Cost at the options' prices: text prompt tokens, audio prompt tokens (when counted apart), output."""
        if out.input_tokens is not None or out.output_tokens is not None:
            o = self.options
            audio = out.extra.get("audio_input_tokens", 0)
            audio_price = o.input_usd_per_mtok if o.audio_input_usd_per_mtok is None else o.audio_input_usd_per_mtok
            out.cost_usd = (
                ((out.input_tokens or 0) - audio) * o.input_usd_per_mtok
                + audio * audio_price
                + (out.output_tokens or 0) * o.output_usd_per_mtok
            ) / 1e6
        return out

    @property
    def endpoint_host(self) -> str:
        """host[:port] of the endpoint, without credentials or path."""
        parts = urlsplit(self.options.base_url or self.default_base_url)
        host = parts.hostname or ""
        return f"{host}:{parts.port}" if parts.port else host

    def temperature_of(self, request: LLMRequest) -> float:
        return self.options.temperature if request.temperature is None else request.temperature

    def scrub(self, text: str) -> str:
        key = self._api_key.get_secret_value() if getattr(self, "_api_key", None) is not None else ""
        return text.replace(key, "***") if key else text
