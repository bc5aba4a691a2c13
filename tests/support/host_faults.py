"""The faults of the docs' faults table, dealt to an evaluate running across the hosts of tests/support/lan.py, and
what they did to it counted: used by tests/system/test_multi_host.py (each fault once, asserting) and
benchmarks/faults_hosts.py (each fault many times under load, counting).

The run: 3 demo items x two instant voices and the fake vendor's paid system, one item per task, into store
s3://lan/<name>; the recogniser takes 1 s a clip, so a run is at least 4 s from its end when its first transcript is
stored (9 clips, two single-thread workers), whatever the machine's speed. The fault starts at a moment given by the
caller (a condition on the run, then a seeded random delay) and lasts until the run is seen to have met it (not for
a time). Each fault leaves the hosts whole again (`make_whole`) for the next run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow.dataset as ds

from tests.support import instant
from tests.support.harness import BIN, demo_items, stop_group, wait_http
from tests.support.lan import Lan

ITEMS = ["emo-a-d0", "que-a-d0", "for-a-d0"]
SYSTEMS = 3  # two instant voices and the paid system
KEYS = {
    "synthesis": ["item_id", "system_id"],
    "transcripts": ["item_id", "system_id", "asr_id"],
    "quality": ["item_id", "system_id", "quality_id"],
}
ROWS_WRITTEN = "rows written: "  # the flow's log line once every stage is done (flows/evaluate.py)
SLOW_HEARING = instant.ENV | {"TTSEVAL_ASR": json.dumps({"*": "instant-asr:seconds=1", "en": "instant-asr:seconds=1"})}
"""The instant voices, recogniser and MOS predictor, the recogniser taking 1 s a clip."""


class Run:
    """The evaluate a fault hits, as the fault sees it: what it has printed so far, what it has stored, and a wait
    for a condition on them."""

    def __init__(self, lan: Lan, name: str, proc: subprocess.Popen) -> None:
        self.lan, self.name, self.proc, self.lines = lan, name, proc, []
        # the output is read as it comes, so a condition can look at it, and a full pipe never stalls the run
        self.reader = threading.Thread(target=lambda: self.lines.extend(iter(proc.stdout.readline, "")), daemon=True)
        self.reader.start()

    def output(self) -> str:
        return "".join(self.lines)

    def worker_logs(self) -> str:
        return "\n".join(self.lan.log_tail(w, 10**7) for w in ("worker-a", "worker-b"))

    def parts(self, table: str = "") -> int:
        """How many objects the run has stored (in `table`, if given; the store must be reachable)."""
        prefix = f"{self.name}/runs/{self.name}/{table + '/' if table else ''}"
        return sum(
            page.get("KeyCount", 0)
            for page in self.lan.s3().get_paginator("list_objects_v2").paginate(Bucket="lan", Prefix=prefix)
        )

    def until(self, condition: Callable[[], bool], max_s: float) -> bool:
        """Wait until `condition()` holds, the run ends, or `max_s` pass; whether the condition held."""
        deadline = time.monotonic() + max_s
        while not condition():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return condition()
            time.sleep(0.2)
        return True

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = 300) -> None:
        """Return once `condition()` holds; fail, saying `what` was awaited, if the run ends first or it does not
        hold within `timeout_s` (generous: the conditions come in seconds to a minute on an idle machine)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                ended = f"the run ended (exit {self.proc.returncode})" if self.proc.poll() is not None else "timed out"
                raise AssertionError(
                    f"waited for {what}: {ended}; it printed:\n{first_error_and_end(self.output())}\n"
                    f"--- workers:\n{self.worker_logs()[-4000:]}"
                )
            time.sleep(0.2)


def first_error_and_end(output: str, n: int = 4000) -> str:
    """The part of a command's output a failure is read from: from a little before its first traceback (the error
    that started it; what follows is often a second error while reporting the first), then its end."""
    first = output.find("Traceback (most recent call last)")
    if first < 0 or first >= len(output) - n:
        return output[-n:]
    return f"{output[max(0, first - 1000) : first + n]}\n[...]\n{output[-n:]}"


def after_first_part(table: str, delay_s: float) -> Callable[[Run], None]:
    """The moment: once the run has stored its first part of `table` (it is going), and `delay_s` more."""

    def moment(run: Run) -> None:
        run.wait_for(lambda: run.parts(table) > 0, f"the first part of {table} before the fault", timeout_s=400)
        time.sleep(delay_s)

    return moment


RESTART_S = 30.0
"""The longest a restarted server stays away: a host's restart, and within the Prefect client's retries of its API
calls (docs: storage.md, the faults table)."""


def after_row_parts(k: int) -> Callable[[Run], None]:
    """The moment: once the run has stored `k` of its row parts (synthesis, transcripts and quality, one part a clip
    at shard size 1), or has logged that it wrote all its rows: a point of its progress, whatever the machine's speed.
    At k = all of them the fault lands in the end phase (compaction, the report)."""

    def moment(run: Run) -> None:
        def reached() -> bool:
            return ROWS_WRITTEN in run.output() or sum(run.parts(table) for table in KEYS) >= k

        run.wait_for(reached, f"{k} row parts stored", timeout_s=400)

    return moment


# The faults: each starts when called and returns when it is over (the hosts it took away given back, or left to
# make_whole where the run does not need them back to finish). `resume` faults end the command; the run is then
# started again as a user would, and that second command is the one whose end is counted.


def worker_link_cut(lan: Lan, run: Run) -> None:
    """worker-a's link taken down, as behind a pulled cable: the scheduler drops it after lan.WORKER_TTL and its
    tasks go to worker-b. Mended by make_whole after the run."""
    lan.hosts["worker-a"].cut()


def worker_killed(lan: Lan, run: Run) -> None:
    """worker-a's whole process group SIGKILLed (its supervisor too): the scheduler sees its connection close."""
    os.killpg(lan.procs["worker-a"].pid, signal.SIGKILL)


def s3_away(lan: Lan, run: Run) -> None:
    """The S3 host's link cut, and mended once the run (the client or a worker) says it is waiting for the store:
    longer than a store operation's own retries ride out (each try that gets no answer takes the AWS SDK about 10 s)."""
    waiting = f"the store s3://lan/{run.name} cannot be reached"
    lan.hosts["s3"].cut()
    try:
        run.wait_for(lambda: waiting in run.output() + run.worker_logs(), f"the run to say {waiting!r}")
    finally:
        lan.hosts["s3"].mend()


def scheduler_restarted(lan: Lan, run: Run) -> None:
    """The scheduler host restarted: its Dask scheduler and Prefect server stopped, and started again (the Prefect
    database kept on its disk) once the run has said it lost the scheduler, or after RESTART_S (a run past its
    last task has no scheduler to lose, but still reports to the Prefect server). The workers stop with their
    scheduler and their supervisor starts them again."""
    lost = f"the Dask scheduler at {lan.scheduler} was lost mid-run"
    for name in ("scheduler", "prefect"):
        stop_group(lan.procs.pop(name))
    try:
        run.until(lambda: lost in run.output(), RESTART_S)
    finally:
        lan.start_prefect()
        lan.start_scheduler()
        wait_http(lan.prefect_api + "/health", 120)


def prefect_restarted(lan: Lan, run: Run) -> None:
    """Only the Prefect server restarted, once the run has stored a part more without it (its tasks report to the
    server through events, which wait for it), or after RESTART_S (a run with no part left to store)."""
    stop_group(lan.procs.pop("prefect"))
    stored = run.parts()
    try:
        run.until(lambda: run.parts() > stored, RESTART_S)
    finally:
        lan.start_prefect()
        wait_http(lan.prefect_api + "/health", 120)


def command_killed(lan: Lan, run: Run) -> None:
    """The command and everything it started SIGKILLed, as the OOM killer or a pulled plug does."""
    os.killpg(run.proc.pid, signal.SIGKILL)
    run.proc.wait(timeout=60)


def command_terminated(lan: Lan, run: Run) -> None:
    """SIGTERM to the command (a scheduler's or a user's kill): it stops in order, within its watchdog's grace."""
    run.proc.send_signal(signal.SIGTERM)
    run.proc.wait(timeout=120)


@dataclass(frozen=True)
class Fault:
    name: str
    deal: Callable[[Lan, Run], None]
    after: str  # the table whose first part opens the window the fault is dealt in
    in_flight: int  # paid calls that may be bought again: those in flight on what the fault took away (a worker
    # thread each: one for a lost worker host, both for the command, whose tasks the workers finish unheard)
    resume: bool = False  # the fault ends the command: it is run again, and that run is counted


FAULTS = {
    f.name: f
    for f in (
        Fault("worker link cut", worker_link_cut, "transcripts", 1),
        Fault("worker killed", worker_killed, "transcripts", 1),
        Fault("S3 away", s3_away, "synthesis", 0),
        Fault("scheduler restarted", scheduler_restarted, "transcripts", 0),
        Fault("Prefect restarted", prefect_restarted, "transcripts", 0),
        Fault("command SIGKILL", command_killed, "synthesis", 2, resume=True),
        Fault("command SIGTERM", command_terminated, "synthesis", 2, resume=True),
    )
}


def make_whole(lan: Lan) -> None:
    """The hosts as open_lan left them, whatever a fault (or a failure mid-fault) took away: every link up, the
    scheduler host's servers running, worker-a started again if it was lost, both workers joined."""
    for host in lan.hosts.values():
        host.mend()
    if "prefect" not in lan.procs:
        lan.start_prefect()
    if "scheduler" not in lan.procs:
        lan.start_scheduler()
    wait_http(lan.prefect_api + "/health", 120)
    if lan.procs["worker-a"].poll() is not None or lan.hosts["worker-a"].ip not in _joined(lan):
        stop_group(lan.procs.pop("worker-a"))
        lan.start_worker("worker-a")
    lan.wait_workers(2)


def _joined(lan: Lan) -> set[str]:
    try:
        return set(lan.worker_hosts())
    except OSError:
        return set()


@dataclass
class Outcome:
    """What a fault did to a run: its exit code (the resumed command's, for a fault that ends the command), when
    the fault hit and how long the run took to end after it, and what the store and the vendor hold."""

    exit_code: int
    output: str
    into_s: float  # from the command's start to the fault
    recovered_s: float  # from the fault's end to the (resumed) run's end
    mid_run: bool  # the run was going when the fault began, with rows still to compute
    expected: int  # keys over the three tables
    lost: int  # expected keys with no row
    duplicated: int  # rows beyond one per key, in the parts as written (a reader would hide them)
    not_ok: int  # rows whose status is not ok
    paid_again: int  # calls the vendor billed beyond one per paid item


def evaluate_through(
    lan: Lan, name: str, fault: Fault, moment: Callable[[Run], None], monkeypatch: Any = None
) -> Outcome:
    """The run (above) into a new store s3://lan/<name>, with `fault` dealt at `moment`; the counts of Outcome (the
    store read with Lan.store's `monkeypatch`)."""
    files = lan.client_files / name
    files.mkdir()
    rows = demo_items(files / "items.jsonl", ITEMS)
    billed = lan.vendor_counters()["paid_calls"]
    argv = [
        str(BIN / "ttseval"),
        "evaluate",
        "--dataset",
        "items.jsonl",
        "--systems",
        f"instant:a,instant:b:pace=1.2,{lan.paid}",
        "--store",
        f"s3://lan/{name}",
        "--run-id",
        name,
        "--shard-size",
        "1",
        "--judges",
        "",
    ]

    def start(*extra: str) -> Run:
        proc = subprocess.Popen(
            [*argv, *extra],
            env=lan.client_env() | SLOW_HEARING,
            cwd=files,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        return Run(lan, name, proc)

    started = time.monotonic()
    run = start("--new-store")
    runs = [run]
    try:
        moment(run)
        # mid-run: the command was going and had not yet logged the rows it wrote (which it does once every stage
        # is done, before compaction and the report); a count of parts cannot tell, as compaction merges them
        mid_run = run.proc.poll() is None and ROWS_WRITTEN not in run.output()
        fault_at = time.monotonic()
        fault.deal(lan, run)
        fault_end = time.monotonic()
        if fault.resume:
            runs.append(start())
        runs[-1].proc.wait(timeout=600)
    finally:
        for r in runs:
            if r.proc.poll() is None:
                os.killpg(r.proc.pid, signal.SIGKILL)
            r.reader.join(timeout=60)
    ended = time.monotonic()
    output = "\n--- the command run again:\n".join(r.output() for r in runs)
    store = lan.store(f"s3://lan/{name}", monkeypatch)
    lost = duplicated = not_ok = 0
    for table, key in KEYS.items():
        parts = store.part_files(name, table)
        raw = ds.dataset(parts, format="parquet", filesystem=store.fs).to_table().to_pandas() if parts else None
        present = 0 if raw is None else raw[key].drop_duplicates().shape[0]
        lost += len(rows) * SYSTEMS - present
        duplicated += 0 if raw is None else int(raw.duplicated(key).sum())
        not_ok += 0 if raw is None else int((raw["status"] != "ok").sum())
    return Outcome(
        exit_code=runs[-1].proc.returncode,
        output=output,
        into_s=fault_at - started,
        recovered_s=ended - fault_end,
        mid_run=mid_run,
        expected=len(rows) * SYSTEMS * len(KEYS),
        lost=lost,
        duplicated=duplicated,
        not_ok=not_ok,
        paid_again=lan.vendor_counters()["paid_calls"] - billed - len(rows),
    )
