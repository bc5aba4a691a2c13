"""The evaluate flow as the work grows: the cost per clip at each size, and its ratio to the smallest's, in one run.

By default the systems are instant voices, recogniser and MOS predictor (tests/support/instant.py: microseconds,
no model), so what is measured is the pipeline itself: Prefect task runs, Dask futures, store parts, reports.
Every size runs `ttseval evaluate` into its own empty store, on the local cluster, against one shared Prefect
server (a fresh PREFECT_HOME, so its database holds this benchmark's runs only). For each size it prints:
  - wall time and CPU seconds per clip: the command (flow and scheduler), its Dask workers, the Prefect server,
  - Prefect API requests the command and its workers sent (counted in each process by benchmarks/requests_count),
    the server's task runs and database size after the run,
  - peak resident memory of the command, the biggest worker and the server,
  - store parts before the end-of-run compaction, and the compaction's time,
  - the server's answer time: a one-task flow started beside the run every few seconds, its slowest completion,
  - a no-op re-run's wall time, `ttseval report`'s, and building the per-item table in-process,
then the ratio of each size's per-clip wall and CPU, and its peak memory, to the smallest size's.

`--systems espeak-ng --sizes 1645` runs real local engines instead (EmergentTTS-Eval's 1,645 items, as before).

Usage:
  python benchmarks/bench_scale.py [--sizes 1000,10000,100000] [--systems 20] [--workers 2] [--shard-size N]
                                   [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TTSEVAL = [sys.executable, "-m", "ttseval.cli"]
COMMAND, WORKERS, SERVER = "command process", "Dask worker processes", "Prefect server"  # bench_evaluate.role's
COUNTER = Path(__file__).resolve().parent / "requests_count"

from bench_evaluate import _cpu, role, shared_server  # noqa: E402 - this script's folder is first on sys.path

from ttseval.core.telemetry import TELEMETRY_OFF  # noqa: E402
from ttseval.core.validation import remembered_passes  # noqa: E402


def build_dataset(n: int, path: Path) -> None:
    """`n` items from the bundled demo items, each text given a numbered clause so every item is a new request;
    categories, depths and languages kept in their proportions."""
    from ttseval.corpus import DEMO_DATASET

    demo = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines() if line.strip()]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            row = dict(demo[i % len(demo)])
            row["item_id"] = f"scale-{i:06d}"
            row.pop("parent_id", None)
            if row["language"].startswith("en"):
                row["text"] = f"{row['text']} This is line {i + 1}."
            else:  # a number is read in every language
                row["text"] = f"{row['text']} {i + 1}."
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


class Sampler:
    """Peak RSS and last-seen CPU seconds of the command's process tree and the shared server's processes, sampled in
    a thread every 0.25 s, by role (bench_evaluate.role)."""

    def __init__(self, pid: int, env: dict[str, str]) -> None:
        import psutil

        self.command, self.env = psutil.Process(pid), env
        self.peak: dict[int, tuple[int, str]] = {}
        self.cpu: dict[int, tuple[float, str]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import psutil

        while not self.stop.is_set():
            try:
                procs = [self.command, *self.command.children(recursive=True), *shared_server(self.env)]
            except psutil.Error:
                procs = shared_server(self.env)
            for p in procs:
                try:
                    with p.oneshot():
                        rss, seconds = p.memory_info().rss, _cpu(p)
                        kind = (
                            self.peak[p.pid][1] if p.pid in self.peak else role(p.cmdline(), command=p == self.command)
                        )
                except psutil.Error:
                    continue
                self.peak[p.pid] = (max(rss, self.peak.get(p.pid, (0, ""))[0]), kind)
                self.cpu[p.pid] = (seconds, kind)
            time.sleep(0.25)

    def finish(self) -> tuple[dict[str, int], dict[str, float]]:
        """(peak RSS by role: the largest process of each, CPU seconds by role: summed over its processes)."""
        self.stop.set()
        self.thread.join()
        peaks: dict[str, int] = {}
        for rss, kind in self.peak.values():
            peaks[kind] = max(rss, peaks.get(kind, 0))
        cpu: dict[str, float] = {}
        for seconds, kind in self.cpu.values():
            cpu[kind] = cpu.get(kind, 0.0) + seconds
        return peaks, cpu


SLOW_PROBE_S = 10.0  # the bound on a small flow beside the run


class Probe:
    """A one-task flow run beside the evaluate run every `every_s` seconds, in a thread: the server's answer time."""

    def __init__(self, env: dict[str, str], every_s: float = 5.0) -> None:
        self.env, self.every_s, self.times, self.errors, self.cpu_s = env, every_s, [], [], 0.0
        self.slow: list[str] = []  # when and what each probe over SLOW_PROBE_S printed: Prefect's timestamped lines
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        # Python and Prefect are imported before the clock starts: what is timed is the server's part
        script = (
            "import time\nfrom prefect import flow, task\n@task\ndef one(): return 1\n"
            "@flow\ndef probe(): return one()\nt = time.perf_counter()\nprobe()\nprint(time.perf_counter() - t)"
        )
        while not self.stop.wait(self.every_s):
            began = time.strftime("%H:%M:%S", time.gmtime())
            proc = subprocess.Popen(
                [sys.executable, "-c", script],
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            out = proc.stdout.read()
            _, status, usage = os.wait4(proc.pid, 0)  # its CPU, taken out of the run's (both are our children)
            proc.returncode = os.waitstatus_to_exitcode(status)
            self.cpu_s += usage.ru_utime + usage.ru_stime
            try:
                self.times.append(float(out.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                self.errors.append(out[-300:])
                continue
            if self.times[-1] > SLOW_PROBE_S:
                self.slow.append(f"started {began} UTC, {self.times[-1]:.1f} s:\n{out[-1500:]}")

    def finish(self) -> tuple[list[float], list[str], float]:
        self.stop.set()
        self.thread.join()
        for what in self.slow:
            print(f"  a probe flow over {SLOW_PROBE_S:.0f} s, {what}", flush=True)
        return self.times, self.errors, self.cpu_s


def forget_passed_checks() -> None:
    """Every size starts as a run on new data does, with no check of its rows remembered
    (ttseval.core.validation.passed_marker): Great Expectations is then imported at the same point at every size,
    where a remembered pass of the items would skip its import (148 MiB) until the stage tables' check."""
    shutil.rmtree(remembered_passes(), ignore_errors=True)


def requests_sent(folder: Path) -> int:
    return sum(int(p.read_text() or 0) for p in folder.glob("*"))


def start_server(env: dict[str, str]) -> str:
    """Start the shared Prefect server the runs use (kept an hour), in the benchmark's PREFECT_HOME; its API URL."""
    code = (
        "import json\nfrom ttseval.infra.prefect_server import shared_server, server_info\n"
        "with shared_server(3600):\n    print(json.dumps(server_info()))"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"the shared Prefect server did not start:\n{proc.stderr[-3000:]}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    return info["api_url"]


def server_cpu(env: dict[str, str]) -> float:
    """CPU seconds of the shared Prefect server's processes so far (getrusage never counts them: they outlive the
    command that started them)."""
    return sum(_cpu(p) for p in shared_server(env))


def database(prefect_home: Path) -> tuple[float, int]:
    """(database MiB with its write-ahead log, task runs it holds)."""
    db = prefect_home / "prefect.db"
    size = sum(p.stat().st_size for p in prefect_home.glob("prefect.db*"))
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        runs = con.execute("select count(*) from task_run").fetchone()[0]
    return size / 2**20, runs


def run_size(clips: int, systems: list[str], args: argparse.Namespace, base: Path, env: dict[str, str]) -> dict:
    items = max(1, clips // len(systems))
    dataset, store = base / f"items-{items}.jsonl", base / f"store-{clips}"
    build_dataset(items, dataset)
    counted = base / f"requests-{clips}"
    counted.mkdir()
    run_env = env | {"TTSEVAL_BENCH_REQUESTS_DIR": str(counted)}
    cmd = [
        *TTSEVAL,
        "evaluate",
        "--dataset",
        str(dataset),
        "--systems",
        ",".join(systems),
        "--store",
        str(store),
        "--run-id",
        "scale",
        "--workers",
        str(args.workers),
    ]
    if args.shard_size:
        cmd += ["--shard-size", str(args.shard_size)]
    prefect_home = Path(env["PREFECT_HOME"])
    forget_passed_checks()
    server_before = server_cpu(env)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    probe = Probe(env | {"PREFECT_API_URL": args.api_url})
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=run_env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = Sampler(proc.pid, env)
    output = proc.communicate()[0]
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    peaks, cpu = sampler.finish()
    probe_times, probe_errors, probe_cpu = probe.finish()
    if proc.returncode != 0:
        raise SystemExit(f"evaluate at {clips} clips exited {proc.returncode}:\n{output[-3000:]}")
    # the command and its workers: every child of this process that ended meanwhile, less the probes
    tree_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) - probe_cpu
    log = json.loads(sorted((store / "runs" / "scale" / "log").glob("*.json"))[-1].read_text())
    compacted = re.search(r"parts compacted: (.*?)(?: \(([\d.]+) s\))?$", output, re.M)
    parts_before = sum(int(a) for a in re.findall(r"(\d+)->\d+", compacted.group(1))) if compacted else 0
    db_mib, task_runs = database(prefect_home) if (prefect_home / "prefect.db").exists() else (float("nan"), 0)

    t0 = time.perf_counter()
    again = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    noop_s = time.perf_counter() - t0
    if again.returncode != 0:
        raise SystemExit(f"the no-op re-run at {clips} clips exited {again.returncode}:\n{again.stdout[-3000:]}")
    t0 = time.perf_counter()
    subprocess.run(
        [*TTSEVAL, "report", "--store", str(store), "--run-id", "scale"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    report_s = time.perf_counter() - t0
    per_item_s = per_item_time(store, env)
    return {
        "clips": log["computed"]["synthesis"],
        "items": items,
        "wall_s": wall,
        "flow_s": log["wall_s"],
        "cpu_s": cpu,
        "tree_cpu_s": tree_cpu,
        "server_cpu_s": server_cpu(env) - server_before,
        "requests": requests_sent(counted),
        "task_runs": task_runs,
        "db_mib": db_mib,
        "peak_mib": {k: v / 2**20 for k, v in peaks.items()},
        "parts_before": parts_before,
        "compaction_s": float(compacted.group(2)) if compacted and compacted.group(2) else float("nan"),
        "probe_s": max(probe_times, default=float("nan")),
        "probe_median_s": sorted(probe_times)[len(probe_times) // 2] if probe_times else float("nan"),
        "probes": len(probe_times),
        "probe_errors": probe_errors,
        "noop_s": noop_s,
        "report_s": report_s,
        "per_item_s": per_item_s,
        "computed": log["computed"],
    }


def per_item_time(store: Path, env: dict[str, str]) -> float:
    """Seconds to read the run's tables and build its per-item table (what every report writes), in a fresh process
    with the run's settings."""
    code = (
        "import time, sys\n"
        "from ttseval.core.config import load_settings\n"
        "from ttseval.core.store import ArtifactStore\n"
        "from ttseval.tasks.report.compute import RunTables\n"
        "from ttseval.tasks.report.per_item import write_per_item\n"
        "t = time.perf_counter()\n"
        f"st = ArtifactStore({str(store)!r})\n"
        "tables = RunTables.read(st, 'scale')\n"
        "write_per_item(st, 'scale', load_settings(), tables)\n"
        "print(time.perf_counter() - t)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return float(proc.stdout.strip().splitlines()[-1])


def real_recogniser(size: str, base: Path) -> dict[str, str]:
    """The settings of a run whose recogniser is a batched Whisper on the GPU (float16), built here from random
    weights: the transcripts are noise, the batching, placement and times are real."""
    import torch
    from gpu_batch import DIMS, build_whisper  # this script's folder is first on sys.path

    build_whisper(base / "whisper", DIMS[size]["whisper"])
    dtype = "float16" if torch.cuda.is_available() else "float32"
    whisper = f"transformers:model={base / 'whisper'}:max_new_tokens=32:dtype={dtype}"
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
    print(f"recogniser: {size} Whisper, {dtype}, on {device}")
    gpu = "true" if torch.cuda.is_available() else "false"  # gpu = true: the model stages on the GPU worker
    return {"TTSEVAL_ASR": json.dumps({"*": whisper, "en": whisper}), "TTSEVAL_GPU": gpu, "HF_HUB_OFFLINE": "1"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="clips per run, comma-separated")
    parser.add_argument(
        "--systems",
        default="20",
        help="a number: that many instant voices (no model cost); or comma-separated system specs (real engines)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shard-size", type=int, default=0, help="items per task (default: the run's own choice)")
    parser.add_argument(
        "--whisper",
        choices=["tiny", "full"],
        help="transcribe with a real batched recogniser instead: a Whisper of these dimensions with random weights "
        "(benchmarks/gpu_batch.py builds it; `full`: large-v3's), float16 on a GPU worker (gpu = true)",
    )
    parser.add_argument("--keep", help="run in this folder and keep its stores (to profile a report after)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    path = [str(COUNTER), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = os.environ | {"PYTHONPATH": os.pathsep.join(path), **TELEMETRY_OFF}
    env.pop("PREFECT_API_URL", None)
    if args.systems.isdigit():
        from tests.support import instant

        # each voice its own pace: distinct audio, so no recogniser or predictor answer is reused from another's
        systems = [f"instant:v{i:02d}:pace={1 + i / 100:.2f}" for i in range(int(args.systems))]
        env |= instant.ENV
    else:
        systems = args.systems.split(",")
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        base = Path(args.keep or tmp)
        base.mkdir(parents=True, exist_ok=True)
        env["PREFECT_HOME"] = str(base / "prefect")
        if args.whisper:
            env |= real_recogniser(args.whisper, base)
        print(f"systems: {len(systems)} ({systems[0]}, ...); workers: {args.workers}; cores: {os.cpu_count()}")
        try:
            args.api_url = start_server(env)
            for clips in sizes:
                r = run_size(clips, systems, args, base, env)
                results.append(r)
                print_size(r)
        finally:
            subprocess.run([*TTSEVAL, "server", "stop"], env=env, capture_output=True)
    print_ratios(results)


def print_size(r: dict[str, Any]) -> None:
    c = r["clips"]
    cpu = r["cpu_s"]
    total_cpu = r["tree_cpu_s"] + r["server_cpu_s"]
    print(
        f"\n{c:,} clips ({r['items']:,} items): wall {r['wall_s']:.1f} s (flow {r['flow_s']:.1f} s), "
        f"{1000 * r['wall_s'] / c:.2f} ms/clip ({c / r['wall_s']:.1f} clips/s); "
        f"CPU {total_cpu:.1f} s, {1000 * total_cpu / c:.2f} ms/clip "
        f"(command {cpu.get(COMMAND, 0):.1f}, workers {cpu.get(WORKERS, 0):.1f}, "
        f"server {r['server_cpu_s']:.1f}; command and workers exactly {r['tree_cpu_s']:.1f})"
    )
    print(
        f"  Prefect: {r['requests']:,} API requests from the command and workers ({r['requests'] / c:.2f}/clip), "
        f"{r['task_runs']:,} task runs in the database, {r['db_mib']:.1f} MiB; "
        f"probe flows: slowest {r['probe_s']:.2f} s, median {r['probe_median_s']:.2f} s of {r['probes']}"
        + (f" ({len(r['probe_errors'])} failed: {r['probe_errors'][0]!r})" if r["probe_errors"] else "")
    )
    print("  peak RSS: " + ", ".join(f"{k} {v:.0f} MiB" for k, v in sorted(r["peak_mib"].items())))
    print(
        f"  parts before compaction {r['parts_before']:,}, compaction {r['compaction_s']:.2f} s; no-op re-run "
        f"{r['noop_s']:.1f} s; ttseval report {r['report_s']:.1f} s; per-item table {r['per_item_s']:.2f} s"
    )
    print(f"  rows computed: {r['computed']}", flush=True)


def print_ratios(results: list[dict[str, Any]]) -> None:
    if len(results) < 2:
        return
    small = results[0]

    def per_clip(r: dict[str, Any], key: str) -> float:
        value = r["tree_cpu_s"] + r["server_cpu_s"] if key == "cpu" else r[key]
        return value / r["clips"]

    print(f"\nratios to {small['clips']:,} clips (per-clip cost; peak memory)")
    print(f"{'clips':>9} {'wall/clip':>10} {'CPU/clip':>9} {'command':>8} {'worker':>7} {'server':>7}")
    for r in results:
        mem = [r["peak_mib"].get(k, 0) / max(small["peak_mib"].get(k, 1), 1) for k in (COMMAND, WORKERS, SERVER)]
        print(
            f"{r['clips']:>9,} {per_clip(r, 'wall_s') / per_clip(small, 'wall_s'):>9.2f}x "
            f"{per_clip(r, 'cpu') / per_clip(small, 'cpu'):>8.2f}x " + " ".join(f"{m:>7.2f}x" for m in mem)
        )


if __name__ == "__main__":
    main()
