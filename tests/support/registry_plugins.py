"""Plugin classes for tests/unit/test_registry.py, loaded by dotted path (tests.support.registry_plugins:<Class>):
a complete TTS without metadata, and classes that each lack what their kind's protocol needs."""

from __future__ import annotations

from typing import Any, ClassVar

from ttseval.core.audio import Audio


class SilentTTS:
    """A complete TTS provider that declares no metadata: a plugin written before the metadata existed."""

    name: ClassVar[str] = "silent"
    accepts_instruction: ClassVar[bool] = False

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        self.voice = voice

    def supports_language(self, language: str) -> bool:
        return True

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        raise NotImplementedError

    def metadata(self) -> dict[str, Any]:
        return {}


class NoSynthesizeTTS:
    """Has everything of a TTS provider except synthesize()."""

    name: ClassVar[str] = "mute"
    accepts_instruction: ClassVar[bool] = False

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        pass

    def supports_language(self, language: str) -> bool:
        return True

    def metadata(self) -> dict[str, Any]:
        return {}


class NeedyTTS(SilentTTS):
    """Declares a Python module that does not exist, installed by the 'engines' extra."""

    name: ClassVar[str] = "needy"
    extra: ClassVar[str | None] = "engines"
    imports: ClassVar[tuple[str, ...]] = ("ttseval_no_such_module",)


class ProgramTTS(SilentTTS):
    name: ClassVar[str] = "program"
    requires: ClassVar[tuple[str, ...]] = ("ttseval-no-such-program",)


class MetadataOnlyJudge:
    """A judge that judges nothing: neither judge_pairs nor judge_instructions."""

    name: ClassVar[str] = "idle"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        self.judge_id = "idle-1"

    def metadata(self) -> dict[str, Any]:
        return {}


class NoIdJudge:
    """Judges pairs but never sets the judge_id the rows are keyed by."""

    name: ClassVar[str] = "anonymous"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        pass

    def judge_pairs(self, batch: list[Any]) -> list[Any]:
        return []

    def metadata(self) -> dict[str, Any]:
        return {}
