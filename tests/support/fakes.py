"""Test providers loaded through the `plugins` setting (TTSEVAL_PLUGINS), so Dask workers can import them too."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError


class FlakyTTS:
    """A real tone generator that fails on purpose: raises on texts with '?', returns silence for 'Wow'.

    The failures are of two kinds on purpose: a documented PermanentProviderError and a plain RuntimeError,
    which stands for a bug in a third-party SDK; both must end as rows, not as a crashed run.
    """

    name: ClassVar[str] = "flaky"
    accepts_instruction: ClassVar[bool] = False
    version = "1.0"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        self.voice = voice or "tone"

    def supports_language(self, language: str) -> bool:
        return language.lower().startswith("en")

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        if "?" in text:
            raise PermanentProviderError(f"flaky refuses questions: {text[:20]!r}")
        if text.startswith("Oh"):
            raise RuntimeError("SDK exploded")
        rate = 16000
        t = np.arange(int(rate * 0.02 * len(text.split()))) / rate
        samples = np.zeros_like(t) if "Wow" in text else 0.3 * np.sin(2 * np.pi * 220 * t)
        return Audio(samples.astype(np.float32), rate)

    def metadata(self) -> dict[str, Any]:
        return {"engine": "flaky", "voice": self.voice}


class CountingFliteTTS:
    """Real flite speech that appends one line per synthesize call to the file named by option `log`.

    Lets a test prove that a flow made no synthesis calls, across processes (Dask workers). With option `gate`
    the first call is held as GatedFliteTTS holds it (after its line is written).
    """

    name: ClassVar[str] = "counting-flite"
    accepts_instruction: ClassVar[bool] = False

    def __init__(self, voice: str | None = None, log: str = "", gate: str = "", **options: Any) -> None:
        from ttseval.providers.tts.flite import FliteTTS

        self._inner = FliteTTS(voice=voice or "slt")
        self.version = self._inner.version
        self._log, self._gate = log, gate

    def supports_language(self, language: str) -> bool:
        return self._inner.supports_language(language)

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        with open(self._log, "a", encoding="utf-8") as f:
            f.write(json.dumps(text) + "\n")  # one line per call, the whole text
        if self._gate:
            hold_first_call(self._gate, 900.0, "counting-flite")
        return self._inner.synthesize(text, language)

    def metadata(self) -> dict[str, Any]:
        return self._inner.metadata()


class InstructedToneTTS:
    """A tone whose pitch is set by the instruction it receives: proves instructions reach the provider."""

    name: ClassVar[str] = "instructed-tone"
    accepts_instruction: ClassVar[bool] = True
    version = "1.0"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        self.voice = voice

    def supports_language(self, language: str) -> bool:
        return True

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        rate = 16000
        t = np.arange(int(rate * 0.5)) / rate
        freq = 200 + 10 * len(instruction or "")  # no instruction: 200 Hz
        return Audio((0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32), rate)

    def metadata(self) -> dict[str, Any]:
        return {"engine": "instructed-tone"}


class ScriptedJudge:
    """A pairwise judge answering from the item id: `<winner>-<difference>-<winner when swapped>-...`, e.g.
    `first-significant-second-3` (settled), `first-subtle-second-4` (subtle), `first-significant-first-5` (a flip:
    the same position wins in both orders). Costs `usd` a call; counts its calls."""

    name: ClassVar[str] = "scripted"
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False

    def __init__(self, voice: str | None = None, *, usd: str = "0.001") -> None:
        self.judge_id, self.spec, self.usd, self.calls = f"scripted-{voice}", f"scripted:{voice}", float(usd), 0

    def metadata(self) -> dict[str, Any]:
        return {"usd": self.usd}

    def judge_pairs(self, batch: list[Any]) -> list[Any]:
        from ttseval.core.protocols import PairwiseVerdict

        out = []
        for r in batch:
            self.calls += 1
            drawn, difference, swapped = r.item_id.split("-")[:3]
            if self.judge_id == "scripted-strong":
                winner = "first"
            else:
                winner = drawn if r.first_signals["order"] == "drawn" else swapped
            out.append(PairwiseVerdict(winner=winner, parse_ok=True, difference=difference, cost_usd=self.usd))
        return out


class InstructionOnlyJudge:
    """A judge that judges instruction following only: it can be a run's instruction judge, never a cascade's."""

    name = "says-yes"

    def __init__(self, voice: str | None = None) -> None:
        self.judge_id = "says-yes-1"

    def judge_instructions(self, batch: list[object]) -> list[object]:
        return []

    def metadata(self) -> dict[str, str]:
        return {}


class HelloASR:
    """A recogniser that hears 'hello' in every clip: the placement test needs the model stages, not their answers."""

    name: ClassVar[str] = "place-asr"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        pass

    def transcribe(self, batch: list[Audio], languages: list[str | None]) -> list[Any]:
        from ttseval.core.protocols import Transcript

        return [Transcript(text="hello") for _ in batch]

    def metadata(self) -> dict[str, Any]:
        return {"asr": "place-asr"}


class FlatMOS:
    """A MOS predictor that gives every clip 3.0: the placement test needs the stage, not its scores."""

    name: ClassVar[str] = "place-mos"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        pass

    def score(self, batch: list[Audio]) -> list[Any]:
        from ttseval.core.protocols import QualityScore

        return [QualityScore(mos=3.0) for _ in batch]

    def metadata(self) -> dict[str, Any]:
        return {"mos": "place-mos"}


class GatedFliteTTS:
    """Real flite speech (the same clips as `flite:<voice>`) that holds exactly one call until the test lets it go.

    Option `gate` names a folder the test owns. The first call, in whichever Dask worker process it runs, claims
    the hold by creating `<gate>/held` (an exclusive create, so one call of all processes wins) and waits until
    `<gate>/open` exists; every other call, and every call once `open` exists, speaks at once. A run with this
    system therefore cannot finish before the test creates `open`: a test can kill it mid-run at a moment of its
    choosing. The hold gives up after `hold_s` seconds with an error (a test that forgot to open the gate).
    """

    name: ClassVar[str] = "gated-flite"
    accepts_instruction: ClassVar[bool] = False

    def __init__(self, voice: str | None = None, gate: str = "", hold_s: str = "900", **options: Any) -> None:
        from ttseval.providers.tts.flite import FliteTTS

        if not gate:
            raise ValueError("gated-flite needs the option gate=<folder>")
        self._inner = FliteTTS(voice=voice or "slt")
        self.version = self._inner.version
        self._gate, self._hold_s = gate, float(hold_s)

    def supports_language(self, language: str) -> bool:
        return self._inner.supports_language(language)

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        hold_first_call(self._gate, self._hold_s, self.name)
        return self._inner.synthesize(text, language)

    def metadata(self) -> dict[str, Any]:
        return self._inner.metadata()


def hold_first_call(gate: str, hold_s: float, name: str) -> None:
    """The gate of GatedFliteTTS: the first caller of all processes creates `<gate>/held` and waits for
    `<gate>/open`; every other call, and every call once `open` exists, returns at once."""
    import os
    import time

    opened = os.path.join(gate, "open")
    if os.path.exists(opened):
        return
    try:
        os.close(os.open(os.path.join(gate, "held"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # another call holds the gate: this one speaks at once
    deadline = time.monotonic() + hold_s
    while not os.path.exists(opened):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: {opened} did not appear within {hold_s:g} s")
        time.sleep(0.05)  # polls the test's condition, with the deadline above
