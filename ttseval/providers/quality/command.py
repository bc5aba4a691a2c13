"""A MOS predictor in an environment of its own (`command:<label>:run=COMMAND`): ttseval runs COMMAND (typically a
Python of another venv and a scorer script) and speaks the protocol `ttseval-scorer/1` with it (providers/_command.py),
so a metric whose pins cannot sit beside ours (UTMOSv2, anything needing torchaudio or an old torch) still runs as
a quality stage, with the same caching, reuse, failure rows and Dask placement as the built-in predictors.

Its op is `score`; each clip's answer is one of

    {"id": "0", "score": 3.9, "details": {"name": 1.0, ...}}   a MOS (0.5-5.5, as the quality table takes it);
                                                              other scales go in details (finite numbers)
    {"id": "1", "error": "why this clip has no score"}         the scorer refuses the clip: a final failed row

and anything else breaks the protocol (retryable rows, as a crash or a hang).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ttseval.core.audio import Audio
from ttseval.core.protocols import ANY_LANGUAGE, MOS_BOUNDS, Languages, QualityScore
from ttseval.providers import canonical_spec, parse_options
from ttseval.providers._command import CommandOptions, Described, ProtocolCommand, finite


class CommandQuality:
    """The scores a scorer command in another environment gives each clip."""

    name: ClassVar[str] = "command"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # a GPU run places its shards on GPU workers; `device` tells the scorer
    extra: ClassVar[str | None] = None
    output_sample_rate_hz: ClassVar[int | None] = None  # returns scores
    version: ClassVar[Described] = Described()
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ()

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.command = ProtocolCommand(self.name, voice, parse_options(CommandOptions, options, provider=self.name))
        self.label = self.command.label
        self.spec = canonical_spec(self.name, voice, options)

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        """The scorer's score of each clip, in order; a clip it refuses gets a refusal (no score).

        Raises:
            TransientProviderError: the scorer crashed, hung or broke the protocol on a call.
        """
        return [self._one(answer) for answer in self.command.ask("score", batch)]

    def _one(self, answer: dict[str, Any]) -> QualityScore:
        if answer.get("error") is not None:  # the scorer's verdict on this clip: final
            return QualityScore(mos=float("nan"), refused=f"{self.label}: {str(answer['error'])[:500]}")
        score, details = answer.get("score"), answer.get("details", {})
        if not finite(score) or not isinstance(details, dict) or not all(finite(v) for v in details.values()):
            raise self.command.broke(answer, "a finite number 'score' and 'details' of finite numbers")
        if not MOS_BOUNDS[0] <= score <= MOS_BOUNDS[1]:
            raise self.command.broke(
                answer,
                f"a 'score' on the MOS scale 1-5 (the quality table takes "
                f"{MOS_BOUNDS[0]:g}-{MOS_BOUNDS[1]:g}; other scales go in 'details')",
            )
        return QualityScore(
            mos=float(score), details={self.label: float(score)} | {str(k): float(v) for k, v in details.items()}
        )

    def metadata(self) -> dict[str, Any]:
        return self.command.metadata()
