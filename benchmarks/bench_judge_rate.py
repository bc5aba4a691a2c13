"""Judge throughput against a configured rate limit, across every Dask worker together.

A fake Gemini API on loopback (tests/support/fake_gemini.py: the real google-genai client, real HTTP) answers each
pairwise request after a realistic latency and enforces a vendor rate limit of its own: a token bucket of
`--rate` calls refilled at `--rate` per second; a call that finds it empty gets 429 with Retry-After. The same
rate is configured as ttseval's vendor limit (`vendor_limits.gemini.per_second`, the Dask scheduler's clock in
tasks/limits.py), and `ttseval backfill-judge` judges every pair of a stored run with `--workers` Dask workers.

Prints the sustained throughput (accepted calls per second from the first to the last, as the server saw them),
its ratio to the configured limit (target >= 0.9), the 429s the server sent, the most calls in flight, and the
same figures without the vendor limit (the server's 429s and the judges' retries doing the limiting) side by side.
Usage:
  python benchmarks/bench_judge_rate.py [--pairs 240] [--rate 8] [--latency 0.5] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ttseval.core.telemetry import TELEMETRY_OFF

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent


def build_run(store_dir: Path, pairs: int) -> None:
    """A stored run of `pairs` items and two systems (espeak-ng, the baseline, and flite): clips, no judgments."""
    from ttseval.core.config import load_settings
    from ttseval.core.registry import Spec
    from ttseval.core.store import ArtifactStore
    from ttseval.corpus import DEMO_DATASET
    from ttseval.corpus.items import read_items
    from ttseval.flows.common import register_items
    from ttseval.providers.tts import TTS
    from ttseval.tasks.parts import commit
    from ttseval.tasks.synthesize import synthesize_rows

    demo = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines() if line.strip()]
    english = [d for d in demo if d["language"].startswith("en")]
    dataset = store_dir.parent / "items.jsonl"
    with dataset.open("w", encoding="utf-8") as out:
        for i in range(pairs):
            row = english[i % len(english)] | {"item_id": f"rate-{i:04d}", "parent_id": None}
            out.write(json.dumps(row) + "\n")
    settings = load_settings(store=str(store_dir))
    store = ArtifactStore(str(store_dir))
    items, _, _ = read_items(str(dataset), settings)
    register_items(store, "r", items)
    records = items.to_dict("records")
    for system in ("espeak-ng", "flite:slt"):
        spec = Spec.parse(system)
        rows = synthesize_rows(TTS.build(spec), spec, records, settings, store)
        commit(store, "r", "synthesis", rows, label=system, replaces=set())


class RateLimitedServer:
    """A vendor's per-second quota as a token bucket holding one second of calls (`rate` tokens, refilled at
    `rate` per second): a call finding no token gets 429 with the Retry-After of the next token. Records when
    each call was accepted."""

    def __init__(self, rate: float) -> None:
        self.rate, self.accepted = rate, []
        self._tokens, self._at = rate, time.monotonic()
        self._lock = threading.Lock()

    def __call__(self, request):  # the FakeGemini responder: None answers the default verdict
        from tests.support.fake_gemini import Reply

        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens < 1.0:
                wait = (1.0 - self._tokens) / self.rate
                return Reply.rate_limited(f"{max(wait, 0.01):.2f}", delay_s=0.001)
            self._tokens -= 1.0
            self.accepted.append(now)
        return None


def judge_once(
    store_dir: Path, pairs: int, rate: float, latency: float, workers: int, limited: bool, env: dict[str, str]
) -> dict[str, float]:
    from tests.support.fake_gemini import FakeGemini

    gate = RateLimitedServer(rate)
    with FakeGemini(responder=gate, delay_s=latency) as fake:
        spec = (
            f"gemini:gemini-2.5-flash:base_url={fake.base_url}:backoff_s=0.2:max_retries=20"
            f":temperature={0.1 if limited else 0.2}"
        )  # a judge id of its own per pass: nothing reused
        extra = {"GEMINI_API_KEY": "bench-key"}
        if limited:
            extra["TTSEVAL_VENDOR_LIMITS"] = json.dumps({"gemini": {"per_second": rate}})
        t0 = time.perf_counter()
        done = subprocess.run(
            [
                str(BIN / "ttseval"),
                "backfill-judge",
                "--store",
                str(store_dir),
                "--run-id",
                "r",
                "--judge",
                spec,
                "--workers",
                str(workers),
            ],
            env=env | extra,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            sys.exit(f"backfill-judge failed:\n{done.stderr[-3000:]}")
        accepted = sorted(gate.accepted)
        assert len(accepted) == pairs == fake.ok_responses, (len(accepted), pairs, fake.ok_responses)
        span = accepted[-1] - accepted[0]
        return {
            "calls": len(accepted),
            "span_s": span,
            "per_s": (len(accepted) - 1) / span,
            "wall_s": wall,
            "429": fake.status_counts[429],
            "max_in_flight": fake.max_in_flight,
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=240)
    parser.add_argument("--rate", type=float, default=8.0, help="the vendor's limit, calls per second")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the fake judge takes per call")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    env = os.environ | {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF, "TTSEVAL_SHARD_SIZE": "8"}
    with tempfile.TemporaryDirectory() as tmp:
        store_dir = Path(tmp) / "store"
        build_run(store_dir, args.pairs)
        print(
            f"{args.pairs} pairs, fake judge latency {args.latency} s, vendor limit {args.rate}/s, "
            f"{args.workers} Dask workers, shards of 8, 4 calls at once per shard"
        )
        results = {}
        for limited in (True, False):
            label = "vendor limit on" if limited else "no vendor limit"
            r = results[label] = judge_once(store_dir, args.pairs, args.rate, args.latency, args.workers, limited, env)
            print(
                f"  {label:16s} {r['calls']} calls in {r['span_s']:.1f} s: {r['per_s']:.2f}/s = "
                f"{r['per_s'] / args.rate:.3f} of the limit; 429s {r['429']}; most in flight "
                f"{r['max_in_flight']}; command {r['wall_s']:.1f} s"
            )
        on = results["vendor limit on"]
        print(f"judge throughput / configured rate limit: {on['per_s'] / args.rate:.3f} (target >= 0.9)")


if __name__ == "__main__":
    main()
