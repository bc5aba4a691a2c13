"""A fake OpenAI chat-completions API on loopback that speaks the real wire format, for tests of anything that
calls an OpenAI-compatible server (OpenAI itself, vLLM, llama.cpp ...).

    with FakeOpenAI() as fake:                      # ThreadingHTTPServer on 127.0.0.1:<free port>
        fake.script("item-3", [Reply.error(429, retry_after="0"), Reply.malformed(), Reply.ok({"a": 1})])
        llm = OpenAICompatLLM("gpt-4.1-mini", api_key="sk-test", base_url=fake.base_url, backoff_s="0.01")
        ...
        fake.requests[0].audio_parts()              # [wav bytes, ...] decoded from input_audio base64
        fake.ok_responses, fake.status_counts[429], fake.max_in_flight, fake.calls

It answers POST /v1/chat/completions with the JSON OpenAI sends: id, object "chat.completion", created, model,
choices[0].message {role, content, refusal}, finish_reason, and usage (audio parts add 10 tokens per second to
prompt_tokens, also given as prompt_tokens_details.audio_tokens). Errors use OpenAI's body
`{"error": {"message", "type", "param", "code"}}`. A request without `Authorization: Bearer <key>` (or, when the
fake was given `api_key`, with another key) gets 401.

Which reply a request gets: the first scripted marker (in the order `script` was called) that occurs in the
request's text (system and user) and still has replies queued pops its next reply; otherwise `responder(request)`
if given and it returns something (a dict is sent as JSON content, a str as content, a Reply as is); otherwise
the default: content `{}` when the request has a response_format, else "ok".
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_http import ScriptedFakeServer, parse_json_object

PATH = "/v1/chat/completions"
AUDIO_TOKENS_PER_S = 10  # OpenAI's rate for audio input: one token per 100 ms


def audio_tokens(wav: bytes) -> int:
    """Tokens the fake counts for one WAV part: ceil(seconds x AUDIO_TOKENS_PER_S)."""
    import io
    import math

    import soundfile as sf

    info = sf.info(io.BytesIO(wav))
    return math.ceil(info.frames / info.samplerate * AUDIO_TOKENS_PER_S)


REFUSAL_TEXT = "I'm sorry, but I can't help with that."

ERROR_KINDS = {  # status -> (type, code) as OpenAI's error bodies name them
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    408: ("timeout", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", None),
    504: ("server_error", None),
}


@dataclass
class Reply:
    """One scripted answer. `status` 200 answers a chat completion with `content` and `refusal_text` (as
    message.refusal); any other status answers OpenAI's error body with `message`. `body` replaces the whole
    JSON body; `raw_body` sends bytes as they are. `echo_auth` appends the request's Authorization header to
    the error message (to prove a client scrubs its key from what it reports)."""

    status: int = 200
    content: str | None = None
    refusal_text: str | None = None  # message.refusal (named apart from the `refusal` constructor)
    finish_reason: str = "stop"
    message: str | None = None
    echo_auth: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    raw_body: bytes | None = None
    content_type: str = "application/json"
    delay_s: float = 0.0
    cut_after: int | None = None  # send this many bytes of the body, then reset the connection
    prompt_tokens: int = 1000
    completion_tokens: int = 50
    served_model: str | None = None  # the response's `model` (default: the model asked for)

    @classmethod
    def ok(cls, answer: dict[str, Any] | str, **kw: Any) -> Reply:
        return cls(content=answer if isinstance(answer, str) else json.dumps(answer), **kw)

    @classmethod
    def error(
        cls,
        status: int,
        retry_after: str | float | None = None,
        *,
        retry_after_ms: str | float | None = None,
        message: str | None = None,
        **kw: Any,
    ) -> Reply:
        headers = dict(kw.pop("headers", {}))
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
        return cls(status=status, headers=headers, message=message or f"fake error {status}", **kw)

    @classmethod
    def malformed(cls, **kw: Any) -> Reply:
        """Output that no JSON repair turns into an object."""
        return cls(content="Here are some thoughts, in prose rather than JSON.", **kw)

    @classmethod
    def refusal(cls, text: str = REFUSAL_TEXT, **kw: Any) -> Reply:
        """A structured-output refusal: message.refusal set, content null."""
        return cls(content=None, refusal_text=text, **kw)

    @classmethod
    def content_filter(cls, **kw: Any) -> Reply:
        return cls(content=None, finish_reason="content_filter", **kw)

    @classmethod
    def apology(cls, text: str = REFUSAL_TEXT, **kw: Any) -> Reply:
        """A plain-text apology where JSON was asked for."""
        return cls(content=text, **kw)

    def usage(self, request: OpenAIRequest | None) -> dict[str, Any]:
        """`prompt_tokens` of text, plus the audio parts' tokens at AUDIO_TOKENS_PER_S, counted apart in
        prompt_tokens_details as OpenAI's audio models do."""
        audio = sum(audio_tokens(wav) for wav in request.audio_parts()) if request is not None else 0
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens + audio,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + audio + self.completion_tokens,
        }
        if audio:
            usage["prompt_tokens_details"] = {"audio_tokens": audio, "cached_tokens": 0}
        return usage

    def response_body(self, request: OpenAIRequest | None) -> bytes:
        if self.raw_body is not None:
            return self.raw_body
        if self.body is not None:
            return json.dumps(self.body).encode()
        if self.status != 200:
            kind, code = ERROR_KINDS.get(self.status, ("api_error", None))
            message = self.message or ""
            if self.echo_auth and request is not None:
                message += f" (request authorization: {request.headers.get('authorization', '')})"
            return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()
        body = {
            "id": f"chatcmpl-fake{int(time.time() * 1e6)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.served_model or (request.model if request is not None else None) or "fake-model",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": self.content,
                        "refusal": self.refusal_text,
                        "annotations": [],
                    },
                    "logprobs": None,
                    "finish_reason": self.finish_reason,
                }
            ],
            "usage": self.usage(request),
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }
        return json.dumps(body).encode()


@dataclass
class OpenAIRequest:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @staticmethod
    def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
        content = message.get("content")
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        return [p for p in content or [] if isinstance(p, dict)]

    def user_parts(self) -> list[dict[str, Any]]:
        """The content parts of the user messages, in order (plain string content as one text part)."""
        return [p for m in self.messages if m.get("role") == "user" for p in self._parts(m)]

    def text(self) -> str:
        """The user turn's text parts, joined by newlines."""
        return "\n".join(p["text"] for p in self.user_parts() if p.get("type") == "text")

    def system_text(self) -> str | None:
        texts = [
            p["text"]
            for m in self.messages
            if m.get("role") in ("system", "developer")
            for p in self._parts(m)
            if p.get("type") == "text"
        ]
        return "\n".join(texts) if texts else None

    def audio_parts(self) -> list[bytes]:
        """Decoded bytes of each input_audio part, in order."""
        return [base64.b64decode(p["input_audio"]["data"]) for p in self.user_parts() if p.get("type") == "input_audio"]

    def audio_formats(self) -> list[str]:
        return [p["input_audio"].get("format") for p in self.user_parts() if p.get("type") == "input_audio"]

    def response_format(self) -> dict[str, Any] | None:
        return self.body.get("response_format")


def default_policy(request: OpenAIRequest) -> Reply:
    return Reply.ok({} if request.response_format() else "ok")


Responder = Callable[[OpenAIRequest], "dict[str, Any] | str | Reply | None"]


class FakeOpenAI(ScriptedFakeServer[OpenAIRequest, Reply]):
    """The server, its script and its counters. Use as a context manager (or call start/stop).

    Args:
        responder: answers requests no script matched; returning None falls through to `default`.
        default: the last word (see default_policy).
        delay_s: wait before every answer (a scripted Reply's own delay_s wins).
        api_key: when set, the only key accepted; otherwise any `Bearer <non-empty>` is.
    """

    reply_class = Reply
    name = "fake-openai"
    url_prefix = "/v1"
    protocol_version = "HTTP/1.1"  # keep-alive, as the real API (the SDK pools connections)
    methods = ("POST", "GET")

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        default: Callable[[OpenAIRequest], Reply] = default_policy,
        delay_s: float = 0.0,
        api_key: str | None = None,
    ) -> None:
        super().__init__(responder, default=default, delay_s=delay_s)
        self.api_key = api_key

    def _marker_text(self, request: OpenAIRequest) -> str:
        return "\n".join(t for t in (request.system_text(), request.text()) if t)

    def _authorized(self, headers: dict[str, str]) -> bool:
        value = headers.get("authorization", "")
        if not value.startswith("Bearer ") or not value[len("Bearer ") :].strip():
            return False
        return self.api_key is None or value == f"Bearer {self.api_key}"

    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[Reply, OpenAIRequest | None]:
        if method != "POST" or path.split("?", 1)[0] != PATH:
            return Reply.error(404, message=f"Invalid URL ({method} {path})"), None
        if not self._authorized(headers):
            return Reply.error(401, message="Incorrect API key provided."), None
        body = parse_json_object(raw)
        if body is None:
            return Reply.error(400, message="We could not parse the JSON body of your request."), None
        request = OpenAIRequest(path=path, headers=headers, body=body)
        return self._accept(request), request

    def _payload(self, reply: Reply, request: OpenAIRequest | None) -> bytes:
        return reply.response_body(request)

    def _content_type(self, reply: Reply) -> str:
        return reply.content_type
