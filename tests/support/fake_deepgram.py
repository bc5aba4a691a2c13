"""A fake Deepgram TTS API on loopback that checks requests field by field against the documented shape.

    POST /v1/speak?model=aura-2-thalia-en&encoding=linear16&container=wav&sample_rate=24000   JSON {"text"}
    GET  /v1/models                                       {"stt": [...], "tts": [{"canonical_name", ...}]}

Auth is `Authorization: Token <key>`. Errors use Deepgram's bodies (`{"err_code", "err_msg", "request_id"}`, and
`{"category", "message", "details", "request_id"}` for the TTS request checks). The format combinations follow
the Media Output Settings page: linear16 (wav or none) at 8-48 kHz, flac at 8-48 kHz, mp3 at 22.05 kHz and
opus (ogg) at 48 kHz with no sample_rate allowed; text over 2,000 characters is a 413.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.fake_http import parse_json_object
from tests.support.fake_tts import FakeTTSServer, TTSReply, TTSRequest

QUERY_FIELDS = {
    "model",
    "encoding",
    "container",
    "sample_rate",
    "bit_rate",
    "callback",
    "callback_method",
    "mip_opt_out",
    "tag",
}
RATES = {"linear16": {8000, 16000, 24000, 32000, 48000}, "flac": {8000, 16000, 22050, 32000, 48000}}
FIXED = {"mp3": 22050, "opus": 48000}
CONTAINERS = {"linear16": {"wav", "none"}, "flac": {"none"}, "mp3": {"none"}, "opus": {"ogg"}}
MODELS = [
    {
        "name": "thalia",
        "canonical_name": "aura-2-thalia-en",
        "architecture": "aura-2",
        "languages": ["en", "en-US"],
        "version": "2025-04-07.0",
        "uuid": "ecb76e9d-0000-4000-8000-000000000001",
        "metadata": {"accent": "American"},
    },
    {
        "name": "celeste",
        "canonical_name": "aura-2-celeste-es",
        "architecture": "aura-2",
        "languages": ["es", "es-CO"],
        "version": "2025-04-07.0",
        "uuid": "ecb76e9d-0000-4000-8000-000000000002",
        "metadata": {},
    },
    {
        "name": "asteria",
        "canonical_name": "aura-asteria-en",
        "architecture": "aura",
        "language": "en",
        "version": "2024-03-28.0",
        "uuid": "ecb76e9d-0000-4000-8000-000000000003",
        "metadata": {},
    },
]


def error_json(category: str, message: str, details: str = "") -> bytes:
    return json.dumps(
        {
            "category": category,
            "message": message,
            "details": details or message,
            "request_id": "00000000-0000-4000-8000-00000000fake",
        }
    ).encode()


def err_json(code: str, message: str) -> bytes:
    return json.dumps(
        {"err_code": code, "err_msg": message, "request_id": "00000000-0000-4000-8000-00000000fake"}
    ).encode()


class FakeDeepgram(FakeTTSServer):
    name = "fake-deepgram"

    def __init__(self, *, models: list[dict[str, Any]] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.models = MODELS if models is None else models

    @staticmethod
    def quota() -> TTSReply:
        """Out of credits: 402 Payment Required (the errors page's insufficient-credits answer)."""
        return TTSReply.error(
            402,
            body=err_json(
                "PAYMENT_REQUIRED",
                "Project does not have enough credits for a TTS request and does not have an overage agreement.",
            ),
        )

    @staticmethod
    def refusal() -> TTSReply:
        return TTSReply.error(
            422,
            body=error_json(
                "UNPROCESSABLE_CONTENT", "The text was refused under our content policy.", "Unprocessable Content"
            ),
        )

    def _authorized(self, headers: dict[str, str]) -> bool:
        value = headers.get("authorization", "")
        return value == f"Token {self.api_key}" if self.api_key else value.startswith("Token ")

    def _parse(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], raw: bytes
    ) -> TTSRequest | TTSReply:
        if method == "GET" and path == "/v1/models":
            return TTSReply(body=json.dumps({"stt": [], "tts": self.models}).encode(), content_type="application/json")
        if method != "POST" or path != "/v1/speak":
            return TTSReply.error(404, body=err_json("NOT_FOUND", f"{method} {path} not found"))
        if unknown := set(query) - QUERY_FIELDS:
            return TTSReply.error(
                400,
                body=error_json("INVALID_QUERY_PARAMETER", "Failed to parse query parameters.", f"unknown {unknown}"),
            )
        q = {k: v[0] for k, v in query.items()}
        model = q.get("model", "aura-asteria-en")
        if model not in {m["canonical_name"] for m in self.models}:
            return TTSReply.error(
                400,
                body=error_json(
                    "INVALID_QUERY_PARAMETER", f"Unknown model: failed to resolve the requested model {model!r}."
                ),
            )
        encoding = q.get("encoding", "mp3")
        if encoding not in CONTAINERS:
            return TTSReply.error(400, body=error_json("UNSUPPORTED_AUDIO_FORMAT", f"encoding {encoding!r}"))
        container = q.get("container", {"linear16": "wav", "opus": "ogg"}.get(encoding, "none"))
        if container not in CONTAINERS[encoding]:
            return TTSReply.error(
                400, body=error_json("UNSUPPORTED_AUDIO_FORMAT", f"container {container!r} with {encoding}")
            )
        if encoding in FIXED:
            if "sample_rate" in q:
                return TTSReply.error(
                    400, body=error_json("UNSUPPORTED_AUDIO_FORMAT", f"sample_rate is not configurable for {encoding}")
                )
            rate = FIXED[encoding]
        else:
            rate = int(q.get("sample_rate", 24000 if encoding == "linear16" else 48000))
            if rate not in RATES[encoding]:
                return TTSReply.error(
                    400, body=error_json("UNSUPPORTED_AUDIO_FORMAT", f"sample_rate {rate} with {encoding}")
                )
        if headers.get("content-type", "").split(";")[0] != "application/json":
            return TTSReply.error(415, body=error_json("UNSUPPORTED_CONTENT_TYPE", "Unsupported Content-Type"))
        body = parse_json_object(raw)
        if body is None or set(body) != {"text"} or not isinstance(body["text"], str):
            return TTSReply.error(
                400,
                body=error_json(
                    "INVALID_JSON", "Invalid JSON submitted.", f"expected exactly {{'text'}}, got {sorted(body or {})}"
                ),
            )
        if not body["text"].strip():
            return TTSReply.error(400, body=error_json("EMPTY_TEXT", "Input text contained no characters."))
        if len(body["text"]) > 2000:
            return TTSReply.error(413, body=error_json("TEXT_TOO_LONG", "Input text exceeded character limit."))
        fmt = (
            "pcm"
            if encoding == "linear16" and container == "none"
            else {"linear16": "wav", "opus": "opus"}.get(encoding, encoding)
        )
        return TTSRequest(method, path, query, headers, body, raw, text=body["text"], fmt=fmt, sample_rate_hz=rate)

    def _error_body(self, status: int, message: str) -> bytes:
        code = {401: "INVALID_AUTH", 429: "TOO_MANY_REQUESTS", 503: "SERVICE_UNAVAILABLE"}.get(status, "ERROR")
        return err_json(code, message)
