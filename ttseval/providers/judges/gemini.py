"""Gemini as a pairwise and instruction-following judge, through google-genai's generate_content.

Spec: `gemini[:MODEL][:key=value ...]`, e.g. `gemini:gemini-2.5-pro:temperature=0:thinking_budget=1024`.

Requests, prompts and verdicts are every chat judge's (providers/judges/llm_judge.py); here the WAVs go inline
and the output is constrained to JSON by response_schema (the pydantic answer model), then parsed tolerantly, so
a MAX_TOKENS stop that cut the JSON short can still yield a verdict. Audio costs 32 prompt tokens per second.

Transport, retries, re-asks and usage are GeminiLLM's (providers/llm/gemini.py, built from this judge's options),
with two budgets counted apart and both per judgement:
  retries   transport retries: 408, 429, 5xx, timeouts and connection errors, up to `max_retries`, with
            exponential backoff from `backoff_s` (Retry-After or Google's RetryInfo honoured, capped at
            `max_backoff_s`). google-genai's own retry is left off so each retry is seen and counted.
  attempts  successful HTTP responses used: 1 + re-asks after output that does not parse, up to `max_attempts`.
A refusal (a plain-text apology, a SAFETY stop, a blocked prompt) is asked again like unparseable output.
A judgement never raises for a failed call: it becomes a verdict with parse_ok False and `error` set. Errors
from the transport start with "Gemini HTTP <code>" or "Gemini transport"; unparseable output with
"unparseable output".
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, SecretStr

from ttseval.core.ids import stable_id
from ttseval.providers import AllowedEndpoints, EngineVersion, canonical_spec, endpoint_allowlist, parse_options
from ttseval.providers.judges.llm_judge import LLMJudge, SamplingOptions, check_sampling, llm_options
from ttseval.providers.llm.gemini import GeminiLLM, GeminiLLMOptions, require_genai, resolve_api_key

DEFAULT_MODEL = "gemini-2.5-pro"


class GeminiOptions(GeminiLLMOptions, SamplingOptions):
    """Options of the judge `gemini:<model>:key=value`: GeminiLLM's, with a judge's defaults."""

    temperature: float = Field(0.0, ge=0, le=2, description="sampling temperature")
    max_output_tokens: int = Field(2048, gt=0, description="output cap; on 2.5 models it includes thinking tokens")
    input_usd_per_mtok: float = Field(1.25, ge=0, description="price of a million prompt tokens (audio included)")
    output_usd_per_mtok: float = Field(10.0, ge=0, description="price of a million output tokens (thinking included)")


class _JudgeLLM(GeminiLLM):
    """GeminiLLM as the judge uses it: a refusal is re-asked (and reported) like unparseable output."""

    refusals_are_final: ClassVar[bool] = False


class GeminiJudge(LLMJudge):
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
    extra: ClassVar[str | None] = None  # google-genai is a base dependency
    version: ClassVar[EngineVersion] = EngineVersion(lambda: GeminiLLM.version)  # the google-genai SDK's
    imports: ClassVar[tuple[str, ...]] = GeminiLLM.imports

    def __init__(
        self,
        voice: str | None = None,
        *,
        api_key: str | SecretStr | None = None,
        allowed_endpoints: AllowedEndpoints | None = None,
        **options: str,
    ) -> None:
        self.options = parse_options(GeminiOptions, options, provider=self.name)
        self.model = voice or DEFAULT_MODEL
        self.spec = canonical_spec(self.name, voice, options)
        # decided before the key is read here: a key read here is confined, one passed in is the caller's
        allowed = endpoint_allowlist(allowed_endpoints, key_given=api_key is not None, provider=self.name)
        secret = resolve_api_key(api_key, "gemini judge")
        require_genai("gemini judge")
        o = self.options
        # Every judge option is a GeminiLLM option of the same name; the judge's defaults are passed explicitly.
        check_sampling(o.samples, o.temperature, self.spec)
        self._llm = _JudgeLLM(self.model, api_key=secret, allowed_endpoints=allowed, **llm_options(o))
        self.judge_id = stable_id(f"gemini-{self.model}", self.verdict_settings())

    def own_settings(self) -> dict[str, Any]:
        return {"thinking_budget": self.options.thinking_budget}

    def client_metadata(self) -> dict[str, Any]:
        return {"api_version": self.options.api_version, "sdk": f"google-genai {self.version}"}

    def __repr__(self) -> str:
        return f"GeminiJudge(model={self.model!r}, judge_id={self.judge_id!r})"
