"""One writer per run id (ttseval/core/lease.py) through the CLI: a second `evaluate` on a run id that is being written
is refused with exit 2 and the run ends without a duplicate row. The lease itself is tests/unit/test_lease.py."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pandas as pd

from tests.support import instant
from tests.support.harness import BIN


def test_a_second_evaluate_on_a_run_being_written_exits_2_and_nothing_is_duplicated(
    shared_env: dict[str, str], small_dataset: Path, tmp_path: Path
) -> None:
    # The first run's one system holds a call until the second run has been refused (tests.support.fakes'
    # GatedFliteTTS), so the first is still writing however fast the machine; the clips are heard by the instant
    # recogniser and MOS predictor (the assertions are about the lease, not what a model hears).
    gate = tmp_path / "gate"
    gate.mkdir()
    store = tmp_path / "store"
    env = shared_env | instant.env({"tts": {"gated-flite": "tests.support.fakes:GatedFliteTTS"}})
    args = [
        str(BIN / "ttseval"),
        "evaluate",
        "--dataset",
        str(small_dataset),
        "--systems",
        f"gated-flite:slt:gate={gate}",
        "--store",
        str(store),
        "--run-id",
        "busy",
        "--shard-size",
        "2",
    ]
    first = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lease = store / "runs" / "busy" / ".lease"
    deadline = time.monotonic() + 120
    while not lease.exists():
        assert first.poll() is None and time.monotonic() < deadline, "the first run never took the lease"
        time.sleep(0.05)
    second = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert first.poll() is None  # the gate is still closed: the first run is mid-way
    (gate / "open").touch()
    assert second.returncode == 2, second.stderr[-2000:]
    assert "run 'busy' is being written by another invocation (evaluate of 1 systems" in second.stderr
    assert (gate / "held").exists()  # the first run's call was held while the second was refused
    assert first.wait(timeout=600) == 0, first.stderr.read()[-3000:]
    assert not lease.exists()  # released when the run ended
    for table, key in (
        ("synthesis", ["item_id", "system_id"]),
        ("transcripts", ["item_id", "system_id", "asr_id"]),
        ("quality", ["item_id", "system_id", "quality_id"]),
    ):
        raw = pd.read_parquet(store / "runs" / "busy" / table)  # every part, before any dedup
        assert len(raw) and not raw.duplicated(key).any(), table
