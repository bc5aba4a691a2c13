"""A judge cascade against the strong judge alone: same ranking of systems, at what share of the cost?

Simulated judges with set error rates (no API): every clip has a hidden true quality (its system's quality plus
an item effect); a judge hears each clip's quality plus its own Gaussian noise, per call, and answers the higher
one (a tie inside `margin`; "subtle" inside twice the margin). The strong judge is near the truth (noise 0.1,
USD 0.02 a call), the cheap one noisier (noise from --cheap-noise, USD 0.001: Gemini 2.5 Flash-Lite against 2.5 Pro
prices a pairwise call at about 1/16) and biased towards the clip played first (0.05). Both run through the real
CascadeJudge (providers/judges/cascade.py, built from the `cascades` setting, its judges as plugins).

Prints, measured in one run over the same pairs, for each cheap-judge noise level: each system's win-rate from
the strong judge alone and from the cascade, Kendall's W of the two rankings (target >= 0.95), the cascade's cost
/ the strong judge's (target <= 0.20), the share of pairs escalated, and how far the win-rates are from the
strong judge's (with the cheap judge alone, one order, beside it), for three configurations: every unsettled pair
escalated, flips only, and a fifth of the unsettled pairs with a 3% audit. Usage:
  python benchmarks/bench_cascade.py [--items 300] [--systems 6] [--seed 0] [--cheap-noise 0.15 0.25 0.5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class SimulatedJudge:
    """A pairwise judge that hears `first_signals['quality']` and `second_signals['quality']` through noise."""

    name: ClassVar[str] = "simulated"
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False

    def __init__(
        self,
        voice: str | None = None,
        *,
        noise: str = "0.1",
        usd: str = "0.02",
        margin: str = "0.05",
        bias: str = "0",
        seed: str = "0",
    ) -> None:
        self.noise, self.usd, self.margin, self.seed = float(noise), float(usd), float(margin), int(seed)
        self.bias = float(bias)  # heard in favour of the clip played first
        self.spec = f"simulated:{voice or 'judge'}"
        self.judge_id = f"simulated-{voice}-{noise}"
        self.calls = 0

    def metadata(self) -> dict[str, Any]:
        return {"noise": self.noise, "usd": self.usd}

    def _heard(self, key: str) -> float:
        digest = hashlib.sha256(f"{self.seed}|{self.judge_id}|{key}".encode()).digest()
        return float(np.random.default_rng(int.from_bytes(digest[:8], "little")).normal(0.0, self.noise))

    def judge_pairs(self, batch: list[Any]) -> list[Any]:
        from ttseval.core.protocols import PairwiseVerdict

        out = []
        for r in batch:
            self.calls += 1
            q1, q2 = r.first_signals["quality"], r.second_signals["quality"]
            order = f"{r.item_id}|{q1:.6f}|{q2:.6f}"
            d = (q1 + self.bias + self._heard(order + "|1")) - (q2 + self._heard(order + "|2"))
            winner = "tie" if abs(d) < self.margin else ("first" if d > 0 else "second")
            difference = "subtle" if abs(d) < 2 * self.margin else "significant"
            out.append(PairwiseVerdict(winner=winner, parse_ok=True, difference=difference, cost_usd=self.usd))
        return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--systems", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spread", type=float, default=1.0, help="best candidate quality - worst")
    parser.add_argument("--cheap-noise", type=float, nargs="+", default=[0.15, 0.25, 0.5])
    args = parser.parse_args()

    os.environ["TTSEVAL_PLUGINS"] = json.dumps({"judge": {"simulated": "benchmarks.bench_cascade:SimulatedJudge"}})
    from ttseval.core.audio import Audio
    from ttseval.core.protocols import PairwiseRequest
    from ttseval.metrics.agreement import kendalls_w
    from ttseval.providers.judges.cascade import CascadeJudge

    rng = np.random.default_rng(args.seed)
    quality = np.linspace(0.5 - args.spread / 2, 0.5 + args.spread / 2, args.systems)  # candidates, evenly apart
    baseline = 0.5
    silence = Audio(np.zeros(160, dtype=np.float32), 16000)
    requests, system_of = [], []
    for s, q in enumerate(quality):
        for i in range(args.items):
            item_effect = rng.normal(0.0, 0.3)
            cand, base = q + item_effect + rng.normal(0, 0.1), baseline + item_effect + rng.normal(0, 0.1)
            first = bool(rng.integers(2))
            a, b = (cand, base) if first else (base, cand)
            requests.append(
                (
                    first,
                    PairwiseRequest(
                        item_id=f"s{s}-i{i}",
                        text="t",
                        language="en",
                        category="questions",
                        rubric="r",
                        first=silence,
                        second=silence,
                        first_signals={"quality": a},
                        second_signals={"quality": b},
                    ),
                )
            )
            system_of.append(s)

    def win_rates(vs: list[Any]) -> np.ndarray:
        score = np.array(
            [
                1.0 if v.winner == ("first" if first else "second") else 0.5 if v.winner == "tie" else 0.0
                for (first, _), v in zip(requests, vs)
            ]
        )
        return np.array([score[np.array(system_of) == s].mean() for s in range(args.systems)])

    print(
        f"{args.systems} systems x {args.items} items = {len(requests)} pairs; strong judge noise 0.1 at USD 0.02 "
        "a call; cheap judge at USD 0.001 a call, noise as listed, preferring the first clip by 0.05"
    )
    # (escalation rules, escalate_sample, audit_share): every unsettled pair; flips only; a fifth of the unsettled
    # pairs with a 3% audit (the configuration sized for the cost target)
    configs = [(["tie", "subtle", "flip"], 1.0, 0.1), (["flip"], 1.0, 0.1), (["tie", "subtle", "flip"], 0.2, 0.03)]
    for cheap_noise in args.cheap_noise:
        for escalate, sample, audit in configs:
            os.environ["TTSEVAL_CASCADES"] = json.dumps(
                {
                    "bench": {
                        "cheap": f"simulated:cheap:noise={cheap_noise}:usd=0.001:bias=0.05",
                        "strong": "simulated:strong:noise=0.1:usd=0.02",
                        "escalate": escalate,
                        "escalate_sample": sample,
                        "audit_share": audit,
                    }
                }
            )
            cascade = CascadeJudge("bench")
            cheap_alone = win_rates(cascade.cheap.judge_pairs([r for _, r in requests]))
            cascade.cheap.calls = 0
            alone = cascade.strong.judge_pairs([r for _, r in requests])
            strong_usd = sum(v.cost_usd for v in alone)
            cascade.strong.calls = 0
            verdicts = cascade.judge_pairs([r for _, r in requests])
            cascade_usd = sum(v.cost_usd for v in verdicts)
            escalated = sum(v.comparison.startswith("[strong") for v in verdicts)
            a, c = win_rates(alone), win_rates(verdicts)
            w = kendalls_w(np.vstack([a, c]), correct_ties=True)
            w_cheap = kendalls_w(np.vstack([a, cheap_alone]), correct_ties=True)
            print(
                f"cheap noise {cheap_noise}, escalate on {'/'.join(escalate)}, escalate_sample {sample}, audit_share "
                f"{audit}: Kendall's W vs strong alone {w:.3f} (target >= 0.95); cost / strong alone "
                f"{cascade_usd / strong_usd:.3f} (target <= 0.20); escalated {escalated / len(requests):.3f} "
                f"({cascade.cheap.calls} cheap calls, {cascade.strong.calls} strong); win-rate mean abs. difference "
                f"from strong alone {np.abs(c - a).mean():.3f} (cheap judge alone, one order: W {w_cheap:.3f}, "
                f"{np.abs(cheap_alone - a).mean():.3f})"
            )
            print("  win-rates, strong alone: " + " ".join(f"{x:.3f}" for x in a))
            print("  win-rates, cascade:      " + " ".join(f"{x:.3f}" for x in c))


if __name__ == "__main__":
    main()
