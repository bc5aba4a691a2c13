"""The evaluate flow at EmergentTTS-Eval's size: 1,645 items with the local engines, on this machine.

Builds a 1,645-item dataset from the bundled demo items (the demo's texts, each given a numbered clause so every
item is a new request; categories, depths and languages kept in their proportions), runs `ttseval evaluate` on
it into an empty store, and prints:
  - wall time of the whole command, and clips per minute,
  - peak resident memory per process (the command, each Dask worker, the Prefect server), sampled every 0.5 s,
  - parts written per table before the end-of-run compaction, and parts after it,
  - the time to read every table back (what `ttseval report` does) and the report command's wall time.
Usage:
  python benchmarks/bench_scale.py [--items 1645] [--systems espeak-ng] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


def build_dataset(n: int, path: Path) -> None:
    from ttseval.corpus import DEMO_DATASET

    demo = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines() if line.strip()]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            row = dict(demo[i % len(demo)])
            row["item_id"] = f"scale-{i:05d}"
            row.pop("parent_id", None)
            if row["language"].startswith("en"):
                row["text"] = f"{row['text']} This is line {i + 1}."
            else:  # a number is read in every language
                row["text"] = f"{row['text']} {i + 1}."
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


class PeakMemory:
    """Peak RSS per process of a process tree, sampled in a thread."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.peak: dict[int, tuple[int, str]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import psutil

        while not self.stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            for p in procs:
                try:
                    rss, cmd = p.memory_info().rss, " ".join(p.cmdline())
                except psutil.Error:
                    continue
                if rss > self.peak.get(p.pid, (0, ""))[0]:
                    self.peak[p.pid] = (rss, cmd)
            time.sleep(0.5)

    def finish(self) -> list[tuple[str, int]]:
        self.stop.set()
        self.thread.join()

        def kind(cmd: str) -> str:
            if "spawn_main" in cmd:
                return "dask worker"
            if "uvicorn" in cmd or ("prefect" in cmd and "server" in cmd):
                return "prefect server"
            if "ttseval" in cmd:
                return "ttseval command"
            return Path(cmd.split(" ")[0]).name + " (each call)"  # engine subprocesses, e.g. espeak-ng

        rows = [(kind(cmd), rss) for rss, cmd in self.peak.values()]
        workers = sorted(
            ((k, rss) for k, rss in rows if k in ("dask worker", "prefect server", "ttseval command")),
            key=lambda kv: -kv[1],
        )
        others: dict[str, int] = {}
        for k, rss in rows:
            if (k, rss) not in workers:
                others[k] = max(rss, others.get(k, 0))
        return workers + sorted(others.items(), key=lambda kv: -kv[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1645)
    parser.add_argument("--systems", default="espeak-ng")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    env = os.environ | {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF}
    env.pop("PREFECT_API_URL", None)
    with tempfile.TemporaryDirectory() as tmp:
        dataset, store = Path(tmp) / "scale.jsonl", Path(tmp) / "store"
        build_dataset(args.items, dataset)
        cmd = [
            str(BIN / "ttseval"),
            "evaluate",
            "--dataset",
            str(dataset),
            "--systems",
            args.systems,
            "--store",
            str(store),
            "--run-id",
            "scale",
            "--workers",
            str(args.workers),
        ]
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        memory = PeakMemory(proc.pid)
        output = proc.communicate()[0]
        wall = time.perf_counter() - started
        peaks = memory.finish()
        if proc.returncode != 0:
            raise SystemExit(output[-3000:])
        compacted = re.search(r"parts compacted: (.*)", output)

        from ttseval.core.schemas import TABLES
        from ttseval.core.store import ArtifactStore

        st = ArtifactStore(str(store))
        t0 = time.perf_counter()
        rows = {t: len(st.read("scale", t)) for t in TABLES if st.part_files("scale", t)}
        read_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run(
            [str(BIN / "ttseval"), "report", "--store", str(store), "--run-id", "scale"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        report_s = time.perf_counter() - t0
        log = json.loads(sorted((store / "runs" / "scale" / "log").glob("*.json"))[-1].read_text())

    clips = log["computed"]["synthesis"]
    print(f"items: {args.items}; systems: {args.systems}; workers: {args.workers}; cores: {os.cpu_count()}")
    print(
        f"evaluate, whole command: {wall:8.1f} s (flow {log['wall_s']:.1f} s); {clips} clips, "
        f"{60 * clips / wall:.0f} clips/min; computed {log['computed']}"
    )
    for kind, rss in peaks:
        print(f"peak RSS  {kind:<34} {rss / 2**20:8.0f} MiB")
    print(f"parts compacted (before->after): {compacted.group(1) if compacted else 'none'}")
    print(f"read every table back: {read_s:.2f} s ({', '.join(f'{t} {n}' for t, n in rows.items())} rows)")
    print(f"ttseval report, whole command: {report_s:.1f} s")


if __name__ == "__main__":
    main()
