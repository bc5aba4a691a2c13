"""SIGTERM ends the command within a bounded time even when its orderly stop hangs (ttseval.cli's watchdog).

The end-to-end case (a real evaluate run stopped mid-synthesis, its Dask workers and temporary Prefect server
gone after) is tests/system/test_evaluate_lifecycle.py::test_sigterm_stops_the_run_and_everything_it_started. Here
the orderly stop is made to hang on purpose, which a real run does only on a loaded machine, so the watchdog's own
path is what ends the process.

Each case runs twice: with the signal free to land on the main thread, and with the main thread blocking SIGTERM so
that the kernel must hand it to another thread, as it may at any time in a process with threads (Prefect's, Dask's).
There CPython's handler waits for the main thread, which here sleeps for ten minutes: only ttseval's nudge
(ttseval.cli.signals.handle_sigterm) makes it run."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading

import psutil
import pytest

from tests.support.harness import ROOT, cli_env

# A command body whose cleanup never finishes: a child process (standing in for a Dask worker) and a `finally`
# that blocks forever (standing in for a LocalCluster close that does not return).
HANGING_COMMAND = textwrap.dedent("""
    import signal, subprocess, sys, time
    import ttseval.cli.signals as cli
    cli.SIGTERM_GRACE_S = float(sys.argv[1])
    cli.handle_sigterm()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if sys.argv[2] == "another thread":  # the nudge thread, started above, is then the only one that takes it
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # after the child, which would inherit it
    try:
        print("child", child.pid, flush=True)  # inside the try: a SIGTERM sent once this is read meets the finally
        time.sleep(600)
    finally:
        print("cleanup started", flush=True)
        time.sleep(600)
""")


RECEIVERS = pytest.mark.parametrize("receiver", ["the main thread", "another thread"])


class Lines:
    """A process's stdout, read by a thread, so that waiting for a line has a deadline."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.queue.put(line)
        self.queue.put("")

    def starting(self, prefix: str, timeout: float = 60) -> str:
        """The first line starting with prefix; Prefect's own log lines may come first."""
        try:
            while line := self.queue.get(timeout=timeout):
                if line.startswith(prefix):
                    return line
        except queue.Empty:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its children too, which hold stderr open
        raise AssertionError(f"no line starting {prefix!r}; stderr: {self.proc.stderr.read()[-3000:]}")


def _start(
    script: str, grace_s: float, receiver: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, Lines, psutil.Process]:
    """Run a hanging script (HANGING_COMMAND, HANGING_FLOW) and wait for the child it starts."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(grace_s), receiver],
        cwd=ROOT,
        text=True,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a process group to stop whole when a line never comes
    )
    lines = Lines(proc)
    return proc, lines, psutil.Process(int(lines.starting("child ").split()[1]))


@RECEIVERS
def test_a_hung_orderly_stop_ends_after_the_grace_and_takes_its_children_with_it(receiver: str) -> None:
    proc, lines, child = _start(HANGING_COMMAND, grace_s=2, receiver=receiver)
    proc.send_signal(signal.SIGTERM)
    lines.starting("cleanup started")  # SystemExit reached the finally: the orderly stop
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert "the orderly stop took over 2 s" in proc.stderr.read()
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


@RECEIVERS
def test_a_second_sigterm_stops_at_once(receiver: str) -> None:
    proc, lines, child = _start(HANGING_COMMAND, grace_s=600, receiver=receiver)  # the watchdog alone: 10 minutes
    proc.send_signal(signal.SIGTERM)
    lines.starting("cleanup started")
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
    cli.handle_sigterm()
    cli.bridge_prefect_sigterm()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if sys.argv[2] == "another thread":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

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


@RECEIVERS
def test_a_sigterm_inside_a_flow_run_is_bounded_by_the_watchdog(prefect_api: str, receiver: str) -> None:
    proc, lines, child = _start(HANGING_FLOW, grace_s=2, receiver=receiver, env=cli_env(prefect_api))
    proc.send_signal(signal.SIGTERM)
    lines.starting("cleanup started")  # Prefect's TerminationSignal reached the flow's finally
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert "the orderly stop took over 2 s" in proc.stderr.read()
    _, alive = psutil.wait_procs([child], timeout=10)
    assert not alive


@RECEIVERS
def test_a_second_sigterm_inside_a_flow_run_stops_at_once(prefect_api: str, receiver: str) -> None:
    proc, lines, child = _start(HANGING_FLOW, grace_s=600, receiver=receiver, env=cli_env(prefect_api))
    proc.send_signal(signal.SIGTERM)
    lines.starting("cleanup started")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    _, alive = psutil.wait_procs([child], timeout=10)
    assert not alive
    assert "the orderly stop took over" not in proc.stderr.read()
