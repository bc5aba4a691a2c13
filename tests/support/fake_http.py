"""What the loopback fake APIs (tests/support/fake_gemini.py, tests/support/fake_openai.py) share: a scripted HTTP
server.

A subclass of `ScriptedFakeServer` supplies only its wire format: how a raw HTTP request becomes a request object
or an error reply (`_route`), the text a script's markers are looked for in (`_marker_text`), how a reply is
serialized (`_payload`, `_content_type`), and the Reply class whose `ok`/`error` constructors it uses. This class
keeps the rest:

- which reply a request gets: the first scripted marker (in the order `script` was called) that occurs in
  `_marker_text(request)` and still has replies queued pops its next reply; otherwise `responder(request)` when
  one was given and it returns something (a dict or str becomes `Reply.ok(answer)`, a Reply goes as it is, None
  falls through); otherwise `default(request)`;
- the counters: requests, status_counts, calls (= total_requests), ok_responses, in_flight, max_in_flight;
- a ThreadingHTTPServer on 127.0.0.1:<free port> (or `bind`), start/stop and use as a context manager.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

Req = TypeVar("Req")
Rep = TypeVar("Rep")


def parse_json_object(raw: bytes) -> dict[str, Any] | None:
    """The request body as a JSON object (an empty body as {}), or None when it is not one."""
    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def wav(freq_hz: float = 440.0, duration_s: float = 0.2, sample_rate_hz: int = 16000) -> bytes:
    """A short sine tone as WAV bytes, for audio parts sent to a fake."""
    import numpy as np
    import soundfile as sf

    t = np.arange(int(duration_s * sample_rate_hz)) / sample_rate_hz
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(2 * np.pi * freq_hz * t)).astype(np.float32), sample_rate_hz, format="WAV")
    return buf.getvalue()


class ScriptedFakeServer(Generic[Req, Rep]):
    """The server, its script and its counters. Use as a context manager (or call start/stop)."""

    reply_class: Any  # the subclass's Reply: has classmethods ok(answer) and error(status, message=...)
    name = "fake"  # the serving thread's name, and the subject of "... is not started"
    url_prefix = ""  # appended to http://host:port in base_url
    protocol_version = "HTTP/1.0"  # "HTTP/1.1" keeps connections alive
    methods: tuple[str, ...] = ("POST",)  # HTTP methods handed to _route; others get http.server's 501

    bind: tuple[str, int] = ("127.0.0.1", 0)  # (address, port) to listen on; a test host's fake: ("0.0.0.0", PORT)

    def __init__(
        self,
        responder: Callable[[Req], dict[str, Any] | str | Rep | None] | None = None,
        *,
        default: Callable[[Req], Rep],
        delay_s: float = 0.0,
    ) -> None:
        self.responder = responder
        self.default = default
        self.delay_s = delay_s
        self.requests: list[Req] = []
        self.status_counts: Counter[int] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._scripts: dict[str, list[Rep]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- the wire format (the subclass's part) ---------------------------------------------------------------
    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[Rep, Req | None]:
        """(reply, request) for one HTTP request; request is None when it was refused before parsing. Call
        `self._accept(request)` for a well-formed request to record it and choose its reply."""
        raise NotImplementedError

    def _marker_text(self, request: Req) -> str:
        """The text scripted markers are looked for in."""
        raise NotImplementedError

    def _payload(self, reply: Rep, request: Req | None) -> bytes:
        raise NotImplementedError

    def _content_type(self, reply: Rep) -> str:
        return "application/json"

    def _unexpected_answer(self, answer: object) -> Rep:
        """What a responder's answer of the wrong type gets (by default, an error in the handler)."""
        raise TypeError(f"responder returned {type(answer).__name__}; expected dict, str, Reply or None")

    # -- scripting ---------------------------------------------------------------------------------------------
    def script(self, marker: str, replies: list[Rep]) -> None:
        """Queue `replies` for requests whose text contains `marker` (appends to an existing queue)."""
        with self._lock:
            self._scripts.setdefault(marker, []).extend(replies)

    def pending(self) -> dict[str, int]:
        """Scripted replies not yet used, per marker."""
        with self._lock:
            return {k: len(v) for k, v in self._scripts.items() if v}

    def _choose(self, request: Req) -> Rep:
        text = self._marker_text(request)
        with self._lock:
            for marker, queue in self._scripts.items():
                if queue and marker in text:
                    return queue.pop(0)
        if self.responder is not None:
            answer = self.responder(request)
            if isinstance(answer, self.reply_class):
                return answer
            if isinstance(answer, (dict, str)):
                return self.reply_class.ok(answer)
            if answer is not None:
                return self._unexpected_answer(answer)
        return self.default(request)

    def _accept(self, request: Req) -> Rep:
        """Record a well-formed request and choose its reply."""
        with self._lock:
            self.requests.append(request)
        return self._choose(request)

    # -- counters ----------------------------------------------------------------------------------------------
    @property
    def calls(self) -> int:
        """HTTP exchanges answered, whatever the status."""
        return sum(self.status_counts.values())

    @property
    def total_requests(self) -> int:
        return self.calls

    @property
    def ok_responses(self) -> int:
        return self.status_counts[200]

    # -- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.url_prefix}"

    def start(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = fake.protocol_version

            def handle_any(self) -> None:
                fake._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # silence per-request stderr lines
                pass

        for method in self.methods:
            setattr(Handler, f"do_{method}", Handler.handle_any)
        self._server = ThreadingHTTPServer(self.bind, Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=self.name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one request -------------------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length)
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        counted = True  # in flight until its reply starts: a client that has the reply may send its next request
        try:
            reply, request = self._route(h.command, h.path, headers, raw)
            delay = reply.delay_s or self.delay_s
            if delay:
                time.sleep(delay)
            payload = self._payload(reply, request)
            with self._lock:
                self.status_counts[reply.status] += 1
                self.in_flight -= 1  # before the reply is written, not after: else the client's next request,
                counted = False  # sent on reading this reply, could be counted with this one (4 of a limit of 3)
            try:
                h.send_response(reply.status)
                h.send_header("Content-Type", self._content_type(reply))
                h.send_header("Content-Length", str(len(payload)))
                for k, v in reply.headers.items():
                    h.send_header(k, v)
                h.end_headers()
                cut = getattr(reply, "cut_after", None)
                h.wfile.write(payload if cut is None else payload[:cut])
                if cut is not None:  # a connection reset in the middle of the body
                    h.wfile.flush()
                    h.close_connection = True
                    h.connection.shutdown(2)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer
        finally:
            if counted:
                with self._lock:
                    self.in_flight -= 1
