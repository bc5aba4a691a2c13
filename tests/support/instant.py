"""Instant providers for the tests whose assertions are about pipeline mechanics (resume, leases, budgets, drift,
judging, billing), loaded through the `plugins` setting (`PLUGINS` below), so Dask workers import them too:

- `InstantTTS` ("instant"): a clip that carries its text. Each word is its UTF-8 bytes, one byte a block of
  constant samples (byte / 512, the sign alternating from byte to byte), the words separated by a block of silence;
  a block lasts 0.02 s times `pace`, so a slower voice (pace=1.3) makes clips exactly 1.3 times as long.
- `InstantASR` ("instant-asr"): reads the words back. A word counts only when the silence after it was heard, so a
  clip cut short loses exactly the words it cut, and audio that is not the instant voice's (a tone, a real
  engine's clip) is heard as nothing.
- `InstantMOS` ("instant-mos"): 1 + 4 x the share of the clip that is not silence; a clip of silence scores 1.

They take microseconds, load nothing and survive the store's 16-bit WAV (a byte block is 64 PCM steps from the
next), so a run on them costs what the pipeline itself costs. What a real model hears is tested on the real
engines (the providers' own tests and a bounded set of end-to-end runs)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, QualityScore, Transcript

RATE_HZ = 16000
BLOCK_S = 0.02
"""Seconds one byte (or the silence after a word) lasts at pace 1."""
_LEVEL = 512
"""A byte b is the sample value b / _LEVEL (below 0.5, so the clip never clips)."""
_MIN_BLOCK = 8
"""Samples a constant block needs to be read as a byte: a tone or a real voice never holds a value this long."""

PLUGINS: dict[str, dict[str, str]] = {
    "tts": {"instant": "tests.support.instant:InstantTTS"},
    "asr": {"instant-asr": "tests.support.instant:InstantASR"},
    "quality": {"instant-mos": "tests.support.instant:InstantMOS"},
}
"""The `plugins` setting (TTSEVAL_PLUGINS as JSON) that registers the three."""


def env(plugins: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
    """A command's environment for a run whose every recogniser and MOS predictor is instant, with `plugins` (more
    test providers by kind) registered beside the instant ones; its systems may be instant voices ("instant",
    "instant:slow:pace=1.3", ...)."""
    merged = {kind: PLUGINS.get(kind, {}) | (plugins or {}).get(kind, {}) for kind in PLUGINS.keys() | (plugins or {})}
    return {
        "TTSEVAL_PLUGINS": json.dumps(merged),
        "TTSEVAL_ASR": json.dumps({"*": "instant-asr", "en": "instant-asr"}),
        "TTSEVAL_QUALITY": "instant-mos",
    }


ENV = env()
"""`env()`: the instant providers only."""


def speak(text: str, pace: float = 1.0, rate_hz: int = RATE_HZ) -> Audio:
    """The instant voice's clip of `text` (InstantTTS without the provider around it), at `rate_hz`."""
    block = round(BLOCK_S * pace * rate_hz)
    pieces = []
    for word in text.split():
        data = np.frombuffer(word.encode("utf-8"), dtype=np.uint8).astype(np.float32) / _LEVEL
        data *= np.where(np.arange(len(data)) % 2 == 0, 1.0, -1.0).astype(np.float32)
        pieces += [np.repeat(data, block), np.zeros(block, dtype=np.float32)]
    samples = np.concatenate(pieces) if pieces else np.zeros(block, dtype=np.float32)
    return Audio(samples.astype(np.float32), rate_hz)


def hear(audio: Audio) -> str:
    """The words an instant clip carries, each one only if the silence after it is there (a cut word is lost)."""
    scaled = audio.samples.astype(np.float64) * _LEVEL
    levels = np.rint(scaled).astype(np.int64)
    if not len(levels):
        return ""
    off_grid = np.abs(scaled - levels) > 0.05  # the 16-bit WAV moves a level by at most 0.016
    starts = np.flatnonzero(np.diff(levels, prepend=levels[0] + 1))  # where each run of one value begins
    ends = np.append(starts[1:], len(levels))
    words, current = [], bytearray()
    for start, end in zip(starts, ends):
        value = abs(int(levels[start]))
        if end - start < _MIN_BLOCK or off_grid[start:end].any() or 0 < value < 0x21 or value > 0xFF:
            current = bytearray()  # not the instant voice: whatever was being read is not a word
        elif value == 0:
            if current:
                words.append(current.decode("utf-8", errors="replace"))
            current = bytearray()
        else:
            current.append(value)
    return " ".join(words)


class InstantTTS:
    """Speaks in no time. Options (all optional): `pace` stretches every block (a slower voice); `drop` leaves out
    every drop-th word (a mumbling voice: CER above 0); `only` is the base languages it speaks, '+'-separated (others
    are unsupported, as an English-only engine's); `refuse` is a word whose texts fail with a permanent provider
    error (a provider failure row); `log` is a file that gets one line per synthesize call, so a test counts calls
    made on any worker; `gate` is a folder whose first call of all processes is held until the test opens it
    (tests.support.fakes.hold_first_call), so a run is mid-way for as long as the test needs."""

    name: ClassVar[str] = "instant"
    accepts_instruction: ClassVar[bool] = False
    languages: ClassVar[str] = ANY_LANGUAGE
    output_sample_rate_hz: ClassVar[int] = RATE_HZ
    version: ClassVar[str] = "1.0"

    def __init__(
        self,
        voice: str | None = None,
        pace: str = "1.0",
        drop: str = "0",
        only: str = "",
        refuse: str = "",
        log: str = "",
        gate: str = "",
        **options: Any,
    ) -> None:
        self.voice, self.pace, self.drop, self.refuse, self.log = voice or "plain", float(pace), int(drop), refuse, log
        self.gate = gate
        self.only = {code.strip().lower() for code in only.split("+") if code.strip()}

    def supports_language(self, language: str) -> bool:
        from ttseval.core.languages import base_language

        return not self.only or base_language(language) in self.only

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        if self.gate:
            from tests.support.fakes import hold_first_call

            hold_first_call(self.gate, 900.0, self.name)
        if self.log:
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(f"{text}\n")
        if self.refuse and self.refuse in text:
            raise PermanentProviderError(f"the instant voice refuses texts with {self.refuse!r}")
        words = text.split()
        if self.drop:
            words = [w for i, w in enumerate(words, start=1) if i % self.drop]
        return speak(" ".join(words), self.pace)

    def metadata(self) -> dict[str, Any]:
        return {"engine": "instant", "voice": self.voice, "pace": self.pace, "drop": self.drop}


class InstantASR:
    """Hears exactly the words an instant clip carries. Option `seconds`: each clip takes that long to hear (a slow
    recogniser: a run on it is still in its transcripts stage for at least that long per clip, so a fault a test
    starts once the first transcript is stored lands mid-run by construction)."""

    name: ClassVar[str] = "instant-asr"
    languages: ClassVar[str] = ANY_LANGUAGE
    version: ClassVar[str] = "1.0"

    def __init__(self, voice: str | None = None, seconds: str = "0", **options: Any) -> None:
        self.seconds = float(seconds)

    def transcribe(self, batch: list[Audio], languages: list[str | None]) -> list[Transcript]:
        if self.seconds:
            import time

            time.sleep(self.seconds * len(batch))
        return [Transcript(text=hear(audio)) for audio in batch]

    def metadata(self) -> dict[str, Any]:
        return {"asr": "instant-asr"}


class InstantMOS:
    """1 + 4 x the share of the clip that is not silence."""

    name: ClassVar[str] = "instant-mos"
    version: ClassVar[str] = "1.0"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        pass

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        return [
            QualityScore(mos=1.0 + 4.0 * float(np.mean(audio.samples != 0)) if len(audio.samples) else 1.0)
            for audio in batch
        ]

    def metadata(self) -> dict[str, Any]:
        return {"mos": "instant-mos"}
