"""An audio chat model behind an OpenAI-compatible chat-completions endpoint as a pairwise and instruction judge.

Spec: `openai[:MODEL][:key=value ...]`, e.g. `openai:gpt-4o-audio-preview`, `openai:gpt-4o-mini-audio-preview`,
or a self-hosted omni model: `openai:Qwen2.5-Omni-7B:base_url=http://127.0.0.1:8000/v1` (vLLM, llama.cpp's
server, SGLang: any server that takes `input_audio` content parts).

The same prompts, rubrics, answer models, parsing and verdicts as the Gemini judge (providers/judges/llm_judge.py);
transport, retries (429 Retry-After honoured), re-asks, tokens and cost are OpenAICompatLLM's
(providers/llm/openai_compat.py): clips go as base64 WAV `input_audio` parts, the answer model as a
`json_schema` response_format (`json_mode=json_object` or `none` for servers without it). A refusal is asked
again like unparseable output, as the Gemini judge does.

Cost: OpenAI counts audio prompt tokens apart (`usage.prompt_tokens_details.audio_tokens`, about 10 per second)
and prices them apart. Known models carry their list prices (PRICES, USD per million tokens: text in, audio in,
out); the price options override them; a model with a `base_url` and no known price is free (self-hosted).

The key comes from OPENAI_API_KEY (or `api_key=`); with `base_url` and no key, none is needed.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, SecretStr

from ttseval.core.ids import stable_id
from ttseval.providers import AllowedEndpoints, EngineVersion, canonical_spec, package_version, parse_options
from ttseval.providers.judges.llm_judge import LLMJudge, SamplingOptions, check_sampling, llm_options
from ttseval.providers.llm.openai_compat import OpenAICompatLLM, OpenAIOptions

DEFAULT_MODEL = "gpt-4o-audio-preview"
PRICES: dict[str, tuple[float, float, float]] = {
    # USD per million tokens (text input, audio input, output), OpenAI's list prices
    "gpt-4o-audio-preview": (2.50, 40.0, 10.0),
    "gpt-4o-mini-audio-preview": (0.15, 10.0, 0.60),
}


class OpenAIJudgeOptions(OpenAIOptions, SamplingOptions):
    """Options of the judge `openai:<model>:key=value`: OpenAICompatLLM's, with a judge's defaults. Prices left
    unset come from PRICES for a known model, else 0 with a `base_url` (a server of your own)."""

    temperature: float = Field(0.0, ge=0, le=2, description="sampling temperature")
    max_output_tokens: int = Field(2048, gt=0, description="output cap per answer")
    # The prices are optional here, unlike the client's: unset means the model's list price (PRICES). The judge
    # passes its client resolved prices (llm_options), and nothing reads these options as the client's.
    input_usd_per_mtok: float | None = Field(  # type: ignore[assignment]  # re-declared wider on purpose, see above
        None, ge=0, description="price of a million text prompt tokens"
    )
    audio_input_usd_per_mtok: float | None = Field(None, ge=0, description="price of a million audio prompt tokens")
    output_usd_per_mtok: float | None = Field(  # type: ignore[assignment]  # re-declared wider on purpose, see above
        None, ge=0, description="price of a million output tokens"
    )


class _JudgeLLM(OpenAICompatLLM):
    """OpenAICompatLLM as the judge uses it: a refusal is re-asked (and reported) like unparseable output."""

    refusals_are_final: ClassVar[bool] = False


class OpenAIJudge(LLMJudge):
    """An OpenAI-compatible audio chat model judging pairs of clips and instruction following.

    Raises:
        ValueError: an unknown or invalid option, no API key for OpenAI's own endpoint, or no price for a model
            of OpenAI's own endpoint that PRICES does not know (give the price options).
        ImportError: the openai package is not installed.
    """

    name: ClassVar[str] = "openai"
    extra: ClassVar[str | None] = None  # openai is a base dependency
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("openai"))
    imports: ClassVar[tuple[str, ...]] = ("openai",)
    audio_tokens_per_s: ClassVar[float] = 10.0  # OpenAI: one audio token per 100 ms

    def __init__(
        self,
        voice: str | None = None,
        *,
        api_key: str | SecretStr | None = None,
        allowed_endpoints: AllowedEndpoints | None = None,
        **options: str,
    ) -> None:
        self.options = parse_options(OpenAIJudgeOptions, options, provider=self.name)
        o = self.options
        self.model = o.model or voice or DEFAULT_MODEL
        self.spec = canonical_spec(self.name, voice, options)
        listed = PRICES.get(self.model)
        if listed is None and not o.base_url and None in (o.input_usd_per_mtok, o.output_usd_per_mtok):
            raise ValueError(
                f"openai judge: no list price for {self.model!r}; give input_usd_per_mtok= and "
                f"output_usd_per_mtok= (known: {', '.join(sorted(PRICES))})"
            )
        text_in, audio_in, out = listed or (0.0, 0.0, 0.0)
        prices = {
            "input_usd_per_mtok": text_in if o.input_usd_per_mtok is None else o.input_usd_per_mtok,
            "audio_input_usd_per_mtok": (audio_in if listed else None)
            if o.audio_input_usd_per_mtok is None
            else o.audio_input_usd_per_mtok,
            "output_usd_per_mtok": out if o.output_usd_per_mtok is None else o.output_usd_per_mtok,
        }
        check_sampling(o.samples, o.temperature, self.spec)
        fields = llm_options(o) | {"model": self.model} | {k: str(v) for k, v in prices.items() if v is not None}
        self._llm = _JudgeLLM(self.model, api_key=api_key, allowed_endpoints=allowed_endpoints, **fields)
        self.judge_id = stable_id(f"openai-{self.model}", self.verdict_settings())

    def own_settings(self) -> dict[str, Any]:
        o = self.options
        # two servers may serve different weights under one model name
        return {"seed": o.seed, "json_mode": o.json_mode, "endpoint": self._llm.endpoint_host}

    def client_metadata(self) -> dict[str, Any]:
        return {"sdk": f"openai {self.version}"}

    def __repr__(self) -> str:
        return f"OpenAIJudge(model={self.model!r}, judge_id={self.judge_id!r}, endpoint={self._llm.endpoint_host!r})"
