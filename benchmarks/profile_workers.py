"""What each process of `ttseval evaluate` spends its Python threads on, beside the plain loop doing the same work
(the pipeline's extra CPU over the loop's).

Samples every process of the command (the command, its Dask workers) and the plain loop of bench_evaluate.py with
py-spy (`pip install py-spy`; a sampling profiler outside the process, so the code runs unchanged), on the first
`--items` items of the dataset, then sorts the samples of each side into kinds: the engines' ONNX runs, ASR, model
loads, imports, ttseval's own code, Prefect, Dask and asyncio, and waiting. Prints seconds of samples per kind (a
thread counted while py-spy saw it running; native threads the engines start are not seen, so this is where the
Python threads go, not a CPU total: bench_evaluate.py measures that).

Uses the shared Prefect server of its own PREFECT_HOME (started by a one-item warm-up run, not sampled). Usage:
  python benchmarks/profile_workers.py [--items 12] [--systems SPECS] [--workers 2] [--rate 50]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from ttseval.core.telemetry import TELEMETRY_OFF

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

# (kind, any of these in a sample's stack), first match wins: a model load inside an import is an import.
KINDS: list[tuple[str, tuple[str, ...]]] = [
    ("import", ("_find_and_load",)),
    ("model load", ("_create_inference_session", "WhisperModel.__init__", "_load (")),
    ("onnx run (Piper, DNSMOS)", ("InferenceSession.run", "Session.run (")),
    ("asr", ("WhisperModel.", "transcribe (")),
    ("waiting (select, locks, queues)", ("select (selectors", "Condition.wait", "Connection._recv", "sleep")),
    ("ttseval's own code", ("(tasks/", "(providers/", "(metrics/", "(flows/", "(ttseval/", "(corpus/")),
    ("prefect", ("(prefect/",)),
    ("dask and asyncio", ("(distributed/", "(tornado/", "(asyncio/")),
]


def kind_of(stack: str) -> str:
    for kind, marks in KINDS:
        if any(mark in stack for mark in marks):
            return kind
    return "other"


def classify(raw_lines, rate: int) -> dict[str, Counter]:
    """py-spy's raw (collapsed) output, `frame;frame;... count` with the process first, to seconds of samples per
    role ('worker' for a Dask worker process, spawned by multiprocessing; 'command' for the rest) and kind."""
    out: dict[str, Counter] = {"command": Counter(), "worker": Counter()}
    for line in raw_lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        role = "worker" if "spawn_main" in stack else "command"
        out[role][kind_of(stack)] += int(count) / rate
    return out


def record(py_spy: str, cmd: list[str], raw: Path, rate: int, env: dict) -> None:
    subprocess.run(
        [py_spy, "record", "--subprocesses", "--rate", str(rate), "--format", "raw", "-o", str(raw), "--", *cmd],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> None:
    from ttseval.core.config import DEFAULT_SYSTEMS
    from ttseval.corpus import DEMO_DATASET

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(DEMO_DATASET))
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=int, default=50, help="samples per second")
    args = parser.parse_args()
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(BIN))
    if not py_spy:
        sys.exit("py-spy is needed: pip install py-spy (it samples the processes from outside)")
    work = Path(tempfile.mkdtemp(prefix="profile-workers-"))
    lines = Path(args.dataset).read_text(encoding="utf-8").splitlines()
    (work / "items.jsonl").write_text("\n".join(lines[: args.items]) + "\n", encoding="utf-8")
    (work / "one.jsonl").write_text(lines[0] + "\n", encoding="utf-8")
    env = os.environ | {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF, "PREFECT_HOME": str(work / "home")}
    env.pop("PREFECT_API_URL", None)
    from ttseval.infra.prefect_server import server_folder, stop_server

    def evaluate(dataset: str, store: str) -> list[str]:
        return [
            str(BIN / "ttseval"),
            "evaluate",
            "--dataset",
            dataset,
            "--systems",
            args.systems,
            "--store",
            store,
            "--run-id",
            "profile",
            "--workers",
            str(args.workers),
        ]

    try:
        subprocess.run(
            evaluate(str(work / "one.jsonl"), str(work / "warm")),
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # the shared server, up before sampling
        record(py_spy, evaluate(str(work / "items.jsonl"), str(work / "store")), work / "pipeline.txt", args.rate, env)
        record(
            py_spy,
            [
                sys.executable,
                str(ROOT / "benchmarks" / "bench_evaluate.py"),
                "--plain-loop",
                "--dataset",
                str(work / "items.jsonl"),
                "--systems",
                args.systems,
            ],
            work / "loop.txt",
            args.rate,
            env,
        )
        with open(work / "pipeline.txt", encoding="utf-8") as f:
            pipeline = classify(f, args.rate)
        with open(work / "loop.txt", encoding="utf-8") as f:
            loop = classify(f, args.rate)["command"]
    finally:
        stop_server(server_folder(work / "home"))
        shutil.rmtree(work, ignore_errors=True)
    kinds = [k for k, _ in KINDS] + ["other"]
    print(f"items: {args.items}, systems: {args.systems}, workers: {args.workers}, {args.rate} samples/s")
    print(f"{'seconds of samples':34} {'workers':>9} {'command':>9} {'plain loop':>11}")
    for kind in kinds:
        print(f"{kind:34} {pipeline['worker'][kind]:9.1f} {pipeline['command'][kind]:9.1f} {loop[kind]:11.1f}")
    total = [sum(c.values()) for c in (pipeline["worker"], pipeline["command"], loop)]
    print(f"{'all':34} {total[0]:9.1f} {total[1]:9.1f} {total[2]:11.1f}")


if __name__ == "__main__":
    main()
