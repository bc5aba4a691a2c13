"""OpenAI's chat-completions API, and any server that speaks it (vLLM, llama.cpp, SGLang, LiteLLM, ...).

Spec: `openai[:MODEL][:key=value ...]`, e.g. `openai:gpt-4.1-mini:temperature=0` or, for a local vLLM,
`openai:Qwen2.5-7B-Instruct:base_url=http://127.0.0.1:8000/v1`.

One request is one chat completion: an optional system message, then one user message whose content lists the
request's parts in order (text as `text` parts, WAV bytes as `input_audio` parts, base64). Structured output goes
as `response_format`: `json_schema` (OpenAI and vLLM), `json_object` (servers that only know JSON mode; the
schema is then only in the prompt, if the caller put it there) or `none`. The official `openai` client does the
HTTP with its own retries off, so BaseLLM's loop sees and counts every retry.

The key comes from OPENAI_API_KEY (or `api_key=`). With `base_url` set and no key, the placeholder "EMPTY" is
sent: local servers check none. Without `base_url`, the endpoint is OpenAI's own; OPENAI_BASE_URL in the
environment is not consulted, so the spec alone says where calls go.
"""

from __future__ import annotations

import base64
import os
import threading
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr

from ttseval.core.errors import MissingKeyError
from ttseval.core.ids import stable_id
from ttseval.core.protocols import LLMRequest
from ttseval.providers import (
    AllowedEndpoints,
    EngineVersion,
    canonical_spec,
    confine_key,
    endpoint_allowlist,
    package_version,
    parse_options,
)
from ttseval.providers.llm.base import RETRYABLE_STATUS, BaseLLM, Fatal, LLMOptions, Reply, Transient, retry_after_s

DEFAULT_MODEL = "gpt-4.1-mini"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_VARIABLE = "OPENAI_API_KEY"
PLACEHOLDER_KEY = "EMPTY"


class OpenAIOptions(LLMOptions):
    """Options of `openai:<model>:key=value`, on top of LLMOptions."""

    json_mode: Literal["json_schema", "json_object", "none"] = Field(
        "json_schema", description="how a request's schema is sent: json_schema, json_object (JSON mode) or none"
    )
    seed: int | None = Field(None, description="sampling seed sent with every request (best effort server-side)")
    model: str | None = Field(
        None,
        description="model name when it holds ':' (e.g. qwen2.5:7b), which the "
        "spec's model slot cannot; overrides that slot",
    )
    token_limit_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens",
        description="request field for max_output_tokens; OpenAI's reasoning models (o-series, "
        "gpt-5) accept only max_completion_tokens",
    )


def _error_message(e: Any) -> str:
    """The API's own error message when the body has one, else the SDK's text."""
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        message = body.get("message")
        if isinstance(message, str):
            return message
    return str(getattr(e, "message", None) or e)


class OpenAICompatLLM(BaseLLM):
    """A chat model behind an OpenAI-compatible chat-completions endpoint.

    Args:
        voice: the model name (the spec's voice slot); default gpt-4.1-mini.
        api_key: the key; when None, OPENAI_API_KEY is read once, here.
        **options: `OpenAIOptions` fields as strings.

    Raises:
        ValueError: an unknown or invalid option, or no API key for OpenAI's own endpoint.
        ImportError: the openai package is not installed.
    """

    name: ClassVar[str] = "openai"
    refusal_finish_reasons: ClassVar[frozenset[str]] = frozenset({"content_filter"})
    default_base_url: ClassVar[str] = DEFAULT_BASE_URL
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("openai"))
    imports: ClassVar[tuple[str, ...]] = ("openai",)

    options: OpenAIOptions

    def __init__(
        self,
        voice: str | None = None,
        *,
        api_key: str | SecretStr | None = None,
        allowed_endpoints: AllowedEndpoints | None = None,
        **options: str,
    ) -> None:
        self.options = parse_options(OpenAIOptions, options, provider=self.name)
        self.model = self.options.model or voice or DEFAULT_MODEL
        self.spec = canonical_spec(self.name, voice, options)
        allowed = endpoint_allowlist(allowed_endpoints, key_given=api_key is not None, provider=self.name)
        if api_key is None:
            api_key = os.environ.get(KEY_VARIABLE) or None
        secret = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key or "")
        if not secret.get_secret_value() and not self.options.base_url:
            raise MissingKeyError(
                f"openai LLM needs an API key: set {KEY_VARIABLE} in the environment (or pass api_key=), "
                "or point base_url= at a local server that needs none"
            )
        # An empty key is kept as such (so scrub has nothing to hide); the client is sent the placeholder. A server
        # that is neither OpenAI's nor allowed gets no key: a self-hosted one checks none.
        self._api_key = confine_key(
            secret,
            self.options.base_url,
            vendor=DEFAULT_BASE_URL,
            allowed=allowed,
            provider="openai",
            variable=KEY_VARIABLE,
            key_required=False,
        )
        try:
            import openai  # noqa: F401 (fail at build time, not on the first batch)
        except ImportError as e:
            raise ImportError("openai LLM needs the openai package: pip install openai") from e
        o = self.options
        self.llm_id = stable_id(
            f"openai-{self.model}",
            {
                "model": self.model,
                "temperature": o.temperature,
                "max_output_tokens": o.max_output_tokens,
                "seed": o.seed,
                "json_mode": o.json_mode,
                # Two self-hosted servers may serve different weights under one model name.
                "endpoint": self.endpoint_host,
            },
        )
        self._client: Any = None
        self._client_lock = threading.Lock()

    # -- identity ----------------------------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        o = self.options
        return {
            "provider": self.name,
            "llm_id": self.llm_id,
            "model": self.model,
            "temperature": o.temperature,
            "max_output_tokens": o.max_output_tokens,
            "seed": o.seed,
            "json_mode": o.json_mode,
            "max_attempts": o.max_attempts,
            "max_retries": o.max_retries,
            "input_usd_per_mtok": o.input_usd_per_mtok,
            "output_usd_per_mtok": o.output_usd_per_mtok,
            "endpoint_host": self.endpoint_host,
            "sdk": f"openai {self.version}",
        }

    def __repr__(self) -> str:
        return f"OpenAICompatLLM(model={self.model!r}, llm_id={self.llm_id!r}, endpoint={self.endpoint_host!r})"

    # -- one exchange --------------------------------------------------------------------------------------------
    def _client_or_new(self) -> Any:
        with self._client_lock:
            if self._client is None:
                import openai

                from ttseval.providers.capped_http import capped_client, max_answer_bytes

                o = self.options
                self._client = openai.OpenAI(
                    api_key=self._api_key.get_secret_value() or PLACEHOLDER_KEY,
                    base_url=o.base_url or DEFAULT_BASE_URL,
                    timeout=o.timeout_s,
                    max_retries=0,
                    # answers read up to max_answer_mb; no redirects, which could carry the key elsewhere
                    http_client=capped_client(max_answer_bytes(), f"openai:{self.model}"),
                )
            return self._client

    def _messages(self, request: LLMRequest) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        for part in request.parts:
            if isinstance(part, str):
                content.append({"type": "text", "text": part})
            else:
                data = base64.b64encode(bytes(part)).decode("ascii")
                content.append({"type": "input_audio", "input_audio": {"data": data, "format": "wav"}})
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        if len(content) == 1 and content[0]["type"] == "text":
            # Plain string content: every compatible server takes it, not all take a list of parts.
            messages.append({"role": "user", "content": content[0]["text"]})
        else:
            messages.append({"role": "user", "content": content})
        return messages

    def _response_format(self, request: LLMRequest) -> dict[str, Any] | None:
        mode = self.options.json_mode
        if request.schema is None or mode == "none":
            return None
        if mode == "json_object":
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {
                "name": request.schema.__name__,
                "schema": request.schema.model_json_schema(),
                # strict needs every property required and no additionalProperties; pydantic models with
                # defaults are not, so the schema guides and parse_answer validates.
                "strict": False,
            },
        }

    def _send(self, request: LLMRequest) -> Reply:
        import openai

        o = self.options
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": self._messages(request),
            "temperature": self.temperature_of(request),
            # max_tokens by default: vLLM, llama.cpp and OpenAI's non-reasoning models take it.
            o.token_limit_field: o.max_output_tokens,
        }
        response_format = self._response_format(request)
        if response_format is not None:
            kwargs["response_format"] = response_format
        if o.seed is not None:
            kwargs["seed"] = o.seed
        client = self._client_or_new()
        try:
            completion = client.chat.completions.create(**kwargs)
        except openai.APIStatusError as e:
            detail = f"OpenAI HTTP {e.status_code}: {_error_message(e)[:300]}"
            if e.status_code in RETRYABLE_STATUS:
                raise Transient(detail, retry_after_s(getattr(e.response, "headers", None))) from e
            raise Fatal(f"{detail} (not retried)") from e
        except openai.APIConnectionError as e:  # APITimeoutError included
            from ttseval.providers.capped_http import answer_too_large

            if too_large := answer_too_large(e):  # the SDK wraps what the capped client raised
                raise Fatal(str(too_large)) from e
            raise Transient(f"OpenAI transport: {type(e).__name__}: {str(e)[:200]}") from e
        except openai.APIResponseValidationError as e:
            raise Transient(f"OpenAI transport: a response that does not parse ({str(e)[:200]})") from e
        except ValueError as e:  # a 200 whose body is not JSON (json.JSONDecodeError)
            raise Transient(f"OpenAI transport: a response that is not JSON ({str(e)[:200]})") from e
        if isinstance(completion, str):  # the SDK hands back the text of a 200 that is not JSON (a proxy's page)
            raise Transient(f"OpenAI transport: a 200 response that is not a chat completion ({completion[:200]!r})")
        return self._reply_of(completion)

    @staticmethod
    def _reply_of(completion: Any) -> Reply:
        choices = getattr(completion, "choices", None) or []
        usage = getattr(completion, "usage", None)
        input_tokens = getattr(usage, "prompt_tokens", None) if usage is not None else None
        output_tokens = getattr(usage, "completion_tokens", None) if usage is not None else None
        details = getattr(usage, "prompt_tokens_details", None) if usage is not None else None
        audio_tokens = getattr(details, "audio_tokens", None) if details is not None else None
        served = getattr(completion, "model", None) or None
        if not choices:
            return Reply(
                text=None,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                audio_input_tokens=audio_tokens,
                served_model=served,
            )
        choice = choices[0]
        message = choice.message
        return Reply(
            text=getattr(message, "content", None),
            finish_reason=choice.finish_reason,
            refusal=getattr(message, "refusal", None) or None,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            audio_input_tokens=audio_tokens,
            served_model=served,
        )
