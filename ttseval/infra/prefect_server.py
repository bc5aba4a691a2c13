"""The Prefect server that commands on this machine share when PREFECT_API_URL is not set.

A command with no PREFECT_API_URL needs a Prefect API for its flow run. Starting a temporary one costs seconds
per command (about 8 s on the 2-core machine), and users run many commands a day. So the first command starts one
server in a detached keeper process and leaves it running. Later commands find it and use it. The keeper stops it
once no command has used it for `keep_s` seconds (the `prefect_server_keep_s` setting, 600 by default; 0 keeps
the old way: one temporary server per command, stopped with it).

    shared_server(keep_s)   a context manager: the URL of the running server, or of one it starts; the command
                            counts as using it until the block ends
    server_info()           the running server's record, or None
    stop_server()           stop it now (`ttseval server stop`)

The server is Prefect's own temporary server (`SubprocessASGIServer`: uvicorn, no UI, no background services),
on 127.0.0.1 and a free port. It uses the same database in PREFECT_HOME as the temporary server did, so the run
history is the same either way. Everything lives in <PREFECT_HOME>/ttseval-server/<host name>/, so a different
PREFECT_HOME, or another host sharing the home folder, gets a different server:

    server.json     the keeper's record: api_url, the keeper's and its uvicorn's PID and start time, keep_s;
                    written once the server answers, removed before it stops (and at once on SIGTERM, so no new
                    command attaches to a server that is stopping)
    keeper.pid      the keeper's PID and start time, from its first moment (a start that fails is seen at once)
    start.lock      held while a command looks for the server or starts one: two commands never start two
    in-use.lock     each command holds it shared while it runs, and touches it at its start and its end; the keeper
                    takes it exclusively, without waiting, to stop, so it never stops a server a command is using
    server.log      the keeper's and the server's output, truncated whenever a new keeper starts

The keeper is forked by a launcher that exits at once, so it is no child of the command that started it: stopping
that command's processes (its SIGTERM watchdog) leaves the server to the commands still using it. A keeper killed
outright (SIGKILL, the OOM killer) leaves its record; the next command stops the orphaned uvicorn it names and
starts another. Under Slurm (SLURM_JOB_ID set) a command uses a temporary server of its own instead: the end of a
job kills every process the job started, which would take a server other jobs use with it.

Why hand-written: Prefect's own servers are either per-process (`SubprocessASGIServer`) or long-lived services
(`prefect server start`, which `ttseval stack` runs), and neither stops itself when idle. These are a few flock
calls and a loop.

Secrets: the keeper and its server get an environment with only what Prefect needs (PATH, HOME, locale,
PYTHONPATH, PREFECT_* except the API's URL and key, and the telemetry switches), PREFECT_API_KEY set empty (over
a key a Prefect profile holds), and the keeper's folder as working directory (no project .env or prefect.toml is
read): never the user's API keys.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttseval.core.errors import TTSEvalError
from ttseval.core.telemetry import TELEMETRY_OFF

MIN_START_TIMEOUT_S = 90  # a loaded 2-core machine once took longer than Prefect's default 20 s to migrate the database
POLL_S = 1.0  # how often the keeper checks whether it is idle
_PASSED = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "TZ")


class ServerError(TTSEvalError):
    """The shared Prefect server could not be started."""


def server_folder(prefect_home: Path | None = None) -> Path:
    """<PREFECT_HOME>/ttseval-server/<host name>: the server belongs to the database it serves, and to this host (a
    home folder shared by several hosts over NFS must not have one host's commands judge another's keeper gone).
    prefect_home: default this process's Prefect setting."""
    import socket

    if prefect_home is None:
        from prefect.settings import get_current_settings

        prefect_home = Path(get_current_settings().home).expanduser()
    return prefect_home / "ttseval-server" / socket.gethostname()


def start_timeout_s() -> int:
    """How long a server may take to answer: Prefect's setting, at least MIN_START_TIMEOUT_S."""
    from prefect.settings import get_current_settings

    return max(get_current_settings().server.ephemeral.startup_timeout_seconds, MIN_START_TIMEOUT_S)


def _keeper_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k in _PASSED or (k.startswith("PREFECT_") and k not in ("PREFECT_API_URL", "PREFECT_API_KEY"))
    }
    from prefect.settings import get_current_settings

    env["PREFECT_HOME"] = str(Path(get_current_settings().home).expanduser())
    # empty overrides a key saved in a Prefect profile (`prefect cloud login`), which the server would otherwise be
    # handed with the profile's other settings
    return env | TELEMETRY_OFF | {"PYTHONUNBUFFERED": "1", "PREFECT_API_KEY": ""}


def _healthy(api_url: str, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout_s) as response:
            status: int = response.status
            return status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _same_process(pid: int, create_time: float) -> bool:
    import psutil

    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE and abs(p.create_time() - create_time) < 0.01
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _record(folder: Path) -> dict[str, Any] | None:
    try:
        record: dict[str, Any] = json.loads((folder / "server.json").read_text())  # as keep() wrote it
    except (OSError, ValueError):
        return None
    return record


def server_info(folder: Path | None = None, wait_s: float = 0.0) -> dict[str, Any] | None:
    """The running server's record (api_url, pid and create_time of the keeper and of its uvicorn, keep_s), or None
    when there is none or its keeper is gone. A live keeper whose server does not answer is given up to wait_s
    (a loaded machine); still silent, it is an error rather than a reason to start a second server on the same
    database."""
    folder = folder or server_folder()
    info = _record(folder)
    if info is None or not _same_process(info["pid"], info["create_time"]):
        return None
    deadline = time.monotonic() + wait_s
    while not _healthy(info["api_url"]):
        if not _same_process(info["pid"], info["create_time"]):
            return None
        if time.monotonic() >= deadline:
            if wait_s:
                raise ServerError(
                    f"the shared Prefect server {info['api_url']} (keeper PID {info['pid']}) is "
                    f"running but has not answered for {wait_s:.0f} s; stop it (ttseval server stop), "
                    "or set PREFECT_API_URL to another server, or prefect_server_keep_s = 0"
                )
            return None
        time.sleep(0.5)
    return info


def _clear_stale(folder: Path) -> None:
    """A record whose keeper is gone (killed with SIGKILL, or by the OOM killer): stop its uvicorn, which no parent
    stops now, and remove the record."""
    info = _record(folder)
    if info is None or _same_process(info["pid"], info["create_time"]):
        return
    if _same_process(info["server_pid"], info["server_create_time"]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(info["server_pid"], signal.SIGTERM)
    (folder / "server.json").unlink(missing_ok=True)


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[Any]:
    with open(path, "a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(path)


@dataclass(frozen=True)
class SharedServer:
    api_url: str
    started: bool  # by this command
    keep_s: float  # the keeper's (the command that started it chose it)


@contextlib.contextmanager
def shared_server(keep_s: float, folder: Path | None = None) -> Iterator[SharedServer]:
    """The shared server, started (a detached keeper) when none is running; the caller uses it until the block
    ends. Safe with concurrent commands: one starts the server, the others wait for it."""
    folder = folder or server_folder()
    folder.mkdir(parents=True, exist_ok=True)
    in_use = folder / "in-use.lock"
    with open(in_use, "a") as using:
        with _flock(folder / "start.lock", fcntl.LOCK_EX):
            fcntl.flock(using, fcntl.LOCK_SH)  # waits while a keeper is stopping its server
            info = server_info(folder, wait_s=start_timeout_s())
            started = info is None
            if info is None:
                _clear_stale(folder)
                info = _start_keeper(folder, keep_s)
        _touch(in_use)
        try:
            yield SharedServer(info["api_url"], started, info["keep_s"])
        finally:
            _touch(in_use)
            fcntl.flock(using, fcntl.LOCK_UN)


def _start_keeper(folder: Path, keep_s: float) -> dict[str, Any]:
    (folder / "keeper.pid").unlink(missing_ok=True)
    with open(folder / "server.log", "w") as log:
        # the launcher forks the keeper and exits: the keeper is then no child of this command, so nothing that
        # stops this command's processes (its SIGTERM watchdog, ttseval.cli) stops a server others use
        subprocess.run(
            [sys.executable, "-m", "ttseval.infra.prefect_server", str(folder), str(keep_s)],
            env=_keeper_env(),
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            check=True,
            timeout=30,
        )
    deadline = time.monotonic() + start_timeout_s() + 10
    while time.monotonic() < deadline:
        if (info := server_info(folder)) is not None:
            return info
        if not _keeper_alive(folder):
            break
        time.sleep(0.1)
    _kill_keeper(folder)
    tail = (folder / "server.log").read_text(errors="replace")[-2000:]
    raise ServerError(
        f"the shared Prefect server did not start (its log, {folder / 'server.log'}, ends:\n{tail}\n). "
        "Set PREFECT_API_URL to a running server, or prefect_server_keep_s = 0 for a temporary server "
        "per command"
    )


def _keeper_alive(folder: Path) -> bool:
    try:
        pid, create_time = (folder / "keeper.pid").read_text().split()
    except (OSError, ValueError):
        return True  # not written yet
    return _same_process(int(pid), float(create_time))


def _kill_keeper(folder: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        pid, create_time = (folder / "keeper.pid").read_text().split()
        if _same_process(int(pid), float(create_time)):
            os.killpg(os.getpgid(int(pid)), signal.SIGTERM)  # the keeper and its uvicorn


def stop_server(folder: Path | None = None, timeout_s: float = 30.0) -> str:
    """Stop the running server: 'stopped', 'none' (there was none), or 'stopping' when commands still use it after
    timeout_s (it stops once they end, and no new command attaches to it meanwhile)."""
    folder = folder or server_folder()
    info = server_info(folder)
    if info is None:
        return "none"
    with contextlib.suppress(ProcessLookupError):
        os.kill(info["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _same_process(info["pid"], info["create_time"]):
        if time.monotonic() >= deadline:
            return "stopping"
        time.sleep(0.1)
    return "stopped"


def _idle_s(in_use: Path) -> float:
    try:
        return time.time() - in_use.stat().st_mtime
    except OSError:
        return float("inf")


def keep(folder: Path, keep_s: float) -> None:
    """The keeper: start the server, record it, and stop it once no command has used it for keep_s seconds
    (or on SIGTERM, once the commands using it have finished)."""
    import psutil
    from prefect.server.api.server import SubprocessASGIServer

    stopping = False

    def on_term(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    me = psutil.Process()
    (folder / "keeper.pid").write_text(f"{me.pid} {me.create_time()}")
    server = SubprocessASGIServer()
    server.start(timeout=start_timeout_s())
    assert server.server_process is not None  # start() returns once its process answers, else it raises
    uvicorn = psutil.Process(server.server_process.pid)
    record = {
        "api_url": server.api_url,
        "pid": me.pid,
        "create_time": me.create_time(),
        "server_pid": uvicorn.pid,
        "server_create_time": uvicorn.create_time(),
        "keep_s": keep_s,
    }
    tmp = folder / "server.json.tmp"
    tmp.write_text(json.dumps(record))
    tmp.replace(folder / "server.json")
    in_use = folder / "in-use.lock"
    _touch(in_use)
    try:
        while True:
            time.sleep(POLL_S)
            if server.server_process is None or server.server_process.poll() is not None:
                break  # the server died: the record goes, and the next command starts another
            if stopping:
                _forget(folder, record)  # no new command attaches; those using it finish first
            elif _idle_s(in_use) < keep_s:
                continue
            with open(in_use, "a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a command is using it
                try:  # no command can begin now: each takes the lock shared before it reads the record
                    _forget(folder, record)
                    server.stop()
                    return
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        _forget(folder, record)
        server.stop()


def _forget(folder: Path, record: dict[str, Any]) -> None:
    """Remove the keeper's record, unless it is already another keeper's."""
    path = folder / "server.json"
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text())["pid"] == record["pid"]:
            path.unlink()


if __name__ == "__main__":
    if os.fork() == 0:  # the keeper; the launcher returns at once (see _start_keeper)
        keep(Path(sys.argv[1]), float(sys.argv[2]))
