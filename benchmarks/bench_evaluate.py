"""Wall-time ratios for the demo evaluation, measured side by side in one run.

Prints:
  - first run: `ttseval evaluate` on the demo dataset into an empty store (whole command, start-up included)
  - re-run / first run: the same command again (everything reused)
  - pipeline / plain loop: the first run over a plain sequential script that calls the same engines on the same
    items (synthesize, transcribe, MOS, WER) with no Prefect, Dask or store, also timed as a whole process

Absolute times vary on shared machines; the ratios are the point. Usage:
  python benchmarks/bench_evaluate.py [--dataset PATH] [--systems SPECS] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from ttseval.core.telemetry import TELEMETRY_OFF

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def plain_loop(dataset: str, systems: list[str]) -> dict:
    """The same work as the flow, one item after another in this process."""
    from ttseval.metrics.normalize import normalizer_for
    from ttseval.metrics.wer import error_counts
    from ttseval.core.categories import CATEGORIES
    from ttseval.core.config import load_settings
    from ttseval.corpus.items import load_items
    from ttseval.core.registry import ASR, QUALITY, TTS

    settings = load_settings()
    items = load_items(dataset, categories=set(CATEGORIES)).to_dict("records")
    asr_cache: dict = {}
    mos = QUALITY.build(settings.quality)
    n_clips = 0
    for spec in systems:
        tts = TTS.build(spec)
        for item in items:
            if not tts.supports_language(item["language"]):
                continue
            try:
                audio = tts.synthesize(item["text"], item["language"])
            except Exception:  # noqa: BLE001 - the baseline skips failures, as a naive script would
                continue
            audio.to_wav_bytes()
            asr_spec = settings.asr_for(item["language"])
            asr = asr_cache.setdefault(asr_spec, ASR.build(asr_spec))
            text = asr.transcribe([audio], [item["language"]])[0].text
            normalizer = normalizer_for(item["language"])
            error_counts(normalizer(item["text"]), normalizer(text))
            mos.score([audio])
            n_clips += 1
    return {"clips": n_clips}


CPU_S: dict[str, float] = {}
"""CPU seconds (user + system) of each timed command and every process it started, by label."""


def timed(cmd: list[str], env: dict, label: str = "") -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_S[label] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - started


def main() -> None:
    from ttseval.core.config import DEFAULT_SYSTEMS
    from ttseval.corpus import DEMO_DATASET

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(DEMO_DATASET))
    parser.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--plain-loop", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_loop:
        print(json.dumps(plain_loop(args.dataset, args.systems.split(","))))
        return

    env = os.environ | {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF}
    env.pop("PREFECT_API_URL", None)
    with tempfile.TemporaryDirectory() as store:
        cmd = [str(BIN / "ttseval"), "evaluate", "--dataset", args.dataset, "--systems", args.systems,
               "--store", store, "--run-id", "bench", "--workers", str(args.workers)]
        first = timed(cmd, env, "first")
        logs = sorted(Path(store, "runs", "bench", "log").glob("*.json"))
        flow_first = json.loads(logs[-1].read_text())["wall_s"]
        again = timed(cmd, env, "again")
        computed_again = json.loads(sorted(Path(store, "runs", "bench", "log").glob("*.json"))[-1].read_text())["computed"]
    loop = timed([sys.executable, __file__, "--plain-loop", "--dataset", args.dataset, "--systems", args.systems], env,
                 "loop")

    print(f"dataset: {args.dataset}\nsystems: {args.systems}\nworkers: {args.workers}, cores: {os.cpu_count()}")
    print(f"first run (whole command):          {first:8.1f} s   (flow alone {flow_first:.1f} s)")
    print(f"re-run (whole command):             {again:8.1f} s   computed {computed_again}")
    print(f"re-run / first run:                 {again / first:8.3f}")
    print(f"plain sequential loop (whole proc): {loop:8.1f} s")
    print(f"pipeline / plain loop:              {first / loop:8.3f}")
    cores = os.cpu_count() or 1
    for label, wall in (("first", first), ("loop", loop)):
        print(f"CPU time, {label + ' run' if label == 'first' else 'plain loop'}: {CPU_S[label]:8.1f} s "
              f"= {CPU_S[label] / wall:.2f} of {cores} cores busy on average")
    print(f"pipeline CPU / plain loop CPU:      {CPU_S['first'] / CPU_S['loop']:8.3f}")


if __name__ == "__main__":
    main()
