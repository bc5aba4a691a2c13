"""One writer per run id (ttseval/core/lease.py): the lease is taken atomically (local O_EXCL, S3 If-None-Match on
moto's S3 server), refused to a second invocation with who holds it, taken over when its holder died (same
host) or stopped renewing (ttl), by exactly one of many racers. Through the CLI (a second `evaluate` on a run id
being written): tests/e2e/test_lease_cli.py."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ttseval.core.errors import RunBusyError
from ttseval.core.lease import RunLease
from ttseval.core.store import ArtifactStore


@pytest.fixture(params=["local", "s3"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> ArtifactStore:
    if request.param == "local":
        return ArtifactStore(str(tmp_path / "store"))
    return ArtifactStore(f"s3://{request.getfixturevalue('s3_bucket')}/ttseval")  # moto's S3 server


def _plant(store: ArtifactStore, run_id: str, **holder: object) -> None:
    """A lease written by someone else (a dead process, another host)."""
    record = {
        "token": "theirs",
        "host": socket.gethostname(),
        "pid": 1,
        "purpose": "evaluate",
        "acquired_at": "2026-11-24T00:00:00+00:00",
        "renewed_at": datetime.now(UTC).isoformat(),
        "ttl_s": 120,
    } | holder
    store.write_bytes(f"runs/{run_id}/.lease", json.dumps(record).encode())


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_second_writer_is_refused_naming_the_first_then_takes_the_released_lease(store: ArtifactStore) -> None:
    first = RunLease(store, "r", purpose="evaluate of 3 systems").acquire()
    with pytest.raises(
        RunBusyError,
        match=r"run 'r' is being written by another invocation \(evaluate of 3 "
        rf"systems on host {socket.gethostname()}, pid \d+, since .*nothing was "
        "written",
    ):
        RunLease(store, "r").acquire()
    first.release()
    assert not store.exists("runs/r/.lease")
    with RunLease(store, "r"):
        assert json.loads(store.read_bytes("runs/r/.lease"))["pid"] > 0


def test_a_dead_holder_on_this_host_is_taken_over_at_once_a_live_one_from_elsewhere_is_not(
    store: ArtifactStore,
) -> None:
    _plant(store, "dead", pid=_dead_pid())  # SIGKILLed mid-run: its pid no longer runs
    lease = RunLease(store, "dead").acquire()
    assert lease.taken_over["token"] == "theirs"
    lease.release()
    _plant(store, "far", host="another-host", pid=_dead_pid())  # a pid of another host says nothing here
    with pytest.raises(RunBusyError, match="on host another-host"):
        RunLease(store, "far").acquire()
    # ... until it has not been renewed for the ttl
    _plant(store, "far", host="another-host", renewed_at=(datetime.now(UTC) - timedelta(seconds=121)).isoformat())
    RunLease(store, "far").acquire().release()


@pytest.mark.parametrize("stale", [False, True])
def test_of_many_racers_exactly_one_takes_the_lease(store: ArtifactStore, stale: bool) -> None:
    if stale:
        _plant(store, "race", pid=_dead_pid())
    leases = [RunLease(store, "race") for _ in range(12)]
    results: list[object] = [None] * len(leases)
    start = threading.Barrier(len(leases))

    def go(k: int) -> None:
        start.wait()
        results[k] = leases[k].try_acquire()

    threads = [threading.Thread(target=go, args=(k,)) for k in range(len(leases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [k for k, r in enumerate(results) if r is None]
    assert len(winners) == 1
    assert json.loads(store.read_bytes("runs/race/.lease"))["token"] == leases[winners[0]].owner["token"]


def test_the_holder_renews_and_a_waiter_gets_it_when_released(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path / "store"))
    # ttl 2 s, renewed every 0.5 s: a stall of the renewing thread under 1.5 s (a loaded machine) keeps it held
    holder = RunLease(store, "w", ttl_s=2.0).acquire()
    first = json.loads(store.read_bytes("runs/w/.lease"))["renewed_at"]
    time.sleep(2.5)  # past the ttl: still held, because it was renewed
    assert json.loads(store.read_bytes("runs/w/.lease"))["renewed_at"] > first
    with pytest.raises(RunBusyError):
        RunLease(store, "w", ttl_s=2.0).acquire()
    threading.Timer(1.0, holder.release).start()
    started = time.monotonic()
    RunLease(store, "w", wait_s=20).acquire().release()  # it looks again every 2 s at most
    assert 0.8 < time.monotonic() - started < 10


def test_try_acquire_alone_says_whether_it_took_the_lease_over(tmp_path: Path) -> None:
    # try_acquire is public: a caller that takes the lease with it (no acquire loop) reads taken_over like any other
    store = ArtifactStore(str(tmp_path / "store"))
    fresh = RunLease(store, "fresh")
    assert fresh.try_acquire() is None and fresh.taken_over is None
    dead = _dead_pid()
    _plant(store, "stale", pid=dead)
    stale = RunLease(store, "stale")
    assert stale.try_acquire() is None and stale.taken_over is not None and stale.taken_over["pid"] == dead


FROZEN_WRITER = """
import sys
from ttseval.core.errors import LeaseLostError
from ttseval.core.lease import RunLease
from ttseval.core.schemas import table_from_rows
from ttseval.core.store import ArtifactStore

store = ArtifactStore(sys.argv[1])
lease = RunLease(store, "r", ttl_s=1.0, purpose="frozen writer").acquire()
print(lease.token, flush=True)
sys.stdin.readline()  # the test says when: after it froze this process, took the lease over and thawed it
row = {"item_id": "late", "text": "Hi.", "language": "en", "category": "c", "depth": 0}
try:
    store.write_part("r", "items", table_from_rows("items", [row]), fence=lease.token)
    print("committed", flush=True)
except LeaseLostError as e:
    print("refused:", e, flush=True)
"""


def test_a_frozen_holder_thawed_after_another_took_over_commits_nothing(store: ArtifactStore) -> None:
    """A writer frozen (SIGSTOP) past its lease's ttl loses the lease to another invocation; thawed, its fenced
    commit (the token its workers carry, settings.lease_token) is refused and writes no part, while the new
    holder's commits go through."""
    import signal
    import sys

    from ttseval.core.errors import LeaseLostError
    from ttseval.core.schemas import table_from_rows

    proc = subprocess.Popen(
        [sys.executable, "-c", FROZEN_WRITER, store.uri],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        frozen_token = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert frozen_token, proc.stderr.read()  # type: ignore[union-attr]
        proc.send_signal(signal.SIGSTOP)
        taker = RunLease(store, "r", ttl_s=1.0, purpose="the next invocation")
        deadline = time.monotonic() + 60
        while taker.try_acquire() is not None:  # stale once a second passes without the frozen one's renewal
            assert time.monotonic() < deadline, "the frozen holder's lease never went stale"
            time.sleep(0.1)  # polls a condition, with the deadline above
        assert taker.taken_over is not None and taker.taken_over["token"] == frozen_token
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate("\n", timeout=60)
    finally:
        proc.kill()
    assert out.startswith("refused:") and "taken over by another (the next invocation" in out, out + err
    assert store.part_files("r", "items") == []
    row = {"item_id": "ours", "text": "Hi.", "language": "en", "category": "c", "depth": 0}
    assert store.write_part("r", "items", table_from_rows("items", [row]), fence=taker.token)
    with pytest.raises(LeaseLostError):
        store.write_part("r", "items", table_from_rows("items", [row]), fence=frozen_token)
    assert len(store.part_files("r", "items")) == 1
