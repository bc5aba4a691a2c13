"""What every paid TTS API shares: the key, the endpoint, the price, one HTTP exchange, error mapping, audio
decoding and the vendor's voice list. A vendor module only builds its request and reads its answer.

One call is one HTTP exchange: the synthesis stage owns the retries (settings `item_retries`, backoff from
`retry_backoff_s`, a server's Retry-After honoured through `TransientProviderError.retry_after_s`), so a vendor's
budget is not multiplied by a second loop here, and no SDK retries behind our back.

How an answer becomes a row (tasks/synthesize.py):

    200 with audio                  ok (or `empty` when the clip has no signal: an empty body, a header only)
    408, 429, 5xx, timeout, reset   TransientProviderError: retried within the run, then a failed, retryable row
    429/402 saying quota, 401, 403  DeferredProviderError: a failed row now, asked again by the next run
    400, 404, 422 (bad input,       PermanentProviderError with the vendor's reason: final
      content policy, unknown voice)
    a body that is not audio        TransientProviderError (a proxy's error page)
    a WAV cut short of its header   TruncatedAudioError: retried, then an `empty`, retryable row

Keys come from the environment variable the class names (`key_variable`) or, through the task layer, from a
Prefect Secret block (settings `secret_blocks`); they are never part of a spec, a row, a log line or a message
(`scrub`). Prices are data: `prices` maps a model to USD per million billable characters (published list prices,
checked 2026-11; settings `tts_prices` overrides them), and a self-hosted endpoint (`base_url` given, for the
OpenAI-compatible provider) is free unless priced.
"""

from __future__ import annotations

import difflib
import io
import os
import threading
import time
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ttseval.core.audio import Audio
from ttseval.core.errors import (
    DeferredProviderError,
    MissingKeyError,
    PermanentProviderError,
    ProviderError,
    TransientProviderError,
    TruncatedAudioError,
)
from ttseval.core.protocols import ANY_LANGUAGE, Languages
from ttseval.providers import (
    AllowedEndpoints,
    canonical_spec,
    confine_key,
    endpoint_allowlist,
    endpoint_without_credentials,
    parse_options,
)
from ttseval.providers.llm.base import RETRYABLE_STATUS, retry_after_s

_POLICY_WORDS = ("content policy", "content_policy", "terms of service", "moderation", "safety system")
_QUOTA_WORDS = ("quota", "insufficient_quota", "credits", "character limit", "billing", "payment")


class CloudOptions(BaseModel):
    """Options every paid TTS API takes (`provider:voice:key=value`); values arrive as strings."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, description="the vendor's model id; None = the provider's default")
    base_url: str | None = Field(None, description="API endpoint; None = the vendor's public one")
    timeout_s: float = Field(60.0, gt=0, description="seconds before one request counts as timed out (transient)")

    @field_validator("base_url")
    @classmethod
    def _no_credentials_in_url(cls, value: str | None) -> str | None:
        checked = endpoint_without_credentials(value)
        return checked.rstrip("/") if checked else checked


def vendor_message(body: bytes | str | None) -> str:
    """The error text a vendor put in its body: `error.message`, `detail.message`, `detail`, `message`, ... or
    the body itself, shortened."""
    import json

    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:500]
    for path in (
        ("error", "message"),
        ("detail", "message"),
        ("detail",),
        ("message",),
        ("error",),
        ("err_msg",),
        ("title",),
    ):
        value: Any = data
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and value.strip():
            extra = data.get("detail", {}).get("status") if isinstance(data.get("detail"), dict) else None
            return f"{value} ({extra})" if extra else value
        if isinstance(value, list) and value:
            return "; ".join(str(v.get("msg", v)) if isinstance(v, dict) else str(v) for v in value)[:500]
    return text.strip()[:500]


def decode_audio(data: bytes, fmt: str, *, sample_rate_hz: int | None = None, spec: str = "") -> Audio:
    """Audio from an API's body: 'pcm' is 16-bit little-endian mono at `sample_rate_hz`; anything else (wav, mp3,
    flac, ogg/opus) is decoded by libsndfile. An empty body (or a WAV header with no samples) is an empty clip,
    which the stage records as `empty`.

    Raises:
        TransientProviderError: the body is not audio, or a WAV is shorter than its header says (a cut stream).
    """
    import soundfile as sf

    if fmt == "pcm":
        if sample_rate_hz is None:
            raise ValueError("pcm audio needs its sample rate")
        usable = len(data) - len(data) % 2
        samples = np.frombuffer(data[:usable], dtype="<i2").astype(np.float32) / 32768.0
        return Audio(samples=samples, sample_rate_hz=sample_rate_hz)
    if not data:
        return Audio(samples=np.zeros(0, dtype=np.float32), sample_rate_hz=sample_rate_hz or 24000)
    if data[:4] == b"RIFF" and (declared := _wav_data_bytes(data)) is not None:
        start = data.find(b"data", 12) + 8
        if declared < 0x7FFF0000 and len(data) - start < declared:  # streaming writers put a huge placeholder
            raise TruncatedAudioError(
                f"truncated WAV: header promises {declared} bytes of audio, {len(data) - start} arrived", spec=spec
            )
    try:
        samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, ValueError, TypeError) as e:
        raise TransientProviderError(
            f"the response is not {fmt} audio ({len(data)} bytes starting {data[:16]!r}): {e}", spec=spec
        ) from e
    return Audio(samples=samples.mean(axis=1).astype(np.float32), sample_rate_hz=int(rate))


def _wav_data_bytes(data: bytes) -> int | None:
    at = data.find(b"data", 12)
    if at < 0 or at + 8 > len(data):
        return None
    return int.from_bytes(data[at + 4 : at + 8], "little")


class CloudTTS:
    """Base of the paid TTS APIs. A subclass sets the class attributes below and implements `_synthesize`
    (build the request, make it with `_post`, decode the answer) and, where the API lists voices, `voices`."""

    name: ClassVar[str] = "cloud"
    remote: ClassVar[bool] = True
    """A vendor's service: its version does not change when the voice behind it does, so a nightly run has it speak
    the canary items afresh (setting fresh_items; a plugin that calls a service sets this too)."""
    key_variable: ClassVar[str | None] = None
    """The environment variable that holds the API key."""
    key_required: ClassVar[bool] = True
    """False: a key is needed only for the vendor's own endpoint (a self-hosted server checks none)."""
    default_base_url: ClassVar[str] = ""
    default_model: ClassVar[str] = ""
    default_voice: ClassVar[str | None] = None
    prices: ClassVar[dict[str, float]] = {}
    """Model -> USD per million billable characters; '*' for every other model."""
    Options: ClassVar[type[CloudOptions]] = CloudOptions
    run_settings: ClassVar[tuple[str, ...]] = ("allowed_endpoints", "max_answer_mb")
    """Built by a stage, the provider sends its key only where the run's settings allow (confine_key), and reads an
    answer only up to the run's cap."""

    # ProviderMetadata (ttseval.core.protocols); a subclass declares `version`, and what differs.
    version: ClassVar[str]
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False  # the model runs behind the endpoint
    extra: ClassVar[str | None] = None  # httpx (and openai, google-genai) are base dependencies
    output_sample_rate_hz: ClassVar[int | None] = None
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("httpx",)

    def __init__(
        self,
        voice: str | None = None,
        *,
        api_key: str | SecretStr | None = None,
        allowed_endpoints: AllowedEndpoints | None = None,
        max_answer_mb: float | None = None,
        **options: str,
    ) -> None:
        self.options = parse_options(self.Options, options, provider=self.name)
        if max_answer_mb is None:  # built by hand: the setting's default
            from ttseval.core.config import Settings

            max_answer_mb = float(Settings.model_fields["max_answer_mb"].default)
        self.max_answer_bytes = int(max_answer_mb * 2**20)
        self.spec = canonical_spec(self.name, voice, options)
        self.voice = voice or self.default_voice
        self.model = self.options.model or self.default_model
        allowed = endpoint_allowlist(allowed_endpoints, key_given=api_key is not None, provider=self.name)
        if api_key is None and self.key_variable:
            api_key = os.environ.get(self.key_variable) or None
        self._api_key = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key or "")
        if (
            not self._api_key.get_secret_value()
            and self.key_variable
            and (self.key_required or not self.options.base_url)
        ):
            raise MissingKeyError(
                f"{self.name} needs an API key: set {self.key_variable} in the environment (or "
                f"name a Prefect Secret block for it in the setting secret_blocks)"
            )
        self._api_key = confine_key(
            self._api_key,
            self.options.base_url,
            vendor=self.vendor_url,
            allowed=allowed,
            provider=self.name,
            variable=self.key_variable or "API key",
            key_required=self.key_required,
        )
        self._client: Any = None  # httpx, made on first use
        self._sdk: Any = None  # a vendor SDK's client, for the subclasses that use one
        self._client_lock = threading.Lock()
        self._timing = threading.local()  # per thread: a worker's threads share the instance

    # -- pickling: the HTTP client holds sockets and locks; a copy in another process builds its own ----------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = state["_sdk"] = None
        state.pop("_client_lock", None)
        state.pop("_timing", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client_lock = threading.Lock()
        self._timing = threading.local()

    # -- to implement ---------------------------------------------------------------------------------------------
    def _synthesize(self, text: str, language: str, voice: str, instruction: str | None) -> Audio:
        raise NotImplementedError

    def voices(self) -> list[dict[str, Any]]:
        """The vendor's voices: dicts with at least `id` (what the spec's voice slot takes) and `name`."""
        raise NotImplementedError(f"{self.name} offers no voice list")

    # -- the protocol ---------------------------------------------------------------------------------------------
    def supports_language(self, language: str) -> bool:
        return True

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        """One call. Raises TransientProviderError, DeferredProviderError or PermanentProviderError (see the
        module docstring); the key never appears in a message. The time to the first byte of its last HTTP answer
        is `first_byte_s()` afterwards, in the same thread."""
        self._timing.first_byte_s = None
        chosen = voice or self.voice
        if chosen is None:  # a vendor without a default voice, built without one
            raise PermanentProviderError(
                f"{self.name} needs a voice: {self.name}:<voice>; `ttseval voices {self.name}` lists them",
                spec=self.spec,
            )
        try:
            return self._synthesize(text, language, chosen, instruction)
        except ProviderError as e:
            e.args = (self.scrub(str(e)),)
            e.spec = self.spec
            raise

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "version": str(self.version),
            "model": self.model,
            "voice": self.voice,
            "endpoint": self.endpoint_host,
            "options": {k: v for k, v in self.options.model_dump().items() if k != "base_url"},
        }

    def first_byte_s(self) -> float | None:
        """Seconds from sending this thread's last request to the first byte of the answer's body (the audio, where
        the vendor streams it); None when the call made no request through `_request` (a vendor SDK's)."""
        return getattr(self._timing, "first_byte_s", None)

    def read_timed(self, chunks: Any, started: float) -> bytes:
        """An answer's body read whole from its `chunks`, noting when the first arrived (`first_byte_s`); `started`
        is time.perf_counter() when the request was sent."""
        parts: list[bytes] = []
        size = 0
        for chunk in chunks:
            if not parts:
                self._timing.first_byte_s = time.perf_counter() - started
            parts.append(chunk)
            size += len(chunk)
            if size > self.max_answer_bytes:  # read no further: an endpoint may stream without end
                raise PermanentProviderError(
                    f"{self.name}: the answer passed {self.max_answer_bytes / 2**20:g} MiB (the setting "
                    "max_answer_mb); the rest was not read"
                )
        return b"".join(parts)

    # -- cost -----------------------------------------------------------------------------------------------------
    @property
    def usd_per_mchar(self) -> float:
        """The list price of this configuration; 0 for a self-hosted endpoint of a provider that needs no key."""
        if self.options.base_url and not self.key_required:
            return 0.0
        return float(self.prices.get(self.model, self.prices.get("*", 0.0)))

    def billable_chars(self, text: str, instruction: str | None) -> int:
        """Characters the vendor bills for one call: the text (a subclass adds what else it bills)."""
        return len(text)

    # -- checks ---------------------------------------------------------------------------------------------------
    def check_voice(self) -> None:
        """Refuse an unknown voice before any work, where the vendor lists its voices.

        Raises:
            ValueError: no voice was given, or it is not in the vendor's list (the message shows the closest ids).
        """
        if self.voice is None:
            raise ValueError(f"{self.name} needs a voice: {self.name}:<voice>; `ttseval voices {self.name}` lists them")
        try:
            known = self.voices()
        except NotImplementedError:
            return
        ids = [str(v["id"]) for v in known]
        if self.voice not in ids and self.voice not in {str(v.get("name")) for v in known}:
            close = difflib.get_close_matches(str(self.voice), ids, n=3)
            raise ValueError(
                f"{self.name} has no voice {self.voice!r}"
                + (f"; did you mean {', '.join(map(repr, close))}?" if close else "")
                + f" ({len(ids)} voices: `ttseval voices {self.name}` lists them)"
            )

    # -- transport ------------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self.options.base_url or self.default_base_url

    @property
    def vendor_url(self) -> str:
        """The vendor's own endpoint, which may always receive the key (confine_key)."""
        return self.default_base_url

    @property
    def endpoint_host(self) -> str:
        parts = urlsplit(self.base_url)
        return f"{parts.hostname}:{parts.port}" if parts.port else (parts.hostname or "")

    def _headers(self) -> dict[str, str]:
        """Authentication headers; a subclass names its own."""
        return {"Authorization": f"Bearer {self._api_key.get_secret_value()}"}

    def http_client(self) -> Any:
        """One httpx client per instance (connections pooled), made on first use."""
        with self._client_lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(timeout=self.options.timeout_s)
            return self._client

    def _request(self, method: str, path: str, **kwargs: Any) -> tuple[bytes, dict[str, str]]:
        """One HTTP exchange with the vendor; returns (body, headers). A streamed (chunked) body is read whole.

        Raises:
            TransientProviderError, DeferredProviderError, PermanentProviderError: as the module docstring maps.
        """
        import httpx

        url = path if "://" in path else f"{self.base_url}{path}"
        headers = self._headers() | kwargs.pop("headers", {})
        started = time.perf_counter()
        try:
            with self.http_client().stream(method, url, headers=headers, **kwargs) as response:
                body = self.read_timed(response.iter_bytes(), started)
                if response.status_code >= 400:
                    raise self.http_error(response.status_code, vendor_message(body), response.headers)
                return body, dict(response.headers)
        except httpx.TimeoutException as e:
            raise TransientProviderError(
                f"{self.name}: no answer within {self.options.timeout_s} s ({type(e).__name__})"
            ) from e
        except httpx.TransportError as e:  # connection refused or reset, a body cut short
            raise TransientProviderError(f"{self.name}: {type(e).__name__}: {e}") from e

    def _post(self, path: str, **kwargs: Any) -> tuple[bytes, dict[str, str]]:
        return self._request("POST", path, **kwargs)

    def _get_json(self, path: str, **kwargs: Any) -> Any:
        import json

        body, _ = self._request("GET", path, **kwargs)
        return json.loads(body)

    def http_error(self, status: int, message: str, headers: Any) -> ProviderError:
        """The provider error for an HTTP error answer (see the module docstring's table)."""
        text = self.scrub(f"{self.name} HTTP {status}: {message}")
        if 400 <= status < 500 and any(w in message.lower() for w in _POLICY_WORDS):
            return PermanentProviderError(text)  # a refusal of the content, whatever the status: final
        quota = status == 402 or any(w in message.lower() for w in _QUOTA_WORDS)
        if quota and status in (400, 401, 402, 403, 429):
            return DeferredProviderError(f"{text} (quota or credits used up: the next run asks again)")
        if status in (401, 403):
            return DeferredProviderError(
                f"{text} (the key was refused: check {self.key_variable}; the next run asks again)"
            )
        if status in RETRYABLE_STATUS:
            return TransientProviderError(text, retry_after_s=retry_after_s(headers))
        return PermanentProviderError(text)

    def scrub(self, text: str) -> str:
        key = self._api_key.get_secret_value()
        return text.replace(key, "***") if key else text
