"""The plain helpers every tier shares: where the checkout and the venv's commands are, free ports, waiting for a
server, stopping a process group, and running `ttseval` as a user would. tests/conftest.py builds its fixtures from
these; test modules import them from here (never from the conftest)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from pathlib import Path

from tests.support.keys import ALLOWED
from ttseval.core.telemetry import TELEMETRY_OFF

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root (the checkout): the one place a test finds it, whatever folder the test lives in."""

BIN = Path(sys.executable).parent
"""The venv's commands: ttseval, prefect, dask, moto_server."""

DEAD_API = "http://127.0.0.1:9/api"
"""A Prefect API address nothing answers on: for a command that must refuse before it needs any server."""


CLAIMS = Path("/run/lock") if os.access("/run/lock", os.W_OK) else Path(tempfile.gettempdir())
"""Where claim() keeps its lock files: one folder every test process on this machine shares, whatever its TMPDIR."""

_claimed: dict[tuple[str, int], int] = {}  # (kind, index) -> the open lock file that holds it


def claim(kind: str, indexes: Sequence[int], prefer: int | None = None) -> int:
    """One of `indexes` that no other holder on this machine has: not this process, not another test suite. Held by
    an exclusive flock on CLAIMS/ttseval-<kind>-<index>.lock until release(kind, index) or the end of this process
    (the kernel drops the lock of a process that dies, so a killed suite leaves no stale claim). `prefer` is tried
    first; the others follow from a place this process picks, so two suites rarely try the same ones first."""
    start = os.getpid() % len(indexes)
    order = [*([prefer] if prefer in indexes else []), *indexes[start:], *indexes[:start]]
    for index in dict.fromkeys(order):
        path = CLAIMS / f"ttseval-{kind}-{index}.lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            with contextlib.suppress(OSError):  # whoever made it lets every user's suite lock it (umask aside)
                os.fchmod(fd, 0o666)
        except PermissionError:  # made by another user under a stricter umask: a read-only file locks as well
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by another process, or by this one through another claim
            os.close(fd)
            continue
        # the holder's pid, for a person looking at the lock files (the lock, not the file, is the claim; the file
        # is never removed, so two processes can never lock two different files of one name)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        _claimed[(kind, index)] = fd
        return index
    raise RuntimeError(
        f"every {kind} index in {indexes[0]}..{indexes[-1]} is claimed by a test process on this machine "
        f"(lock files {CLAIMS}/ttseval-{kind}-*.lock hold their pids)"
    )


def release(kind: str, index: int) -> None:
    """Give up a claim() of this process (nothing if it holds none)."""
    fd = _claimed.pop((kind, index), None)
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _port_range() -> list[int]:
    """Ports free_port() hands out: 23000-24999 less the kernel's ephemeral range, from which it picks the port of
    every outgoing connection and every bind to port 0, so none of those can take a port between free_port() and
    the bind of the server it was meant for."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    ports = [p for p in range(23000, 25000) if not low <= p <= high]
    return ports or list(range(23000, 25000))


def free_port() -> int:
    """A TCP port that nothing listens on and no other free_port() on this machine (in this process or another
    test suite) has handed out: claimed for the rest of this process, since a server started on it later binds it
    after this returns."""
    ports = _port_range()
    while True:
        port = claim("port", ports)
        try:
            for address in ("127.0.0.1", "0.0.0.0"):  # servers bind one or the other
                with socket.socket() as s:
                    s.bind((address, port))
            return port
        except OSError:  # used by something that is no test's (a daemon, a connection): left claimed, try another
            continue


def dask_worker_args(scheduler: str, host: str, folder: Path | str) -> list[str]:
    """`dask worker` for a test cluster: one process of one thread at `host`, no dashboard, its files in `folder`."""
    one = ["--nworkers", "1", "--nthreads", "1", "--no-dashboard"]
    return [str(BIN / "dask"), "worker", scheduler, "--host", host, *one, "--local-directory", str(folder)]


FAULT_SEED = int(os.environ.get("TTSEVAL_FAULT_SEED") or random.SystemRandom().randrange(10**6))
"""The seed of the system tier's fault moments (each test draws from it with random.Random(f"{FAULT_SEED}/<name>")):
a new one each session, printed with each test's failure; set TTSEVAL_FAULT_SEED to replay one."""


def wait_http(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout_s} s")


def a_zone_where_2am_is_hours_away(now: datetime | None = None) -> str:
    """An IANA zone (Etc/GMT-N is UTC+N: whole hours, no daylight saving) in which the next 02:00 is 11 to 12 hours
    after `now` (UTC). A test that registers the nightly deployment ("0 2 * * *") on a server whose pool a worker
    polls registers it in this zone, so the schedule never fires mid-test: on CI at 02:00 UTC it did, and the
    55-item demo night held the test hosts' two workers for ten minutes."""
    now = now or datetime.now(UTC)
    utc_hour_of_2am = (now.hour + 12) % 24  # 02:00 local falls at this UTC hour, 11-12 h ahead
    offset = (2 - utc_hour_of_2am) % 24  # local = UTC + offset
    offset = offset - 24 if offset > 14 else offset  # zones run from UTC-12 to UTC+14
    return "Etc/GMT" if offset == 0 else f"Etc/GMT{-offset:+d}"


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a process started with start_new_session=True and everything in its group: SIGTERM, then SIGKILL after
    15 s."""
    with_group = hasattr(os, "killpg")
    try:
        os.killpg(proc.pid, signal.SIGTERM) if with_group else proc.terminate()
        proc.wait(timeout=15)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        with contextlib.suppress(ProcessLookupError):  # the group is already gone (killed and reaped)
            with_group and os.killpg(proc.pid, signal.SIGKILL)


def cli_env(prefect_api: str, **extra: str) -> dict[str, str]:
    """The environment of a `ttseval` command run against `prefect_api`: none of the pytest process's TTSEVAL_* or
    AWS_*, this checkout on PYTHONPATH (so plugin strings such as tests.support.fakes:FlakyTTS import), telemetry
    off, keys allowed to the fake vendors on loopback (tests.support.keys.ALLOWED), and `extra` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_"))}
    return env | {"PREFECT_API_URL": prefect_api, "PYTHONPATH": str(ROOT), **TELEMETRY_OFF, **ALLOWED} | extra


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "ttseval"), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s
    )


def demo_items(path: Path, item_ids: Collection[str]) -> list[dict]:
    """Write the demo dataset's rows with these item ids (in the demo's order) to `path`; returns the rows."""
    from ttseval.corpus import DEMO_DATASET

    rows = [
        r
        for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines()
        if (r := json.loads(line))["item_id"] in item_ids
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return rows


def copy_package_tree(target: Path) -> Path:
    """The package folder, pyproject.toml and README of the working tree, copied to `target`."""
    import shutil

    shutil.copytree(ROOT / "ttseval", target / "ttseval", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, target / name)
    return target
