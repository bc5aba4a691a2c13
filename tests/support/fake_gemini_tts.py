"""A fake Gemini API on loopback for the TTS models (tests/support/fake_tts.py's FakeTTSServer), speaking the REST wire
format google-genai sends and reads (ai.google.dev/gemini-api/docs/speech-generation, api/generate-content):

    POST /{v1,v1beta}/models/{model}:generateContent   header x-goog-api-key; JSON
        {"contents": [{"role": "user", "parts": [{"text": ...}]}],
         "generationConfig": {"responseModalities": ["AUDIO"],
                              "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": ...}}}}}
        (either JSON spelling of the inner names: google-genai sends voice_config/prebuilt_voice_config/voice_name)
    -> {"candidates": [{"content": {"role": "model", "parts": [{"inlineData": {"mimeType":
        "audio/L16;codec=pcm;rate=24000", "data": <base64 PCM>}}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {...}, "modelVersion": ...}

A body without the AUDIO modality, a voice that is not prebuilt, or anything else in the request is refused with
Google's 400 INVALID_ARGUMENT `{"error": {"code", "message", "status"}}`. `refusal(reason)` answers a 200 whose
candidate has no audio and a finishReason (SAFETY, PROHIBITED_CONTENT, OTHER, ...); `blocked(reason)` one with no
candidate and promptFeedback.blockReason; `google_error(...)` a 429 with RetryInfo / QuotaFailure details.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from tests.support.fake_http import parse_json_object
from tests.support.fake_tts import FakeTTSServer, TTSReply, TTSRequest, speech_for

PATH_RE = re.compile(r"^/(?P<version>v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):generateContent$")
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
PREBUILT = {
    "Zephyr",
    "Puck",
    "Charon",
    "Kore",
    "Fenrir",
    "Leda",
    "Orus",
    "Aoede",
    "Callirrhoe",
    "Autonoe",
    "Enceladus",
    "Iapetus",
    "Umbriel",
    "Algieba",
    "Despina",
    "Erinome",
    "Algenib",
    "Rasalgethi",
    "Laomedeia",
    "Achernar",
    "Alnilam",
    "Schedar",
    "Gacrux",
    "Pulcherrima",
    "Achird",
    "Zubenelgenubi",
    "Vindemiatrix",
    "Sadachbia",
    "Sadaltager",
    "Sulafat",
}
MIME = "audio/L16;codec=pcm;rate=24000"


def _field(obj: Any, camel: str) -> Any:
    """A field by either JSON spelling, as Google's proto-JSON parser reads it (google-genai sends the inner
    speechConfig fields snake_case: voice_config, prebuilt_voice_config, voice_name)."""
    if not isinstance(obj, dict):
        return None
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)
    return obj.get(camel, obj.get(snake))


def google_error(
    status: int, message: str, *, retry_delay: str | None = None, quota_id: str | None = None, **kw: Any
) -> TTSReply:
    """Google's error body, with RetryInfo and QuotaFailure details when asked."""
    details: list[dict[str, Any]] = []
    if quota_id is not None:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {"quotaMetric": "generativelanguage.googleapis.com/generate_requests", "quotaId": quota_id}
                ],
            }
        )
    if retry_delay is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay})
    error = {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN"), "details": details}
    return TTSReply(status=status, body=json.dumps({"error": error}).encode(), **kw)


def refusal(reason: str = "PROHIBITED_CONTENT") -> TTSReply:
    candidate = {"content": {"role": "model"}, "finishReason": reason, "index": 0}
    return TTSReply(body=json.dumps({"candidates": [candidate], "modelVersion": "fake"}).encode())


def blocked(reason: str = "SAFETY") -> TTSReply:
    return TTSReply(body=json.dumps({"promptFeedback": {"blockReason": reason}, "modelVersion": "fake"}).encode())


class FakeGeminiTTS(FakeTTSServer):
    name = "fake-gemini-tts"

    def _authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("x-goog-api-key") == self.api_key

    def _error_body(self, status: int, message: str) -> bytes:
        return json.dumps(
            {"error": {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN")}}
        ).encode()

    def _content_type_of(self, fmt: str) -> str:
        return "application/json"

    def _parse(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], raw: bytes
    ) -> TTSRequest | TTSReply:
        match = PATH_RE.match(path)
        if method != "POST" or match is None:
            return TTSReply.error(404, f"Not found: {method} {path}")
        body = parse_json_object(raw)
        if body is None:
            return TTSReply.error(400, "Invalid JSON payload received.")
        if set(body) - {"contents", "generationConfig"}:
            return TTSReply.error(400, f"unexpected fields {sorted(set(body) - {'contents', 'generationConfig'})}")
        contents = body.get("contents")
        if not isinstance(contents, list) or len(contents) != 1 or contents[0].get("role", "user") != "user":
            return TTSReply.error(400, "contents must be one user turn")
        parts = contents[0].get("parts") or []
        if len(parts) != 1 or set(parts[0]) != {"text"}:
            return TTSReply.error(400, "TTS models take one text part")
        config = body.get("generationConfig") or {}
        if config.get("responseModalities") != ["AUDIO"]:
            return TTSReply.error(400, "The requested combination of response modalities is not supported.")
        voice = _field(
            _field(_field(_field(config, "speechConfig"), "voiceConfig"), "prebuiltVoiceConfig"), "voiceName"
        )
        if set(config) - {"responseModalities", "speechConfig", "speech_config"} or voice not in PREBUILT:
            return TTSReply.error(400, f"Voice name {voice!r} is not supported.")
        return TTSRequest(
            method, path, query, headers, body, raw, text=parts[0]["text"], fmt="pcm", sample_rate_hz=24000
        )

    def _payload(self, reply: TTSReply, request: TTSRequest | None) -> bytes:
        if reply.status != 200 or reply.body is not None:
            return super()._payload(reply, request)
        pcm = reply.audio if reply.audio is not None else speech_for(request.text if request else "x", 24000, "pcm")
        candidate = {
            "content": {
                "role": "model",
                "parts": [{"inlineData": {"mimeType": MIME, "data": base64.b64encode(pcm).decode()}}],
            },
            "finishReason": "STOP",
            "index": 0,
        }
        usage = {"promptTokenCount": 10, "candidatesTokenCount": len(pcm) // 1920, "totalTokenCount": 10}
        return json.dumps({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "fake"}).encode()
