"""Azure AI Speech text to speech over its REST API
(`POST https://{region}.tts.speech.microsoft.com/cognitiveservices/v1`), in plain HTTP through the CloudTTS base.

Plain HTTP, not the Speech SDK (`azure-cognitiveservices-speech`): the SDK is a native binary that speaks its own
websocket protocol rather than this REST API, brings its own connection and retry handling, and has no wheel for
every platform; the REST call is one documented POST. The synthesis stage owns the retries.

Spec: `azure:<voice>:region=<region>[:output_format=riff-24khz-16bit-mono-pcm]`, e.g.
`azure:ps-AF-GulNawazNeural:region=westeurope`. The voice is the voice's ShortName (`ttseval voices azure` lists
the region's voices); its locale (`ps-AF`) is the SSML's `xml:lang` and says which language the voice speaks
(`supports_language`; a *Multilingual* voice is tried on every language). The key comes from AZURE_SPEECH_KEY.
`base_url` replaces `https://{region}.tts.speech.microsoft.com` (a private endpoint, a test server).

Wire format relied on (checked 2026-11):
- "Text to speech REST API" (learn.microsoft.com/azure/ai-services/speech-service/rest-text-to-speech; the
  MicrosoftDocs/azure-ai-docs source articles/ai-services/speech-service/rest-text-to-speech.md): `POST
  /cognitiveservices/v1` on `{region}.tts.speech.microsoft.com`; headers `Ocp-Apim-Subscription-Key` (or
  `Authorization: Bearer`), `Content-Type: application/ssml+xml`, `X-Microsoft-OutputFormat` (riff-24khz-16bit-
  mono-pcm, raw-24khz-16bit-mono-pcm, audio-24khz-48kbitrate-mono-mp3, ... listed under "Audio outputs"),
  `User-Agent` (the application name, under 255 characters), all required; the body is SSML as in the page's
  sample `<speak version='1.0' xml:lang='en-US'><voice ... name='en-US-ChristopherNeural'>...</voice></speak>`;
  200 answers the audio file; 400 bad request, 401 bad key or wrong region, 415 wrong Content-Type, 429 quota or
  rate, 502/503 server side. Audio longer than 10 minutes is cut to 10 minutes.
- Same page, "Get a list of voices": `GET /cognitiveservices/voices/list` -> a JSON array of {Name, DisplayName,
  LocalName, ShortName, Gender, Locale, LocaleName, StyleList, SecondaryLocaleList, SampleRateHertz, VoiceType,
  Status, WordsPerMinute}.
- Error bodies are often empty; the API gateway's are `{"error": {"code", "message"}}` (a free-tier resource out
  of its monthly volume answers 403/429 "Out of call volume quota", deferred to the next run here).

Cost: prebuilt neural voices at USD 15 per million characters (Azure Speech pricing, pay as you go, "Neural");
the characters billed are those of the text, not of the SSML markup, and the text-to-speech overview's pricing
note counts each CJK ideograph (Chinese, Japanese kanji, Korean hanja) as two characters; `billable_chars` does
the same. HD and custom neural voices cost more: the setting `tts_prices` overrides the price.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar
from xml.sax.saxutils import escape

from pydantic import Field, field_validator, model_validator

from ttseval.core.audio import Audio
from ttseval.core.protocols import PER_VOICE, Languages
from ttseval.providers.tts.cloud import CloudOptions, CloudTTS, decode_audio

API_VERSION = "cognitiveservices/v1"
USER_AGENT = "ttseval"
OUTPUT_FORMAT = re.compile(
    r"^(?P<kind>riff|raw)-(?P<rate>8khz|16khz|22050hz|24khz|44100hz|48khz)-16bit-mono-pcm$|"
    r"^audio-(?P<mp3rate>16khz|24khz|48khz)-\d+kbitrate-mono-mp3$"
)
"""The output formats decoded here: RIFF (WAV) and raw 16-bit PCM at each documented rate, and mp3."""
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")


def _rate_hz(token: str) -> int:
    return int(token[:-3]) * 1000 if token.endswith("khz") else int(token[:-2])


class AzureOptions(CloudOptions):
    region: str | None = Field(
        None, description="the Speech resource's region (westeurope, eastus, ...); required unless base_url is given"
    )
    output_format: str = Field(
        "riff-24khz-16bit-mono-pcm",
        description="X-Microsoft-OutputFormat: riff-/raw-<rate>-16bit-mono-pcm or audio-<rate>-<n>kbitrate-mono-mp3",
    )

    @field_validator("region")
    @classmethod
    def _region_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z0-9]+", value):
            raise ValueError("a region is a lower-case name such as westeurope or eastus")
        return value

    @field_validator("output_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if not OUTPUT_FORMAT.match(value):
            raise ValueError(
                "expected riff-24khz-16bit-mono-pcm, raw-24khz-16bit-mono-pcm, "
                "audio-24khz-48kbitrate-mono-mp3 or another riff/raw 16-bit or mp3 format"
            )
        return value

    @model_validator(mode="after")
    def _an_endpoint(self) -> AzureOptions:
        if not self.region and not self.base_url:
            raise ValueError("azure needs region=<the Speech resource's region> (or base_url)")
        return self


class AzureTTS(CloudTTS):
    """Azure AI Speech `/cognitiveservices/v1` with prebuilt neural voices. Options: region, output_format,
    base_url, timeout_s."""

    name: ClassVar[str] = "azure"
    key_variable: ClassVar[str | None] = "AZURE_SPEECH_KEY"
    default_model: ClassVar[str] = "neural"  # Azure has no model id: the voice is the model
    prices: ClassVar[dict[str, float]] = {"*": 15.0}
    Options: ClassVar[type[CloudOptions]] = AzureOptions
    languages: ClassVar[Languages] = PER_VOICE  # the voice's locale
    version: ClassVar[str] = API_VERSION

    options: AzureOptions

    @property
    def base_url(self) -> str:
        return self.options.base_url or self.vendor_url

    @property
    def vendor_url(self) -> str:
        return f"https://{self.options.region}.tts.speech.microsoft.com" if self.options.region else ""

    def _headers(self) -> dict[str, str]:
        return {"Ocp-Apim-Subscription-Key": self._api_key.get_secret_value(), "User-Agent": USER_AGENT}

    # -- the call -------------------------------------------------------------------------------------------------
    @staticmethod
    def voice_locale(voice: str) -> str:
        """'ps-AF-GulNawazNeural' -> 'ps-AF' (ShortNames are <language>-<REGION>[-<script>]-<Name>)."""
        parts = voice.split("-")
        return "-".join(parts[:-1]) if len(parts) > 2 else voice

    def ssml(self, text: str, voice: str) -> str:
        """The request body: the text, XML-escaped, in the voice's <voice> element, in the voice's locale."""
        attr = {"'": "&apos;", '"': "&quot;"}
        return (
            f"<speak version='1.0' xml:lang='{escape(self.voice_locale(voice), attr)}'>"
            f"<voice name='{escape(voice, attr)}'>{escape(text)}</voice></speak>"
        )

    def _synthesize(self, text: str, language: str, voice: str, instruction: str | None) -> Audio:
        data, _ = self._post(
            "/cognitiveservices/v1",
            content=self.ssml(text, voice).encode("utf-8"),
            headers={"Content-Type": "application/ssml+xml", "X-Microsoft-OutputFormat": self.options.output_format},
        )
        return self.decode(data)

    def decode(self, data: bytes) -> Audio:
        """The answer at its own rate: RIFF and mp3 carry theirs, raw PCM is at the rate its format names."""
        match = OUTPUT_FORMAT.match(self.options.output_format)
        assert match is not None  # validated
        if match["mp3rate"]:
            return decode_audio(data, "mp3", sample_rate_hz=_rate_hz(match["mp3rate"]), spec=self.spec)
        rate = _rate_hz(match["rate"])
        fmt = "pcm" if match["kind"] == "raw" and data[:4] != b"RIFF" else "wav"
        return decode_audio(data, fmt, sample_rate_hz=rate, spec=self.spec)

    # -- language, voices, cost, metadata -------------------------------------------------------------------------
    def supports_language(self, language: str) -> bool:
        from ttseval.core.languages import base_language

        if self.voice is None or "multilingual" in self.voice.lower():
            return True
        return base_language(self.voice_locale(self.voice)) == base_language(language)

    def voices(self) -> list[dict[str, Any]]:
        """The region's voices (`GET /cognitiveservices/voices/list`): id is the ShortName the spec takes."""
        data = self._get_json("/cognitiveservices/voices/list")
        return [
            {
                "id": v["ShortName"],
                "name": v.get("DisplayName") or v["ShortName"],
                "locale": v.get("Locale"),
                "gender": v.get("Gender"),
                "voice_type": v.get("VoiceType"),
                "secondary_locales": v.get("SecondaryLocaleList") or [],
                "styles": v.get("StyleList") or [],
            }
            for v in data
        ]

    def billable_chars(self, text: str, instruction: str | None) -> int:
        """The text's characters (SSML markup is not billed), each CJK ideograph counted twice."""
        return len(text) + len(_CJK.findall(text))

    def metadata(self) -> dict[str, Any]:
        return super().metadata() | {"api_version": API_VERSION, "locale": self.voice_locale(self.voice or "")}
