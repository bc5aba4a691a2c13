"""What the synthesis stage adds around a paid API call, and what a dry run costs, measured side by side.

Against the OpenAI-compatible fake speech server on loopback (tests/support/fake_tts.py; real HTTP, real WAV bytes), it
times in one process:
  - direct:  `provider.synthesize` in a plain loop (the HTTP exchange and decoding only)
  - stage:   `ttseval.tasks.synthesize.synthesize_rows` over the same texts into a fresh store (rows, cost, WAV blobs,
             the reuse cache)
  - reuse:   the same stage call again (every clip reused from the cache: no call)
  - dry run: `ttseval.tasks.cost.estimate_synthesis` over a plan of the same keys (pricing, cache look-ups, no call)
and prints each per item and the ratios stage/direct and reuse/stage. Usage:
  python benchmarks/bench_paid.py [--items N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=200)
    args = parser.parse_args()

    from tests.support.fake_tts import FakeOpenAISpeech
    from ttseval.core.config import load_settings
    from ttseval.core.registry import Spec
    from ttseval.core.store import ArtifactStore
    from ttseval.providers.tts import TTS
    from ttseval.tasks.cost import estimate_synthesis
    from ttseval.tasks.plan import Plan
    from ttseval.tasks.synthesize import synthesize_rows

    texts = [f"Sentence number {i}: is the kettle on, or did you forget again?" for i in range(args.items)]
    items = [
        {"item_id": f"b{i}", "text": t, "language": "en", "category": "questions", "instruction": None}
        for i, t in enumerate(texts)
    ]
    with FakeOpenAISpeech(api_key=None) as fake, tempfile.TemporaryDirectory() as tmp:
        spec = Spec.parse(f"openai:alloy:base_url={fake.base_url}:model=tts-1")
        tts = TTS.build(spec)
        settings = load_settings(store=tmp, tts_prices={"openai:tts-1": 15.0})
        store = ArtifactStore(tmp)

        t0 = time.perf_counter()
        for t in texts:
            tts.synthesize(t, "en")
        direct = time.perf_counter() - t0

        t0 = time.perf_counter()
        rows = synthesize_rows(tts, spec, items, settings, store)
        stage = time.perf_counter() - t0
        assert all(r["status"] == "ok" for r in rows)

        t0 = time.perf_counter()
        again = synthesize_rows(tts, spec, items, settings, store)
        reuse = time.perf_counter() - t0
        assert all(r["cache_hit"] for r in again)

        plan = Plan(
            "synthesis", wanted=len(items), shards=[{"system": spec.canonical, "items": items, "index": 1, "of": 1}]
        )
        fresh = load_settings(store=str(Path(tmp) / "empty"), tts_prices={"openai:tts-1": 15.0})
        t0 = time.perf_counter()
        [estimate] = estimate_synthesis(plan, ArtifactStore(fresh.store), fresh)
        dry = time.perf_counter() - t0
        assert estimate.chars == sum(map(len, texts)) == fake.billable_chars // 2

    n = args.items
    print(f"items: {n}; fake server on loopback, WAV 24 kHz")
    print(f"direct provider call  {1000 * direct / n:7.2f} ms/item")
    print(f"synthesis stage       {1000 * stage / n:7.2f} ms/item")
    print(f"stage, all reused     {1000 * reuse / n:7.2f} ms/item")
    print(f"dry-run estimate      {1000 * dry / n:7.2f} ms/item")
    print(f"stage / direct        {stage / direct:7.2f}")
    print(f"reused / stage        {reuse / stage:7.3f}")


if __name__ == "__main__":
    main()
