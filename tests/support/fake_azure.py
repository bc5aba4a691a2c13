"""A fake Azure AI Speech text-to-speech REST API on loopback (tests/support/fake_tts.py's FakeTTSServer), speaking the
wire format of learn.microsoft.com/azure/ai-services/speech-service/rest-text-to-speech:

    POST /cognitiveservices/v1        SSML body; headers Ocp-Apim-Subscription-Key, Content-Type
                                      application/ssml+xml, X-Microsoft-OutputFormat, User-Agent -> the audio file
    GET  /cognitiveservices/voices/list  -> [{"Name", "DisplayName", "ShortName", "Gender", "Locale", ...}]

A request missing a required header, with a Content-Type other than SSML (415), an unknown output format, SSML
that does not parse or lacks <speak version xml:lang><voice name>, or a voice not in `voices`, is refused with
400 as Azure does. Audio: riff-* is a WAV, raw-* 16-bit PCM, audio-*-mp3 an mp3, at the rate the format names.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

from tests.support.fake_tts import FakeTTSServer, TTSReply, TTSRequest

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
FORMAT_RE = re.compile(r"^(riff|raw)-(\d+)(khz|hz)-16bit-mono-pcm$|^audio-(\d+)khz-\d+kbitrate-mono-mp3$")
DEFAULT_VOICES = ("ps-AF-GulNawazNeural", "ps-AF-LatifaNeural", "en-US-JennyNeural", "en-US-AvaMultilingualNeural")


def voice_entry(short_name: str) -> dict[str, Any]:
    locale = "-".join(short_name.split("-")[:-1])
    display = short_name.split("-")[-1].removesuffix("Neural")
    return {
        "Name": f"Microsoft Server Speech Text to Speech Voice ({locale}, {short_name.split('-')[-1]})",
        "DisplayName": display,
        "LocalName": display,
        "ShortName": short_name,
        "Gender": "Female",
        "Locale": locale,
        "LocaleName": locale,
        "SampleRateHertz": "24000",
        "VoiceType": "Neural",
        "Status": "GA",
        "WordsPerMinute": "150",
    }


class FakeAzureSpeech(FakeTTSServer):
    name = "fake-azure-speech"

    def __init__(self, *, voices: tuple[str, ...] | list[str] = DEFAULT_VOICES, **kw: Any) -> None:
        super().__init__(**kw)
        self.voices = list(voices)

    def _authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("ocp-apim-subscription-key") == self.api_key

    def _error_body(self, status: int, message: str) -> bytes:
        return json.dumps({"error": {"code": str(status), "message": message}}).encode()

    def _parse(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], raw: bytes
    ) -> TTSRequest | TTSReply:
        if method == "GET" and path == "/cognitiveservices/voices/list":
            return TTSReply(
                body=json.dumps([voice_entry(v) for v in self.voices]).encode(), content_type="application/json"
            )
        if method != "POST" or path != "/cognitiveservices/v1":
            return TTSReply.error(404, f"Resource not found ({method} {path})")
        if headers.get("content-type", "").split(";")[0].strip() != "application/ssml+xml":
            return TTSReply.error(415, "Content-Type must be application/ssml+xml")
        fmt_header = headers.get("x-microsoft-outputformat", "")
        match = FORMAT_RE.match(fmt_header)
        if not match:
            return TTSReply.error(400, f"unsupported X-Microsoft-OutputFormat {fmt_header!r}")
        if not headers.get("user-agent") or len(headers["user-agent"]) >= 255:
            return TTSReply.error(400, "User-Agent is required (under 255 characters)")
        try:
            root = ET.fromstring(raw.decode("utf-8"))
        except (ET.ParseError, UnicodeDecodeError) as e:
            return TTSReply.error(400, f"SSML parsing error: {e}")
        voices = list(root)
        if (
            root.tag != "speak"
            or root.get("version") != "1.0"
            or not root.get(XML_LANG)
            or len(voices) != 1
            or voices[0].tag != "voice"
            or not voices[0].get("name")
        ):
            return TTSReply.error(400, "SSML must be <speak version='1.0' xml:lang=...><voice name=...>")
        voice = voices[0].get("name")
        if voice not in self.voices:
            return TTSReply.error(400, f"Unsupported voice {voice}.")
        if match[1]:
            rate = int(match[2]) * (1000 if match[3] == "khz" else 1)
            fmt = "wav" if match[1] == "riff" else "pcm"
        else:
            rate, fmt = int(match[4]) * 1000, "mp3"
        text = "".join(voices[0].itertext())
        return TTSRequest(
            method,
            path,
            query,
            headers,
            {"ssml": raw.decode("utf-8"), "voice": voice, "lang": root.get(XML_LANG)},
            raw,
            text=text,
            fmt=fmt,
            sample_rate_hz=rate,
        )
