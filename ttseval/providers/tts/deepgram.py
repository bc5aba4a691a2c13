"""Deepgram Aura text to speech (`POST /v1/speak`), in plain HTTP through the CloudTTS base.

Plain HTTP, not the `deepgram-sdk`: the call is one documented POST, and the SDK would bring its own retry loop
and dependency tree (the synthesis stage owns retries here).

Spec: `deepgram:<model>[:encoding=linear16][:container=wav][:sample_rate=24000][:bit_rate=...]`, e.g.
`deepgram:aura-2-thalia-en` or `deepgram:aura-2-celeste-es:encoding=mp3`. The voice is the model name,
`aura-2-<name>-<language>` (Aura-1: `aura-<name>-en`), so the voice says its language: `supports_language` reads it.
The key comes from DEEPGRAM_API_KEY.

Wire format relied on (checked 2026-11):
- API reference "Single Text Request" (developers.deepgram.com/reference/text-to-speech/speak-request):
  `POST https://api.deepgram.com/v1/speak`, JSON body `{"text": ...}`, header `Authorization: Token <key>`;
  query `model`, `encoding`, `container`, `sample_rate`, `bit_rate`, `callback`, `callback_method`,
  `mip_opt_out`, `tag`; the answer is the audio bytes.
- "Media Output Settings" / "Encoding" / "Sample Rate" (developers.deepgram.com/docs/tts-media-output-settings,
  tts-encoding, tts-sample-rate): REST defaults linear16 in a wav container at 24 kHz; linear16 takes
  `container=wav|none` and sample_rate 8000/16000/24000/32000/48000; flac takes a sample_rate; mp3 (22.05 kHz)
  and opus (48 kHz, ogg) have a fixed rate, and a sample_rate with them is refused.
- "Model Metadata" (developers.deepgram.com/docs/model-metadata): `GET /v1/models` -> {"stt": [...],
  "tts": [{"name", "canonical_name", "architecture", "languages"|"language", "version", "uuid", "metadata"}]}.
- Errors (developers.deepgram.com/reference/errors): `{"err_code", "err_msg", "request_id"}` or
  `{"category", "message", "details", "request_id"}`; 400 unknown model, 402 insufficient credits, 413 text over
  the character limit (2,000), 429 rate limit, 503.

Cost: Deepgram's pay-as-you-go list price (deepgram.com/pricing; the same unit prices appear on Cloudflare's
Workers AI model pages, 2026): Aura-2 $0.030 per 1,000 characters, Aura-1 $0.015.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, ProviderError
from ttseval.core.protocols import PER_VOICE, Languages
from ttseval.providers.tts.cloud import CloudOptions, CloudTTS, decode_audio

API_VERSION = "v1"
FIXED_RATE = {"mp3": 22050, "opus": 48000}
"""Encodings whose sample rate Deepgram fixes (and refuses to be told)."""
AURA2_LANGUAGES = frozenset({"en", "es", "nl", "fr", "de", "it", "ja"})


class DeepgramOptions(CloudOptions):
    encoding: Literal["linear16", "mp3", "flac", "opus"] = Field("linear16", description="audio encoding")
    container: Literal["wav", "none"] | None = Field(None, description="linear16 only: wav (default) or none (raw)")
    sample_rate: int | None = Field(None, description="linear16: 8000-48000 (default 24000); flac: 8000-48000")
    bit_rate: int | None = Field(None, gt=0, description="mp3/opus bit rate in bits per second")

    @model_validator(mode="after")
    def _valid_combination(self) -> DeepgramOptions:
        if self.encoding in FIXED_RATE and self.sample_rate is not None:
            raise ValueError(f"{self.encoding} has a fixed sample rate ({FIXED_RATE[self.encoding]} Hz)")
        if self.container is not None and self.encoding != "linear16":
            raise ValueError("container applies to linear16 only")
        if self.sample_rate is not None and self.sample_rate not in (8000, 16000, 22050, 24000, 32000, 44100, 48000):
            raise ValueError("sample_rate must be one of 8000, 16000, 22050, 24000, 32000, 44100, 48000")
        return self


class DeepgramTTS(CloudTTS):
    """Deepgram `/v1/speak`. The voice is the model (aura-2-thalia-en). Options: encoding (linear16, mp3, flac,
    opus), container, sample_rate, bit_rate, base_url, timeout_s; `model` may name the voice instead."""

    name: ClassVar[str] = "deepgram"
    key_variable: ClassVar[str | None] = "DEEPGRAM_API_KEY"
    default_base_url: ClassVar[str] = "https://api.deepgram.com"
    default_model: ClassVar[str] = "aura-2-thalia-en"
    default_voice: ClassVar[str | None] = "aura-2-thalia-en"
    prices: ClassVar[dict[str, float]] = {"aura-2": 30.0, "aura": 15.0, "*": 30.0}
    """By architecture (the model name's prefix)."""
    Options: ClassVar[type[CloudOptions]] = DeepgramOptions
    languages: ClassVar[Languages] = PER_VOICE  # the voice's name ends with its language
    version: ClassVar[str] = API_VERSION

    options: DeepgramOptions

    def __init__(self, voice: str | None = None, **kwargs: Any) -> None:
        super().__init__(voice, **kwargs)
        if voice and self.options.model and self.options.model != voice:
            raise ValueError(f"deepgram: the voice is the model; got voice {voice!r} and model {self.options.model!r}")
        self.model = voice or self.options.model or self.default_model  # default_model is default_voice
        self.voice = self.model

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Token {self._api_key.get_secret_value()}"}

    # -- the call -------------------------------------------------------------------------------------------------
    def query(self, model: str) -> dict[str, str]:
        """The query string of one call: only what this encoding takes."""
        o = self.options
        params = {"model": model, "encoding": o.encoding}
        if o.encoding == "linear16":
            params["container"] = o.container or "wav"
        if o.encoding in ("linear16", "flac"):
            params["sample_rate"] = str(o.sample_rate or self.sample_rate_hz)
        if o.bit_rate is not None and o.encoding in ("mp3", "opus"):
            params["bit_rate"] = str(o.bit_rate)
        return params

    @property
    def sample_rate_hz(self) -> int:
        o = self.options
        return FIXED_RATE.get(o.encoding) or o.sample_rate or (48000 if o.encoding == "flac" else 24000)

    def _synthesize(self, text: str, language: str, voice: str, instruction: str | None) -> Audio:
        data, _ = self._post("/v1/speak", params=self.query(voice), json={"text": text})
        o = self.options
        fmt = (
            "pcm"
            if o.encoding == "linear16" and o.container == "none"
            else {"linear16": "wav", "opus": "ogg"}.get(o.encoding, o.encoding)
        )
        return decode_audio(data, fmt, sample_rate_hz=self.sample_rate_hz, spec=self.spec)

    # -- language, voices, cost, errors, metadata -----------------------------------------------------------------
    @staticmethod
    def voice_language(voice: str) -> str:
        """'aura-2-thalia-en' -> 'en'; 'aura-asteria-en' -> 'en'."""
        return voice.rsplit("-", 1)[-1]

    def supports_language(self, language: str) -> bool:
        from ttseval.core.languages import base_language

        return base_language(language) == base_language(self.voice_language(str(self.voice)))

    def voices(self) -> list[dict[str, Any]]:
        """The TTS models `GET /v1/models` lists: id is the canonical name the spec takes."""
        data = self._get_json("/v1/models")
        found = []
        for m in data.get("tts", []):
            languages = m.get("languages") or ([m["language"]] if m.get("language") else [])
            meta = m.get("metadata") or {}
            found.append(
                {
                    "id": m["canonical_name"],
                    "name": m.get("name"),
                    "language": ", ".join(languages),
                    "description": ", ".join(str(x) for x in [meta.get("accent"), *meta.get("tags", [])] if x),
                    "architecture": m.get("architecture"),
                    "languages": languages,
                }
            )
        return found

    @property
    def architecture(self) -> str:
        return "aura-2" if str(self.model).startswith("aura-2-") else "aura"

    @property
    def usd_per_mchar(self) -> float:
        return float(self.prices.get(self.architecture, self.prices["*"]))

    def http_error(self, status: int, message: str, headers: Any) -> ProviderError:
        """Deepgram answers an unknown model (the voice) with a 400 that names it; quota (402) and the rest
        follow the base table."""
        lowered = message.lower()
        if (
            status in (400, 404)
            and "model" in lowered
            and any(w in lowered for w in ("unknown", "resolve", "not found"))
        ):
            return PermanentProviderError(
                self.scrub(
                    f"{self.name} HTTP {status}: {message} (the voice is the "
                    f"model: `ttseval voices {self.name}` lists them)"
                )
            )
        return super().http_error(status, message, headers)

    def metadata(self) -> dict[str, Any]:
        return super().metadata() | {"api_version": API_VERSION, "architecture": self.architecture}
