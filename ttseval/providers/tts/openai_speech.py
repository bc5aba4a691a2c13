"""OpenAI's speech endpoint (`POST /v1/audio/speech`) and every server that speaks it, through the official
`openai` client: OpenAI's tts-1, tts-1-hd and gpt-4o-mini-tts (which takes style `instructions`), and
self-hosted servers such as Kokoro-FastAPI or openedai-speech (`base_url=http://host:8880/v1`).

Spec: `openai:<voice>[:model=...][:response_format=wav|pcm|mp3][:speed=1.0][:base_url=...]`, e.g.
`openai:alloy:model=gpt-4o-mini-tts` or `openai:af_bella:model=kokoro:base_url=http://127.0.0.1:8880/v1`.
The key comes from OPENAI_API_KEY; a self-hosted server (base_url given) needs none and costs nothing unless the
setting `tts_prices` prices it. `pcm` is 16-bit mono at `pcm_rate_hz` (OpenAI's: 24 kHz).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from pydantic import Field

from ttseval.core.audio import Audio
from ttseval.core.errors import ProviderError, TransientProviderError
from ttseval.providers import EngineVersion, package_version
from ttseval.providers.tts.cloud import CloudOptions, CloudTTS, decode_audio, vendor_message

OPENAI_VOICES = (
    "alloy",
    "ash",
    "ballad",
    "coral",
    "echo",
    "fable",
    "nova",
    "onyx",
    "sage",
    "shimmer",
    "verse",
    "marin",
    "cedar",
)
"""The voices OpenAI's speech endpoint documents (2026-11); a self-hosted server lists its own."""
NO_INSTRUCTIONS = ("tts-1", "tts-1-hd")
"""Models that refuse `instructions` (OpenAI's older two); it is sent to every other model, which a self-hosted
server may read or ignore."""


class OpenAISpeechOptions(CloudOptions):
    response_format: Literal["wav", "pcm", "mp3", "flac", "opus"] = Field("wav", description="audio format asked for")
    speed: float = Field(1.0, ge=0.25, le=4.0, description="speaking speed (0.25-4)")
    pcm_rate_hz: int = Field(24000, gt=0, description="sample rate of `pcm` answers (OpenAI's is 24 kHz)")


class OpenAISpeechTTS(CloudTTS):
    """OpenAI-compatible `/v1/audio/speech`. Options: model (default tts-1), response_format, speed, pcm_rate_hz,
    base_url, timeout_s."""

    name: ClassVar[str] = "openai"
    key_variable: ClassVar[str | None] = "OPENAI_API_KEY"
    key_required: ClassVar[bool] = False  # a self-hosted server checks no key
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    default_model: ClassVar[str] = "tts-1"
    prices: ClassVar[dict[str, float]] = {
        "tts-1": 15.0,
        "tts-1-hd": 30.0,
        # Billed by tokens (USD 0.60 / M text in, 12 / M audio out), which OpenAI equates to USD 0.015 a minute;
        # at about 15 characters a second that is USD 16.7 per million characters: an estimate.
        "gpt-4o-mini-tts": 16.7,
    }
    Options: ClassVar[type[CloudOptions]] = OpenAISpeechOptions
    accepts_instruction: ClassVar[bool] = True  # gpt-4o-mini-tts; other models ignore it (not sent)
    version: ClassVar[EngineVersion] = EngineVersion(lambda: f"v1 (openai {package_version('openai')})")
    imports: ClassVar[tuple[str, ...]] = ("openai",)

    options: OpenAISpeechOptions

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key.get_secret_value() or 'EMPTY'}"}  # as the SDK sends it

    def sdk(self) -> Any:
        """The official client, made on first use; the stage owns retries (the SDK's would multiply them)."""
        with self._client_lock:
            if self._sdk is None:
                import openai

                self._sdk = openai.OpenAI(
                    api_key=self._api_key.get_secret_value() or "EMPTY",
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=self.options.timeout_s,
                )
            return self._sdk

    def _synthesize(self, text: str, language: str, voice: str, instruction: str | None) -> Audio:
        import openai

        o = self.options
        extra: dict[str, Any] = {}
        if instruction and self.takes_instructions:
            extra["instructions"] = instruction
        try:
            started = time.perf_counter()
            with self.sdk().audio.speech.with_streaming_response.create(
                model=self.model, voice=voice, input=text, response_format=o.response_format, speed=o.speed, **extra
            ) as response:
                data = self.read_timed(response.iter_bytes(), started)
        except openai.APIStatusError as e:
            raise self.http_error(e.status_code, vendor_message(e.response.content), e.response.headers) from e
        except openai.APITimeoutError as e:
            raise TransientProviderError(f"openai: no answer within {o.timeout_s} s") from e
        except openai.APIConnectionError as e:
            raise TransientProviderError(f"openai: connection failed: {e}") from e
        except Exception as e:  # the body, streamed, cut short: read outside the SDK's own error mapping
            if not any(c.__name__ == "TransportError" and c.__module__.startswith("httpx") for c in type(e).__mro__):
                raise  # the SDK's httpx (httpx or its fork httpx2) raised a transport error: the connection's fault
            raise TransientProviderError(f"openai: {type(e).__name__}: {e}") from e
        return decode_audio(data, o.response_format, sample_rate_hz=o.pcm_rate_hz, spec=self.spec)

    @property
    def takes_instructions(self) -> bool:
        """gpt-4o-mini-tts reads instructions, tts-1 and tts-1-hd refuse them; a self-hosted model may read them."""
        return self.model not in NO_INSTRUCTIONS

    def voices(self) -> list[dict[str, Any]]:
        """OpenAI's documented voices, or a self-hosted server's `GET /audio/voices` (Kokoro-FastAPI's list)."""
        if not self.options.base_url:
            return [{"id": v, "name": v} for v in OPENAI_VOICES]
        try:
            data = self._get_json("/audio/voices")
        except (ProviderError, ValueError):  # not every compatible server lists voices: nothing to check then
            raise NotImplementedError(f"{self.base_url} lists no voices") from None
        listed = data.get("voices", data) if isinstance(data, dict) else data
        return [v if isinstance(v, dict) else {"id": str(v), "name": str(v)} for v in listed]

    def metadata(self) -> dict[str, Any]:
        return super().metadata() | {"instructions": self.takes_instructions}
