"""Cartesia Sonic text to speech (`POST /tts/bytes`), in plain HTTP through the CloudTTS base.

Plain HTTP, not the `cartesia` SDK: the call is one documented POST, and the SDK would bring its own retry loop
and dependency tree (the synthesis stage owns retries here).

Spec: `cartesia:<voice_id>[:model=sonic-3][:container=wav|raw|mp3][:encoding=pcm_s16le|pcm_f32le]
[:sample_rate=24000][:bit_rate=128000][:speed=1.0][:volume=1.0][:emotion=...]`, e.g.
`cartesia:694f9389-aac1-45b6-b726-9d9369183238:model=sonic-2`. The voice is the voice id (`ttseval voices cartesia`
lists them). The key comes from CARTESIA_API_KEY.

Wire format relied on (checked 2026-11):
- API reference "Text to Speech (Bytes)" (docs.cartesia.ai/api-reference/tts/bytes) and the quickstart
  (docs.cartesia.ai/get-started/make-an-api-request): `POST https://api.cartesia.ai/tts/bytes`, headers
  `Cartesia-Version` (2024-06-10, 2024-11-13, 2025-04-16, 2026-03-01) and `Authorization: Bearer <key>` (the
  current API conventions page; older pages show `X-API-Key`); JSON body `model_id`, `transcript`,
  `voice` {"mode": "id", "id"}, `output_format` (raw/wav: {container, encoding pcm_f32le|pcm_s16le|pcm_mulaw|
  pcm_alaw, sample_rate 8000-48000}; mp3: {container, sample_rate, bit_rate}), `language`, `generation_config`
  {speed 0.6-1.5, volume 0.5-2.0, emotion} (sonic-3 only, ignored by earlier models), `pronunciation_dict_id`,
  `save`, `duration`, `speed` (deprecated); the answer is the audio bytes.
- "List Voices" (docs.cartesia.ai/api-reference/voices/list): `GET /voices?limit=1..100&starting_after=<id>` ->
  {"data": [{"id", "name", "language", ...}], "has_more", "next_page"}.
- "API Errors" (docs.cartesia.ai/use-the-api/api-errors): from version 2026-03-01, `{"error_code", "title",
  "message", "request_id", "doc_url"?}`; e.g. 429 `concurrency_limited`. Credits are spent only by successful
  requests (docs.cartesia.ai/pricing).

Cost: about 1 credit per character (docs.cartesia.ai/pricing); plans sell credits at $5 per 100K (Pro) down to
$299 per 8M (Scale), 2026: $50 per million characters is the self-serve list rate, an estimate for larger plans.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, ProviderError
from ttseval.core.protocols import PER_VOICE, Languages
from ttseval.providers.tts.cloud import CloudOptions, CloudTTS, decode_audio

API_VERSION = "2026-03-01"
"""The Cartesia-Version this module speaks (structured JSON errors from this version on)."""
SONIC_LANGUAGES = ("en", "fr", "de", "es", "pt", "zh", "ja", "hi", "it", "ko", "nl", "pl", "ru", "sv", "tr")
SONIC3_LANGUAGES = (
    *SONIC_LANGUAGES,
    "tl",
    "bg",
    "ro",
    "ar",
    "cs",
    "el",
    "fi",
    "hr",
    "ms",
    "sk",
    "da",
    "ta",
    "uk",
    "hu",
    "no",
    "vi",
    "bn",
    "th",
    "he",
    "ka",
    "id",
    "te",
    "gu",
    "kn",
    "ml",
    "mr",
    "pa",
)
"""The `language` values of the bytes endpoint: sonic-3 takes all, earlier models (sonic-2, sonic-turbo) the 15."""
SAMPLE_RATES = (8000, 16000, 22050, 24000, 44100, 48000)


class CartesiaOptions(CloudOptions):
    container: Literal["wav", "raw", "mp3"] = Field("wav", description="output container")
    encoding: Literal["pcm_s16le", "pcm_f32le"] = Field("pcm_s16le", description="raw/wav sample encoding")
    sample_rate: int = Field(24000, description="8000, 16000, 22050, 24000, 44100 or 48000 Hz")
    bit_rate: int = Field(128000, gt=0, description="mp3 bit rate")
    speed: float | None = Field(None, ge=0.6, le=1.5, description="generation_config.speed (sonic-3)")
    volume: float | None = Field(None, ge=0.5, le=2.0, description="generation_config.volume (sonic-3)")
    emotion: str | None = Field(None, description="generation_config.emotion (sonic-3, beta)")

    @model_validator(mode="after")
    def _known_rate(self) -> CartesiaOptions:
        if self.sample_rate not in SAMPLE_RATES:
            raise ValueError(f"sample_rate must be one of {', '.join(map(str, SAMPLE_RATES))}")
        return self


class CartesiaTTS(CloudTTS):
    """Cartesia `/tts/bytes`. Options: model (default sonic-3), container, encoding, sample_rate, bit_rate, speed,
    volume, emotion, base_url, timeout_s."""

    name: ClassVar[str] = "cartesia"
    key_variable: ClassVar[str | None] = "CARTESIA_API_KEY"
    default_base_url: ClassVar[str] = "https://api.cartesia.ai"
    default_model: ClassVar[str] = "sonic-3"
    prices: ClassVar[dict[str, float]] = {"*": 50.0}
    Options: ClassVar[type[CloudOptions]] = CartesiaOptions
    languages: ClassVar[Languages] = PER_VOICE  # per model
    version: ClassVar[str] = API_VERSION

    options: CartesiaOptions

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key.get_secret_value()}", "Cartesia-Version": API_VERSION}

    @property
    def sonic3(self) -> bool:
        return str(self.model).startswith("sonic-3")

    # -- the call -------------------------------------------------------------------------------------------------
    def output_format(self) -> dict[str, Any]:
        o = self.options
        if o.container == "mp3":
            return {"container": "mp3", "sample_rate": o.sample_rate, "bit_rate": o.bit_rate}
        return {"container": o.container, "encoding": o.encoding, "sample_rate": o.sample_rate}

    def request_body(self, text: str, language: str, voice: str) -> dict[str, Any]:
        """The JSON body of one call, as the API reference documents it."""
        o = self.options
        body: dict[str, Any] = {
            "model_id": self.model,
            "transcript": text,
            "voice": {"mode": "id", "id": voice},
            "output_format": self.output_format(),
        }
        if (code := self.language_code(language)) is not None:
            body["language"] = code
        config = {k: v for k, v in (("speed", o.speed), ("volume", o.volume), ("emotion", o.emotion)) if v is not None}
        if config and self.sonic3:
            body["generation_config"] = config
        return body

    def _synthesize(self, text: str, language: str, voice: str, instruction: str | None) -> Audio:
        data, _ = self._post("/tts/bytes", json=self.request_body(text, language, voice))
        o = self.options
        if o.container == "raw" and o.encoding == "pcm_f32le":
            usable = len(data) - len(data) % 4
            samples = np.frombuffer(data[:usable], dtype="<f4").astype(np.float32)
            return Audio(samples=samples, sample_rate_hz=o.sample_rate)
        return decode_audio(
            data, "pcm" if o.container == "raw" else o.container, sample_rate_hz=o.sample_rate, spec=self.spec
        )

    # -- language, voices, errors, metadata -----------------------------------------------------------------------
    def language_code(self, language: str) -> str | None:
        """Cartesia's code for `language` with this model ('en-US' -> 'en'), or None when it has none."""
        from ttseval.core.languages import base_language

        wanted = base_language(language)
        for code in SONIC3_LANGUAGES if self.sonic3 else SONIC_LANGUAGES:
            if base_language(code) == wanted:
                return code
        return None

    def supports_language(self, language: str) -> bool:
        return self.language_code(language) is not None

    def voices(self) -> list[dict[str, Any]]:
        """Every voice `GET /voices` pages through: id is what the spec takes."""
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 100}
        while True:
            data = self._get_json("/voices", params=params)
            page = data.get("data", []) if isinstance(data, dict) else data  # versions before 2024-11-13: a list
            found += [
                {
                    "id": v["id"],
                    "name": v.get("name"),
                    "language": v.get("language"),
                    "description": v.get("description"),
                }
                for v in page
            ]
            if not (isinstance(data, dict) and data.get("has_more") and page):
                return found
            params = {"limit": 100, "starting_after": page[-1]["id"]}

    def http_error(self, status: int, message: str, headers: Any) -> ProviderError:
        """An unknown voice is final and says where the voices are listed; quota (402) and the rest follow the
        base table."""
        lowered = message.lower()
        if status in (400, 404, 422) and "voice" in lowered and "not found" in lowered:
            return PermanentProviderError(
                self.scrub(f"{self.name} HTTP {status}: {message} (`ttseval voices {self.name}` lists them)")
            )
        return super().http_error(status, message, headers)

    def metadata(self) -> dict[str, Any]:
        return super().metadata() | {"api_version": API_VERSION}
