"""Wall-time ratios for the demo evaluation, measured side by side in one run.

Prints:
  - first run: `ttseval evaluate` on the demo dataset into an empty store (whole command, start-up included), with
    the shared Prefect server already up, as every command finds it within 10 minutes of another; the server's own
    start is measured before it (its CPU seconds until ready) and printed beside, with the CPU ratio counting it
  - re-run / first run: the same command again (everything reused)
  - pipeline / plain loop: the first run over a plain sequential script that calls the same engines on the same
    items (synthesize, transcribe, MOS, WER) with no Prefect, Dask or store, also timed as a whole process
  - start-up paid once: the re-run with the shared Prefect server left running (the default: commands share
    one, ttseval.infra.prefect_server) and with a temporary server of its own (prefect_server_keep_s = 0, the way
    before), and a small flow (`ttseval human-eval export` of 4 items) both ways

The benchmark runs in a PREFECT_HOME of its own (its database migrated before anything is timed) and stops the
shared server at its end.

And where the orchestration's time goes, for the first run and the re-run side by side:
  - wall time by phase, from the command's own log timestamps (no profiler, so nothing is slowed): start-up and
    the preflight's validation, the temporary Prefect server's start, the flow's planning and work, table
    validation and compaction, report rendering, the run log and flow state, then the server's stop and printing;
  - CPU seconds by process, sampled with psutil while the command runs: the command's own process (imports,
    preflight, the Dask scheduler, task submission, state reporting, planning, report), the Prefect server, the
    Dask worker processes (their imports, model loads and the engines' work), and what the sampler did not see
    (short-lived processes such as the engine binaries); the plain loop's the same way.

Absolute times vary on shared machines; the ratios are the point. Usage:
  python benchmarks/bench_evaluate.py [--dataset PATH] [--systems SPECS] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from ttseval.core.telemetry import TELEMETRY_OFF

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def plain_loop(dataset: str, systems: list[str]) -> dict:
    """The same work as the flow, one item after another in this process."""
    from ttseval.core.categories import CATEGORIES
    from ttseval.core.config import load_settings
    from ttseval.corpus.items import load_items
    from ttseval.metrics.normalize import normalizer_for
    from ttseval.metrics.wer import error_counts
    from ttseval.providers.asr import ASR
    from ttseval.providers.quality import QUALITY
    from ttseval.providers.tts import TTS

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


CPU_BY_ROLE: dict[str, dict[str, float]] = {}
"""Each timed command's CPU seconds by process role (`role`), by label; 'not sampled' is the rest of CPU_S."""

PHASES: dict[str, list[tuple[str, float]]] = {}
"""Each timed command's wall time by phase (`phases`), by label."""

SAMPLE_S = 0.2


def role(cmdline: list[str], *, command: bool) -> str:
    """Which part of the orchestration a process is, from its command line."""
    line = " ".join(cmdline)
    if command:
        return "command process"
    if "uvicorn" in line or "prefect.server" in line:
        return "Prefect server"
    if "multiprocessing" in line or "distributed" in line:
        return "Dask worker processes"
    return "other processes"


def shared_server(env: dict) -> list:
    """The shared Prefect server's processes (its keeper and uvicorn) in env's PREFECT_HOME: they outlive the
    command that started them, so getrusage never counts them; `timed` adds their CPU seconds itself."""
    import psutil

    from ttseval.infra.prefect_server import server_folder, server_info

    info = server_info(server_folder(Path(env["PREFECT_HOME"])))
    if info is None:
        return []
    keeper = psutil.Process(info["pid"])
    return [keeper, *keeper.children(recursive=True)]


def _cpu(p) -> float:
    t = p.cpu_times()
    return t.user + t.system


def timed(cmd: list[str], env: dict, label: str = "") -> float:
    """Run `cmd` to the end; its wall time. Records its CPU seconds (with every process it started, and the shared
    Prefect server's during it: CPU_S), the CPU seconds of each process role sampled every SAMPLE_S (CPU_BY_ROLE)
    and its phases (PHASES)."""
    import psutil

    server_before = {p.pid: _cpu(p) for p in shared_server(env)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True)
        seen: dict[int, tuple[str, float]] = {}  # pid -> (role, CPU seconds when last sampled)
        try:
            process_start = psutil.Process(proc.pid).create_time()
        except psutil.NoSuchProcess:
            process_start = time.time()
        while proc.poll() is None:
            try:
                tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for p in tree:
                try:
                    cpu = p.cpu_times()
                    kind = seen[p.pid][0] if p.pid in seen else role(p.cmdline(), command=p.pid == proc.pid)
                    seen[p.pid] = (kind, cpu.user + cpu.system)  # its children: their own entries, or not sampled
                except psutil.Error:
                    continue
            time.sleep(SAMPLE_S)
        proc.wait()
        ended = time.time()
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{text[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    server = {p.pid: _cpu(p) - server_before.get(p.pid, 0.0) for p in shared_server(env)}
    CPU_S[label] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) + sum(server.values())
    by_role: dict[str, float] = {"Prefect server": sum(server.values())} if server else {}
    for pid, (kind, cpu) in seen.items():
        if pid not in server:
            by_role[kind] = by_role.get(kind, 0.0) + cpu
    by_role["not sampled (short-lived processes, last 0.2 s)"] = max(CPU_S[label] - sum(by_role.values()), 0.0)
    CPU_BY_ROLE[label] = by_role
    PHASES[label] = phases(text, process_start, ended)
    return time.perf_counter() - started


MARKS = (  # (a log line's text, the phase that ends there), in the order a run logs them
    ("Starting temporary server", "Python start-up, imports, settings, preflight (dataset validation, engines)"),
    ("Beginning flow run", "temporary Prefect server start, flow run created"),
    ("rows written:", "flow: items, planning, store listings (and the stages' work, Dask start, submission)"),
    ("parts compacted", "table validation (check_stage_tables) and compaction"),
    ("report: ", "report rendering (tables, figures, HTML)"),
    ("Finished in state", "Prefect artifact, run log, flow state, Dask cluster stop"),
)
END = "server stop, printing the report, interpreter exit"

_STAMP = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) \|")


def phases(output: str, process_start: float, ended: float) -> list[tuple[str, float]]:
    """A command's wall time cut at the first log line of each of MARKS (Prefect's HH:MM:SS.fff local-time
    stamps), from the process's start (epoch seconds) to its end; a mark the run did not log (no temporary server
    under PREFECT_API_URL) joins its phase to the next. The phases sum to the command's wall time."""
    start_of_day = datetime.fromtimestamp(process_start).replace(hour=0, minute=0, second=0, microsecond=0)
    day_start = start_of_day.timestamp()
    at: dict[str, float] = {}
    for line in output.splitlines():
        if (m := _STAMP.match(line)) is None:
            continue
        for mark, _ in MARKS:  # the flow's own lines (a task run also logs 'Finished in state')
            if mark in line and mark not in at and (mark == MARKS[0][0] or "Flow run '" in line):
                t = day_start + int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3])
                at[mark] = t + 86400 if t < process_start - 1 else t  # a run across midnight
    out, previous, pending = [], process_start, []
    for mark, name in MARKS:
        pending.append(name)
        if mark in at:
            out.append((" + ".join(pending), max(at[mark] - previous, 0.0)))
            previous, pending = at[mark], []
    out.append((" + ".join([*pending, END]), max(ended - previous, 0.0)))
    return out


START_SERVER = "from ttseval.infra.prefect_server import shared_server\nwith shared_server(600):\n    pass\n"


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

    home = tempfile.mkdtemp(prefix="bench-prefect-home-")
    env = os.environ | {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF, "PREFECT_HOME": home}
    env.pop("PREFECT_API_URL", None)
    own_server = env | {"TTSEVAL_PREFECT_SERVER_KEEP_S": "0"}  # a temporary server per command, the way before
    # its database migrated before anything is timed, as a user's is after the first command ever (the first run
    # then pays a server's start, not Prefect's migrations, as the temporary server did on a used PREFECT_HOME)
    subprocess.run(
        [str(BIN / "prefect"), "server", "database", "upgrade", "-y"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    from ttseval.infra.prefect_server import server_folder, stop_server

    with tempfile.TemporaryDirectory() as store:
        cmd = [
            str(BIN / "ttseval"),
            "evaluate",
            "--dataset",
            args.dataset,
            "--systems",
            args.systems,
            "--store",
            store,
            "--run-id",
            "bench",
            "--workers",
            str(args.workers),
        ]
        try:
            # the shared server started first, on its own, as any command does for those of the next 10 minutes: the
            # first run then measures a run's own cost, and the server's start is counted once, beside it
            timed([sys.executable, "-c", START_SERVER], env, "server-start")
            first = timed(cmd, env, "first")
            logs = sorted(Path(store, "runs", "bench", "log").glob("*.json"))
            flow_first = json.loads(logs[-1].read_text())["wall_s"]
            again = timed(cmd, env, "again")
            computed_again = json.loads(sorted(Path(store, "runs", "bench", "log").glob("*.json"))[-1].read_text())[
                "computed"
            ]
            again_own = timed(cmd, own_server, "again-own")

            def export(test_id: str) -> list[str]:  # a listening test is a new input of the report: after the re-runs
                return [
                    str(BIN / "ttseval"),
                    "human-eval",
                    "export",
                    "--store",
                    store,
                    "--run-id",
                    "bench",
                    "--kind",
                    "mos",
                    "--items",
                    "4",
                    "--test-id",
                    test_id,
                    "--out",
                    str(Path(store, "listening", test_id)),
                ]

            small = timed(export("bench-shared"), env, "small")
            small_own = timed(export("bench-own"), own_server, "small-own")
        finally:
            assert stop_server(server_folder(Path(home))) == "stopped", "the shared server was not found or stopped"
            shutil.rmtree(home, ignore_errors=True)
    loop = timed(
        [sys.executable, __file__, "--plain-loop", "--dataset", args.dataset, "--systems", args.systems], env, "loop"
    )

    print(f"dataset: {args.dataset}\nsystems: {args.systems}\nworkers: {args.workers}, cores: {os.cpu_count()}")
    print(f"first run (whole command):          {first:8.1f} s   (flow alone {flow_first:.1f} s)")
    print(f"re-run (whole command):             {again:8.1f} s   computed {computed_again}")
    print(f"re-run / first run:                 {again / first:8.3f}")
    print(f"re-run, a temporary server of its own (prefect_server_keep_s = 0): {again_own:.1f} s")
    print(
        f"small flow (human-eval export of 4 items): {small:.1f} s; with a temporary server of its own "
        f"{small_own:.1f} s"
    )
    print(f"plain sequential loop (whole proc): {loop:8.1f} s")
    print(f"pipeline / plain loop:              {first / loop:8.3f}")
    cores = os.cpu_count() or 1
    for label, wall in (("first", first), ("loop", loop)):
        print(
            f"CPU time, {label + ' run' if label == 'first' else 'plain loop'}: {CPU_S[label]:8.1f} s "
            f"= {CPU_S[label] / wall:.2f} of {cores} cores busy on average"
        )
    print(f"pipeline CPU / plain loop CPU:      {CPU_S['first'] / CPU_S['loop']:8.3f}   (the shared server already up)")
    start_cpu = CPU_BY_ROLE["server-start"].get("Prefect server", 0.0)
    print(
        f"the shared Prefect server's start:  {start_cpu:8.1f} CPU-s (its keeper and uvicorn, until ready), paid "
        "by the first command in 10 idle minutes"
    )
    print(f"  counted in the first run:         {(CPU_S['first'] + start_cpu) / CPU_S['loop']:8.3f} CPU ratio")
    print_profile()


def print_profile() -> None:
    """Where the first run's and the re-run's seconds go, beside the plain loop's."""
    for label, title in (
        ("first", "first run"),
        ("again", "re-run"),  # a phase a run did not log joins the next
        ("again-own", "re-run, a temporary Prefect server of its own"),
    ):
        print(f"\n{title}: wall time by phase (s), from the command's log timestamps:")
        for name, seconds in PHASES[label]:
            print(f"  {seconds:8.1f}  {name}")
    print(f"\nCPU seconds by process, sampled every {SAMPLE_S} s:")
    roles = list(dict.fromkeys(r for label in ("first", "again", "loop") for r in CPU_BY_ROLE[label]))
    print(f"  {'process':<50} {'first':>8} {'re-run':>8} {'loop':>8}")
    for name in roles:
        print(
            f"  {name:<50} "
            + " ".join(f"{CPU_BY_ROLE[label].get(name, 0.0):8.1f}" for label in ("first", "again", "loop"))
        )
    print(
        f"  {'total (the command, its children, the shared server)':<50} "
        + " ".join(f"{CPU_S[label]:8.1f}" for label in ("first", "again", "loop"))
    )
    print(f"  pipeline CPU - plain loop CPU: {CPU_S['first'] - CPU_S['loop']:.1f} s")


if __name__ == "__main__":
    main()
