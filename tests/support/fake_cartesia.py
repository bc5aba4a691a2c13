"""A fake Cartesia API on loopback that checks requests field by field against the documented shape.

    POST /tts/bytes   headers Authorization: Bearer <key>, Cartesia-Version: <date>
                      JSON {model_id, transcript, voice{mode: "id", id}, output_format{...}, language?, ...}
    GET  /voices?limit=&starting_after=   {"data": [{"id", "name", "language", ...}], "has_more", "next_page"}

Errors use the structured body of Cartesia-Version 2026-03-01 (`{"error_code", "title", "message", "request_id"}`).
Audio comes back in the asked container/encoding/rate (raw pcm_f32le as float32, wav pcm_f32le as a float WAV).
`page_size` caps a voice page below `limit`, to exercise the paging.
"""

from __future__ import annotations

import io
import json
from typing import Any

import soundfile as sf

from tests.support.fake_http import parse_json_object
from tests.support.fake_tts import FakeTTSServer, TTSReply, TTSRequest, speech_for, tone

VERSIONS = {"2024-06-10", "2024-11-13", "2025-04-16", "2026-03-01"}
BODY_FIELDS = {
    "model_id",
    "transcript",
    "voice",
    "output_format",
    "language",
    "generation_config",
    "duration",
    "speed",
    "save",
    "pronunciation_dict_id",
}
RATES = {8000, 16000, 22050, 24000, 44100, 48000}
ENCODINGS = {"pcm_f32le", "pcm_s16le", "pcm_mulaw", "pcm_alaw"}
FORMAT_FIELDS = {
    "raw": {"container", "encoding", "sample_rate"},
    "wav": {"container", "encoding", "sample_rate"},
    "mp3": {"container", "sample_rate", "bit_rate"},
}
VOICES = [
    {"id": "694f9389-aac1-45b6-b726-9d9369183238", "name": "Sarah", "language": "en", "is_public": True},
    {"id": "a0e99841-438c-4a64-b679-ae501e7d6091", "name": "Barbershop Man", "language": "en", "is_public": True},
    {"id": "e07c00bc-4134-4eae-9ea4-1a55fb45746b", "name": "Brooke", "language": "en", "is_public": True},
]


def error_json(code: str | None, title: str, message: str) -> bytes:
    return json.dumps(
        {"error_code": code, "title": title, "message": message, "request_id": "550e8400-e29b-41d4-a716-446655440000"}
    ).encode()


class FakeCartesia(FakeTTSServer):
    name = "fake-cartesia"

    def __init__(self, *, voices: list[dict[str, Any]] | None = None, page_size: int = 100, **kw: Any) -> None:
        super().__init__(**kw)
        self.voices = VOICES if voices is None else voices
        self.page_size = page_size

    @staticmethod
    def quota() -> TTSReply:
        """Credits used up: 402 Payment Required with the structured body (the error code is the fake's)."""
        return TTSReply.error(
            402,
            body=error_json(
                "insufficient_credits",
                "Payment Required",
                "You have run out of credits. Upgrade your plan or buy more.",
            ),
        )

    @staticmethod
    def refusal() -> TTSReply:
        return TTSReply.error(
            400,
            body=error_json(
                "content_policy_violation", "Bad Request", "The transcript was refused under our content policy."
            ),
        )

    def _authorized(self, headers: dict[str, str]) -> bool:
        value = headers.get("authorization", "")
        return value == f"Bearer {self.api_key}" if self.api_key else value.startswith("Bearer ")

    def _bad(self, message: str, status: int = 400, code: str | None = "invalid_request") -> TTSReply:
        return TTSReply.error(status, body=error_json(code, "Bad Request" if status == 400 else "Error", message))

    def _parse(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], raw: bytes
    ) -> TTSRequest | TTSReply:
        if headers.get("cartesia-version") not in VERSIONS:
            return self._bad(f"Cartesia-Version must be one of {sorted(VERSIONS)}")
        if method == "GET" and path == "/voices":
            return self._voice_page(query)
        if method != "POST" or path != "/tts/bytes":
            return self._bad(f"{method} {path} not found", 404, "not_found")
        if headers.get("content-type", "").split(";")[0] != "application/json":
            return self._bad("expected a JSON body")
        body = parse_json_object(raw)
        if body is None:
            return self._bad("invalid JSON")
        if missing := {"model_id", "transcript", "voice", "output_format"} - set(body):
            return self._bad(f"missing field(s) {sorted(missing)}")
        if unknown := set(body) - BODY_FIELDS:
            return self._bad(f"unknown field(s) {sorted(unknown)}")
        voice = body["voice"]
        if not isinstance(voice, dict) or voice.get("mode") != "id" or set(voice) != {"mode", "id"}:
            return self._bad('voice must be {"mode": "id", "id": <voice id>}')
        if voice["id"] not in {v["id"] for v in self.voices}:
            return self._bad(f"Voice not found: {voice['id']}", 404, "voice_not_found")
        out = body["output_format"]
        container = out.get("container") if isinstance(out, dict) else None
        if container not in FORMAT_FIELDS or set(out) != FORMAT_FIELDS[container]:
            return self._bad(f"output_format must hold exactly {sorted(FORMAT_FIELDS.get(container, []))}")
        if out["sample_rate"] not in RATES or (container != "mp3" and out["encoding"] not in ENCODINGS):
            return self._bad("unsupported sample_rate or encoding")
        if "generation_config" in body and set(body["generation_config"]) - {"speed", "volume", "emotion"}:
            return self._bad("unknown generation_config field")
        fmt = "mp3" if container == "mp3" else f"{'pcm' if container == 'raw' else 'wav'}:{out['encoding']}"
        return TTSRequest(
            method, path, query, headers, body, raw, text=body["transcript"], fmt=fmt, sample_rate_hz=out["sample_rate"]
        )

    def _voice_page(self, query: dict[str, list[str]]) -> TTSReply:
        limit = min(int(query.get("limit", ["10"])[0]), 100, self.page_size)
        start = 0
        if after := query.get("starting_after", [None])[0]:
            start = [v["id"] for v in self.voices].index(after) + 1
        page = self.voices[start : start + limit]
        more = start + limit < len(self.voices)
        return TTSReply(
            body=json.dumps({"data": page, "has_more": more, "next_page": page[-1]["id"] if more else None}).encode(),
            content_type="application/json",
        )

    def _payload(self, reply: TTSReply, request: TTSRequest | None) -> bytes:
        if (
            reply.status != 200
            or reply.body is not None
            or reply.audio is not None
            or request is None
            or ":" not in request.fmt
        ):
            return super()._payload(reply, request)
        container, encoding = request.fmt.split(":")
        samples = tone(max(0.2, 0.02 * len(request.text)), request.sample_rate_hz)
        if container == "pcm":
            return (
                samples.astype("<f4").tobytes()
                if encoding == "pcm_f32le"
                else speech_for(request.text, request.sample_rate_hz, "pcm")
            )
        buf = io.BytesIO()
        sf.write(
            buf, samples, request.sample_rate_hz, format="WAV", subtype="FLOAT" if encoding == "pcm_f32le" else "PCM_16"
        )
        return buf.getvalue()

    def _content_type_of(self, fmt: str) -> str:
        return {"mp3": "audio/mpeg"}.get(fmt, "audio/wav" if fmt.startswith("wav") else "application/octet-stream")

    def _error_body(self, status: int, message: str) -> bytes:
        code = {401: "unauthorized", 429: "concurrency_limited", 500: "internal_error", 503: "service_unavailable"}.get(
            status
        )
        return error_json(code, "Error", message)
