"""A remote voice that changes behind an unchanged API version, for the nightly tests (test_nightly_canary,
test_nightly_week): OpenAI's speech wire format on loopback, answering every request with fresh audio, a tone whose
length follows the text with a small jitter that changes every night."""

from __future__ import annotations

import hashlib
from typing import Any

from tests.support.fake_tts import FakeOpenAISpeech, TTSReply, TTSRequest, encode, tone

KEY = "sk-fake-openai-0123456789abcdef"
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


class ChangingVoice(FakeOpenAISpeech):
    """Fresh audio each night: `seconds_per_char` sets the voice's pace; the jitter (within 1.5%) follows the
    text and the night, so it is the same whatever order the workers ask in."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.seconds_per_char, self.night = 0.02, 1

    def _payload(self, reply: TTSReply, request: TTSRequest | None) -> bytes:
        if request is None or reply.status != 200 or reply.body is not None or reply.audio is not None:
            return super()._payload(reply, request)
        draw = int(hashlib.sha256(f"{self.night}/{request.text}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        seconds = max(0.2, self.seconds_per_char * len(request.text)) * (1 + 0.03 * (draw - 0.5))
        return encode(tone(seconds, request.sample_rate_hz), request.sample_rate_hz, request.fmt)
