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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_http import ScriptedFakeServer, parse_json_object

PATH_RE = re.compile(r"^/(?P<version>v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):generateContent$")

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "BAD_GATEWAY",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
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
    cut_after: int | None = None  # send this many bytes of the body, then reset the connection
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


class FakeGemini(ScriptedFakeServer[GeminiRequest, Reply]):
    """The server, its script and its counters. Use as a context manager (or call start/stop)."""

    reply_class = Reply
    name = "fake-gemini"

    def __init__(
        self,
        default: Callable[[GeminiRequest], Reply] = default_policy,
        delay_s: float = 0.0,
        responder: Callable[[GeminiRequest], dict[str, Any] | str | Reply | None] | None = None,
    ) -> None:
        super().__init__(responder, default=default, delay_s=delay_s)

    def _marker_text(self, request: GeminiRequest) -> str:
        return "\n".join(request.texts())

    def _unexpected_answer(self, answer: object) -> Reply:
        # a test bug: answer 400 (not retried) so the client's error says so
        return Reply.error(
            400, message=f"fake: responder returned {type(answer).__name__}, want dict, str, Reply or None"
        )

    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[Reply, GeminiRequest | None]:
        match = PATH_RE.match(path.split("?", 1)[0])
        if match is None:
            return Reply.error(404, message=f"no such method: POST {path}"), None
        body = parse_json_object(raw)
        if body is None:
            return Reply.error(400, message="Invalid JSON payload received."), None
        request = GeminiRequest(
            path=path, api_version=match["version"], model=match["model"], headers=headers, body=body
        )
        return self._accept(request), request

    def _payload(self, reply: Reply, request: GeminiRequest | None) -> bytes:
        return reply.response_body()

    def _content_type(self, reply: Reply) -> str:
        return "application/json; charset=UTF-8"
