"""A fake Hume Octave TTS API on loopback (tests/support/fake_tts.py's FakeTTSServer), speaking the wire format of
dev.hume.ai/voice/reference/text-to-speech-tts/synthesize-file and .../voices/list:

    POST /v0/tts/file     header X-Hume-Api-Key; JSON {utterances: [{text, description?, voice?: {id} | {name,
                          provider?}, speed?, trailing_silence?}], format?: {type: wav|mp3|pcm}, context?,
                          num_generations?, split_utterances?, strip_headers?, version?, instant_mode?}
                          -> the audio file (pcm: 16-bit mono at 48 kHz)
    GET  /v0/tts/voices?provider=HUME_AI|CUSTOM_VOICE&page_number&page_size
                          -> {page_number, page_size, total_pages, voices_page: [{id, name, provider}]}

Unknown fields, a missing or empty `utterances`, a text over 5,000 characters, or an unknown voice are refused
as Hume does: FastAPI's 422 `{"detail": [...]}` for the shape, 400 `{"error", "message", "code"}` otherwise.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.support.fake_http import parse_json_object
from tests.support.fake_tts import FakeTTSServer, TTSReply, TTSRequest

BODY_FIELDS = {
    "utterances",
    "context",
    "format",
    "num_generations",
    "split_utterances",
    "strip_headers",
    "version",
    "instant_mode",
    "include_timestamp_types",
}
UTTERANCE_FIELDS = {"text", "description", "voice", "speed", "trailing_silence"}
DEFAULT_VOICES = ("Ava Song", "Male English Actor", "Colton Rivers", "Vince Douglas")


def voice_id(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"hume-voice:{name}"))


class FakeHume(FakeTTSServer):
    name = "fake-hume"

    def __init__(self, *, voices: tuple[str, ...] | list[str] = DEFAULT_VOICES, **kw: Any) -> None:
        super().__init__(**kw)
        self.voices = list(voices)

    def _authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("x-hume-api-key") == self.api_key

    def _error_body(self, status: int, message: str) -> bytes:
        if status == 422:
            return json.dumps({"detail": [{"loc": ["body"], "msg": message, "type": "value_error"}]}).encode()
        return json.dumps({"error": "fake", "message": message, "code": f"E{status}"}).encode()

    def _marker_text(self, request: TTSRequest) -> str:
        descriptions = [u.get("description") or "" for u in (request.body or {}).get("utterances", [])]
        return "\n".join([request.text, *descriptions])

    def _parse(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], raw: bytes
    ) -> TTSRequest | TTSReply:
        if method == "GET" and path == "/v0/tts/voices":
            return self._voice_page(query)
        if method != "POST" or path != "/v0/tts/file":
            return TTSReply.error(404, f"Not Found ({method} {path})")
        body = parse_json_object(raw)
        if body is None:
            return TTSReply.error(422, "body is not a JSON object")
        unknown = set(body) - BODY_FIELDS
        utterances = body.get("utterances")
        if unknown or not isinstance(utterances, list) or not utterances:
            return TTSReply.error(422, f"unknown fields {sorted(unknown)} or no utterances")
        for u in utterances:
            if not isinstance(u, dict) or set(u) - UTTERANCE_FIELDS or not isinstance(u.get("text"), str):
                return TTSReply.error(422, f"bad utterance {u!r}")
            if len(u["text"]) > 5000:
                return TTSReply.error(400, "utterance text is longer than 5000 characters")
            voice = u.get("voice")
            if voice is not None:
                known = {voice_id(v) for v in self.voices} if "id" in voice else set(self.voices)
                key = voice.get("id", voice.get("name"))
                if (
                    set(voice) - {"id", "name", "provider"}
                    or key not in known
                    or voice.get("provider", "CUSTOM_VOICE") not in ("HUME_AI", "CUSTOM_VOICE")
                ):
                    return TTSReply.error(400, f"Voice not found: {voice!r}")
        fmt = (body.get("format") or {"type": "mp3"}).get("type")
        if fmt not in ("wav", "mp3", "pcm"):
            return TTSReply.error(422, f"unknown format {fmt!r}")
        text = "".join(u["text"] for u in utterances)
        return TTSRequest(method, path, query, headers, body, raw, text=text, fmt=fmt, sample_rate_hz=48000)

    def _voice_page(self, query: dict[str, list[str]]) -> TTSReply:
        provider = query.get("provider", [None])[0]
        if provider not in ("HUME_AI", "CUSTOM_VOICE"):
            return TTSReply.error(422, "provider is required: HUME_AI or CUSTOM_VOICE")
        page = int(query.get("page_number", ["0"])[0])
        size = int(query.get("page_size", ["10"])[0])
        names = self.voices if provider == "HUME_AI" else []
        chunk = names[page * size : (page + 1) * size]
        body = {
            "page_number": page,
            "page_size": size,
            "total_pages": max(1, -(-len(names) // size)),
            "voices_page": [{"id": voice_id(n), "name": n, "provider": provider} for n in chunk],
        }
        return TTSReply(body=json.dumps(body).encode(), content_type="application/json")
