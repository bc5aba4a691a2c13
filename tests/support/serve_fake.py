"""A fake vendor as a process of its own, for a test host (tests/support/hosts.py) that plays the vendor's machine:

    python -m tests.support.serve_fake openai-speech PORT

serves tests/support/fake_tts.py's FakeOpenAISpeech (any bearer key) on every address at PORT until SIGTERM, and answers
GET /_counters (no key needed) with what a vendor bills so far: {"paid_calls", "paid_keys", "requests"}."""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

from tests.support.fake_tts import FakeOpenAISpeech, TTSReply


class CountedOpenAISpeech(FakeOpenAISpeech):
    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[TTSReply, Any]:
        if method == "GET" and path == "/_counters":
            with self._lock:
                body = {
                    "paid_calls": self.paid_calls,
                    "paid_keys": list(self.paid_keys),
                    "requests": len(self.requests),
                }
            return TTSReply(body=json.dumps(body).encode(), content_type="application/json"), None
        return super()._route(method, path, headers, raw)


FAKES = {"openai-speech": CountedOpenAISpeech}


def main(kind: str, port: str) -> None:
    fake = FAKES[kind](api_key=None)
    fake.bind = ("0.0.0.0", int(port))
    fake.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(0.2):
        pass
    fake.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
