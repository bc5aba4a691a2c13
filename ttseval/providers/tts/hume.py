"""Hume Octave text to speech (`POST https://api.hume.ai/v0/tts/file`), in plain HTTP through the CloudTTS base.

`/v0/tts/file` answers the audio file itself, which is the simplest of Hume's documented synthesis endpoints;
`/v0/tts` answers JSON with base64 `generations`, and the `/v0/tts/stream/*` endpoints stream chunks. Plain HTTP,
not the `hume` SDK: one documented POST, and the stage owns retries.

Spec: `hume:<voice>[:format=wav|mp3|pcm][:voice_provider=HUME_AI|CUSTOM_VOICE][:octave_version=1|2]`, e.g.
`hume:Ava Song` or `hume:9e068547-5ba4-4c8e-8e03-69282a008f04`. The voice is a Voice Library name (provider
HUME_AI, the default) or a custom voice's name (voice_provider=CUSTOM_VOICE), or a voice id (a UUID, sent as
`{"id": ...}`). An item's instruction becomes the utterance's `description`: with a voice given, Hume reads it as
acting instructions. The key comes from HUME_API_KEY.

Wire format relied on (checked 2026-11):
- API reference "Text-to-Speech (File)" (dev.hume.ai/voice/reference/text-to-speech-tts/synthesize-file):
  `POST /v0/tts/file`, header `X-Hume-Api-Key`; JSON body `utterances` (required: a list of {text, description,
  voice, speed, trailing_silence}), `context`, `format` ({"type": "wav"|"mp3"|"pcm"}), `num_generations`,
  `split_utterances`, `strip_headers`, `version` (Octave "1" or "2"), `instant_mode` (streaming endpoints only);
  the response is the audio file in the requested format. The same fields in the official SDK's generated types
  (HumeAI/hume-python-sdk, src/hume/tts/types/posted_tts.py, posted_utterance.py, format_pcm.py).
- "Voice Guide" (dev.hume.ai/voice/docs/text-to-speech-tts/voice): a voice is `{"id": ...}` or `{"name": ...,
  "provider": "HUME_AI"|"CUSTOM_VOICE"}` (provider defaults to CUSTOM_VOICE; Voice Library voices need HUME_AI).
- "List voices" (dev.hume.ai/voice/reference/voices/list): `GET /v0/tts/voices?provider=HUME_AI|CUSTOM_VOICE
  &page_number=0&page_size=1..100` -> {page_number, page_size, total_pages, voices_page: [{id, name, ...}]}.
- Errors: the SDK's ErrorResponse `{"error", "message", "code"}`; request validation is FastAPI's 422
  `{"detail": [{"loc", "msg", "type"}]}`.
- PCM is 16-bit little-endian mono at 48 kHz (Hume's own rate, as the Pipecat and LiveKit integrations state);
  `pcm_rate_hz` changes it. WAV and mp3 carry their rate.
- Hume has announced the end of its TTS API (the reference's banner: access ends 2026-11-13); after that date
  every call fails with the vendor's error, as failed rows.

Cost: Hume bills TTS by characters of `text` under a monthly subscription with included characters and
per-character overage (dev.hume.ai/docs/resources/billing). USD 100 per million characters here is an estimate
of a Creator-plan rate, not read off Hume's pricing page in this session; set `tts_prices` for your plan. The
description (instruction) is not counted.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, ProviderError
from ttseval.providers.tts.cloud import CloudOptions, CloudTTS, decode_audio

API_VERSION = "v0"
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class HumeOptions(CloudOptions):
    format: Literal["wav", "mp3", "pcm"] = Field("wav", description="format.type of the answer")
    voice_provider: Literal["HUME_AI", "CUSTOM_VOICE"] = Field(
        "HUME_AI", description="where a voice given by name lives: Hume's Voice Library or the account's voices"
    )
    octave_version: Literal["1", "2"] | None = Field(None, description="Octave model version; None = Hume's choice")
    pcm_rate_hz: int = Field(48000, gt=0, description="sample rate of `pcm` answers (Hume's is 48 kHz)")


class HumeTTS(CloudTTS):
    """Hume Octave `/v0/tts/file`. Options: format, voice_provider, octave_version, pcm_rate_hz, base_url,
    timeout_s."""

    name: ClassVar[str] = "hume"
    key_variable: ClassVar[str | None] = "HUME_API_KEY"
    default_base_url: ClassVar[str] = "https://api.hume.ai"
    default_model: ClassVar[str] = "octave"
    prices: ClassVar[dict[str, float]] = {"*": 100.0}
    Options: ClassVar[type[CloudOptions]] = HumeOptions
    accepts_instruction: ClassVar[bool] = True  # the utterance's description: acting instructions
    version: ClassVar[str] = API_VERSION

    options: HumeOptions

    def __init__(self, voice: str | None = None, **kwargs: Any) -> None:
        super().__init__(voice, **kwargs)
        if self.options.octave_version:
            self.model = f"octave-{self.options.octave_version}"

    def _headers(self) -> dict[str, str]:
        return {"X-Hume-Api-Key": self._api_key.get_secret_value()}

    # -- the call -------------------------------------------------------------------------------------------------
    def voice_field(self, voice: str) -> dict[str, str]:
        """`{"id": ...}` for a voice id, else `{"name": ..., "provider": ...}`."""
        if _UUID.match(voice):
            return {"id": voice}
        return {"name": voice, "provider": self.options.voice_provider}

    def request_body(self, text: str, voice: str | None, instruction: str | None) -> dict[str, Any]:
        """The JSON body of one call, as the API reference documents it."""
        utterance: dict[str, Any] = {"text": text}
        if instruction and instruction.strip():
            utterance["description"] = instruction.strip()
        if voice:
            utterance["voice"] = self.voice_field(voice)
        body: dict[str, Any] = {"utterances": [utterance], "format": {"type": self.options.format}}
        if self.options.octave_version:
            body["version"] = self.options.octave_version
        return body

    def _synthesize(self, text: str, language: str, voice: str, instruction: str | None) -> Audio:
        data, _ = self._post("/v0/tts/file", json=self.request_body(text, voice, instruction))
        fmt = self.options.format
        if fmt == "pcm" and data[:4] == b"RIFF":  # a WAV despite asking for pcm: read it as the WAV it is
            fmt = "wav"
        return decode_audio(data, fmt, sample_rate_hz=self.options.pcm_rate_hz, spec=self.spec)

    # -- voices, errors, metadata ---------------------------------------------------------------------------------
    def voices(self) -> list[dict[str, Any]]:
        """The Voice Library's voices (or the account's, voice_provider=CUSTOM_VOICE), every page: `id` is the name
        the spec takes, `voice_id` Hume's id (which the spec takes too)."""
        found: list[dict[str, Any]] = []
        page = 0
        while True:
            data = self._get_json(
                "/v0/tts/voices",
                params={"provider": self.options.voice_provider, "page_number": page, "page_size": 100},
            )
            found += [
                {
                    "id": v["name"],
                    "name": v["name"],
                    "voice_id": v.get("id"),
                    "provider": v.get("provider", self.options.voice_provider),
                }
                for v in data.get("voices_page", [])
            ]
            page += 1
            if page >= int(data.get("total_pages") or 1) or not data.get("voices_page"):
                return found

    def check_voice(self) -> None:
        """A voice id (UUID) is looked up among the listed ids, a name as the base class does."""
        if self.voice is not None and _UUID.match(self.voice):
            if self.voice not in {v.get("voice_id") for v in self.voices()}:
                raise ValueError(
                    f"{self.name} has no voice id {self.voice!r} among the {self.options.voice_provider}"
                    f" voices (`ttseval voices {self.name}` lists them)"
                )
            return
        super().check_voice()

    def http_error(self, status: int, message: str, headers: Any) -> ProviderError:
        """Hume's usage-policy refusals are 400s like any bad input (final); named as such in the row."""
        lowered = message.lower()
        if (
            400 <= status < 500
            and status != 429
            and any(w in lowered for w in ("usage policy", "content policy", "moderation", "violat"))
        ):
            return PermanentProviderError(
                self.scrub(f"{self.name} HTTP {status}: {message} (refused by the vendor's usage policy)")
            )
        return super().http_error(status, message, headers)

    def metadata(self) -> dict[str, Any]:
        return super().metadata() | {"api_version": API_VERSION}
