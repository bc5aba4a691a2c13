"""Wall-time ratios for dataset generation, measured side by side in one run.

The LLM is tests/support/fake_openai.py on loopback with a fixed latency per call (default 200 ms, a fast hosted
model's order), answering like a cooperative model (tests/support/gen_fakes.py); everything else is real: the openai
client, the call cache, Great Expectations screening, the Prefect flow, the store.

Prints:
  - first run with the LLM's default concurrency (4) and with concurrency 1, each into an empty store
  - concurrent / sequential: what running calls concurrently buys for latency-bound generation
  - re-run / first run: the same flow again (every call answered by the cache)
  - the calls made in each run

Usage: python benchmarks/bench_generate.py [--latency-s 0.2] [--breadth 5] [--depth-steps 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-s", type=float, default=0.2)
    parser.add_argument("--breadth", type=int, default=5)
    parser.add_argument("--depth-steps", type=int, default=3)
    args = parser.parse_args()
    from ttseval.core.telemetry import telemetry_off

    telemetry_off()
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    from tests.support import gen_fakes
    from tests.support.fake_openai import FakeOpenAI
    from ttseval.cli import prefect_api
    from ttseval.flows.generate_dataset import generate_dataset

    def run(fake: FakeOpenAI, store: str, concurrency: int) -> tuple[float, dict]:
        spec = f"openai:bench-model:base_url={fake.base_url}:concurrency={concurrency}"
        t0 = time.perf_counter()
        result = generate_dataset(llm=spec, store=store, breadth=args.breadth, depth_steps=args.depth_steps)
        return time.perf_counter() - t0, result

    with (
        FakeOpenAI(lambda r: gen_fakes.answer(r.text(), r.system_text()), delay_s=args.latency_s) as fake,
        prefect_api(),
        tempfile.TemporaryDirectory() as tmp,
    ):
        concurrent_s, first = run(fake, str(Path(tmp) / "a"), 4)
        rerun_s, again = run(fake, str(Path(tmp) / "a"), 4)
        sequential_s, _ = run(fake, str(Path(tmp) / "b"), 1)
    print(f"items {first['n_items']} by depth {first['items_by_depth']}; LLM latency {args.latency_s:.3f} s/call")
    print(f"first run, concurrency 4:  {concurrent_s:7.1f} s  ({first['calls']['made']} calls made)")
    print(f"first run, concurrency 1:  {sequential_s:7.1f} s")
    print(
        f"re-run (all cached):       {rerun_s:7.1f} s  ({again['calls']['made']} calls made, "
        f"{again['calls']['cached']} cached)"
    )
    print(f"concurrent / sequential:   {concurrent_s / sequential_s:7.3f}")
    print(f"re-run / first run:        {rerun_s / concurrent_s:7.3f}")


if __name__ == "__main__":
    main()
