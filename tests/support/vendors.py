"""ElevenLabs, Deepgram and Cartesia as the tests see them (test_tts_vendors_a, test_paid_run): each provider's
class, key variable, a voice and a misspelling of it, words of its quota and content-policy answers, and its price."""

from __future__ import annotations

from dataclasses import dataclass

from ttseval.providers.tts.cartesia import CartesiaTTS
from ttseval.providers.tts.deepgram import DeepgramTTS
from ttseval.providers.tts.elevenlabs import ElevenLabsTTS


@dataclass(frozen=True)
class Vendor:
    cls: type
    env: str
    voice: str
    near_miss: str  # a misspelt voice, whose closest match is `voice`
    quota_reason: str  # words of the vendor's own quota answer
    refusal_reason: str  # words of the vendor's own content-policy answer
    price: float  # USD per million characters of the default model


VENDORS = {
    "elevenlabs": Vendor(
        ElevenLabsTTS,
        "ELEVENLABS_API_KEY",
        "JBFqnCBsd6RMkjVDRZzb",
        "JBFqnCBsd6RMkjVDRZzc",
        "exceeds your quota",
        "Terms of Service",
        100.0,
    ),
    "deepgram": Vendor(
        DeepgramTTS,
        "DEEPGRAM_API_KEY",
        "aura-2-thalia-en",
        "aura-2-thalya-en",
        "does not have enough credits",
        "content policy",
        30.0,
    ),
    "cartesia": Vendor(
        CartesiaTTS,
        "CARTESIA_API_KEY",
        "694f9389-aac1-45b6-b726-9d9369183238",
        "694f9389-aac1-45b6-b726-9d9369183239",
        "run out of credits",
        "content policy",
        50.0,
    ),
}
