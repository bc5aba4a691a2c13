"""Where the demo evaluation's time goes: per stage and per engine, model loads, the store, and what the flow adds.

Part 1 runs the demo's work in this process, one stage at a time, timing each piece with nothing else running:
  - synthesis per TTS system (engine start-up apart from the time per clip),
  - ASR per recogniser (model load apart; clips in shards of `shard_size`, as the flow feeds them),
  - DNSMOS (session build apart; shards of `shard_size`),
  - the store: WAV encode + put, get + decode, one Parquet part per shard.
Part 2 runs `ttseval evaluate` on the same dataset into an empty store and compares its wall time with the sum
of part 1 (the work itself): the difference, less what the second worker saves, is Prefect, Dask, start-up and
scheduling overhead. Usage:
  python benchmarks/profile_demo.py [--dataset PATH] [--systems SPECS] [--workers N] [--no-flow]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from ttseval.core.telemetry import TELEMETRY_OFF

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent


class Clock:
    """Seconds and counts per (stage, engine, what)."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[str, str, str], float] = defaultdict(float)
        self.count: dict[tuple[str, str, str], int] = defaultdict(int)

    @contextmanager
    def time(self, key: tuple[str, str, str], n: int = 1) -> Iterator[None]:
        """Time the `with` block under `key`, counting `n`; a block that raises is not counted."""
        started = time.perf_counter()
        yield
        self.seconds[key] += time.perf_counter() - started
        self.count[key] += n

    def total(self) -> float:
        return sum(self.seconds.values())


def profile_work(dataset: str, systems: list[str], clock: Clock) -> int:
    from ttseval.core.audio import Audio, sha256_hex
    from ttseval.core.categories import CATEGORIES
    from ttseval.core.config import load_settings
    from ttseval.core.schemas import table_from_rows
    from ttseval.core.store import ArtifactStore
    from ttseval.corpus.items import load_items
    from ttseval.metrics.normalize import normalizer_for
    from ttseval.metrics.wer import error_counts
    from ttseval.providers.asr import ASR
    from ttseval.providers.quality import QUALITY
    from ttseval.providers.tts import TTS

    settings = load_settings()
    items = load_items(dataset, categories=set(CATEGORIES)).to_dict("records")
    clips = []  # (item, sha)
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(tmp)
        for spec in systems:
            with clock.time(("synthesis", spec, "build"), 0):
                tts = TTS.build(spec)
            first = True
            for item in items:
                if not tts.supports_language(item["language"]):
                    continue
                what = "first clip (engine start)" if first else "per clip"
                try:
                    with clock.time(("synthesis", spec, what)):
                        audio = tts.synthesize(item["text"], item["language"])
                except Exception:  # noqa: BLE001 - a failed clip is skipped here; the flow records it
                    continue
                first = False
                with clock.time(("store", "audio", "encode + put")):
                    wav = audio.to_wav_bytes()
                sha = sha256_hex(wav)
                with clock.time(("store", "audio", "encode + put"), 0):
                    store.put_audio(wav, sha)
                clips.append((item, sha))
        shards = [clips[i : i + settings.shard_size] for i in range(0, len(clips), settings.shard_size)]
        by_asr: dict[str, list] = defaultdict(list)
        for item, sha in clips:
            by_asr[settings.asr_for(item["language"])].append((item, sha))
        for asr_spec, mine in by_asr.items():
            asr = ASR.build(asr_spec)
            with clock.time(("asr", asr_spec, "model load"), 0):
                if hasattr(asr, "_load"):
                    asr._load()
            for start in range(0, len(mine), settings.shard_size):
                shard = mine[start : start + settings.shard_size]
                with clock.time(("store", "audio", "get + decode"), len(shard)):
                    audios = [Audio.from_wav_bytes(store.get_audio(s)) for _, s in shard]
                with clock.time(("asr", asr_spec, "per clip"), len(shard)):
                    found = asr.transcribe(audios, [i["language"] for i, _ in shard])
                for (item, _), t in zip(shard, found):
                    norm = normalizer_for(item["language"])
                    with clock.time(("asr", "normalize + WER", "per clip")):
                        error_counts(norm(item["text"]), norm(t.text))
        mos = QUALITY.build(settings.quality)
        with clock.time(("quality", settings.quality, "session build"), 0):
            if hasattr(mos, "_load"):
                mos._load()
        for shard in shards:
            with clock.time(("store", "audio", "get + decode"), len(shard)):
                audios = [Audio.from_wav_bytes(store.get_audio(s)) for _, s in shard]
            with clock.time(("quality", settings.quality, "per clip"), len(shard)):
                mos.score(audios)
            rows = [
                {
                    "item_id": i["item_id"],
                    "system_id": "s",
                    "quality_id": "q",
                    "quality_spec": "q",
                    "mos": 3.0,
                    "created_at": datetime.now(UTC),
                    "status": "ok",
                    "retryable": False,
                    "attempt": 1,
                }
                for i, _ in shard
            ]
            with clock.time(("store", "parquet", "one part per shard"), 1):
                store.write_part("p", "quality", table_from_rows("quality", rows))
    return len(clips)


TASK_LINE = re.compile(r"\b(synthesis|transcripts|quality|judgments) (.*?): (\d+) rows \(.*?\) in ([0-9.]+) s")


def flow_wall(dataset: str, systems: list[str], workers: int) -> tuple[float, float, dict[str, tuple[int, float]]]:
    """(whole command s, flow s, stage -> (tasks, seconds inside tasks)) of one `ttseval evaluate`."""
    env = os.environ | {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF}
    env.pop("PREFECT_API_URL", None)
    with tempfile.TemporaryDirectory() as store:
        started = time.perf_counter()
        result = subprocess.run(
            [
                str(BIN / "ttseval"),
                "evaluate",
                "--dataset",
                dataset,
                "--systems",
                ",".join(systems),
                "--store",
                store,
                "--run-id",
                "profile",
                "--workers",
                str(workers),
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - started
        if result.returncode != 0:
            raise SystemExit(result.stderr[-3000:])
        log = sorted(Path(store, "runs", "profile", "log").glob("*.json"))[-1]
        tasks: dict[str, tuple[int, float]] = {}
        for stage, _, _, seconds in TASK_LINE.findall(result.stdout + result.stderr):
            n, total = tasks.get(stage, (0, 0.0))
            tasks[stage] = (n + 1, total + float(seconds))
        return wall, json.loads(log.read_text())["wall_s"], tasks


def main() -> None:
    from ttseval.core.config import DEFAULT_SYSTEMS
    from ttseval.corpus import DEMO_DATASET

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(DEMO_DATASET))
    parser.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-flow", action="store_true", help="part 1 only")
    args = parser.parse_args()
    systems = args.systems.split(",")

    clock = Clock()
    started = time.perf_counter()
    n = profile_work(args.dataset, systems, clock)
    work = time.perf_counter() - started
    print(f"dataset: {args.dataset}; {n} clips; systems: {args.systems}; cores: {os.cpu_count()}")
    print(f"{'stage':<10} {'engine':<34} {'what':<26} {'total s':>8} {'n':>5} {'ms each':>9}")
    for (stage, engine, what), seconds in sorted(clock.seconds.items(), key=lambda kv: -kv[1]):
        count = clock.count[(stage, engine, what)]
        each = f"{1000 * seconds / count:9.1f}" if count else " " * 9
        print(f"{stage:<10} {engine[:34]:<34} {what:<26} {seconds:8.2f} {count:5d} {each}")
    per_stage: dict[str, float] = defaultdict(float)
    for (stage, _, _), seconds in clock.seconds.items():
        per_stage[stage] += seconds
    print(
        "per stage: "
        + ", ".join(
            f"{k} {v:.1f} s ({100 * v / clock.total():.0f}%)"
            for k, v in sorted(per_stage.items(), key=lambda kv: -kv[1])
        )
    )
    print(f"the work, in one process:       {work:8.1f} s")
    if args.no_flow:
        return
    wall, flow, tasks = flow_wall(args.dataset, systems, args.workers)
    ideal = work / args.workers
    print(
        f"ttseval evaluate, whole command: {wall:8.1f} s (flow {flow:.1f} s; start-up and server {wall - flow:.1f} s)"
    )
    inside = sum(t for _, t in tasks.values())
    for stage, (n, seconds) in sorted(tasks.items()):
        print(f"  {stage:<12} {n:3d} tasks, {seconds:7.1f} s inside them")
    print(
        f"  worker time in tasks: {inside:.1f} s of {args.workers} x {flow:.1f} s = "
        f"{inside / (args.workers * flow):.0%} busy (the rest: scheduling, Prefect API calls, waiting)"
    )
    print(f"work / {args.workers} workers (the ideal):   {ideal:8.1f} s")
    print(f"overhead over the ideal:        {wall - ideal:8.1f} s ({(wall - ideal) / wall:.0%} of the command)")
    print(f"command / work in one process:  {wall / work:8.3f}")


if __name__ == "__main__":
    main()
