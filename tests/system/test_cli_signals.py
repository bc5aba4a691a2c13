"""SIGTERM ends the command within a bounded time even when its orderly stop hangs (ttseval.cli's watchdog).

The end-to-end case (a real evaluate run stopped mid-synthesis, its Dask workers and temporary Prefect server
gone after) is tests/system/test_evaluate_lifecycle.py::test_sigterm_stops_the_run_and_everything_it_started. Here
the orderly stop is made to hang on purpose, which a real run does only on a loaded machine, so the watchdog's own
path is what ends the process."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import psutil

from tests.support.harness import ROOT

# A command body whose cleanup never finishes: a child process (standing in for a Dask worker) and a `finally`
# that blocks forever (standing in for a LocalCluster close that does not return).
HANGING_COMMAND = textwrap.dedent("""
    import signal, subprocess, sys, time
    import ttseval.cli.signals as cli
    cli.SIGTERM_GRACE_S = float(sys.argv[1])
    signal.signal(signal.SIGTERM, cli.exit_on_sigterm)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        print(child.pid, flush=True)  # inside the try: a SIGTERM sent once this is read always meets the finally
        time.sleep(600)
    finally:
        print("cleanup started", flush=True)
        time.sleep(600)
""")


def _start(grace_s: float) -> tuple[subprocess.Popen, psutil.Process]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HANGING_COMMAND, str(grace_s)],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    child = psutil.Process(int(proc.stdout.readline()))
    return proc, child


def test_a_hung_orderly_stop_ends_after_the_grace_and_takes_its_children_with_it() -> None:
    proc, child = _start(grace_s=2)
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().strip() == "cleanup started"  # SystemExit reached the finally: the orderly stop
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert "the orderly stop took over 2 s" in proc.stderr.read()
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_a_second_sigterm_stops_at_once() -> None:
    proc, child = _start(grace_s=600)  # the watchdog alone would wait ten minutes
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().strip() == "cleanup started"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    _, alive = psutil.wait_procs([child], timeout=10)
    assert not alive
    assert "the orderly stop took over" not in proc.stderr.read()


# The same hang inside a Prefect flow run: while a flow runs, Prefect's SIGTERM bridge, not ttseval's handler,
# receives the signal (ttseval.cli.signals.bridge_prefect_sigterm makes it arm the watchdog as well).
HANGING_FLOW = textwrap.dedent("""
    import signal, subprocess, sys, time
    from prefect import flow
    import ttseval.cli.signals as cli
    cli.SIGTERM_GRACE_S = float(sys.argv[1])
    signal.signal(signal.SIGTERM, cli.exit_on_sigterm)
    cli.bridge_prefect_sigterm()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])

    @flow
    def hanging():
        try:
            print("child", child.pid, flush=True)
            time.sleep(600)
        finally:
            print("cleanup started", flush=True)
            time.sleep(600)

    hanging()
""")


def _start_flow(grace_s: float, prefect_api: str) -> tuple[subprocess.Popen, psutil.Process]:
    from tests.support.harness import cli_env

    proc = subprocess.Popen(
        [sys.executable, "-c", HANGING_FLOW, str(grace_s)],
        cwd=ROOT,
        text=True,
        env=cli_env(prefect_api),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return proc, psutil.Process(int(_line_starting(proc, "child ").split()[1]))


def _line_starting(proc: subprocess.Popen, prefix: str) -> str:
    for line in proc.stdout:  # Prefect's own log lines may come first
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no line starting {prefix!r}; stderr: {proc.stderr.read()[-3000:]}")


def test_a_sigterm_inside_a_flow_run_is_bounded_by_the_watchdog(prefect_api: str) -> None:
    proc, child = _start_flow(grace_s=2, prefect_api=prefect_api)
    proc.send_signal(signal.SIGTERM)
    _line_starting(proc, "cleanup started")  # Prefect's TerminationSignal reached the flow's finally
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert "the orderly stop took over 2 s" in proc.stderr.read()
    _, alive = psutil.wait_procs([child], timeout=10)
    assert not alive


def test_a_second_sigterm_inside_a_flow_run_stops_at_once(prefect_api: str) -> None:
    proc, child = _start_flow(grace_s=600, prefect_api=prefect_api)
    proc.send_signal(signal.SIGTERM)
    _line_starting(proc, "cleanup started")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    _, alive = psutil.wait_procs([child], timeout=10)
    assert not alive
    assert "the orderly stop took over" not in proc.stderr.read()
