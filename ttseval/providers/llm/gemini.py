"""Gemini through google-genai's generate_content, behind the LLM protocol.

Spec: `gemini[:MODEL][:key=value ...]`, e.g. `gemini:gemini-2.5-flash:temperature=0.7:thinking_budget=1024`.

A request is one user turn: each `str` part a text part, each `bytes` part a WAV clip sent inline (audio/wav).
With a schema the output is constrained to JSON (response_mime_type application/json, response_schema the
pydantic model) and parsed tolerantly by BaseLLM. google-genai's own retry is left off, so BaseLLM sees and counts
every transport retry: 408, 429, 5xx, timeouts and connection errors are Transient (Retry-After or Google's
RetryInfo honoured); other HTTP errors are Fatal and their error starts with "Gemini HTTP <code>"; transport
failures start with "Gemini transport".

The default prices are gemini-2.5-flash's paid-tier list prices (text/image/video input); they are defaults only:
set `input_usd_per_mtok` / `output_usd_per_mtok` for another model, or for audio input, which is priced higher.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any, ClassVar

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

DEFAULT_MODEL = "gemini-2.5-flash"
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"


class GeminiLLMOptions(LLMOptions):
    """Options of `gemini:<model>:key=value`: the common ones plus Gemini's thinking budget and API version."""

    thinking_budget: int | None = Field(
        None, ge=-1, description="thinking tokens; None = the model's default, -1 = dynamic, 0 = off where allowed"
    )
    api_version: str = Field("v1beta", description="API version path segment")
    input_usd_per_mtok: float = Field(
        0.30, ge=0, description="price of a million prompt tokens (default: gemini-2.5-flash text; override)"
    )
    output_usd_per_mtok: float = Field(
        2.50, ge=0, description="price of a million output tokens, thinking included (default: gemini-2.5-flash)"
    )


def resolve_api_key(api_key: str | SecretStr | None, who: str) -> SecretStr:
    """The key passed in, else GEMINI_API_KEY then GOOGLE_API_KEY (read once, here).

    Raises:
        ValueError: no key anywhere; the message names the environment variables.
    """
    if api_key is None:
        api_key = next((os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
    secret = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key or "")
    if not secret.get_secret_value():
        raise MissingKeyError(
            f"{who} needs an API key: set {' or '.join(KEY_VARIABLES)} in the environment (or pass api_key=)"
        )
    return secret


def require_genai(who: str) -> None:
    """Fail at build time, not on the first batch, when google-genai is missing."""
    try:
        import google.genai  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{who} needs google-genai: pip install google-genai") from e


def transient_transport_errors() -> tuple[type[BaseException], ...]:
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


def retry_delay_s(response: Any, details: Any) -> float | None:
    """Server-requested wait: the Retry-After header (seconds or HTTP date), else Google's RetryInfo detail."""
    requested = retry_after_s(getattr(response, "headers", None))
    if requested is not None:
        return requested
    error = details.get("error", details) if isinstance(details, dict) else None
    for item in (error or {}).get("details", []) if isinstance(error, dict) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            match = re.fullmatch(r"\s*([0-9.]+)s\s*", str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _value(enum_or_str: Any) -> str | None:
    if enum_or_str is None:
        return None
    return str(getattr(enum_or_str, "value", enum_or_str))


class GeminiLLM(BaseLLM):
    """A Gemini model answering text (and inline audio) prompts.

    Args:
        voice: the model name (the spec's voice slot); default gemini-2.5-flash.
        api_key: the key; when None, GEMINI_API_KEY then GOOGLE_API_KEY are read once, here.
        **options: `GeminiLLMOptions` fields as strings.

    Raises:
        ValueError: an unknown or invalid option, or no API key.
        ImportError: google-genai is not installed.
    """

    name: ClassVar[str] = "gemini"
    refusal_finish_reasons: ClassVar[frozenset[str]] = frozenset(
        {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY"}
    )
    default_base_url: ClassVar[str] = DEFAULT_BASE_URL
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("google-genai"))
    imports: ClassVar[tuple[str, ...]] = ("google.genai",)

    options: GeminiLLMOptions

    def __init__(
        self,
        voice: str | None = None,
        *,
        api_key: str | SecretStr | None = None,
        allowed_endpoints: AllowedEndpoints | None = None,
        **options: str,
    ) -> None:
        self.options = parse_options(GeminiLLMOptions, options, provider=self.name)
        self.model = voice or DEFAULT_MODEL
        self.spec = canonical_spec(self.name, voice, options)
        self._api_key = confine_key(
            resolve_api_key(api_key, "gemini llm"),
            self.options.base_url,
            vendor=DEFAULT_BASE_URL,
            allowed=endpoint_allowlist(allowed_endpoints, key_given=api_key is not None, provider=self.name),
            provider="gemini",
            variable=" or ".join(KEY_VARIABLES),
            key_required=True,
        )
        require_genai("gemini llm")
        o = self.options
        self.llm_id = stable_id(
            f"gemini-{self.model}",
            {
                "model": self.model,
                "temperature": o.temperature,
                "thinking_budget": o.thinking_budget,
                "max_output_tokens": o.max_output_tokens,
            },
        )
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._transient = transient_transport_errors()

    # -- identity ----------------------------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        o = self.options
        return {
            "provider": self.name,
            "llm_id": self.llm_id,
            "model": self.model,
            "temperature": o.temperature,
            "thinking_budget": o.thinking_budget,
            "max_output_tokens": o.max_output_tokens,
            "max_attempts": o.max_attempts,
            "max_retries": o.max_retries,
            "input_usd_per_mtok": o.input_usd_per_mtok,
            "output_usd_per_mtok": o.output_usd_per_mtok,
            "api_version": o.api_version,
            "endpoint_host": self.endpoint_host,
            "sdk": f"google-genai {self.version}",
        }

    def __repr__(self) -> str:
        return f"GeminiLLM(model={self.model!r}, llm_id={self.llm_id!r})"

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._transient = transient_transport_errors()

    # -- one exchange --------------------------------------------------------------------------------------------
    def _client_or_new(self) -> Any:
        with self._client_lock:
            if self._client is None:
                from google import genai
                from google.genai import types

                from ttseval.providers.capped_http import capped_client, max_answer_bytes

                o = self.options
                # No retry_options: the SDK does not retry, BaseLLM does (and counts each retry).
                self._client = genai.Client(
                    api_key=self._api_key.get_secret_value(),
                    http_options=types.HttpOptions(
                        base_url=o.base_url,
                        api_version=o.api_version,
                        timeout=int(o.timeout_s * 1000),
                        # answers read up to max_answer_mb; no redirects, which could carry the key elsewhere
                        httpx_client=capped_client(max_answer_bytes(), f"gemini:{self.model}"),
                    ),
                )
            return self._client

    def _config(self, request: LLMRequest) -> Any:
        from google.genai import types

        o = self.options
        structured: dict[str, Any] = {}
        if request.schema is not None:
            structured = {"response_mime_type": "application/json", "response_schema": request.schema}
        return types.GenerateContentConfig(
            temperature=self.temperature_of(request),
            max_output_tokens=o.max_output_tokens,
            system_instruction=request.system,
            thinking_config=(
                types.ThinkingConfig(thinking_budget=o.thinking_budget) if o.thinking_budget is not None else None
            ),
            **structured,
        )

    @staticmethod
    def _contents(request: LLMRequest) -> list[Any]:
        from google.genai import types

        parts = [
            types.Part.from_text(text=p) if isinstance(p, str) else types.Part.from_bytes(data=p, mime_type="audio/wav")
            for p in request.parts
        ]
        return [types.Content(role="user", parts=parts)]

    def _send(self, request: LLMRequest) -> Reply:
        from google.genai import errors

        from ttseval.providers.capped_http import AnswerTooLarge

        client = self._client_or_new()
        try:
            response = client.models.generate_content(
                model=self.model, contents=self._contents(request), config=self._config(request)
            )
        except errors.APIError as e:
            status = f"Gemini HTTP {e.code} {e.status or ''}".rstrip()
            detail = f"{status}: {(e.message or '')[:300]}"
            if e.code not in RETRYABLE_STATUS:
                raise Fatal(f"{detail} (not retried)") from e
            raise Transient(detail, retry_delay_s(getattr(e, "response", None), e.details)) from e
        except errors.UnknownApiResponseError as e:
            raise Transient(f"Gemini transport: a 200 response that is not JSON ({str(e)[:200]})") from e
        except AnswerTooLarge as e:
            raise Fatal(str(e)) from e
        except self._transient as e:
            raise Transient(f"Gemini transport: {type(e).__name__}: {str(e)[:200]}") from e
        return self._reply_of(response)

    @staticmethod
    def _reply_of(response: Any) -> Reply:
        """Answer text (thought parts excluded), finish reason, block reason and usage of one response."""
        usage = response.usage_metadata
        input_tokens = output_tokens = None
        if usage is not None:
            input_tokens = usage.prompt_token_count
            # Thinking tokens are billed as output tokens, so they count as output here.
            if usage.candidates_token_count is not None or usage.thoughts_token_count is not None:
                output_tokens = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
        served = getattr(response, "model_version", None) or None
        candidates = response.candidates or []
        if not candidates:
            feedback = response.prompt_feedback
            reason = _value(feedback.block_reason) if feedback is not None else None
            refusal = None
            if reason is not None:
                message = feedback.block_reason_message
                refusal = f"prompt blocked: {reason}" + (f" ({message})" if message else "")
            return Reply(
                text=None, refusal=refusal, input_tokens=input_tokens, output_tokens=output_tokens, served_model=served
            )
        candidate = candidates[0]
        parts = candidate.content.parts if candidate.content is not None and candidate.content.parts else []
        texts = [p.text for p in parts if p.text is not None and not p.thought]
        return Reply(
            text="".join(texts) if texts else None,
            finish_reason=_value(candidate.finish_reason),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            served_model=served,
        )
