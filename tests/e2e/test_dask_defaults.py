"""Dask's housekeeping at ttseval's pace (ttseval.infra.dask_defaults): the intervals the running scheduler's and
workers' periodic callbacks really have, read from them, in the flows' own LocalCluster and in `dask worker`
processes started with dask_env(); a value the user set wins. What it saves is measured in
benchmarks/bench_dask_idle.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from distributed import Client

from tests.support.dask_probe import callbacks, ms
from tests.support.harness import ROOT
from ttseval.infra.dask_defaults import QUIET_DASK, SMALL_LOGS, env_name

SCRIPT = """
import json
from ttseval.flows.runner import SettingsDaskTaskRunner
from tests.support.dask_probe import callbacks, log_bounds, ms

if __name__ == "__main__":
    kwargs = {"n_workers": 1, "threads_per_worker": 1, "processes": True, "dashboard_address": ":0"}
    with SettingsDaskTaskRunner(cluster_kwargs=kwargs) as runner:
        client = runner.dask_runner().client
        print(json.dumps({"scheduler": client.run_on_scheduler(callbacks),
                          "worker": next(iter(client.run(callbacks).values())),
                          "logs": {"client": client.scheduler_comm.recent_message_log.maxlen,
                                   **client.run_on_scheduler(log_bounds),
                                   **next(iter(client.run(log_bounds).values()))}}))
"""


def test_a_flows_local_cluster_has_ttseval_s_intervals_and_a_value_the_user_set_wins(tmp_path: Path) -> None:
    # The flows' task runner makes the LocalCluster (scheduler and nanny in this process, the worker in its own) in
    # a fresh process, the user having set the tick interval; each server's callbacks are read back.
    script = tmp_path / "cluster.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    env |= {"PYTHONPATH": str(ROOT), env_name("distributed.admin.tick.interval"): "50ms"}
    out = subprocess.run(
        [sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    for server in ("scheduler", "worker"):
        assert seen[server]["tick"] == 50.0  # the user's, not ttseval's 500 ms nor Dask's 20 ms
        assert seen[server]["monitor"] == ms(QUIET_DASK["distributed.admin.system-monitor.interval"]) == 2000
    assert seen["worker"]["profile"] == ms(QUIET_DASK["distributed.worker.profile.interval"]) == 100
    assert seen["worker"]["memory_monitor"] == ms(QUIET_DASK["distributed.worker.memory.monitor-interval"]) == 500
    # each low-level log keeps 50 entries (Dask's default, 1,000, held 2.9 GiB of submitted shards at 100,000 clips)
    assert seen["logs"] == {"client": 50, "transitions": 50, "messages": 50, "stimuli": 50}
    assert SMALL_LOGS == {"distributed.admin.low-level-log-length": 50}


def test_dask_worker_processes_started_with_dask_env_have_ttseval_s_intervals(shared_dask: str) -> None:
    # the tests' shared cluster is `dask worker` and `dask scheduler` processes given dask_env(), as the local
    # stack's are (tests/conftest.py, ttseval.infra.stack)
    with Client(shared_dask, timeout=30, set_as_default=False) as client:
        workers = list(client.run(callbacks).values())
        scheduler = client.run_on_scheduler(callbacks)
    assert workers
    for server in [scheduler, *workers]:
        assert server["tick"] == 500 and server["monitor"] == 2000
    for worker in workers:
        assert worker["profile"] == 100 and worker["memory_monitor"] == 500
