"""A fake ElevenLabs API on loopback that checks requests field by field against the documented shape.

    POST /v1/text-to-speech/{voice_id}?output_format=pcm_24000   JSON {text, model_id, voice_settings{...}, ...}
    GET  /v1/voices                                              {"voices": [{"voice_id", "name", ...}]}

Auth is the `xi-api-key` header. Errors use ElevenLabs' body `{"detail": {"type", "code", "message", "status",
"request_id", "param"}}`, request validation FastAPI's 422 `{"detail": [{"loc", "msg", "type"}]}`. Audio comes back
in the asked `output_format` at its rate (pcm: 16-bit mono; opus: Ogg Opus).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.support.fake_http import parse_json_object
from tests.support.fake_tts import FakeTTSServer, TTSReply, TTSRequest

BODY_FIELDS = {
    "text",
    "model_id",
    "language_code",
    "voice_settings",
    "pronunciation_dictionary_locators",
    "seed",
    "previous_text",
    "next_text",
    "previous_request_ids",
    "next_request_ids",
    "apply_text_normalization",
    "apply_language_text_normalization",
    "use_pvc_as_ivc",
}
VOICE_SETTINGS = {"stability", "similarity_boost", "style", "use_speaker_boost", "speed"}
QUERY_FIELDS = {"output_format", "enable_logging", "optimize_streaming_latency"}
FORMAT = re.compile(r"^(mp3|pcm|wav|opus|ulaw|alaw)_(\d+)(?:_(\d+))?$")
VOICES = [
    {"voice_id": "JBFqnCBsd6RMkjVDRZzb", "name": "George", "category": "premade", "labels": {"accent": "british"}},
    {"voice_id": "21m00Tcm4TlvDq8ikWAM", "name": "Rachel", "category": "premade", "labels": {"accent": "american"}},
]
CODES = {
    400: ("invalid_request", "invalid_parameters"),
    401: ("authentication_error", "invalid_api_key"),
    404: ("not_found", "not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("service_error", "internal_server_error"),
    503: ("service_error", "service_unavailable"),
}


def error_json(status_code: str, message: str, *, kind: str = "invalid_request") -> bytes:
    """ElevenLabs' error body with `code` (and the legacy `status`) set to `status_code`."""
    return json.dumps(
        {
            "detail": {
                "type": kind,
                "code": status_code,
                "message": message,
                "status": status_code,
                "request_id": "req-fake",
                "param": None,
            }
        }
    ).encode()


class FakeElevenLabs(FakeTTSServer):
    name = "fake-elevenlabs"

    def __init__(self, *, voices: list[dict[str, Any]] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.voices = VOICES if voices is None else voices

    # -- vendor answers the tests script ------------------------------------------------------------------------
    @staticmethod
    def quota() -> TTSReply:
        """An exhausted quota, as ElevenLabs answers it: 401 with detail.status quota_exceeded."""
        return TTSReply.error(
            401,
            body=error_json(
                "quota_exceeded",
                "This request exceeds your quota of 10000. You have 0 credits remaining, while 91 "
                "credits are required for this request.",
                kind="authentication_error",
            ),
        )

    @staticmethod
    def refusal() -> TTSReply:
        return TTSReply.error(
            400,
            body=error_json(
                "content_against_policy",
                "This text violates our Terms of Service (content policy) and was not synthesized.",
            ),
        )

    # -- the wire format ----------------------------------------------------------------------------------------
    def _authorized(self, headers: dict[str, str]) -> bool:
        value = headers.get("xi-api-key", "")
        return value == self.api_key if self.api_key else bool(value)

    def _parse(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], raw: bytes
    ) -> TTSRequest | TTSReply:
        if method == "GET" and path == "/v1/voices":
            return TTSReply(body=json.dumps({"voices": self.voices}).encode(), content_type="application/json")
        match = re.fullmatch(r"/v1/text-to-speech/([^/]+)", path)
        if method != "POST" or not match:
            return TTSReply.error(404, f"Not Found ({method} {path})")
        voice_id = match.group(1)
        if voice_id not in {v["voice_id"] for v in self.voices}:
            return TTSReply.error(
                404, body=error_json("voice_not_found", f"A voice with voice_id {voice_id} was not found.")
            )
        if unknown := set(query) - QUERY_FIELDS:
            return self._invalid(["query", sorted(unknown)[0]], "extra query parameters not permitted")
        fmt_name = query.get("output_format", ["mp3_44100_128"])[0]
        fmt = FORMAT.match(fmt_name)
        if not fmt or fmt.group(1) in ("ulaw", "alaw"):
            return self._invalid(["query", "output_format"], f"unsupported output_format {fmt_name!r}")
        if headers.get("content-type", "").split(";")[0] != "application/json":
            return self._invalid(["body"], "expected application/json")
        body = parse_json_object(raw)
        if body is None:
            return self._invalid(["body"], "JSON decode error")
        if "text" not in body:
            return self._invalid(["body", "text"], "Field required", kind="missing")
        if unknown := set(body) - BODY_FIELDS:
            return self._invalid(["body", sorted(unknown)[0]], "Extra inputs are not permitted")
        settings = body.get("voice_settings") or {}
        if unknown := set(settings) - VOICE_SETTINGS:
            return self._invalid(["body", "voice_settings", sorted(unknown)[0]], "Extra inputs are not permitted")
        if "speed" in settings and not 0.7 <= settings["speed"] <= 1.2:
            return self._invalid(["body", "voice_settings", "speed"], "speed must be between 0.7 and 1.2")
        if "language_code" in body and body.get("model_id") not in ("eleven_flash_v2_5", "eleven_turbo_v2_5"):
            return TTSReply.error(
                400,
                body=error_json(
                    "unsupported_language_code", f"Model {body.get('model_id')} does not support language_code."
                ),
            )
        codec = fmt.group(1)
        return TTSRequest(
            method,
            path,
            query,
            headers,
            body,
            raw,
            text=body["text"],
            fmt={"opus": "opus"}.get(codec, codec),
            sample_rate_hz=int(fmt.group(2)),
        )

    @staticmethod
    def _invalid(loc: list[str], msg: str, kind: str = "value_error") -> TTSReply:
        return TTSReply.error(422, body=json.dumps({"detail": [{"loc": loc, "msg": msg, "type": kind}]}).encode())

    def _error_body(self, status: int, message: str) -> bytes:
        kind, code = CODES.get(status, ("service_error", "error"))
        return error_json(code, message, kind=kind)
