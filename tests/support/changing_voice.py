"""A remote voice that changes behind an unchanged API version, for the nightly tests (test_nightly_canary and the
week's): OpenAI's speech wire format on loopback, answering every request with fresh audio in the instant voice
(tests/support/instant.py, so the instant recogniser hears its words) at a pace with a small jitter that changes
every night."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.support.fake_tts import FakeOpenAISpeech, TTSReply, TTSRequest, encode
from tests.support.instant import speak
from tests.support.keys import OPENAI_KEY

KEY = OPENAI_KEY
TEXTS = [
    "Is the kettle on yet?",
    "The quick brown fox jumps over the lazy dog.",
    "Tell me what you saw, please.",
    "Where did you leave the keys?",
    "I cannot believe we won the final!",
    "Please close the door quietly.",
    "Which train goes to the airport?",
    "What a wonderful surprise this is!",
]


def write_items(path: Path, prefix: str) -> list[dict[str, Any]]:
    """TEXTS as a dataset at `path`, items `<prefix>0`, `<prefix>1`, ... in English, questions and emotions in turn;
    returns the rows."""
    rows = [
        {
            "item_id": f"{prefix}{i}",
            "text": t,
            "language": "en-US",
            "category": ("questions", "emotions")[i % 2],
            "depth": 0,
        }
        for i, t in enumerate(TEXTS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


class ChangingVoice(FakeOpenAISpeech):
    """Fresh audio each night: `pace` sets the voice's pace (1.3 is 30% slower); the jitter (within 1.5%) follows
    the text and the night, so it is the same whatever order the workers ask in."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.pace, self.night = 1.0, 1

    def _payload(self, reply: TTSReply, request: TTSRequest | None) -> bytes:
        if request is None or reply.status != 200 or reply.body is not None or reply.audio is not None:
            return super()._payload(reply, request)
        draw = int(hashlib.sha256(f"{self.night}/{request.text}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        clip = speak(request.text, self.pace * (1 + 0.03 * (draw - 0.5)), request.sample_rate_hz)
        return encode(clip.samples, request.sample_rate_hz, request.fmt)
