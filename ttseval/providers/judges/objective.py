"""An objective pairwise judge that needs no LLM: lower CER wins, then higher predicted MOS, else a tie.

It runs offline on the pipeline's own measurements, so the embedded default produces win-rates end to end.
It judges intelligibility and predicted naturalness only, not prosody or emotion; every report names it as
'objective (CER, then MOS; no LLM)' so nobody mistakes it for a listening judge.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ttseval.core.ids import stable_id
from ttseval.core.protocols import ANY_LANGUAGE, Languages, PairwiseRequest, PairwiseVerdict, Winner
from ttseval.providers import EngineVersion, package_version, parse_options

LABEL = "objective (CER, then MOS; no LLM)"


class ObjectiveOptions(BaseModel):
    cer_margin: float = Field(0.02, ge=0, description="CER differences up to this are a draw on intelligibility")
    mos_margin: float = Field(0.1, ge=0, description="MOS differences up to this are a draw on quality")


class ObjectiveJudge:
    """Compares two clips by their CER against the text, then by predicted MOS, with tie margins."""

    name: ClassVar[str] = "objective"
    prompt_version: ClassVar[str] = "objective-cer-mos-v1"
    label: ClassVar[str] = LABEL
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False  # judges pairs only, not instruction following
    gpu: ClassVar[bool] = False
    order_sensitive: ClassVar[bool] = False  # its rule reads both clips' CER and MOS, in no order
    extra: ClassVar[str | None] = None
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("ttseval"))  # the rule is this code
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ()

    def __init__(self, voice: str | None = None, **options: str) -> None:
        if voice:
            raise ValueError(f"the objective judge has no model; got {voice!r}")
        self.options = parse_options(ObjectiveOptions, options, provider=self.name)
        self.judge_id = stable_id("objective", {"version": self.prompt_version, **self.options.model_dump()})

    def _decide(self, r: PairwiseRequest) -> PairwiseVerdict:
        winner: Winner
        cer1, cer2 = r.first_signals.get("cer"), r.second_signals.get("cer")
        mos1, mos2 = r.first_signals.get("mos"), r.second_signals.get("mos")
        if cer1 is None or cer2 is None:
            return PairwiseVerdict(
                winner=None, parse_ok=False, error="a clip has no CER (its transcript failed)", cost_usd=0.0
            )
        if abs(cer1 - cer2) > self.options.cer_margin:
            winner, why = ("first" if cer1 < cer2 else "second"), f"CER {cer1:.3f} vs {cer2:.3f}"
        elif mos1 is not None and mos2 is not None and abs(mos1 - mos2) > self.options.mos_margin:
            winner, why = ("first" if mos1 > mos2 else "second"), f"CER within margin; MOS {mos1:.2f} vs {mos2:.2f}"
        else:
            winner, why = "tie", "CER and MOS within their margins"
        return PairwiseVerdict(
            winner=winner,
            parse_ok=True,
            score_first=1.0 - min(cer1, 1.0),
            score_second=1.0 - min(cer2, 1.0),
            comparison=why,
            raw_response=why,
            cost_usd=0.0,
            input_tokens=0,
            output_tokens=0,
        )

    def judge_pairs(self, batch: list[PairwiseRequest]) -> list[PairwiseVerdict]:
        return [self._decide(r) for r in batch]

    def metadata(self) -> dict[str, Any]:
        return {"judge": self.name, "label": LABEL, "version": self.prompt_version, **self.options.model_dump()}
