"""`ttseval stack` through the real command, in its own process: the stack goes up, reports its live
processes and comes down in a temporary folder. voices and serve are tests/unit/test_commands_without_server.py and
tests/e2e/test_commands_cli.py.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import psutil

from tests.support.harness import run_cli


def test_stack_up_status_down_through_the_command(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    folder = tmp_path / "stack"
    empty = run_cli(["stack", "status", "--folder", str(folder)], env, cwd=tmp_path, timeout_s=120)
    assert empty.returncode == 0 and json.loads(empty.stdout) == {"running": False, "components": {}}
    up = run_cli(["stack", "up", "--folder", str(folder), "--no-gpu"], env, cwd=tmp_path, timeout_s=300)
    pids: list[int] = []
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        status = json.loads(
            run_cli(["stack", "status", "--folder", str(folder)], env, cwd=tmp_path, timeout_s=120).stdout
        )
        assert status["running"] is True
        assert {"prefect-server", "prefect-worker", "dask-scheduler", "s3"} <= set(status["components"])
        pids = [c["pid"] for c in status["components"].values()]
        assert all(c["alive"] for c in status["components"].values()) and all(map(psutil.pid_exists, pids))
        assert f"Prefect API    {status['api_url']}" in up.stdout and f"folder         {folder}" in up.stdout
        with urllib.request.urlopen(status["api_url"] + "/health", timeout=10) as r:
            assert json.loads(r.read()) is True
    finally:
        down = run_cli(["stack", "down", "--folder", str(folder)], env, cwd=tmp_path, timeout_s=120)
    assert down.returncode == 0 and down.stdout.strip() == f"stack in {folder} stopped", down.stderr[-2000:]
    after = json.loads(run_cli(["stack", "status", "--folder", str(folder)], env, cwd=tmp_path, timeout_s=120).stdout)
    assert after["running"] is False and not any(c["alive"] for c in after["components"].values())
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
