"""Shared fixtures: a real Prefect server and a real S3-compatible server (moto) on loopback, and a CLI runner.

Subprocess runs of `ttseval` point at the session's Prefect server, so each run skips the 10-17 s start of a
temporary server. Nothing here downloads anything.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from ttseval.core.telemetry import TELEMETRY_OFF

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout_s} s")


def _stop(proc: subprocess.Popen) -> None:
    with_group = hasattr(os, "killpg")
    try:
        os.killpg(proc.pid, signal.SIGTERM) if with_group else proc.terminate()
        proc.wait(timeout=15)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        with_group and os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> str:
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    env = os.environ | {"PREFECT_HOME": str(home), **TELEMETRY_OFF,
                        "PREFECT_UI_ENABLED": "false"}
    log = open(home / "server.log", "w")
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        wait_http(url + "/health", 90)
    except RuntimeError:
        _stop(proc)
        raise RuntimeError((home / "server.log").read_text()[-3000:])
    yield url
    _stop(proc)


@pytest.fixture(scope="session")
def s3_server() -> dict[str, str]:
    """moto's S3-compatible server on loopback; returns the AWS environment a client needs."""
    port = free_port()
    proc = subprocess.Popen([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    wait_http(endpoint, 30)
    yield {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret",
           "AWS_REGION": "us-east-1"}
    _stop(proc)


@pytest.fixture
def s3_bucket(s3_server: dict[str, str], monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A fresh bucket; the AWS variables are set for this process too."""
    import boto3

    for k, v in s3_server.items():
        monkeypatch.setenv(k, v)
    name = "ttseval-" + request.node.name.lower().replace("_", "-").replace("[", "-").replace("]", "")[:40]
    boto3.client("s3", endpoint_url=s3_server["AWS_ENDPOINT_URL"]).create_bucket(Bucket=name)
    return name


def cli_env(prefect_api: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_"))}
    return env | {"PREFECT_API_URL": prefect_api, "PYTHONPATH": str(ROOT), **TELEMETRY_OFF} | extra


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ttseval"), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout_s)


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten demo items: one depth-0 and one depth-1 item of five categories... plus French and Pashto."""
    from ttseval.corpus import DEMO_DATASET

    rows = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines()]
    keep = {"emo-a-d0", "par-a-d0", "for-a-d0", "syn-a-d0", "pro-a-d0", "que-a-d0", "que-a-d1", "mul-fr", "mul-ps"}
    path = tmp_path_factory.mktemp("data") / "small.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows if r["item_id"] in keep),
                    encoding="utf-8")
    return path
