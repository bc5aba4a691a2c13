"""Plugin providers for the store made by release 0.1.0 (tests/data/release_0_1): a LID model that hears English
in every clip. The real LID backend needs a model this machine builds at random; a plugin keeps the store's keys
independent of any file path."""

from __future__ import annotations

from typing import Any, ClassVar


class EnglishLID:
    name: ClassVar[str] = "always-en"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        pass

    def identify(self, batch: list[Any]) -> list[Any]:
        from ttseval.core.protocols import LanguageGuess

        return [LanguageGuess(language="eng", prob=1.0) for _ in batch]

    def metadata(self) -> dict[str, Any]:
        return {"lid": "always-en"}
