"""A flow on an existing Dask scheduler (dask_address) whose scheduler dies while a gather is talking to it, on this
host: the gather's closed comm leads to the same wait-and-plan-again path as cancelled futures, and the run ends with
exit 0 once a new scheduler answers at the same address. The hosts made of namespaces, with the evaluate flow, are
tests/system/test_multi_host.py; which errors count as a lost scheduler is tests/unit/test_scheduler_restarts.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.harness import BIN, cli_env, dask_worker_args, free_port, stop_group

pytestmark = pytest.mark.timeout(240)

FLOW = '''
import sys, time
from pathlib import Path

from distributed.comm.core import CommClosedError
from prefect import flow, task
from prefect.context import FlowRunContext

from ttseval.core.config import load_settings
from ttseval.flows.runner import task_runner, through_scheduler_restarts

signals = Path(sys.argv[1])


@task
def double(x: int) -> int:
    return 2 * x


def lose_then_finish() -> int:
    """Pass 1 computes on the first scheduler, has the test kill it, then fails as a gather in flight does when the
    scheduler goes (distributed raises CommClosedError there); pass 2 computes on the new one."""
    passes = signals / "passes"
    n = int(passes.read_text()) + 1 if passes.exists() else 1
    passes.write_text(str(n))
    first = double.submit(1).result()
    if n == 1:
        (signals / "lose").touch()
        client = FlowRunContext.get().task_runner._client
        while client.status == "running":  # the client notices the loss and starts reconnecting
            time.sleep(0.1)
        raise CommClosedError("in <TCP (closed) ConnectionPool.gather local=tcp://127.0.0.1:1>: Stream is closed")
    return first + double.submit(20).result()


run = flow(through_scheduler_restarts(lose_then_finish), name="lost-scheduler")
print("result", run.with_options(task_runner=task_runner(load_settings()))())
'''


def start_cluster(port: int, env: dict[str, str], folder: Path, log) -> list[subprocess.Popen]:
    scheduler = [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]
    worker = dask_worker_args(f"tcp://127.0.0.1:{port}", "127.0.0.1", folder)
    started = {"env": env, "cwd": folder, "stdout": log, "stderr": subprocess.STDOUT, "start_new_session": True}
    return [subprocess.Popen(scheduler, **started), subprocess.Popen(worker, **started)]


def wait_for(condition, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s} s")
        time.sleep(0.2)


def test_a_gather_that_meets_a_closed_comm_waits_for_the_scheduler_and_plans_again(
    prefect_api: str, tmp_path: Path
) -> None:
    port = free_port()
    env = cli_env(prefect_api, TTSEVAL_DASK_ADDRESS=f"tcp://127.0.0.1:{port}", TTSEVAL_SCHEDULER_WAIT_S="120")
    (tmp_path / "flow.py").write_text(FLOW, encoding="utf-8")
    with open(tmp_path / "dask.log", "w") as dask_log, open(tmp_path / "flow.log", "w") as flow_log:
        cluster = start_cluster(port, env, tmp_path, dask_log)
        command = [sys.executable, str(tmp_path / "flow.py"), str(tmp_path)]
        flow_run = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=flow_log, stderr=subprocess.STDOUT)
        try:
            wait_for((tmp_path / "lose").exists, "the flow's first pass")
            for proc in cluster:  # the scheduler's host gone at once: no goodbye to the client
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            log = tmp_path / "flow.log"
            wait_for(lambda: "was lost mid-run" in log.read_text() or flow_run.poll() is not None, "the flow's wait")
            assert flow_run.poll() is None, f"the flow ended instead of waiting:\n{log.read_text()[-4000:]}"
            assert (tmp_path / "passes").read_text() == "1", "no pass may run while the scheduler is away"
            cluster = start_cluster(port, env, tmp_path, dask_log)
            assert flow_run.wait(timeout=180) == 0, log.read_text()[-4000:]
        finally:
            flow_run.poll() is None and flow_run.kill()
            for proc in cluster:
                stop_group(proc)
    out = (tmp_path / "flow.log").read_text()
    assert "result 42" in out, out[-4000:]
    assert (tmp_path / "passes").read_text() == "2"
    assert f"the Dask scheduler at tcp://127.0.0.1:{port} is back; planning again from the store" in out
    assert "Traceback" not in out, out[-4000:]
