"""Fake TTS APIs on loopback that speak each vendor's wire format, for the providers in providers/tts/.

`FakeTTSServer` is the shared part (on tests/support/fake_http.py's ScriptedFakeServer): routing, auth, counters, real
audio bytes back, and the faults a real API shows. A vendor's fake (`FakeOpenAISpeech` here; the others beside
their tests) says only how a request is read (`_parse`), what the key header is (`_authorized`), and what its
error body looks like (`_error_body`).

    with FakeOpenAISpeech(api_key="sk-test") as fake:
        fake.script("fail me", [TTSReply.error(429, "slow down", retry_after="0"), TTSReply.not_audio()])
        ...
        fake.paid_calls        # 200 answers with audio: what a vendor bills
        fake.billable_chars    # characters of the text of those calls
        fake.requests[0].body  # the JSON body as received

Faults a reply can carry: an HTTP error with the vendor's body (and Retry-After), a delay (timeouts), a chunked
(streamed) body, a connection reset after `cut_after` bytes of the body, a body that is not audio, an empty
body, a WAV whose header promises more than is sent.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import soundfile as sf

from tests.support.fake_http import ScriptedFakeServer, parse_json_object


def tone(seconds: float, sample_rate_hz: int, freq_hz: float = 220.0) -> np.ndarray:
    t = np.arange(int(seconds * sample_rate_hz)) / sample_rate_hz
    return (0.3 * np.sin(2 * np.pi * freq_hz * t)).astype(np.float32)


def encode(samples: np.ndarray, sample_rate_hz: int, fmt: str) -> bytes:
    """Real audio bytes: 'pcm' (16-bit LE), or a container libsndfile writes (wav, mp3, flac, ogg)."""
    if fmt == "pcm":
        return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
    buf = io.BytesIO()
    kind = {
        "wav": ("WAV", "PCM_16"),
        "mp3": ("MP3", None),
        "flac": ("FLAC", None),
        "ogg": ("OGG", "VORBIS"),
        "opus": ("OGG", "OPUS"),
    }[fmt]
    sf.write(buf, samples, sample_rate_hz, format=kind[0], subtype=kind[1])
    return buf.getvalue()


def speech_for(text: str, sample_rate_hz: int, fmt: str) -> bytes:
    """The fake's speech: a tone 0.02 s per character (at least 0.2 s), so longer texts give longer clips."""
    return encode(tone(max(0.2, 0.02 * len(text)), sample_rate_hz), sample_rate_hz, fmt)


@dataclass
class TTSReply:
    """One scripted answer. `audio` None on a 200: the server makes speech for the request's text."""

    status: int = 200
    audio: bytes | None = None
    body: bytes | None = None  # a raw body (an error JSON is built by the vendor fake when None)
    message: str = ""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    stream: bool = False  # chunked transfer, as a streaming endpoint sends it
    cut_after: int | None = None  # reset the connection after this many body bytes

    @classmethod
    def ok(cls, answer: Any = None, **kw: Any) -> TTSReply:
        return cls(**kw)

    @classmethod
    def error(cls, status: int, message: str = "", *, retry_after: str | float | None = None, **kw: Any) -> TTSReply:
        headers = dict(kw.pop("headers", {}))
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        return cls(status=status, message=message or f"fake error {status}", headers=headers, **kw)

    @classmethod
    def not_audio(cls) -> TTSReply:
        return cls(audio=b"<html><body>502 Bad Gateway</body></html>", content_type="audio/wav")

    @classmethod
    def empty(cls) -> TTSReply:
        return cls(audio=b"")

    @classmethod
    def truncated(cls) -> TTSReply:
        full = encode(tone(1.0, 16000), 16000, "wav")
        return cls(audio=full[: len(full) // 3])


@dataclass
class TTSRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: dict[str, Any] | None
    raw: bytes
    text: str = ""  # the billable text, as the vendor fake reads it
    fmt: str = "wav"  # the audio format asked for
    sample_rate_hz: int = 24000


class FakeTTSServer(ScriptedFakeServer[TTSRequest, TTSReply]):
    """The shared server. Subclasses implement `_parse`, `_authorized` and `_error_body`; `_other` answers
    requests that are not synthesis (voice lists)."""

    reply_class = TTSReply
    protocol_version = "HTTP/1.1"
    methods = ("POST", "GET")

    def __init__(self, *, api_key: str | None = "test-key", delay_s: float = 0.0) -> None:
        super().__init__(None, default=lambda request: TTSReply(), delay_s=delay_s)
        self.api_key = api_key
        self.paid_calls = 0
        self.billable_chars = 0
        self.paid_keys: list[str] = []  # the text of every paid call, to find one paid twice

    # -- the vendor's part -----------------------------------------------------------------------------------
    def _parse(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], raw: bytes
    ) -> TTSRequest | TTSReply:
        raise NotImplementedError

    def _authorized(self, headers: dict[str, str]) -> bool:
        raise NotImplementedError

    def _error_body(self, status: int, message: str) -> bytes:
        return json.dumps({"error": {"message": message}}).encode()

    def _content_type_of(self, fmt: str) -> str:
        return {
            "wav": "audio/wav",
            "mp3": "audio/mpeg",
            "pcm": "audio/pcm",
            "flac": "audio/flac",
            "ogg": "audio/ogg",
            "opus": "audio/ogg",
        }.get(fmt, "application/octet-stream")

    def _marker_text(self, request: TTSRequest) -> str:
        return request.text

    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[TTSReply, Any]:
        parts = urlsplit(path)
        if not self._authorized(headers):
            return TTSReply.error(401, "invalid API key"), None
        parsed = self._parse(method, parts.path, parse_qs(parts.query), headers, raw)
        if isinstance(parsed, TTSReply):
            return parsed, None
        return self._accept(parsed), parsed

    def _payload(self, reply: TTSReply, request: TTSRequest | None) -> bytes:
        if reply.status != 200:
            return reply.body if reply.body is not None else self._error_body(reply.status, reply.message)
        if reply.body is not None:
            return reply.body
        if reply.audio is not None:
            return reply.audio
        return speech_for(
            request.text if request else "x",
            request.sample_rate_hz if request else 24000,
            request.fmt if request else "wav",
        )

    # -- serving, with streaming and resets ------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length)
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply, request = self._route(h.command, h.path, headers, raw)
            if reply.delay_s or self.delay_s:
                time.sleep(reply.delay_s or self.delay_s)
            payload = self._payload(reply, request)
            if (
                isinstance(request, TTSRequest)
                and reply.status == 200
                and request.method == "POST"
                and reply.cut_after is None
            ):
                with self._lock:
                    self.paid_calls += 1
                    self.billable_chars += len(request.text)
                    self.paid_keys.append(request.text)
            with self._lock:
                self.status_counts[reply.status] += 1
            ctype = reply.content_type or (
                self._content_type_of(request.fmt)
                if reply.status == 200 and isinstance(request, TTSRequest) and request.method == "POST"
                else "application/json"
            )
            try:
                h.send_response(reply.status)
                h.send_header("Content-Type", ctype)
                for k, v in reply.headers.items():
                    h.send_header(k, v)
                if reply.cut_after is not None:
                    h.send_header("Content-Length", str(len(payload)))
                    h.end_headers()
                    h.wfile.write(payload[: reply.cut_after])
                    h.wfile.flush()
                    h.close_connection = True
                    h.connection.shutdown(2)
                elif reply.stream:
                    h.send_header("Transfer-Encoding", "chunked")
                    h.end_headers()
                    for start in range(0, len(payload), 4096):
                        chunk = payload[start : start + 4096]
                        h.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    h.wfile.write(b"0\r\n\r\n")
                else:
                    h.send_header("Content-Length", str(len(payload)))
                    h.end_headers()
                    h.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass  # the client gave up (a timeout test)
        finally:
            with self._lock:
                self.in_flight -= 1


# -- OpenAI's /v1/audio/speech ---------------------------------------------------------------------------------

OPENAI_SPEECH_FIELDS = {"model", "input", "voice", "instructions", "response_format", "speed", "stream_format"}
"""The request body fields of POST /v1/audio/speech (OpenAI API reference, audio/createSpeech)."""


class FakeOpenAISpeech(FakeTTSServer):
    """POST /v1/audio/speech -> audio bytes in `response_format` (pcm: 24 kHz 16-bit mono, as OpenAI's);
    GET /v1/audio/voices (what Kokoro-FastAPI adds) -> {"voices": [...]} when `voices` is given."""

    name = "fake-openai-speech"
    url_prefix = "/v1"

    def __init__(self, *, voices: list[str] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.voices = voices

    def _authorized(self, headers: dict[str, str]) -> bool:
        value = headers.get("authorization", "")
        return value == f"Bearer {self.api_key}" if self.api_key else value.startswith("Bearer ")

    def _parse(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], raw: bytes
    ) -> TTSRequest | TTSReply:
        if method == "GET" and path == "/v1/audio/voices" and self.voices is not None:
            return TTSReply(body=json.dumps({"voices": self.voices}).encode(), content_type="application/json")
        if method != "POST" or path != "/v1/audio/speech":
            return TTSReply.error(404, f"Invalid URL ({method} {path})")
        body = parse_json_object(raw)
        if body is None:
            return TTSReply.error(400, "We could not parse the JSON body of your request.")
        unknown = set(body) - OPENAI_SPEECH_FIELDS
        missing = {"model", "input", "voice"} - set(body)
        if unknown or missing:
            return TTSReply.error(400, f"unknown fields {sorted(unknown)} / missing {sorted(missing)}")
        if len(body["input"]) > 4096:
            return TTSReply.error(400, "input is longer than 4096 characters")
        fmt = body.get("response_format", "mp3")
        return TTSRequest(method, path, query, headers, body, raw, text=body["input"], fmt=fmt, sample_rate_hz=24000)

    def _error_body(self, status: int, message: str) -> bytes:
        code = {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(status)
        return json.dumps(
            {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
        ).encode()
