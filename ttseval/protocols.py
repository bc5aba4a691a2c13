"""The small protocols every provider implements, and the records they exchange.

Each kind of provider (tts, asr, quality; judges and llm later) is a Protocol with one to three methods.
Class attributes declare metadata once; the registry and the stages read them instead of asking.
Providers raise `TransientProviderError` for failures worth retrying and `PermanentProviderError` for the rest;
the stages turn both into rows with a status and an error, never into a crash or a silent gap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from ttseval.audio import Audio


@runtime_checkable
class TTSProvider(Protocol):
    """A text-to-speech system.

    Class attributes: `name` (registry name), `version` (engine version string, recorded per row),
    `accepts_instruction` (whether `instruction` changes the output).
    """

    name: ClassVar[str]
    accepts_instruction: ClassVar[bool]

    def supports_language(self, language: str) -> bool:
        """Whether this system can speak `language` (a BCP-47 tag such as 'en-US' or 'fr')."""
        ...

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        """Speak `text` in `language`; `voice` overrides the spec's voice; `instruction` is a style prompt.

        Returns mono audio at the engine's native rate. Raises TransientProviderError or PermanentProviderError.
        """
        ...

    def metadata(self) -> dict[str, Any]:
        """JSON-safe facts about this configuration: engine, version, voice, options. Never secrets."""
        ...


@dataclass(frozen=True)
class Transcript:
    """One recogniser output. `detected_language` and `language_prob` are None when the backend gives none."""

    text: str
    detected_language: str | None = None
    language_prob: float | None = None


@runtime_checkable
class ASRProvider(Protocol):
    """A speech recogniser. `name` and `version` are class attributes."""

    name: ClassVar[str]

    def transcribe(self, batch: list[Audio], languages: list[str | None]) -> list[Transcript]:
        """Transcribe each clip; `languages[i]` is the expected language of clip i (a hint, may be None).

        Returns one Transcript per clip, in order. An empty text is a valid result (nothing recognised).
        """
        ...

    def metadata(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class QualityScore:
    """A predicted mean opinion score on the 1-5 scale, with the predictor's sub-scores in `details`."""

    mos: float
    details: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class QualityProvider(Protocol):
    """A reference-free quality (MOS) predictor. `name` and `version` are class attributes."""

    name: ClassVar[str]

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        """Predict MOS for each clip, in order."""
        ...

    def metadata(self) -> dict[str, Any]: ...
