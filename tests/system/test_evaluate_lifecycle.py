"""The lifecycle of what `ttseval evaluate` starts itself when no Prefect server is set: with
prefect_server_keep_s = 0 it starts one temporary server and stops it, and SIGTERM ends the command, its Dask workers
and that server. The runs on the session's server are tests/e2e/test_evaluate_cli.py."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.support import instant
from tests.support.harness import BIN, cli_env, run_cli


def test_with_keep_0_and_no_prefect_server_the_command_starts_and_stops_its_own(tmp_path: Path) -> None:
    """No PREFECT_API_URL and prefect_server_keep_s = 0: one temporary server for the command and its Dask workers
    (the shared server of the default: tests/system/test_prefect_server.py). On the instant voices, recogniser and
    MOS predictor: what is tested is the server's lifecycle."""
    env = {k: v for k, v in cli_env("unused").items() if k != "PREFECT_API_URL"} | {
        "PREFECT_HOME": str(tmp_path / "ph"),
        "TTSEVAL_PREFECT_SERVER_KEEP_S": "0",
        **instant.ENV,
    }
    dataset = tmp_path / "one.jsonl"
    dataset.write_text(
        '{"item_id": "q1", "text": "Is it late?", "language": "en-US", "category": "questions", "depth": 0}\n'
    )
    result = run_cli(
        [
            "evaluate",
            "--dataset",
            str(dataset),
            "--systems",
            "instant,instant:b:pace=1.2",
            "--store",
            str(tmp_path / "s"),
            "--run-id",
            "own",
        ],
        env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert output.count("Starting temporary server") == 1 and "Stopping temporary server" in output
    assert "Error logging to API" not in output and "Traceback" not in output
    assert len(pd.read_parquet(tmp_path / "s" / "runs" / "own" / "report")) == 2
    # the LocalCluster's workers log to this console: a task run there leaves a duplicate of the runner that never
    # started a cluster, and must not say that nothing was computed (the demo printed it after every task)
    from ttseval.flows.runner import NOT_STARTED

    assert NOT_STARTED not in output


def test_sigterm_stops_the_run_and_everything_it_started(small_dataset: Path, tmp_path: Path) -> None:
    """SIGTERM (a scheduler or a user's kill) ends the command, its Dask workers and its temporary Prefect server
    (prefect_server_keep_s = 0; a shared server outlives commands by design)."""
    import psutil

    env = {k: v for k, v in cli_env("unused").items() if k != "PREFECT_API_URL"} | {
        "PREFECT_HOME": str(tmp_path / "ph"),
        "TTSEVAL_PREFECT_SERVER_KEEP_S": "0",
    }
    proc = subprocess.Popen(
        [
            str(BIN / "ttseval"),
            "evaluate",
            "--dataset",
            str(small_dataset),
            "--systems",
            "espeak-ng,flite:slt",
            "--store",
            str(tmp_path / "s"),
            "--run-id",
            "t",
            "--shard-size",
            "1",
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own session: whatever it starts, even after the snapshot below, is found there
    )
    synth_dir = tmp_path / "s" / "runs" / "t" / "synthesis"
    deadline = time.monotonic() + 300
    while not (synth_dir.is_dir() and list(synth_dir.glob("part-*.parquet"))):
        assert proc.poll() is None, "the run ended before it could be stopped"
        assert time.monotonic() < deadline, "no synthesis part was stored within 300 s"
        time.sleep(0.1)  # polls a condition, with the deadline above
    command = psutil.Process(proc.pid)
    family = command.children(recursive=True)
    names = {p.pid: _describe(p) for p in family}
    # the workers of a LocalCluster and the temporary server's uvicorn are Python processes the command started
    assert len(family) >= 2, f"expected Dask workers and a temporary Prefect server, found {names}"
    proc.send_signal(signal.SIGTERM)
    try:
        returncode = proc.wait(timeout=EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ttseval evaluate was still running {EXIT_DEADLINE_S} s after SIGTERM")
    assert returncode != 0
    _, alive = psutil.wait_procs(family, timeout=EXIT_DEADLINE_S)
    assert not alive, f"still running {EXIT_DEADLINE_S} s after the command ended: {[names[p.pid] for p in alive]}"
    # nothing the snapshot missed (a process started after it) lives on in the command's session or group
    left = [_describe(p) for p in psutil.process_iter() if p.pid != proc.pid and _in_session_or_group(p.pid, proc.pid)]
    assert not left, f"left in the command's session after it ended: {left}"


EXIT_DEADLINE_S = 300  # generous: only a command or child that ignores SIGTERM reaches it


def _describe(p: object) -> str:
    import psutil

    assert isinstance(p, psutil.Process)
    try:
        return f"{p.pid} {' '.join(p.cmdline()[:3])}"
    except psutil.Error:
        return f"{p.pid} (gone)"


def _in_session_or_group(pid: int, leader: int) -> bool:
    import os

    import psutil

    try:
        ours = leader in (os.getsid(pid), os.getpgid(pid))
        return ours and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE  # a zombie has ended, only unreaped
    except (ProcessLookupError, PermissionError, psutil.Error):  # ended while the table was read, or not ours
        return False
