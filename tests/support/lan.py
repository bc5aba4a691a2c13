"""A LAN of hosts for multi-host runs: tests/support/hosts.py `Network` with five hosts, each seeing only its
own files, used by tests/system/test_multi_host.py and benchmarks/bench_hosts.py:

- the client: the caller itself (`client_files` is the client's folder, hidden from every other host);
- a scheduler host: the Dask scheduler and a Prefect server;
- an S3 host: moto's S3-compatible server, bucket `lan`;
- two worker hosts, one declaring the Dask resource GPU=1, each with the store's credentials of its own;
- a vendor host: a fake paid TTS API (tests/support/serve_fake.py) that counts what it would bill.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.harness import BIN, ROOT, dask_worker_args, stop_group, wait_http
from tests.support.hosts import Host, Network
from ttseval.core.store import ArtifactStore
from ttseval.core.telemetry import TELEMETRY_OFF

S3_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret", "AWS_REGION": "us-east-1"}
WORKER_TTL = "15s"


@dataclass
class Lan:
    net: Network
    client_files: Path
    hosts: dict[str, Host]
    base: dict[str, str]  # what every process on a host starts with: this machine's, less our settings and keys
    root: Path  # the folders of the hosts' processes
    prefect_home: Path
    worker_env: dict[str, str] = field(default_factory=dict)  # base, the store's credentials, model threads
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: list = field(default_factory=list)

    def mktemp(self, name: str) -> Path:
        """A new folder under `root`: name0, name1, ..."""
        n = 0
        while (self.root / f"{name}{n}").exists():
            n += 1
        (self.root / f"{name}{n}").mkdir(parents=True)
        return self.root / f"{name}{n}"

    def log_tail(self, name: str, chars: int = 4000) -> str:
        return [Path(log.name) for log in self.logs if Path(log.name).stem == name][-1].read_text()[-chars:]

    def start(self, host: Host, name: str, argv: list[str], env: dict[str, str]) -> None:
        """Run `argv` on `host` in a folder of its own, not seeing the client's files; stopped with the hosts."""
        folder = self.mktemp(f"lan-{name}")
        log = open(folder / f"{name}.log", "w")  # noqa: SIM115 - kept in self.logs past this call, closed with the hosts
        self.logs.append(log)
        self.procs[name] = host.spawn(argv, hide=[self.client_files], env=env, cwd=folder, log=log)

    def start_prefect(self) -> None:
        """The Prefect server on the scheduler host, its database in the module's PREFECT_HOME (kept over restarts)."""
        self.start(
            self.hosts["scheduler"],
            "prefect",
            [str(BIN / "prefect"), "server", "start", "--host", "0.0.0.0", "--port", "4200"],
            self.base | {"PREFECT_HOME": str(self.prefect_home), "PREFECT_UI_ENABLED": "false"},
        )

    def start_scheduler(self) -> None:
        """The Dask scheduler on the scheduler host. A worker that stops answering is dropped after WORKER_TTL
        (Dask's default is 5 minutes), and its tasks go to the others."""
        sched = self.hosts["scheduler"]
        self.start(
            sched,
            "scheduler",
            [
                str(BIN / "dask"),
                "scheduler",
                "--host",
                sched.ip,
                "--port",
                "8786",
                "--dashboard-address",
                "127.0.0.1:0",
            ],
            self.base | {"DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": WORKER_TTL},
        )

    def start_worker(self, name: str) -> None:
        """A Dask worker (one process, one thread) on host `name`; worker-b declares the resource GPU=1. It is
        started again a second after it exits, as infra/docker-compose.yml's `restart: unless-stopped` does: a
        Dask worker stops when it loses its scheduler, and its supervisor starts it again."""
        host = self.hosts[name]
        extra = ["--resources", "GPU=1"] if name == "worker-b" else []
        worker = shlex.join([*dask_worker_args(self.scheduler, host.ip, self.mktemp(f"lan-{name}-dir")), *extra])
        self.start(host, name, ["sh", "-c", f"while :; do {worker}; sleep 1; done"], self.worker_env)

    def worker_hosts(self) -> dict[str, dict]:
        """The scheduler's view: each worker's host address and its resources."""
        from distributed import Client

        with Client(self.scheduler, timeout=60, set_as_default=False) as client:
            return {w["host"]: w.get("resources", {}) for w in client.scheduler_info()["workers"].values()}

    def wait_workers(self, n: int) -> None:
        from distributed import Client

        with Client(self.scheduler, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(n, timeout=180)

    @property
    def scheduler(self) -> str:
        return f"tcp://{self.hosts['scheduler'].ip}:8786"

    @property
    def prefect_api(self) -> str:
        return f"http://{self.hosts['scheduler'].ip}:4200/api"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.hosts['s3'].ip}:5000"

    @property
    def s3_env(self) -> dict[str, str]:
        """The S3 host's endpoint and the store's credentials, as AWS variables."""
        return S3_CREDENTIALS | {"AWS_ENDPOINT_URL": self.s3_endpoint}

    def s3(self) -> Any:
        """A boto3 S3 client of the S3 host."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.s3_endpoint,
            aws_access_key_id=S3_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=S3_CREDENTIALS["AWS_REGION"],
        )

    def store(self, uri: str, monkeypatch: Any = None) -> ArtifactStore:
        """A store on the S3 host, read from this process: its AWS variables set for this test (`monkeypatch`), or
        for the rest of the process (a benchmark, which is the client)."""
        for k, v in self.s3_env.items():
            monkeypatch.setenv(k, v) if monkeypatch else os.environ.__setitem__(k, v)
        return ArtifactStore(uri)

    @property
    def vendor_url(self) -> str:
        return f"http://{self.hosts['vendor'].ip}:8000"

    @property
    def paid(self) -> str:
        """The paid system: the fake vendor's OpenAI-compatible speech API."""
        return f"openai:af_bella:base_url={self.vendor_url}/v1:model=kokoro"

    def vendor_counters(self) -> dict:
        with urllib.request.urlopen(self.vendor_url + "/_counters", timeout=10) as r:
            return json.loads(r.read())

    def client_env(self) -> dict[str, str]:
        return self.base | {"TTSEVAL_DASK_ADDRESS": self.scheduler, "PREFECT_API_URL": self.prefect_api, **self.s3_env}


def _wait_tcp(host: str, port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=2).close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{host}:{port} did not accept a connection within {timeout_s} s")


@contextlib.contextmanager
def open_lan(root: Path) -> Iterator[Lan]:
    """The five hosts and their servers, their folders under `root`; yields when both workers have joined the
    scheduler, and stops every process and removes the hosts after."""
    from ttseval.core.config import Settings
    from ttseval.flows.runner import local_cluster_kwargs
    from ttseval.providers import MODEL_THREADS_VARIABLE

    base = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    base |= {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF, "DASK_LOGGING__DISTRIBUTED": "warning"}
    net = Network.make()  # its index claimed: no other suite on this machine makes the same bridge or subnet
    lan = Lan(net, root / "client", {}, base, root, root / "prefect-home")
    lan.client_files.mkdir(parents=True)
    lan.prefect_home.mkdir()
    start = lan.start
    try:
        for name in ("scheduler", "s3", "worker-a", "worker-b", "vendor"):
            lan.hosts[name] = net.host(f"tt{name[:3]}{name[-1]}")
        lan.start_prefect()
        lan.start_scheduler()
        start(lan.hosts["s3"], "s3", [str(BIN / "moto_server"), "-H", "0.0.0.0", "-p", "5000"], base)
        start(
            lan.hosts["vendor"],
            "vendor",
            [str(BIN / "python"), "-m", "tests.support.serve_fake", "openai-speech", "8000"],
            base | {"PYTHONPATH": str(ROOT)},
        )
        # the workers: the store's credentials of their own (as a worker holds them, never from the run), the
        # shared cluster's model threads, so their results can be compared with a run there
        share = local_cluster_kwargs(Settings.model_construct())["env"][MODEL_THREADS_VARIABLE]
        lan.worker_env = base | lan.s3_env | {MODEL_THREADS_VARIABLE: share}
        lan.start_worker("worker-a")
        lan.start_worker("worker-b")
        wait_http(lan.prefect_api + "/health", 120)
        wait_http(lan.s3_endpoint, 60)
        _wait_tcp(lan.hosts["vendor"].ip, 8000, 60)
        lan.wait_workers(2)
        resources = lan.worker_hosts()
        if resources != {lan.hosts["worker-a"].ip: {}, lan.hosts["worker-b"].ip: {"GPU": 1}}:
            raise RuntimeError(f"the scheduler sees workers {resources}, not worker-a and worker-b with GPU=1")
        lan.s3().create_bucket(Bucket="lan")
        yield lan
    finally:
        for proc in reversed(lan.procs.values()):
            stop_group(proc)
        for log in lan.logs:
            log.close()
        net.remove()
