"""A fake Gemini API on loopback that speaks the real REST wire format, for tests of anything that calls Gemini.

    with FakeGemini() as fake:                      # ThreadingHTTPServer on 127.0.0.1:<free port>
        fake.script("item-3", [Reply.error(429), Reply.malformed(), Reply.ok(PAIRWISE_OK)])
        judge = GeminiJudge(base_url=fake.base_url, api_key="test-key", ...)
        ...
        fake.requests[0].audio_parts()              # [(mime_type, wav bytes), ...] decoded from base64
        fake.ok_responses, fake.status_counts[429], fake.max_in_flight

It answers POST /{v1,v1beta}/models/{model}:generateContent with the JSON Google sends: candidates[0].content.parts
[0].text holds the model's text (for JSON mode, a JSON string), finishReason, and usageMetadata. Errors use
Google's body `{"error": {"code", "message", "status"}}`.

Which reply a request gets: the first scripted marker (in the order `script` was called) that occurs in the
request's text parts and still has replies queued pops its next reply; otherwise `responder(request)` when one was
given and it returns something (a dict is sent as the JSON answer, a str as the text, a Reply as it is; None falls
through); otherwise `default(request)` answers. The default answers a valid pairwise verdict when the request's
responseSchema has a `winner` property, a valid instruction verdict when it has `follows`, else the text "ok".

    fake = FakeGemini(responder=lambda r: {"n": 3} if "count" in r.text() else None)
    fake.requests[0].system_text(), fake.requests[0].response_schema(), fake.requests[0].generation_config
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATH_RE = re.compile(r"^/(?P<version>v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):generateContent$")

STATUS_NAMES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 502: "BAD_GATEWAY", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

PAIRWISE_OK: dict[str, Any] = {
    "clip_1_reasoning": "0:01 clear rising intonation on the question",
    "clip_2_reasoning": "0:02 flat delivery",
    "comparison": "clip 1 handles the question better",
    "difference": "significant",
    "clip_1_score": 3,
    "clip_2_score": 1,
    "winner": "clip_1",
}
INSTRUCTION_OK: dict[str, Any] = {"reasoning": "calm, low pitch, slow as asked", "follows": True}
REFUSAL_TEXT = "I'm sorry, but I can't help with evaluating these recordings."


@dataclass
class Reply:
    """One scripted answer. `status` 200 answers with `text` as the model output; any other status answers
    Google's error body. `body` replaces the whole JSON body; `raw_body` sends bytes as they are."""

    status: int = 200
    text: str | None = None
    finish_reason: str = "STOP"
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    raw_body: bytes | None = None
    delay_s: float = 0.0
    prompt_tokens: int = 1000
    output_tokens: int = 50
    thoughts_tokens: int | None = None

    @classmethod
    def ok(cls, answer: dict[str, Any] | str, **kw: Any) -> Reply:
        return cls(text=answer if isinstance(answer, str) else json.dumps(answer), **kw)

    @classmethod
    def error(cls, status: int, *, retry_after: str | None = None, message: str | None = None, **kw: Any) -> Reply:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        return cls(status=status, headers=headers, text=message or f"fake error {status}", **kw)

    @classmethod
    def rate_limited(cls, retry_after: str | None = "0", **kw: Any) -> Reply:
        return cls.error(429, retry_after=retry_after, message="Resource has been exhausted (e.g. check quota).", **kw)

    @classmethod
    def malformed(cls, **kw: Any) -> Reply:
        """Output that no JSON repair turns into a verdict."""
        return cls(text="The first clip sounds better to me, overall.", **kw)

    @classmethod
    def truncated(cls, answer: dict[str, Any], keep_chars: int, **kw: Any) -> Reply:
        """The first `keep_chars` characters of the JSON answer, as a MAX_TOKENS stop leaves it."""
        return cls(text=json.dumps(answer)[:keep_chars], finish_reason="MAX_TOKENS", **kw)

    @classmethod
    def refusal(cls, **kw: Any) -> Reply:
        return cls(text=REFUSAL_TEXT, **kw)

    @classmethod
    def blocked(cls, reason: str = "SAFETY", *, message: str | None = None, prompt_tokens: int = 1000) -> Reply:
        """The prompt itself was blocked: no candidates, promptFeedback.blockReason set (HTTP 200)."""
        feedback: dict[str, Any] = {"blockReason": reason}
        if message is not None:
            feedback["blockReasonMessage"] = message
        usage = {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens}
        return cls(body={"promptFeedback": feedback, "usageMetadata": usage, "modelVersion": "fake"})

    def response_body(self) -> bytes:
        if self.raw_body is not None:
            return self.raw_body
        if self.body is not None:
            return json.dumps(self.body).encode()
        if self.status != 200:
            status = STATUS_NAMES.get(self.status, "UNKNOWN")
            error = {"code": self.status, "message": self.text or "", "status": status}
            return json.dumps({"error": error}).encode()
        usage: dict[str, Any] = {
            "promptTokenCount": self.prompt_tokens,
            "candidatesTokenCount": self.output_tokens,
            "totalTokenCount": self.prompt_tokens + self.output_tokens + (self.thoughts_tokens or 0),
        }
        if self.thoughts_tokens is not None:
            usage["thoughtsTokenCount"] = self.thoughts_tokens
        candidate = {
            "content": {"role": "model", "parts": [{"text": self.text or ""}]},
            "finishReason": self.finish_reason,
            "index": 0,
        }
        return json.dumps({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "fake"}).encode()


@dataclass
class GeminiRequest:
    """One request as the server received it."""

    path: str
    api_version: str
    model: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def parts(self) -> list[dict[str, Any]]:
        return [p for c in self.body.get("contents", []) for p in c.get("parts", [])]

    def texts(self) -> list[str]:
        return [p["text"] for p in self.parts if "text" in p]

    def text(self) -> str:
        """The user turn's text parts, one per line."""
        return "\n".join(self.texts())

    def system_text(self) -> str | None:
        """The system instruction's text, or None when the request had none."""
        system = self.body.get("systemInstruction") or self.body.get("system_instruction")
        if system is None:
            return None
        if isinstance(system, str):
            return system
        return "\n".join(p["text"] for p in system.get("parts", []) if "text" in p)

    def audio_parts(self) -> list[tuple[str, bytes]]:
        """(mime type, decoded bytes) of each inline-data part, in order."""
        out = []
        for p in self.parts:
            inline = p.get("inlineData") or p.get("inline_data")
            if inline is not None:
                mime = inline.get("mimeType") or inline.get("mime_type")
                # The SDK sends URL-safe base64 ('-', '_'); the API accepts either alphabet.
                data = inline["data"].replace("+", "-").replace("/", "_")
                out.append((mime, base64.urlsafe_b64decode(data)))
        return out

    @property
    def generation_config(self) -> dict[str, Any]:
        return self.body.get("generationConfig", {})

    def response_schema(self) -> dict[str, Any] | None:
        """The output schema sent (responseSchema or responseJsonSchema, either spelling), or None."""
        config = self.generation_config
        for name in ("responseSchema", "response_schema", "responseJsonSchema", "response_json_schema"):
            if config.get(name) is not None:
                return config[name]
        return None

    @property
    def schema_properties(self) -> set[str]:
        return set((self.response_schema() or {}).get("properties", {}))


def default_policy(request: GeminiRequest) -> Reply:
    props = request.schema_properties
    if "winner" in props:
        return Reply.ok(PAIRWISE_OK)
    if "follows" in props:
        return Reply.ok(INSTRUCTION_OK)
    return Reply.ok("ok")


class FakeGemini:
    """The server, its script and its counters. Use as a context manager (or call start/stop)."""

    def __init__(
        self,
        default: Callable[[GeminiRequest], Reply] = default_policy,
        delay_s: float = 0.0,
        responder: Callable[[GeminiRequest], dict[str, Any] | str | Reply | None] | None = None,
    ) -> None:
        self.default = default
        self.responder = responder
        self.delay_s = delay_s
        self.requests: list[GeminiRequest] = []
        self.status_counts: Counter[int] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._scripts: dict[str, list[Reply]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ---------------------------------------------------------------------------------------------
    def script(self, marker: str, replies: list[Reply]) -> None:
        """Queue `replies` for requests whose text parts contain `marker` (appends to an existing queue)."""
        with self._lock:
            self._scripts.setdefault(marker, []).extend(replies)

    def pending(self) -> dict[str, int]:
        """Scripted replies not yet used, per marker."""
        with self._lock:
            return {k: len(v) for k, v in self._scripts.items() if v}

    def _choose(self, request: GeminiRequest) -> Reply:
        text = "\n".join(request.texts())
        with self._lock:
            for marker, queue in self._scripts.items():
                if queue and marker in text:
                    return queue.pop(0)
        if self.responder is not None:
            answer = self.responder(request)
            if isinstance(answer, Reply):
                return answer
            if isinstance(answer, (dict, str)):
                return Reply.ok(answer)
            if answer is not None:  # a test bug: answer 400 (not retried) so the client's error says so
                return Reply.error(400, message=f"fake: responder returned {type(answer).__name__}, "
                                                "want dict, str, Reply or None")
        return self.default(request)

    # -- counters ----------------------------------------------------------------------------------------------
    @property
    def total_requests(self) -> int:
        return sum(self.status_counts.values())

    @property
    def ok_responses(self) -> int:
        return self.status_counts[200]

    # -- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeGemini is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGemini:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                fake._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # silence per-request stderr lines
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-gemini", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one request -------------------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length)
        match = PATH_RE.match(h.path.split("?", 1)[0])
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if match is None:
                reply = Reply.error(404, message=f"no such method: POST {h.path}")
            else:
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = None
                if not isinstance(body, dict):
                    reply = Reply.error(400, message="Invalid JSON payload received.")
                else:
                    request = GeminiRequest(path=h.path, api_version=match["version"], model=match["model"],
                                            headers={k.lower(): v for k, v in h.headers.items()}, body=body)
                    with self._lock:
                        self.requests.append(request)
                    reply = self._choose(request)
            delay = reply.delay_s or self.delay_s
            if delay:
                time.sleep(delay)
            payload = reply.response_body()
            with self._lock:
                self.status_counts[reply.status] += 1
            try:
                h.send_response(reply.status)
                h.send_header("Content-Type", "application/json; charset=UTF-8")
                h.send_header("Content-Length", str(len(payload)))
                for k, v in reply.headers.items():
                    h.send_header(k, v)
                h.end_headers()
                h.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer
        finally:
            with self._lock:
                self.in_flight -= 1
