"""Gemini's native text to speech (`models/{model}:generateContent` with an AUDIO response), through the official
google-genai client, as providers/llm/gemini.py drives it: no SDK retries (the synthesis stage retries), the key
from GEMINI_API_KEY then GOOGLE_API_KEY, `base_url` for a proxy or a test server.

Spec: `gemini:<voice>[:model=gemini-2.5-flash-preview-tts][:api_version=v1beta]`, e.g. `gemini:Kore` or
`gemini:Puck:model=gemini-2.5-pro-preview-tts`. The voice is one of the prebuilt voices (`PREBUILT_VOICES`). An
item's instruction is style guidance in the prompt, in the documented "Say cheerfully: Have a wonderful day!"
form: `Say in this style (<instruction>): <text>`.

Wire format relied on (checked 2026-11):
- "Speech generation (text-to-speech)" (ai.google.dev/gemini-api/docs/speech-generation): `generate_content`
  with `config=GenerateContentConfig(response_modalities=["AUDIO"], speech_config=SpeechConfig(voice_config=
  VoiceConfig(prebuilt_voice_config=PrebuiltVoiceConfig(voice_name="Kore"))))`; style is asked for in natural
  language in the prompt ("Say cheerfully: ..."); the audio is `candidates[0].content.parts[0].inline_data.data`,
  16-bit mono PCM at 24 kHz (the page's `wave_file(..., channels=1, rate=24000, sample_width=2)`); the REST form
  is `generationConfig.responseModalities` / `speechConfig.voiceConfig.prebuiltVoiceConfig.voiceName` and
  `inlineData {mimeType: "audio/L16;codec=pcm;rate=24000", data: <base64>}`. The rate in the mimeType is used when
  present. The page's "Voice options" list the 30 prebuilt voices in `PREBUILT_VOICES`.
- Generating content reference (ai.google.dev/api/generate-content): `finishReason` (STOP, MAX_TOKENS, SAFETY,
  RECITATION, LANGUAGE, OTHER, BLOCKLIST, PROHIBITED_CONTENT, SPII, ...) and `promptFeedback.blockReason`. A
  candidate with no audio is a PermanentProviderError naming the reason (the vendor declined this text).
- Errors (ai.google.dev/gemini-api/docs/troubleshooting): `{"error": {"code", "message", "status", "details"}}`;
  429 RESOURCE_EXHAUSTED for rate and quota limits, with a google.rpc.RetryInfo `retryDelay`; google-genai raises
  errors.ClientError (4xx) / errors.ServerError (5xx) carrying `.code`, mapped through `http_error`. A 429 is
  retried within the run (its RetryInfo honoured) unless its QuotaFailure names a per-day quota, which is
  deferred to the next run.

Cost: billed per token (text in, audio out; about 25 audio tokens a second), not per character. The list prices
(ai.google.dev/gemini-api/docs/pricing: flash-preview-tts USD 0.50 / M text-in tokens and 10 / M audio-out tokens,
pro-preview-tts 1 / 20) at about 15 spoken characters a second and 4 characters a token come to about USD 16.8
(flash) and 33.6 (pro) per million characters of text: an estimate, recorded per character of the text; the
instruction adds only cheap input tokens and is not counted. `tts_prices` overrides it.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar

from pydantic import Field, SecretStr

from ttseval.core.audio import Audio
from ttseval.core.errors import (
    DeferredProviderError,
    MissingKeyError,
    PermanentProviderError,
    ProviderError,
    TransientProviderError,
    TruncatedAudioError,
)
from ttseval.providers import AllowedEndpoints, EngineVersion, endpoint_allowlist, package_version
from ttseval.providers.llm.gemini import KEY_VARIABLES, retry_delay_s, transient_transport_errors
from ttseval.providers.tts.cloud import CloudOptions, CloudTTS, decode_audio, vendor_message

DEFAULT_MODEL = "gemini-2.5-flash-preview-tts"
PREBUILT_VOICES: dict[str, str] = {
    "Zephyr": "Bright",
    "Puck": "Upbeat",
    "Charon": "Informative",
    "Kore": "Firm",
    "Fenrir": "Excitable",
    "Leda": "Youthful",
    "Orus": "Firm",
    "Aoede": "Breezy",
    "Callirrhoe": "Easy-going",
    "Autonoe": "Bright",
    "Enceladus": "Breathy",
    "Iapetus": "Clear",
    "Umbriel": "Easy-going",
    "Algieba": "Smooth",
    "Despina": "Smooth",
    "Erinome": "Clear",
    "Algenib": "Gravelly",
    "Rasalgethi": "Informative",
    "Laomedeia": "Upbeat",
    "Achernar": "Soft",
    "Alnilam": "Firm",
    "Schedar": "Even",
    "Gacrux": "Mature",
    "Pulcherrima": "Forward",
    "Achird": "Friendly",
    "Zubenelgenubi": "Casual",
    "Vindemiatrix": "Gentle",
    "Sadachbia": "Lively",
    "Sadaltager": "Knowledgeable",
    "Sulafat": "Warm",
}
"""The prebuilt voices and their documented character (speech-generation page, "Voice options", 2026-11)."""
PCM_RATE_HZ = 24000
_RATE = re.compile(r"rate=(\d+)")


class GeminiTTSOptions(CloudOptions):
    api_version: str = Field("v1beta", description="API version path segment")


class GeminiTTS(CloudTTS):
    """Gemini TTS models through google-genai. Options: model (default gemini-2.5-flash-preview-tts),
    api_version, base_url, timeout_s."""

    name: ClassVar[str] = "gemini"
    key_variable: ClassVar[str | None] = "GEMINI_API_KEY"  # then GOOGLE_API_KEY, as providers/llm/gemini.py
    default_base_url: ClassVar[str] = "https://generativelanguage.googleapis.com"
    default_model: ClassVar[str] = DEFAULT_MODEL
    default_voice: ClassVar[str | None] = "Kore"
    prices: ClassVar[dict[str, float]] = {
        "gemini-2.5-flash-preview-tts": 16.8,
        "gemini-2.5-pro-preview-tts": 33.6,
        "*": 16.8,
    }
    Options: ClassVar[type[CloudOptions]] = GeminiTTSOptions
    accepts_instruction: ClassVar[bool] = True  # style guidance in the prompt
    output_sample_rate_hz: ClassVar[int | None] = PCM_RATE_HZ
    version: ClassVar[EngineVersion] = EngineVersion(lambda: f"v1beta (google-genai {package_version('google-genai')})")
    imports: ClassVar[tuple[str, ...]] = ("google.genai",)

    options: GeminiTTSOptions

    def __init__(
        self,
        voice: str | None = None,
        *,
        api_key: str | SecretStr | None = None,
        allowed_endpoints: AllowedEndpoints | None = None,
        max_answer_mb: float | None = None,
        **options: str,
    ) -> None:
        # decided before the key is read here: a key read here is confined, one passed in is the caller's
        allowed = endpoint_allowlist(allowed_endpoints, key_given=api_key is not None, provider=self.name)
        if api_key is None:
            api_key = next((os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
        if not (api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key):
            raise MissingKeyError(
                f"{self.name} needs an API key: set {' or '.join(KEY_VARIABLES)} in the "
                "environment (or name a Prefect Secret block for it in the setting secret_blocks)"
            )
        super().__init__(voice, api_key=api_key, allowed_endpoints=allowed, max_answer_mb=max_answer_mb, **options)
        self._transient = transient_transport_errors()

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._transient = transient_transport_errors()

    def sdk(self) -> Any:
        """The google-genai client, made on first use; no retry_options, so the SDK does not retry."""
        with self._client_lock:
            if self._sdk is None:
                from google import genai
                from google.genai import types

                from ttseval.providers.capped_http import capped_client

                o = self.options
                self._sdk = genai.Client(
                    api_key=self._api_key.get_secret_value(),
                    http_options=types.HttpOptions(
                        base_url=o.base_url,
                        api_version=o.api_version,
                        timeout=int(o.timeout_s * 1000),
                        # answers read up to max_answer_mb; no redirects, which could carry the key elsewhere
                        httpx_client=capped_client(self.max_answer_bytes, self.name),
                    ),
                )
            return self._sdk

    # -- the call -------------------------------------------------------------------------------------------------
    @staticmethod
    def prompt(text: str, instruction: str | None) -> str:
        """The text alone, or the documented style form: `Say in this style (<instruction>): <text>`."""
        if instruction and instruction.strip():
            return f"Say in this style ({instruction.strip()}): {text}"
        return text

    def config(self, voice: str) -> Any:
        from google.genai import types

        return types.GenerateContentConfig(
            response_modalities=["AUDIO"],
            speech_config=types.SpeechConfig(
                voice_config=types.VoiceConfig(prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name=voice))
            ),
        )

    def _synthesize(self, text: str, language: str, voice: str, instruction: str | None) -> Audio:
        from google.genai import errors

        from ttseval.providers.capped_http import AnswerTooLarge

        try:
            response = self.sdk().models.generate_content(
                model=self.model, contents=self.prompt(text, instruction), config=self.config(voice)
            )
        except errors.APIError as e:
            raise self.sdk_error(e) from e
        except AnswerTooLarge as e:
            raise PermanentProviderError(str(e)) from e
        except (errors.UnknownApiResponseError, ValueError) as e:
            # a 200 whose body is not JSON (a proxy's page, a body cut short): google-genai 3.x raises
            # json.JSONDecodeError, older versions UnknownApiResponseError. JSON that starts and stops short is a
            # cut stream, whose audio is truncated.
            doc = getattr(e, "doc", None)
            if isinstance(doc, str) and doc.lstrip().startswith("{"):
                raise TruncatedAudioError(
                    f"gemini: the response stopped after {len(doc)} characters of JSON ({str(e)[:120]})"
                ) from e
            raise TransientProviderError(
                f"gemini: a 200 response that is not JSON ({type(e).__name__}: {str(e)[:200]})"
            ) from e
        except self._transient as e:
            if "timeout" in type(e).__name__.lower():
                raise TransientProviderError(
                    f"gemini: no answer within {self.options.timeout_s} s ({type(e).__name__})"
                ) from e
            raise TransientProviderError(f"gemini: {type(e).__name__}: {str(e)[:200]}") from e
        return self.audio_of(response)

    def audio_of(self, response: Any) -> Audio:
        """The first candidate's inline audio; a refusal (no audio, and a finish or block reason) is permanent.

        Raises:
            PermanentProviderError: no audio came back; the message names the finish or block reason.
        """
        candidates = response.candidates or []
        if not candidates:
            feedback = response.prompt_feedback
            reason = _value(feedback.block_reason) if feedback is not None else None
            detail = (
                f" ({feedback.block_reason_message})" if feedback is not None and feedback.block_reason_message else ""
            )
            raise PermanentProviderError(
                f"gemini returned no audio: prompt blocked ({reason or 'no reason given'}){detail}"
            )
        candidate = candidates[0]
        parts = candidate.content.parts if candidate.content is not None and candidate.content.parts else []
        inline = next((p.inline_data for p in parts if p.inline_data is not None), None)
        if inline is None:
            reason = _value(candidate.finish_reason) or "no finish reason"
            message = f": {candidate.finish_message}" if getattr(candidate, "finish_message", None) else ""
            raise PermanentProviderError(f"gemini returned no audio (finishReason {reason}{message})")
        mime = inline.mime_type or ""
        match = _RATE.search(mime)
        rate = int(match.group(1)) if match else PCM_RATE_HZ
        fmt = "wav" if "wav" in mime else "pcm"
        return decode_audio(inline.data or b"", fmt, sample_rate_hz=rate, spec=self.spec)

    def sdk_error(self, e: Any) -> ProviderError:
        """google-genai's ClientError/ServerError by its `.code`: a 429 with a per-day QuotaFailure is deferred,
        other 429s are retried after Google's RetryInfo delay; the rest go through `http_error`."""
        response = getattr(e, "response", None)
        message = e.message or vendor_message(getattr(response, "content", b"") if response is not None else b"")
        if e.code == 429:
            text = self.scrub(f"{self.name} HTTP 429 {e.status or ''}: {message}")
            if _per_day_quota(e.details):
                return DeferredProviderError(f"{text} (daily quota used up: the next run asks again)")
            return TransientProviderError(text, retry_after_s=retry_delay_s(response, e.details))
        return self.http_error(int(e.code or 0), message, getattr(response, "headers", None))

    # -- voices, metadata -----------------------------------------------------------------------------------------
    def voices(self) -> list[dict[str, Any]]:
        """The documented prebuilt voices (the API has no voice list for them)."""
        return [{"id": v, "name": v, "style": style} for v, style in PREBUILT_VOICES.items()]

    def metadata(self) -> dict[str, Any]:
        return super().metadata() | {
            "api_version": self.options.api_version,
            "sdk": f"google-genai {package_version('google-genai')}",
        }


def _value(enum_or_str: Any) -> str | None:
    if enum_or_str is None:
        return None
    return str(getattr(enum_or_str, "value", enum_or_str))


def _per_day_quota(details: Any) -> bool:
    """Whether Google's error details carry a QuotaFailure for a per-day quota (quotaId ...PerDay...)."""
    error = details.get("error", details) if isinstance(details, dict) else None
    for item in (error or {}).get("details", []) if isinstance(error, dict) else []:
        if (
            isinstance(item, dict)
            and str(item.get("@type", "")).endswith("google.rpc.QuotaFailure")
            and any(
                "perday" in str(v.get("quotaId", "")).lower() for v in item.get("violations", []) if isinstance(v, dict)
            )
        ):
            return True
    return False
