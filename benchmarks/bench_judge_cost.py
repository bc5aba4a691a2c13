"""Judge cost per evaluated system at EmergentTTS-Eval's size, against the paper's figure (about USD 50 per system
with Gemini 2.5 Pro as the judge).

The dry run's own estimate (tasks/cost.py `estimate_judges`: the judge's audio tokens per second and prices, the
prompt, `judge_output_tokens` output tokens) over 1,645 items whose texts give EmergentTTS-Eval's mean clip length
(15.3 s), for one candidate against the baseline, in these set-ups:
  - Gemini 2.5 Pro alone, at 400 output tokens and at 3,000 (2.5 Pro thinks before it answers; thinking is billed
    as output);
  - the same plus the position audit (10% of pairs asked again in the other order);
  - a cascade, Gemini 2.5 Flash (both orders, at its list prices) then Pro on the escalated share (from
    benchmarks/bench_cascade.py: 0.31 to 0.49 with simulated judges);
  - a re-run: every judgement already stored, nothing asked (tested: `backfill-judge` twice computes 0);
  - GPT-4o audio (10 audio tokens a second at USD 40 per million).
Nothing is called. Usage:
  python benchmarks/bench_judge_cost.py [--items 1645]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAPER_USD_PER_SYSTEM = 50.0
FLASH = "gemini:gemini-2.5-flash:input_usd_per_mtok=1.0:output_usd_per_mtok=2.5"  # audio input, output list prices


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1645)
    args = parser.parse_args()
    os.environ.setdefault("GEMINI_API_KEY", "not-used")  # judges are built for their prices; nothing is called
    os.environ.setdefault("OPENAI_API_KEY", "not-used")

    import pandas as pd

    from ttseval.core.config import load_settings
    from ttseval.core.store import ArtifactStore
    from ttseval.tasks.cost import WORDS_PER_MINUTE, estimate_judges

    words = round(15.32 * WORDS_PER_MINUTE / 60)  # EmergentTTS-Eval's mean clip: 15.32 s, 33.9 words
    items = pd.DataFrame(
        [{"item_id": f"i{k}", "text": " ".join(["word"] * words), "instruction": None} for k in range(args.items)]
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(tmp)

        def usd(judge: str, output_tokens: int) -> float:
            # the audit off: the dry run would count it for an LLM judge; its 10% is the row of its own below
            settings = load_settings(store=tmp, judge_output_tokens=output_tokens, position_audit_share=0)
            [est] = estimate_judges(items, ["base", "cand"], "base", [judge], [], store, "r", settings)
            return est.usd

        print(
            f"{args.items} items, one candidate against the baseline, clips of 15.3 s; the paper: about USD "
            f"{PAPER_USD_PER_SYSTEM:.0f} per system with Gemini 2.5 Pro"
        )
        rows = []
        for tokens in (400, 3000):
            pro = usd("gemini:gemini-2.5-pro", tokens)
            rows.append((f"Gemini 2.5 Pro, {tokens} output tokens", pro))
            rows.append(("  + position audit (10%)", pro * 1.10))
            flash = usd(FLASH, tokens)
            for share in (0.31, 0.49):
                rows.append((f"  cascade Flash (both orders) -> Pro on {share:.0%}", 2 * flash + share * pro))
        rows.append(("re-run, every judgement stored", 0.0))
        rows.append(("GPT-4o audio, 400 output tokens", usd("openai:gpt-4o-audio-preview", 400)))
        for label, value in rows:
            print(f"  {label:48s} USD {value:7.2f} per system ({value / PAPER_USD_PER_SYSTEM:.2f} of the paper's)")


if __name__ == "__main__":
    main()
