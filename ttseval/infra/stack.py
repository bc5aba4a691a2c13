"""The local operations stack: Prefect server + worker, a Dask cluster and an S3-compatible server, on loopback.

    stack_up(folder)    start everything (each a detached process group), wait until each answers, return StackInfo
    stack_down(folder)  stop everything stack_up started there (SIGTERM, then SIGKILL after a grace period)

Layout under `folder`:

    stack.json          ports, URLs, PIDs of the running stack (no credentials)
    secrets.json        the S3 key made for this start, and the Prefect API's user:password when shared (mode 0600;
                        removed by stack_down)
    pids/<name>.pid     "<pid> <create_time>" per component; removed by stack_down
    logs/<name>.log     each component's stdout+stderr, appended to; kept by stack_down
    prefect/            PREFECT_HOME of the server and the worker (SQLite database, profiles)
    dask/               the Dask workers' local directories
    s3-data/            the S3 bucket on disk: every object under its key, written by stack_down before moto
                        stops and uploaded into the new moto by stack_up, so runs outlive the stack

Components: `s3` (moto_server, in memory while it runs; bucket `ttseval` is created and refilled from s3-data/),
`dask-scheduler`, `dask-worker-0`, `dask-worker-1` (with the Dask resource GPU=1 when a GPU is present),
`prefect-server` (API + bundled UI), and `prefect-worker` for the process work pool `ttseval-local`. Everything
binds 127.0.0.1 only, unless `bind` names another address: then the Prefect API and UI listen there behind a
user:password (secrets.json), and the Dask scheduler listens there over TLS with a certificate made at the first
such `stack up` (tls/dask.crt, its key tls/dask.key mode 0600): a client or worker without the key is refused.
Each component keeps its port across restarts while the port is free.

S3 credentials: moto checks none unless told to, so the stack tells it to (moto's INITIAL_NO_AUTH_ACTION_COUNT):
the three calls that make an IAM user, its policy and its access key go through, then every request must be signed
with that key, made afresh at each start. A process gets the key through its environment (`ttseval stack env`
prints it); it is kept in secrets.json, never in stack.json or the logs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ttseval.core.errors import TTSEvalError
from ttseval.core.memory import prompt_allocator
from ttseval.core.paths import SOURCE_ROOT
from ttseval.core.telemetry import TELEMETRY_OFF
from ttseval.infra.dask_defaults import dask_env

if TYPE_CHECKING:
    import psutil

DEFAULT_FOLDER = Path(".ttseval-stack")
POOL = "ttseval-local"
BUCKET = "ttseval"
STORE_URI = f"s3://{BUCKET}/artifacts"
LOCAL_S3_REGION = "us-east-1"
_UNSIGNED_CALLS = 3
"""The unsigned calls moto takes before it checks every request's key: make a user, its policy, its access key."""
# stop order: what takes work first, what stores it last
S3_DATA = "s3-data"
LOOPBACK = "127.0.0.1"
SECRETS = "secrets.json"
"""The S3 key made at this start and the Prefect API's auth string of a stack listening beyond loopback, under its
folder (mode 0600)."""
TLS_CERT, TLS_KEY = Path("tls/dask.crt"), Path("tls/dask.key")
"""The Dask cluster's certificate (its own CA) and key (mode 0600) of a stack listening beyond loopback, under its
folder; kept by `stack down`, so workers and clients given them stay valid across restarts."""
STOP_ORDER = ("prefect-worker", "dask-worker-0", "dask-worker-1", "dask-scheduler", "prefect-server", "s3")
GRACE_S = 10.0


class StackError(TTSEvalError):
    """A stack component did not start or answer; the message names it and ends with the tail of its log."""


@dataclass(frozen=True)
class StackInfo:
    folder: Path
    ui_url: str
    api_url: str
    store_uri: str
    dask_address: str
    s3_endpoint: str
    pool: str = POOL
    gpu: bool = False
    pids: dict[str, int] = field(default_factory=dict)
    bind: str = LOOPBACK
    auth_string: str | None = field(default=None, repr=False)
    """The Prefect API's `user:password` when it listens beyond loopback (in <folder>/secrets.json, mode 0600)."""
    s3_key: tuple[str, str] = field(default=("", ""), repr=False)
    """The access key id and secret the S3 server takes, made at this start (in <folder>/secrets.json)."""

    def aws_env(self) -> dict[str, str]:
        """The AWS variables a client of the stack's S3 server needs (the key made at this start)."""
        return aws_env(self.s3_endpoint, self.s3_key)

    def env(self) -> dict[str, str]:
        """Variables that point a ttseval process (CLI, flow, test) at this stack."""
        return {
            "PREFECT_API_URL": self.api_url,
            "TTSEVAL_STORE": self.store_uri,
            "TTSEVAL_DASK_ADDRESS": self.dask_address,
            **self.aws_env(),
            **auth_env(self.auth_string),
            **(dask_tls_env(self.folder) if self.dask_address.startswith("tls://") else {}),
        }

    def describe(self) -> str:
        shared = self.bind != LOOPBACK
        return "\n".join(
            [
                f"Prefect UI     {self.ui_url}" + (f"  (listening on {self.bind}; sign in as below)" if shared else ""),
                f"Prefect API    {self.api_url}"
                + (f"  (user:password in {self.folder / SECRETS}; `ttseval stack env` prints it)" if shared else ""),
                f"work pool      {self.pool}",
                f"Dask scheduler {self.dask_address}"
                + (f"  (TLS: a client needs {self.folder / TLS_CERT} and its key)" if shared else "")
                + ("  (one worker has GPU=1)" if self.gpu else ""),
                f"S3 endpoint    {self.s3_endpoint}  (moto; a key made at this start, `ttseval stack env` prints it)",
                (
                    f"store          {self.store_uri}  (kept on disk in {self.folder / S3_DATA} at stack "
                    "down, restored at stack up)"
                ),
                f"folder         {self.folder}",
            ]
        )


# ----------------------------------------------------------------------------------------------------- helpers
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]  # (host, port) of an AF_INET socket
        return port


def _port_free(port: int) -> bool:
    """Whether `port` can be bound on every interface (what a component given it will do)."""
    with socket.socket() as s:
        s.setsockopt(
            socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
        )  # as the servers do: a closed connection's wait is no use
        try:
            s.bind(("", port))
        except OSError:
            return False
        return True


def _ports(folder: Path) -> dict[str, int]:
    """The ports of the stack's servers: those of its last start where still free (so bookmarks, a remote worker's
    scheduler address and a client's exports stay valid across restarts), else new ones."""
    try:
        last = json.loads((folder / "stack.json").read_text()).get("ports", {})
    except (OSError, ValueError):
        last = {}
    ports: dict[str, int] = {}
    for name in ("s3", "dask-scheduler", "prefect-server"):
        kept = last.get(name)
        ports[name] = kept if isinstance(kept, int) and kept not in ports.values() and _port_free(kept) else free_port()
    return ports


def _make_dask_tls(folder: Path) -> None:
    """A certificate and key for every role of the stack's Dask cluster (scheduler, workers, clients), the
    certificate its own CA (distributed's Security.temporary), written once: the key readable by the owner only."""
    cert, key = folder / TLS_CERT, folder / TLS_KEY
    if cert.is_file() and key.is_file():
        return
    from distributed.security import Security

    made = Security.temporary()  # type: ignore[no-untyped-call]
    cert.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key.touch(mode=0o600)
    key.chmod(0o600)
    key.write_text(made.tls_client_key)
    cert.write_text(made.tls_client_cert)


def dask_tls_env(folder: Path) -> dict[str, str]:
    """Dask's settings for a process of the stack in `folder` (client, worker or scheduler): its certificate for
    every role and encryption required, so nothing falls back to plain TCP."""
    cert, key = str(folder / TLS_CERT), str(folder / TLS_KEY)
    return {
        "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
        "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": cert,
        **{f"DASK_DISTRIBUTED__COMM__TLS__{role}__CERT": cert for role in ("CLIENT", "WORKER", "SCHEDULER")},
        **{f"DASK_DISTRIBUTED__COMM__TLS__{role}__KEY": key for role in ("CLIENT", "WORKER", "SCHEDULER")},
    }


def gpu_present() -> bool:
    """True when `nvidia-smi -L` runs and lists a GPU."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return False
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


# The programs the stack starts that come from a pip extra rather than ttseval's own dependencies.
_EXTRA_FOR = {"moto_server": "stack"}


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        extra = _EXTRA_FOR.get(name)
        fix = f"; install it with pip install 'ttseval[{extra}]'" if extra else ""
        raise StackError(f"{name!r} is not installed (looked beside {sys.executable} and on PATH){fix}")
    return found


def _log_tail(path: Path, n_chars: int = 3000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return text[-n_chars:] or "(empty log)"


def aws_env(endpoint: str, key: tuple[str, str]) -> dict[str, str]:
    """The AWS variables of a client of the S3 server at `endpoint` that takes `key` (id, secret)."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": key[0],
        "AWS_SECRET_ACCESS_KEY": key[1],
        "AWS_REGION": LOCAL_S3_REGION,
    }


def auth_env(auth_string: str | None) -> dict[str, str]:
    """What a Prefect client needs to call an API that requires `auth_string` (none on loopback)."""
    return {"PREFECT_API_AUTH_STRING": auth_string} if auth_string else {}


def _http_ok(
    url: str, timeout: float = 2.0, method: str = "GET", body: bytes | None = None, auth_string: str | None = None
) -> bytes | None:
    import base64

    headers = {"Content-Type": "application/json"} if body is not None else {}
    if auth_string:
        headers["Authorization"] = "Basic " + base64.b64encode(auth_string.encode()).decode()
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            data: bytes = r.read()
            return data
    except (OSError, urllib.error.HTTPError):
        return None


def _port_open(port: int, host: str = LOOPBACK) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
        return True
    return False


OPERATOR_LIMITS = (
    "TTSEVAL_CONFINE_PATHS",
    "TTSEVAL_ALLOWED_PATHS",
    "TTSEVAL_ALLOWED_STORES",
    "TTSEVAL_ALLOWED_ENDPOINTS",
    "TTSEVAL_BUDGET_USD",
)
"""The settings that bound what a run from the UI may do: the operator who starts the stack sets them for its
worker, the one place they take effect."""


def _base_env() -> dict[str, str]:
    """The parent's environment without settings that would point a component somewhere else (the operator's
    limits, OPERATOR_LIMITS, go through)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_")) or k in OPERATOR_LIMITS
    }
    env["PYTHONPATH"] = os.pathsep.join([str(SOURCE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env |= {
        **TELEMETRY_OFF,
        **dask_env(env),  # the scheduler's and workers' housekeeping at ttseval's pace
        "PYTHONUNBUFFERED": "1",
    }
    prompt_allocator(env)  # Arrow's pool in the workers and flow runs (a pool the user chose is kept)
    return env


def _proc_identity(pid: int) -> float | None:
    """The process's start time, or None when it is gone (a zombie counts as gone).

    It does not reap: a child reaped here would lose its exit code, and Popen.poll() would then report 0.
    """
    import psutil

    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return None
        return p.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


# ------------------------------------------------------------------------------------------------------ state
class _State:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pids_dir, self.logs_dir = folder / "pids", folder / "logs"
        self.file = folder / "stack.json"
        self.data: dict[str, Any] = {
            "running": True,
            "components": {},
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }

    def save(self) -> None:
        tmp = self.file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.data, indent=2))
        tmp.replace(self.file)

    def spawn(self, name: str, argv: list[str], env: dict[str, str], **meta: Any) -> subprocess.Popen[bytes]:
        log_path = self.logs_dir / f"{name}.log"
        with open(log_path, "a") as log:
            log.write(f"\n===== ttseval stack: {name} started {datetime.now(UTC).isoformat()} =====\n")
            log.flush()
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=SOURCE_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        created = _proc_identity(proc.pid) or time.time()
        (self.pids_dir / f"{name}.pid").write_text(f"{proc.pid} {created}\n")
        self.data["components"][name] = {"pid": proc.pid, "create_time": created, "log": str(log_path), **meta}
        self.save()
        return proc

    def fail(self, name: str, what: str) -> StackError:
        log = self.logs_dir / f"{name}.log"
        return StackError(f"stack component {name!r} {what}; last lines of {log}:\n{_log_tail(log)}")

    def wait(
        self, name: str, proc: subprocess.Popen[bytes], ready: Callable[[], bool], timeout_s: float, what: str
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise self.fail(name, f"exited with code {proc.returncode} before it was ready ({what})")
            if ready():
                return
            time.sleep(0.3)
        raise self.fail(name, f"did not become ready within {timeout_s:.0f} s ({what})")


# ------------------------------------------------------------------------------------------------ up and down
def stack_up(
    folder: Path, *, gpu: bool | None = None, pool: str = POOL, timeout_s: float = 120.0, bind: str = LOOPBACK
) -> StackInfo:
    """Start the stack under `folder` and wait until every component answers.

    `bind` is the address the Prefect API and UI and the Dask scheduler listen on (the Dask workers and the S3
    server stay on loopback). Beyond loopback the API requires a `user:password` made here (Prefect's API auth
    string), kept in <folder>/secrets.json (mode 0600), and the Dask cluster speaks TLS only, with the certificate
    and key of <folder>/tls (made here once); both are handed to the stack's own processes and printed (the
    password, the files' paths) by `ttseval stack env`.

    `gpu=None` detects a GPU with `nvidia-smi -L`; True/False forces it. When a GPU is used, one Dask worker has
    the resource GPU=1 and flows run with TTSEVAL_GPU=true (model stages annotated GPU=1). A stack already
    running in `folder` is returned as it is; a partly running one is stopped and started again. On any
    failure everything started so far is stopped and StackError names the component and shows its log tail.
    """
    folder = Path(folder).resolve()
    existing = stack_info(folder)
    if existing is not None:
        return existing
    stack_down(folder)  # leftovers of a partial or crashed stack
    use_gpu = gpu_present() if gpu is None else gpu
    state = _State(folder)
    for d in (folder, state.pids_dir, state.logs_dir, folder / "prefect", folder / "dask"):
        d.mkdir(parents=True, exist_ok=True)
    try:
        return _start(state, use_gpu, pool, timeout_s, bind)
    except BaseException:
        stack_down(folder)
        raise


def _start(state: _State, use_gpu: bool, pool: str, timeout_s: float, bind: str = LOOPBACK) -> StackInfo:
    folder = state.folder
    ports = _ports(folder)
    s3_port, sched_port, api_port = ports["s3"], ports["dask-scheduler"], ports["prefect-server"]
    shared = bind != LOOPBACK
    # the stack's own clients call its servers on loopback when they listen there (or everywhere), else on `bind`
    own = LOOPBACK if bind in (LOOPBACK, "0.0.0.0") else bind
    tls: dict[str, str] = {}
    if shared:  # beyond loopback the Dask cluster takes only who holds the key made here
        _make_dask_tls(folder)
        tls = dask_tls_env(folder)
    base = _base_env() | tls
    s3_endpoint = f"http://127.0.0.1:{s3_port}"
    dask_address = f"tls://{own}:{sched_port}" if shared else f"tcp://127.0.0.1:{sched_port}"
    api_url = f"http://{own}:{api_port}/api"
    ui_url = f"http://{socket.gethostname() if bind == '0.0.0.0' else bind}:{api_port}"
    auth_string = None
    if bind != LOOPBACK:  # beyond loopback the API answers only who knows a password made here
        import secrets

        auth_string = f"ttseval:{secrets.token_urlsafe(24)}"
        _save_secrets(folder, api_auth_string=auth_string)
    auth = auth_env(auth_string)
    prefect_home = {"PREFECT_HOME": str(folder / "prefect")}
    state.data |= {
        "folder": str(folder),
        "ui_url": ui_url,
        "api_url": api_url,
        "store_uri": STORE_URI,
        "dask_address": dask_address,
        "s3_endpoint": s3_endpoint,
        "pool": pool,
        "gpu": use_gpu,
        "bind": bind,
        "ports": ports,
    }
    state.save()

    # the three independent servers start together; the slowest (Prefect, 7-17 s) sets the pace
    server = state.spawn(
        "prefect-server",
        [_bin("prefect"), "server", "start", "--host", bind, "--port", str(api_port)],
        base
        | prefect_home
        | {"PREFECT_UI_API_URL": f"{ui_url}/api" if auth_string else api_url, "PREFECT_UI_ENABLED": "true"}
        | ({"PREFECT_SERVER_API_AUTH_STRING": auth_string} if auth_string else {}),
        port=api_port,
        url=ui_url,
    )
    s3 = state.spawn(
        "s3",
        [_bin("moto_server"), "-H", "127.0.0.1", "-p", str(s3_port)],
        base | {"INITIAL_NO_AUTH_ACTION_COUNT": str(_UNSIGNED_CALLS)},  # then every request must carry the key
        port=s3_port,
        url=s3_endpoint,
    )
    sched = state.spawn(
        "dask-scheduler",
        [
            _bin("dask"),
            "scheduler",
            "--host",
            bind,
            "--port",
            str(sched_port),
            "--dashboard-address",
            "127.0.0.1:0",
            *_tls_flags(folder, shared),
        ],
        base,
        port=sched_port,
        url=dask_address,
    )

    # moto's own API answers without counting as one of the unsigned calls
    moto_api = f"{s3_endpoint}/moto-api/"
    state.wait("s3", s3, lambda: _http_ok(moto_api) is not None, timeout_s, f"HTTP {moto_api}")
    s3_key = _make_s3_key(state, s3_endpoint)
    _save_secrets(folder, s3_access_key=s3_key[0], s3_secret_key=s3_key[1])
    aws = aws_env(s3_endpoint, s3_key)
    _create_bucket(state, s3_endpoint, s3_key)
    _restore_bucket(folder, s3_endpoint, s3_key)
    state.wait("dask-scheduler", sched, lambda: _port_open(sched_port, own), timeout_s, f"port {sched_port}")

    # Dask workers run the tasks: they read and write the store and report task runs to Prefect
    worker_env = (
        base
        | aws
        | auth
        | {"PREFECT_API_URL": api_url, "TTSEVAL_STORE": STORE_URI, "TTSEVAL_DASK_ADDRESS": dask_address}
    )
    dask_workers = []
    for i in range(2):
        argv = [
            _bin("dask"),
            "worker",
            dask_address,
            "--host",
            "127.0.0.1",
            "--nworkers",
            "1",
            "--nthreads",
            "1",
            "--name",
            f"ttseval-{i}",
            "--dashboard-address",
            "127.0.0.1:0",
            "--local-directory",
            str(folder / "dask"),
            *_tls_flags(folder, shared),
        ]
        gpu_worker = use_gpu and i == 1
        if use_gpu:  # CPU-bound tasks of a GPU run go to the CPU worker (ttseval.flows.common.placement)
            argv += ["--resources", "GPU=1" if gpu_worker else "CPU=1"]
        dask_workers.append(state.spawn(f"dask-worker-{i}", argv, worker_env, gpu=gpu_worker))

    state.wait(
        "prefect-server", server, lambda: _http_ok(api_url + "/health") is not None, timeout_s, f"GET {api_url}/health"
    )
    _ensure_pool(state, api_url, pool, base | prefect_home | auth, auth_string)
    flow_env = worker_env | prefect_home | {"TTSEVAL_REPO": str(SOURCE_ROOT), "TTSEVAL_WORK_POOL": pool}
    if use_gpu:
        flow_env["TTSEVAL_GPU"] = "true"
    worker = state.spawn(
        "prefect-worker",
        [_bin("prefect"), "worker", "start", "--pool", pool, "--type", "process", "--name", f"{pool}-worker"],
        flow_env,
    )
    _wait_dask_workers(state, dask_address, dask_workers, timeout_s, shared)
    state.wait(
        "prefect-worker",
        worker,
        lambda: _prefect_worker_online(api_url, pool, auth_string),
        timeout_s,
        f"an ONLINE worker in pool {pool!r}",
    )
    pids = {name: c["pid"] for name, c in state.data["components"].items()}
    return StackInfo(
        folder=folder,
        ui_url=ui_url,
        api_url=api_url,
        store_uri=STORE_URI,
        dask_address=dask_address,
        s3_endpoint=s3_endpoint,
        pool=pool,
        gpu=use_gpu,
        pids=pids,
        bind=bind,
        auth_string=auth_string,
        s3_key=s3_key,
    )


def _save_secrets(folder: Path, **values: str) -> None:
    """Add `values` to <folder>/secrets.json, readable by its owner only."""
    secret_file = folder / SECRETS
    secret_file.touch(mode=0o600)
    secret_file.chmod(0o600)
    try:
        kept = json.loads(secret_file.read_text() or "{}")
    except ValueError:
        kept = {}
    secret_file.write_text(json.dumps(kept | values))


def _read_secrets(folder: Path) -> dict[str, str]:
    try:
        found: dict[str, str] = json.loads((folder / SECRETS).read_text())
    except (OSError, ValueError):
        return {}
    return found


def _make_s3_key(state: _State, endpoint: str) -> tuple[str, str]:
    """An IAM user allowed everything on the S3 server at `endpoint`, and its access key: the first three calls,
    the last moto takes unsigned (_UNSIGNED_CALLS); from then on it refuses any request not signed with the key."""
    import boto3
    import botocore.exceptions

    iam = boto3.client(
        "iam", endpoint_url=endpoint, region_name=LOCAL_S3_REGION, aws_access_key_id="-", aws_secret_access_key="-"
    )
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    try:
        iam.create_user(UserName="ttseval-stack")
        iam.put_user_policy(UserName="ttseval-stack", PolicyName="everything", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="ttseval-stack")["AccessKey"]
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
        raise state.fail("s3", f"did not make its access key ({type(e).__name__}: {e})") from e
    return str(key["AccessKeyId"]), str(key["SecretAccessKey"])


def _tls_flags(folder: Path, shared: bool) -> list[str]:
    """The Dask command-line options for the stack's certificate (none on loopback)."""
    if not shared:
        return []
    cert, key = str(folder / TLS_CERT), str(folder / TLS_KEY)
    return ["--protocol", "tls", "--tls-ca-file", cert, "--tls-cert", cert, "--tls-key", key]


def _create_bucket(state: _State, endpoint: str, key: tuple[str, str]) -> None:
    import botocore.exceptions

    s3 = _s3_client(endpoint, key)
    deadline = time.monotonic() + 30
    while True:
        try:
            with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
                s3.create_bucket(Bucket=BUCKET)
            s3.head_bucket(Bucket=BUCKET)
            return
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            if time.monotonic() > deadline:
                raise state.fail("s3", f"did not create bucket {BUCKET!r} ({type(e).__name__}: {e})") from e
            time.sleep(0.5)


def _s3_client(endpoint: str, key: tuple[str, str]) -> Any:
    import boto3

    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=key[0], aws_secret_access_key=key[1], region_name=LOCAL_S3_REGION
    )


def _restore_bucket(folder: Path, endpoint: str, key: tuple[str, str]) -> int:
    """Upload every object saved in folder/s3-data (by _save_bucket) into the new moto's bucket; returns how many."""
    data = folder / S3_DATA
    if not data.is_dir():
        return 0
    s3 = _s3_client(endpoint, key)
    files = [f for f in data.rglob("*") if f.is_file()]
    for f in files:
        s3.upload_file(str(f), BUCKET, f.relative_to(data).as_posix())
    return len(files)


def _save_bucket(folder: Path, endpoint: str, key: tuple[str, str]) -> int:
    """Write every object of the bucket to folder/s3-data/<key> (a mirror: keys gone from the bucket are removed
    there), before moto stops and forgets them; returns how many objects were saved."""
    data = folder / S3_DATA
    tmp = folder / f".{S3_DATA}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    s3 = _s3_client(endpoint, key)
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for obj in page.get("Contents", []):
            target = tmp / obj["Key"]
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(BUCKET, obj["Key"], str(target))
            n += 1
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(data, ignore_errors=True)  # swapped in whole: a save cut short leaves the last one intact
    tmp.rename(data)
    return n


def pool_template() -> dict[str, Any]:
    """The process work pool's base job template with the command and working folder fixed (Prefect's defaults):
    a custom run's job variables can set neither, so a UI user cannot run a command of their own on the worker.
    The environment stays a job variable (a declared series' deployment sets TTSEVAL_CONFIG); the flows refuse a
    run that sets it itself (ttseval.flows.common.check_job_variables)."""
    from prefect.workers.process import ProcessWorker

    template: dict[str, Any] = ProcessWorker.get_default_base_job_template()
    for fixed in ("command", "working_dir"):
        template["job_configuration"][fixed] = None
        template["variables"]["properties"].pop(fixed)
    return template


def _ensure_pool(state: _State, api_url: str, pool: str, env: dict[str, str], auth_string: str | None) -> None:
    template = state.folder / "prefect" / "pool-template.json"  # also for an operator's own pools (docs/security.md)
    template.write_text(json.dumps(pool_template(), indent=2))
    if _http_ok(f"{api_url}/work_pools/{pool}", auth_string=auth_string) is not None:
        # a pool an earlier start made (the database outlives the stack) gets today's template
        fixed = json.dumps({"base_job_template": pool_template()}).encode()
        if _http_ok(f"{api_url}/work_pools/{pool}", method="PATCH", body=fixed, auth_string=auth_string) is None:
            raise StackError(f"stack component 'work-pool' could not set the job template of pool {pool!r}")
        return
    out = subprocess.run(
        [
            *(_bin("prefect"), "--no-prompt", "work-pool", "create", pool),
            *("--type", "process", "--base-job-template", str(template)),
        ],
        env=env | {"PREFECT_API_URL": api_url},
        cwd=SOURCE_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    with open(state.logs_dir / "prefect-server.log", "a") as log:
        log.write(f"[ttseval stack] prefect work-pool create {pool}: rc={out.returncode}\n{out.stdout}{out.stderr}\n")
    if out.returncode != 0 and _http_ok(f"{api_url}/work_pools/{pool}", auth_string=auth_string) is None:
        raise StackError(
            f"stack component 'work-pool' could not create pool {pool!r}:\n{(out.stdout + out.stderr)[-3000:]}"
        )


def _prefect_worker_online(api_url: str, pool: str, auth_string: str | None = None) -> bool:
    body = _http_ok(f"{api_url}/work_pools/{pool}/workers/filter", method="POST", body=b"{}", auth_string=auth_string)
    if not body:
        return False
    return any(w.get("status") == "ONLINE" for w in json.loads(body))


def _wait_dask_workers(
    state: _State, address: str, procs: list[subprocess.Popen[bytes]], timeout_s: float, shared: bool
) -> None:
    """Until every Dask worker (named ttseval-<i>) has registered with the scheduler (over TLS when `shared`)."""
    from distributed import Client
    from distributed.security import Security

    deadline = time.monotonic() + timeout_s
    cert, key = str(state.folder / TLS_CERT), str(state.folder / TLS_KEY)
    # distributed is unannotated
    security = (
        Security(require_encryption=True, tls_ca_file=cert, tls_client_cert=cert, tls_client_key=key)  # type: ignore[no-untyped-call]
        if shared
        else None
    )
    with Client(address, timeout=30, set_as_default=False, security=security) as client:  # type: ignore[no-untyped-call]
        while True:
            for i, p in enumerate(procs):
                if p.poll() is not None:
                    raise state.fail(f"dask-worker-{i}", f"exited with code {p.returncode} before it registered")
            names = {w.get("name") for w in client.scheduler_info(n_workers=-1)["workers"].values()}
            missing = [i for i in range(len(procs)) if f"ttseval-{i}" not in names]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise state.fail(
                    f"dask-worker-{missing[0]}",
                    f"did not register with the scheduler {address} within {timeout_s:.0f} s",
                )
            time.sleep(0.3)


def _read_pidfiles(folder: Path) -> dict[str, tuple[int, float | None]]:
    found: dict[str, tuple[int, float | None]] = {}
    with contextlib.suppress(OSError, ValueError):
        for name, c in json.loads((folder / "stack.json").read_text()).get("components", {}).items():
            found[name] = (int(c["pid"]), c.get("create_time"))
    for f in sorted((folder / "pids").glob("*.pid")) if (folder / "pids").is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            parts = f.read_text().split()
            found[f.stem] = (int(parts[0]), float(parts[1]) if len(parts) > 1 else None)
    return found


def _ours(pid: int, create_time: float | None) -> bool:
    """Alive and the same process we started (not a recycled PID)."""
    now = _proc_identity(pid)
    return now is not None and (create_time is None or abs(now - create_time) < 1.0)


def stack_info(folder: Path) -> StackInfo | None:
    """The running stack in `folder`, or None when none is running there (or only part of one)."""
    folder = Path(folder).resolve()
    try:
        data = json.loads((folder / "stack.json").read_text())
    except (OSError, ValueError):
        return None
    comps = data.get("components", {})
    expected = set(STOP_ORDER)
    if not data.get("running") or set(comps) != expected:
        return None
    if not all(_ours(c["pid"], c.get("create_time")) for c in comps.values()):
        return None
    if _http_ok(data["api_url"] + "/health") is None:
        return None
    secrets = _read_secrets(folder)
    return StackInfo(
        folder=folder,
        ui_url=data["ui_url"],
        api_url=data["api_url"],
        store_uri=data["store_uri"],
        dask_address=data["dask_address"],
        s3_endpoint=data["s3_endpoint"],
        pool=data["pool"],
        gpu=data["gpu"],
        pids={n: c["pid"] for n, c in comps.items()},
        bind=data.get("bind", LOOPBACK),
        auth_string=secrets.get("api_auth_string"),
        s3_key=(secrets.get("s3_access_key", ""), secrets.get("s3_secret_key", "")),
    )


def stack_down(folder: Path, *, grace_s: float = GRACE_S) -> None:
    """Stop every process stack_up started in `folder`, and their children (flow runs, Dask's processes).

    First saves the S3 bucket to `s3-data/` (moto holds it in memory), so `stack up` restores it. SIGTERM to each
    process group, then SIGKILL to what is left after `grace_s`. Removes the PID files, keeps the logs, marks
    stack.json as not running and removes the API's password. Idempotent; fine on a partly started stack or an empty
    folder.
    """
    import psutil

    folder = Path(folder).resolve()
    recorded = _read_pidfiles(folder)
    if "s3" in recorded and _ours(*recorded["s3"]):  # moto keeps the bucket in memory: save it before it stops
        try:
            endpoint = json.loads((folder / "stack.json").read_text())["s3_endpoint"]
            secrets = _read_secrets(folder)
            saved = _save_bucket(folder, endpoint, (secrets["s3_access_key"], secrets["s3_secret_key"]))
            print(f"stack: {saved} S3 object(s) saved to {folder / S3_DATA}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - stopping must go on; say what was not saved
            print(
                f"stack: the S3 bucket could NOT be saved to {folder / S3_DATA} ({type(e).__name__}: {e}); "
                "its objects since the last save are lost",
                file=sys.stderr,
            )
    order = sorted(recorded, key=lambda n: STOP_ORDER.index(n) if n in STOP_ORDER else -1)
    groups: list[int] = []
    procs: list[psutil.Process] = []
    for name in order:
        pid, created = recorded[name]
        if not _ours(pid, created):
            continue
        try:
            root = psutil.Process(pid)
            family = [root, *root.children(recursive=True)]  # flow runs start in sessions of their own
        except psutil.NoSuchProcess:
            continue
        for p in family:
            with contextlib.suppress(psutil.Error, OSError):
                pgid = os.getpgid(p.pid)
                if pgid not in groups and pgid != os.getpgid(0):
                    groups.append(pgid)
            procs.append(p)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in procs):
        time.sleep(0.2)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for p in procs:  # anything that left its group
        if _alive(p):
            with contextlib.suppress(psutil.Error):
                p.kill()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in procs):
        time.sleep(0.1)
    if (folder / "pids").is_dir():
        for f in (folder / "pids").glob("*.pid"):
            f.unlink(missing_ok=True)
    (folder / SECRETS).unlink(missing_ok=True)  # the servers they opened are gone; the next `stack up` makes new ones
    state_file = folder / "stack.json"
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(state_file.read_text())
        data["running"] = False
        data["stopped_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        state_file.write_text(json.dumps(data, indent=2))


def _alive(p: psutil.Process) -> bool:
    import psutil

    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(p.pid, os.WNOHANG)
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stack_status(folder: Path) -> dict[str, Any]:
    """Per component: pid and whether it is alive; plus the URLs from stack.json."""
    folder = Path(folder).resolve()
    try:
        data: dict[str, Any] = json.loads((folder / "stack.json").read_text())  # as _State.save wrote it
    except (OSError, ValueError):
        return {"running": False, "components": {}}
    for c in data.get("components", {}).values():
        c["alive"] = _ours(c["pid"], c.get("create_time"))
    data["running"] = bool(data.get("running")) and all(c["alive"] for c in data.get("components", {}).values())
    return data


__all__ = [
    "POOL",
    "STORE_URI",
    "StackError",
    "StackInfo",
    "gpu_present",
    "stack_down",
    "stack_info",
    "stack_status",
    "stack_up",
]
