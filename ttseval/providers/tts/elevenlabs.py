"""ElevenLabs text to speech (`POST /v1/text-to-speech/{voice_id}`), in plain HTTP through the CloudTTS base.

Plain HTTP, not the `elevenlabs` SDK: the call is one documented POST, and the SDK would bring its own retry loop
and dependency tree (the synthesis stage owns retries here).

Spec: `elevenlabs:<voice_id>[:model=eleven_multilingual_v2][:output_format=pcm_24000][:stability=0.5]
[:similarity_boost=0.75][:style=0][:use_speaker_boost=true][:speed=1.0]`, e.g.
`elevenlabs:JBFqnCBsd6RMkjVDRZzb:model=eleven_flash_v2_5`. The voice is the voice id (`ttseval voices elevenlabs`
lists the account's voices with their names). The key comes from ELEVENLABS_API_KEY.

Wire format relied on (checked 2026-11):
- API reference "Create speech" (elevenlabs.io/docs/api-reference/text-to-speech/convert): path `voice_id`; query
  `output_format` (`codec_samplerate[_bitrate]`: mp3_44100_128, pcm_16000 ... pcm_48000, opus_48000_64, ...;
  44.1 kHz PCM needs the Pro tier), `enable_logging`, `optimize_streaming_latency`; JSON body `text`, `model_id`,
  `language_code` (ISO 639-1; enforced by the v2.5 Flash/Turbo models, refused by others), `voice_settings`
  {stability, similarity_boost, style, use_speaker_boost, speed (0.7-1.2)}, `seed`, `previous_text`,
  `next_text`, `previous_request_ids`, `next_request_ids`, `pronunciation_dictionary_locators`,
  `apply_text_normalization`, `apply_language_text_normalization`, `use_pvc_as_ivc`; header `xi-api-key`;
  the answer is the audio bytes.
- "Get voices" (`GET /v1/voices` -> {"voices": [{"voice_id", "name", "labels", ...}]}).
- Errors (elevenlabs.io/docs/eleven-api/resources/errors): `{"detail": {"type", "code", "message", "status",
  "request_id", "param"}}`; 429 with code rate_limit_exceeded / concurrent_limit_exceeded; an exhausted quota is
  a 401 whose `detail.status` is `quota_exceeded` (as reported in home-assistant/core#160414 and
  elevenlabs/elevenlabs-docs#301); request validation is FastAPI's 422 `{"detail": [{"loc", "msg", "type"}]}`.
- `wav_<rate>` output formats are newer than some listings of the enum; `pcm_<rate>` is the lossless default.

Cost: USD per million characters from the API price list (elevenlabs.io/pricing/api, as quoted 2026-06): Multilingual
v2 / v3 $0.10 per 1,000 characters, Flash / Turbo $0.05; plans bundle credits at other effective rates, so this is
an estimate (the setting `tts_prices` overrides it).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field, field_validator

from ttseval.core.audio import Audio
from ttseval.core.errors import DeferredProviderError, PermanentProviderError, ProviderError
from ttseval.core.protocols import PER_VOICE, Languages
from ttseval.providers.tts.cloud import CloudOptions, CloudTTS, decode_audio

API_VERSION = "v1"
OUTPUT_FORMAT = re.compile(
    r"^(mp3_(22050|24000|44100)_\d+|pcm_(8000|16000|22050|24000|32000|44100|48000)|"
    r"wav_(8000|16000|22050|24000|32000|44100|48000)|opus_48000_\d+)$"
)
"""The output formats decoded here: mp3, raw 16-bit PCM, WAV and Ogg Opus (u-law and A-law are left out)."""

_V2_LANGUAGES = frozenset(
    [
        "en",
        "ja",
        "zh",
        "de",
        "hi",
        "fr",
        "ko",
        "pt",
        "it",
        "es",
        "id",
        "nl",
        "tr",
        "fil",
        "pl",
        "sv",
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
        "ru",
    ]
)
MODEL_LANGUAGES: dict[str, frozenset[str] | None] = {
    "eleven_multilingual_v2": _V2_LANGUAGES,
    "eleven_flash_v2_5": _V2_LANGUAGES | {"hu", "no", "vi"},
    "eleven_turbo_v2_5": _V2_LANGUAGES | {"hu", "no", "vi"},
    "eleven_flash_v2": frozenset({"en"}),
    "eleven_turbo_v2": frozenset({"en"}),
    "eleven_monolingual_v1": frozenset({"en"}),
    "eleven_v3": None,  # 70+ languages: not enumerated here, every language is tried
}
"""Languages per model (ElevenLabs' models page, 2026-11), as ISO 639-1 codes; an unlisted model is not checked."""
LANGUAGE_CODE_MODELS = ("eleven_flash_v2_5", "eleven_turbo_v2_5")
"""Models documented to take `language_code` (language enforcement); the others detect the language and refuse
the field."""


class ElevenLabsOptions(CloudOptions):
    output_format: str = Field(
        "pcm_24000", description="codec_samplerate[_bitrate]: pcm_24000, mp3_44100_128, wav_24000, opus_48000_64 ..."
    )
    stability: float = Field(0.5, ge=0, le=1, description="voice_settings.stability")
    similarity_boost: float = Field(0.75, ge=0, le=1, description="voice_settings.similarity_boost")
    style: float = Field(0.0, ge=0, le=1, description="voice_settings.style (style exaggeration)")
    use_speaker_boost: bool = Field(True, description="voice_settings.use_speaker_boost")
    speed: float = Field(1.0, ge=0.7, le=1.2, description="voice_settings.speed (0.7-1.2)")
    seed: int | None = Field(None, ge=0, le=4294967295, description="best-effort deterministic sampling")

    @field_validator("output_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if not OUTPUT_FORMAT.match(value):
            raise ValueError("expected mp3_<rate>_<kbps>, pcm_<rate>, wav_<rate> or opus_48000_<kbps>")
        return value


class ElevenLabsTTS(CloudTTS):
    """ElevenLabs `/v1/text-to-speech/{voice_id}`. Options: model (default eleven_multilingual_v2), output_format,
    stability, similarity_boost, style, use_speaker_boost, speed, seed, base_url, timeout_s."""

    name: ClassVar[str] = "elevenlabs"
    key_variable: ClassVar[str | None] = "ELEVENLABS_API_KEY"
    default_base_url: ClassVar[str] = "https://api.elevenlabs.io"
    default_model: ClassVar[str] = "eleven_multilingual_v2"
    prices: ClassVar[dict[str, float]] = {
        "eleven_multilingual_v2": 100.0,
        "eleven_v3": 100.0,
        "eleven_flash_v2_5": 50.0,
        "eleven_turbo_v2_5": 50.0,
        "eleven_flash_v2": 50.0,
        "eleven_turbo_v2": 50.0,
        "*": 100.0,
    }
    Options: ClassVar[type[CloudOptions]] = ElevenLabsOptions
    languages: ClassVar[Languages] = PER_VOICE  # per model (MODEL_LANGUAGES)
    version: ClassVar[str] = API_VERSION

    options: ElevenLabsOptions

    def _headers(self) -> dict[str, str]:
        return {"xi-api-key": self._api_key.get_secret_value()}

    # -- the call -------------------------------------------------------------------------------------------------
    def request_body(self, text: str, language: str) -> dict[str, Any]:
        """The JSON body of one call, as the API reference documents it."""
        o = self.options
        body: dict[str, Any] = {
            "text": text,
            "model_id": self.model,
            "voice_settings": {
                "stability": o.stability,
                "similarity_boost": o.similarity_boost,
                "style": o.style,
                "use_speaker_boost": o.use_speaker_boost,
                "speed": o.speed,
            },
        }
        if self.model in LANGUAGE_CODE_MODELS:
            from ttseval.core.languages import base_language

            body["language_code"] = base_language(language)
        if o.seed is not None:
            body["seed"] = o.seed
        return body

    def _synthesize(self, text: str, language: str, voice: str, instruction: str | None) -> Audio:
        from urllib.parse import quote

        fmt = self.options.output_format
        data, _ = self._post(
            f"/v1/text-to-speech/{quote(voice, safe='')}",
            params={"output_format": fmt},
            json=self.request_body(text, language),
        )
        return self.decode(data)

    def decode(self, data: bytes) -> Audio:
        """The answer's audio at its own rate; raw PCM is 16-bit mono at the rate its format names (a body that
        is a WAV despite asking for pcm is read as the WAV it is, so a cut one is caught)."""
        codec, rate = self.options.output_format.split("_")[:2]
        if codec == "pcm" and data[:4] == b"RIFF":
            codec = "wav"
        return decode_audio(data, {"opus": "ogg"}.get(codec, codec), sample_rate_hz=int(rate), spec=self.spec)

    # -- language, voices, errors, metadata -----------------------------------------------------------------------
    def supports_language(self, language: str) -> bool:
        from ttseval.core.languages import base_language

        known = MODEL_LANGUAGES.get(self.model)
        return known is None or base_language(language) in {base_language(code) for code in known}

    def voices(self) -> list[dict[str, Any]]:
        """The account's voices (`GET /v1/voices`): id is the voice_id the spec takes."""
        data = self._get_json("/v1/voices")
        found = []
        for v in data.get("voices", []):
            labels = v.get("labels") or {}
            found.append(
                {
                    "id": v["voice_id"],
                    "name": v.get("name"),
                    "language": labels.get("language"),
                    "description": v.get("description") or ", ".join(map(str, labels.values())),
                    "category": v.get("category"),
                    "labels": labels,
                }
            )
        return found

    def check_voice(self) -> None:
        """As the base checks, and a voice given by its name is refused with its id (the path takes the id).

        Raises:
            ValueError: no voice, an unknown one (with the closest ids), or a name in place of the id.
        """
        super().check_voice()
        ids = {str(v["name"]): v["id"] for v in self.voices()}
        if self.voice in ids and self.voice != ids[self.voice]:
            raise ValueError(
                f"{self.name} takes the voice id, not its name: {self.voice!r} is "
                f"{ids[self.voice]!r} ({self.name}:{ids[self.voice]})"
            )

    def http_error(self, status: int, message: str, headers: Any) -> ProviderError:
        """ElevenLabs says what went wrong in `detail.status`/`detail.code` (vendor_message appends it): an
        exhausted quota arrives as a 401 `quota_exceeded`, an unknown voice as `voice_not_found`."""
        text = self.scrub(f"{self.name} HTTP {status}: {message}")
        lowered = message.lower()
        if "quota_exceeded" in lowered or "payment_required" in lowered:
            return DeferredProviderError(f"{text} (quota or credits used up: the next run asks again)")
        if "voice_not_found" in lowered:
            return PermanentProviderError(f"{text} (`ttseval voices {self.name}` lists the account's voices)")
        if (
            400 <= status < 500
            and status != 429
            and any(w in lowered for w in ("content policy", "terms of service", "moderation", "violat"))
        ):
            return PermanentProviderError(f"{text} (refused by the vendor's content policy)")
        return super().http_error(status, message, headers)

    def metadata(self) -> dict[str, Any]:
        return super().metadata() | {"api_version": API_VERSION}
