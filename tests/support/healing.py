"""Test providers whose failures heal, and the helpers that run the synthesis stage over a local store with them
(tests/unit/test_healing.py, test_score_reuse.py, the toy_mos plugin's test, benchmarks/faults.py).

The providers are loaded through the `plugins` setting by dotted path (tests.support.healing:BuggyTTS, ...), as a
user's would be, and append what they were asked to `CALLS`: a test clears it and reads it back. They live here, in
one importable module, so the module the registry imports is the one the test reads `CALLS` from.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.errors import PermanentProviderError, TransientProviderError
from ttseval.core.protocols import PairwiseVerdict, QualityScore
from ttseval.core.registry import Spec
from ttseval.tasks.parts import get_store
from ttseval.tasks.plan import plan_synthesis
from ttseval.tasks.synthesize import synthesize_items

CALLS: list[str] = []
"""Texts the test providers were asked to speak (or judge), in order, across every provider object."""


def tone(text: str) -> Audio:
    """A deterministic 220 Hz tone, 50 ms per word."""
    t = np.arange(int(16000 * 0.05 * len(text.split()))) / 16000
    return Audio((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 16000)


class BuggyTTS:
    """A TTS with a programming error on texts containing 'bug' (a TypeError, as a broken SDK upgrade gives)
    and a documented permanent refusal on texts containing 'never'."""

    name: ClassVar[str] = "heal-tts"
    accepts_instruction: ClassVar[bool] = False
    version = "1.0"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        self.voice = voice

    def supports_language(self, language: str) -> bool:
        return True

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        CALLS.append(text)
        if "never" in text:
            raise PermanentProviderError(f"this voice refuses {text!r}")
        if "bug" in text:
            return self._speak_buggy(text)
        return tone(text)

    def _speak_buggy(self, text: str) -> Audio:
        return tone(text) + 1  # the bug: Audio does not support +

    def metadata(self) -> dict[str, Any]:
        return {"engine": "heal-tts"}


class FixedTTS(BuggyTTS):
    """The same provider after the bug fix: same name and version, so the same spec, system_id and keys."""

    def _speak_buggy(self, text: str) -> Audio:
        return tone(text)


class OutageTTS(BuggyTTS):
    """A vendor under an outage: texts with 'flaky' fail once then work; texts with 'down' fail every time."""

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        CALLS.append(text)
        if "down" in text or ("flaky" in text and CALLS.count(text) == 1):
            raise TransientProviderError(f"HTTP 503 for {text!r}")
        return tone(text)


class BuggyJudge:
    """A pairwise judge with a TypeError on its first batch; every later batch is judged a tie."""

    name: ClassVar[str] = "heal-judge"
    judge_id: ClassVar[str] = "heal-judge-1"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        self.batches = 0

    def metadata(self) -> dict[str, Any]:
        return {"judge": "heal-judge"}

    def judge_pairs(self, requests: list[Any]) -> list[PairwiseVerdict]:
        CALLS.extend(f"judge {r.item_id}" for r in requests)
        self.batches += 1
        if self.batches == 1:
            raise TypeError("'NoneType' object is not subscriptable")
        return [PairwiseVerdict(winner="tie", parse_ok=True) for _ in requests]


class UnreachableJudge(BuggyJudge):
    """A judge whose server cannot be reached on its first batch (no answer came); later batches answer."""

    def judge_pairs(self, requests: list[Any]) -> list[PairwiseVerdict]:
        CALLS.extend(f"judge {r.item_id}" for r in requests)
        self.batches += 1
        if self.batches == 1:
            return [
                PairwiseVerdict(
                    winner=None,
                    parse_ok=False,
                    error="Gemini HTTP 503 UNAVAILABLE: gave up after 2 retries",
                    retries=2,
                    attempts=0,
                    transient=True,
                )
                for _ in requests
            ]
        return [PairwiseVerdict(winner="candidate", parse_ok=True) for _ in requests]


SPEC = Spec.parse("heal-tts")


def settings_for(store: Path, tts: str, **extra: Any) -> Settings:
    plugins = {"tts": {"heal-tts": f"tests.support.healing:{tts}"}} | extra.pop("plugins", {})
    return Settings(store=str(store), plugins=plugins, item_retries=2, retry_backoff_s=0.0, shard_size=2, **extra)


def items_frame(items: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"item_id": i, "text": t, "language": "en-US", "instruction": None, "category": "questions"} for i, t in items]
    )


def run_synthesis(settings: Settings, items: list[tuple[str, str]]) -> set[str]:
    """Plan and run the synthesis stage like the evaluate flow does; returns the item ids it computed."""
    plan = plan_synthesis(get_store(settings.store), "r", items_frame(items), [SPEC], settings)
    computed = {i["item_id"] for shard in plan.shards for i in shard["items"]}
    assert plan.to_compute == len(computed)
    for shard in plan.shards:
        synthesize_items(settings, "r", shard)
    return computed


def synthesis(store: Path) -> pd.DataFrame:
    """The table as the planner sees it (newest row per key), after checking no key is stored twice."""
    raw = pd.read_parquet(store / "runs" / "r" / "synthesis")
    assert not raw.duplicated(["item_id", "system_id"]).any(), "a recomputed key left its old row behind"
    return get_store(str(store)).read("r", "synthesis").set_index("item_id").sort_index()


class EchoASR:
    """Hears the words it is told to: the item's text, except 'drop' (returns one result short: a contract bug)
    and 'crash' (a TypeError). Stands for a recogniser with bugs."""

    name: ClassVar[str] = "heal-asr"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        self.texts: dict[int, str] = {}

    def transcribe(self, batch: list[Audio], languages: list[str | None]) -> list[Any]:
        from ttseval.core.protocols import Transcript

        CALLS.append(f"asr {len(batch)}")
        n_words = [round(a.duration_s / 0.05) for a in batch]  # tone(): 50 ms per word
        if 4 in n_words:
            raise TypeError("'float' object cannot be interpreted as an integer")
        out = [Transcript(text=" ".join(["plain"] * n)) for n in n_words]
        return out[:-1] if 5 in n_words else out

    def metadata(self) -> dict[str, Any]:
        return {"asr": "heal-asr"}


class BrokenAudioTTS:
    """Audio broken in the ways a provider's can be, chosen by a word of the text."""

    name: ClassVar[str] = "heal-tts"
    accepts_instruction: ClassVar[bool] = False
    output_sample_rate_hz: ClassVar[int] = 16000
    version = "1.0"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        pass

    def supports_language(self, language: str) -> bool:
        return True

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        CALLS.append(text)
        seconds = len(text) / 14  # the predicted duration
        t = np.arange(int(16000 * seconds)) / 16000
        x = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
        if "nan" in text:
            x[100:200] = np.nan
        if "loud" in text:
            x = np.clip(8 * x, -1, 1)  # a third of the samples at full scale
        if "cut" in text:
            x = x[: len(x) // 5]  # a fifth of what the text needs
        if "rambling" in text:
            x = np.tile(x, 4)
        if "rate" in text:
            return Audio(x, 22050)
        return Audio(x, 16000)

    def metadata(self) -> dict[str, Any]:
        return {"engine": "broken"}


class CountingMOS:
    """Scores a clip by its length (50 ms per word -> words / 2) and counts the clips it scores."""

    name: ClassVar[str] = "count-mos"
    version = "1.0"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        pass

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        CALLS.append(f"mos {len(batch)}")
        return [QualityScore(mos=1 + a.duration_s / 0.05 / 2, details={"words": a.duration_s / 0.05}) for a in batch]

    def metadata(self) -> dict[str, Any]:
        return {"engine": "count-mos"}


class CountedASR(EchoASR):
    """EchoASR that remembers each object built (weakly), to see when the stages' cache builds and frees one."""

    built: ClassVar[list[weakref.ref]] = []

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        super().__init__(voice, **options)
        CountedASR.built.append(weakref.ref(self))
