"""The lifecycle of what `ttseval evaluate` starts itself: with no Prefect server set and prefect_server_keep_s = 0 it
starts one temporary server and stops it; SIGTERM ends the command, its Dask workers and that server; SIGKILL mid-run
loses nothing that a resume does not finish. The runs on the session's server are tests/e2e/test_evaluate_cli.py."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.support import instant
from tests.support.harness import BIN, FAULT_SEED, cli_env, demo_items, run_cli
from ttseval.core.store import ArtifactStore


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
    # then a random moment: up to 2 s more, drawn from harness.FAULT_SEED (recognition and scoring are still to do)
    time.sleep(random.Random(f"{FAULT_SEED}/sigterm").uniform(0.0, 2.0))
    assert proc.poll() is None, f"the run ended before it could be stopped (fault seed {FAULT_SEED})"
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


def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(
    prefect_api: str, shared_env: dict[str, str], tmp_path: Path
) -> None:
    """...and ends with the values of an undisturbed run of the same systems (the same clip bytes, transcripts, error
    rates and MOS, though computed in other shards and another process).

    What is tested is the store's resume, so the voices, recogniser and predictor are the instant ones. The killed
    run's second voice holds its first call until this test opens its gate (tests.support.fakes.hold_first_call):
    the run cannot finish before the kill however fast or slow the machine, and the other worker stores parts
    meanwhile, so the kill lands after KILL_AFTER_PARTS parts and before the end by construction. The command runs
    its own LocalCluster, so the kill takes its workers too."""
    dataset = tmp_path / "six.jsonl"
    demo_items(dataset, SIX_ITEMS)
    calm_store, store = tmp_path / "calm", tmp_path / "store"
    calm = run_cli(
        [
            *("evaluate", "--dataset", str(dataset), "--systems", CALM_SYSTEMS),
            *("--store", str(calm_store), "--run-id", "calm", "--shard-size", "3"),
        ],
        shared_env | instant.ENV,
        cwd=tmp_path,
    )
    assert calm.returncode == 0, calm.stderr[-3000:]
    gate = tmp_path / "gate"
    gate.mkdir()
    args = [
        str(BIN / "ttseval"),
        "evaluate",
        "--dataset",
        str(dataset),
        "--systems",
        f"{CALM_SYSTEMS}:gate={gate}",
        "--store",
        str(store),
        "--run-id",
        "k",
        "--shard-size",
        "1",
    ]
    env = cli_env(prefect_api, **instant.ENV)
    proc = subprocess.Popen(
        args, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    synth_dir = store / "runs" / "k" / "synthesis"

    def parts() -> int:
        return len(list(synth_dir.glob("part-*.parquet"))) if synth_dir.is_dir() else 0

    try:
        deadline = time.monotonic() + 600
        while not ((gate / "held").exists() and parts() >= KILL_AFTER_PARTS):
            assert proc.poll() is None, f"the run ended (exit {proc.returncode}) with its gate closed"
            assert time.monotonic() < deadline, (
                f"within 600 s: held call {(gate / 'held').exists()}, {parts()} of {KILL_AFTER_PARTS} parts stored"
            )
            time.sleep(0.05)  # polls a condition, with the deadline above
        assert not (gate / "open").exists() and proc.poll() is None  # still held: the run is mid-way
        print(f"killed after {parts()} parts (fault seed {FAULT_SEED}: at least {KILL_AFTER_PARTS})")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its Dask workers, mid-run (or after a failed wait)
        proc.wait()
    (gate / "open").touch()  # the resume's calls are not held
    # a write the kill cut between its dot-file and the rename leaves that dot-file (never read as a part); the
    # resume adds none of its own
    left_by_the_kill = set(tmp_path.rglob(".*.tmp"))
    partial = pd.read_parquet(synth_dir)
    # every part holds rows; the held call's row was never stored, so the kill left the stage unfinished
    said = f"fault seed {FAULT_SEED}: killed after {KILL_AFTER_PARTS} parts"
    assert KILL_AFTER_PARTS <= len(partial) < 12 and not partial.duplicated(["item_id", "system_id"]).any(), said

    result = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{said}\n{result.stderr[-3000:]}"
    log = json.loads(sorted((store / "runs" / "k" / "log").glob("*.json"))[-1].read_text())
    assert log["reused"]["synthesis"] >= len(partial)
    assert log["computed"]["synthesis"] == 12 - log["reused"]["synthesis"]
    for table in ("synthesis", "transcripts", "quality"):
        frame = pd.read_parquet(store / "runs" / "k" / table)
        assert len(frame) == 12 and not frame.duplicated(["item_id", "system_id"]).any(), table
    assert set(tmp_path.rglob(".*.tmp")) == left_by_the_kill
    # the gated voice speaks the calm second voice's clips: compare its rows with the calm run's
    ids = dict(pd.read_parquet(calm_store / "runs" / "calm" / "synthesis")[["system_spec", "system_id"]].values)
    resumed_specs = pd.read_parquet(synth_dir)[["system_spec", "system_id"]].drop_duplicates().values
    as_calm = {system_id: ids[spec.replace(f":gate={gate}", "")] for spec, system_id in resumed_specs}
    assert len(as_calm) == 2 and set(as_calm.values()) == set(ids.values()), as_calm
    for table, key, columns in (
        ("synthesis", ["item_id", "system_id"], ["status", "audio_sha256", "duration_s"]),
        ("transcripts", ["item_id", "system_id", "asr_id"], ["hypothesis", "wer", "cer"]),
        ("quality", ["item_id", "system_id", "quality_id"], ["mos"]),
    ):
        resumed = ArtifactStore(str(store)).read("k", table)
        resumed["system_id"] = resumed["system_id"].map(as_calm)
        resumed = resumed.set_index(key)[columns].sort_index()
        undisturbed = ArtifactStore(str(calm_store)).read("calm", table).set_index(key).loc[resumed.index, columns]
        pd.testing.assert_frame_equal(resumed, undisturbed, check_exact=False, rtol=1e-6)
    assert set(resumed.index.get_level_values("item_id")) == set(SIX_ITEMS)


# English items of three categories and both depths, French and Pashto: 12 clips of two voices
SIX_ITEMS = ("emo-a-d0", "for-a-d0", "que-a-d0", "que-a-d1", "mul-fr", "mul-ps")
CALM_SYSTEMS = "instant,instant:slow:pace=1.3"
# synthesis parts stored (one item each, shard size 1) before the kill: a random moment between the first part and
# 9 of the 12 (the free worker can store 11 while the other's call is held), drawn from harness.FAULT_SEED
KILL_AFTER_PARTS = random.Random(f"{FAULT_SEED}/sigkill").randint(1, 9)


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
