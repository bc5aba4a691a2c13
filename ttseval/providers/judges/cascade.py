"""A judge cascade: a cheap judge on every pair, a strong judge only where the cheap one cannot settle it.

Spec: `cascade:<name>`, the name of a cascade in the settings:

    [cascades.flash-pro]
    cheap = "gemini:gemini-2.5-flash"
    strong = "gemini:gemini-2.5-pro"
    escalate = ["tie", "subtle", "flip"]     # the default

The cheap judge hears every pair in the order drawn and again swapped. A pair goes to the strong judge (in the
drawn order) when the cheap verdict is a tie, the cheap judge heard only a `subtle` difference, or its verdict
changes with the order (`flip`), as `escalate` lists; an unparsed cheap answer always escalates. With
`escalate_sample` below 1, only that share of the unsettled pairs (drawn by a hash of the pair, the same in every
run) goes to the strong judge; the others keep the cheap verdict in the drawn order. The cascade's verdict is the strong
one where asked, else the cheap one; its cost, tokens and attempts are every call's.
`comparison` starts with "[cheap; cheap $C, strong $S]", "[strong: <reasons>; ...]", "[cheap, not drawn: <reasons>;
...]" or, for the `audit_share` of settled pairs the strong judge also hears (its answer recorded, not used),
"[cheap, audited: strong said <answer>; ...]", which the report reads (ttseval.metrics.cascade: the share escalated,
each judge's cost, and how often the two judges agree on the audited pairs).

Why the swap for every pair: a cheap judge's order preference is the commonest way it is wrong on close pairs,
and at a tenth of the strong judge's price both orders cost less than one strong call in five.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, ClassVar

from ttseval.core.ids import stable_id
from ttseval.core.protocols import ANY_LANGUAGE, Languages, PairwiseJudge, PairwiseRequest, PairwiseVerdict, Winner

FLIP: dict[Winner, Winner] = {"first": "second", "second": "first", "tie": "tie"}


class CascadeJudge:
    """Pairwise only. Built from the run's settings' `cascades[name]` and judge plugins (`run_settings`: a task
    builds it from the settings object it was given, never from a worker's environment); built directly with
    neither, from this process's settings (the environment or ttseval.toml)."""

    name: ClassVar[str] = "cascade"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False
    extra: ClassVar[str | None] = None
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[str] = "1"
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ()
    run_settings: ClassVar[tuple[str, ...]] = ("cascades", "plugins", "allowed_endpoints")

    def __init__(
        self,
        voice: str | None = None,
        *,
        cascades: dict[str, Any] | None = None,
        plugins: dict[str, dict[str, str]] | None = None,
        allowed_endpoints: dict[str, list[str]] | None = None,
        **options: str,
    ) -> None:
        if options:
            raise ValueError(f"cascade takes no options ({', '.join(options)}); set them on its judges' specs")
        if cascades is None or plugins is None:
            from ttseval.core.config import load_settings

            settings = load_settings()
            cascades, plugins = settings.cascades, settings.plugins
            allowed_endpoints = settings.allowed_endpoints if allowed_endpoints is None else allowed_endpoints
        if not voice or voice not in cascades:
            known = ", ".join(sorted(cascades)) or "none"
            raise ValueError(
                f"cascade:{voice or ''}: no cascade of that name in the settings ([cascades.<name>] "
                f"with cheap and strong judge specs); known: {known}"
            )
        self.config = cascades[voice]
        judge_plugins = plugins.get("judge")
        self.cheap = _pairwise_judge(voice, "cheap", self.config.cheap, judge_plugins, allowed_endpoints)
        self.strong = _pairwise_judge(voice, "strong", self.config.strong, judge_plugins, allowed_endpoints)
        self.spec = f"cascade:{voice}"
        self.prompt_version = f"{self.cheap.judge_id}+{self.strong.judge_id}"
        identity: dict[str, Any] = {
            "cheap": self.cheap.judge_id,
            "strong": self.strong.judge_id,
            "escalate": sorted(self.config.escalate),
        }
        if self.config.escalate_sample < 1:  # only when set, so the ids of cascades that escalate all stay as they were
            identity["escalate_sample"] = self.config.escalate_sample
        self.judge_id = stable_id(f"cascade-{voice}", identity)
        # audit_share is not in the id: an audit changes no verdict

    @property
    def parts(self) -> tuple[PairwiseJudge, PairwiseJudge]:
        """The two judges, each limited by its own vendor's limits (ttseval.tasks.limits.limit_calls)."""
        return self.cheap, self.strong

    def metadata(self) -> dict[str, Any]:
        return {
            "provider": self.name,
            "judge_id": self.judge_id,
            "cheap": self.cheap.metadata(),
            "strong": self.strong.metadata(),
            "escalate": list(self.config.escalate),
        }

    def reasons(self, drawn: PairwiseVerdict, swapped: PairwiseVerdict) -> list[str]:
        """Why a pair goes to the strong judge; empty when the cheap verdict stands."""
        if not (drawn.parse_ok and swapped.parse_ok) or drawn.winner is None or swapped.winner is None:
            return ["unparsed"]  # a verdict without a winner is no answer, whatever its parse_ok says
        why = []
        if "tie" in self.config.escalate and drawn.winner == "tie":
            why.append("tie")
        if "subtle" in self.config.escalate and (drawn.difference or "").lower() in ("subtle", "none"):
            why.append("subtle")
        if "flip" in self.config.escalate and FLIP[swapped.winner] != drawn.winner:
            why.append("flip")
        return why

    @staticmethod
    def draw(request: PairwiseRequest) -> float:
        """A number in [0, 1) fixed by the item and both clips, so the same pair is drawn in every run."""
        key = hashlib.sha256(request.item_id.encode())
        for clip in (request.first, request.second):
            key.update(clip.samples[:4096].tobytes())
        return int.from_bytes(key.digest()[:8], "big") / 2**64

    def asked(self, request: PairwiseRequest, why: list[str]) -> bool:
        """Whether the strong judge hears a pair: an unparsed cheap answer always; an unsettled pair when drawn
        (`escalate_sample`); a settled one when drawn for the audit (`audit_share`)."""
        if "unparsed" in why:
            return True
        return self.draw(request) < (self.config.escalate_sample if why else self.config.audit_share)

    def judge_pairs(self, batch: list[PairwiseRequest]) -> list[PairwiseVerdict]:
        cheap = self.cheap.judge_pairs(batch + [r.swapped() for r in batch])
        drawn, swapped = cheap[: len(batch)], cheap[len(batch) :]
        why = [self.reasons(d, s) for d, s in zip(drawn, swapped)]
        asked = [i for i, (r, w) in enumerate(zip(batch, why)) if self.asked(r, w)]
        strong = dict(zip(asked, self.strong.judge_pairs([batch[i] for i in asked]))) if asked else {}
        out = []
        for i, (d, s) in enumerate(zip(drawn, swapped)):
            cheap_usd = (d.cost_usd or 0.0) + (s.cost_usd or 0.0)
            calls = [d, s] + ([strong[i]] if i in strong else [])
            strong_usd = (strong[i].cost_usd or 0.0) if i in strong else 0.0
            v = d  # the cheap verdict in the drawn order: the orders are drawn at random, so its position bias
            # averages out over pairs, and the bench measured it closer to the strong judge than counting flips as ties
            if why[i] and i in strong:
                v, label = strong[i], f"[strong: {', '.join(why[i])}"
            elif why[i]:
                label = f"[cheap, not drawn: {', '.join(why[i])}"
            elif i in strong:
                label = f"[cheap, audited: strong said {strong[i].winner if strong[i].parse_ok else 'unparsed'}"
            else:
                label = "[cheap"
            label += f"; cheap ${cheap_usd:.6f}, strong ${strong_usd:.6f}]"
            out.append(
                dataclasses.replace(
                    v,
                    comparison=f"{label} {v.comparison or ''}".strip(),
                    cost_usd=cheap_usd + strong_usd,
                    input_tokens=sum(c.input_tokens or 0 for c in calls),
                    output_tokens=sum(c.output_tokens or 0 for c in calls),
                    attempts=sum(c.attempts for c in calls),
                    retries=sum(c.retries for c in calls),
                )
            )
        return out


def _pairwise_judge(
    cascade: str,
    role: str,
    spec: str,
    plugins: dict[str, str] | None,
    allowed_endpoints: dict[str, list[str]] | None,
) -> PairwiseJudge:
    """The cascade's `role` judge, built from `spec`, with the cascade's allowed_endpoints where it sends a key.

    Raises:
        ValueError: the judge judges no pairs (an instruction-only judge cannot be a cascade's).
    """
    from ttseval.core.registry import Spec
    from ttseval.providers.judges import JUDGES

    cls = JUDGES.resolve(Spec.parse(spec).provider, plugins)
    keyed = "allowed_endpoints" in getattr(cls, "run_settings", ())
    judge = JUDGES.build(spec, extra=plugins, **({"allowed_endpoints": allowed_endpoints} if keyed else {}))
    if not isinstance(judge, PairwiseJudge):
        raise ValueError(f"cascade:{cascade}: its {role} judge {spec!r} does not judge pairs")
    return judge
