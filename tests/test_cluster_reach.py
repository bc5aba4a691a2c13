"""A cluster whose workers cannot reach the Prefect API or the store is refused before anything is written.

The worker here runs on another host (tests/hosts.py: its own network and mount namespaces): it reaches the
scheduler over a veth link, but neither the client's loopback (where a command's temporary Prefect server listens)
nor the client's files (the test's folder is an empty tmpfs there). Issue 27's two-host trial crashed this way with
`RuntimeError: Failed to reach API at http://127.0.0.1:<port>/api/` from every task.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from ttseval.core.config import Settings
from ttseval.core.errors import ConfigError
from ttseval.core.telemetry import TELEMETRY_OFF
from ttseval.flows import preflight
from ttseval.flows.preflight import check_cluster_reach

from tests.conftest import BIN, ROOT, _stop, demo_items
from tests.hosts import Host


@pytest.fixture(scope="module")
def client_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client's folder: datasets and stores of this module's runs; empty on the worker host."""
    return tmp_path_factory.mktemp("client-files")


@pytest.fixture(scope="module")
def remote_cluster(tmp_path_factory: pytest.TempPathFactory, client_files: Path) -> Iterator[tuple[str, Host]]:
    """A scheduler on the client's side of a veth link and one worker on another host; yields (address, host)."""
    from distributed import Client

    host = Host.make("ttw", 200 + os.getpid() % 50)
    folder = tmp_path_factory.mktemp("worker-host")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    env |= {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF, "DASK_LOGGING__DISTRIBUTED": "warning"}
    address = f"tcp://{host.peer_ip}:8786"
    log = open(folder / "dask.log", "w")
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", host.peer_ip, "--port", "8786",
                               "--dashboard-address", "127.0.0.1:0"], env=env, cwd=folder, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)]
    try:
        procs.append(host.spawn([str(BIN / "dask"), "worker", address, "--host", host.ip, "--nworkers", "1",
                                 "--nthreads", "1", "--no-dashboard", "--local-directory", str(folder)],
                                hide=[client_files], env=env, cwd=folder, log=log))
        with Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(1, timeout=120)
        yield address, host
    finally:
        for proc in reversed(procs):
            _stop(proc)
        log.close()
        host.remove()


def test_a_run_on_another_host_without_a_reachable_api_or_store_is_refused_before_anything_is_written(
        remote_cluster: tuple[str, Host], client_files: Path) -> None:
    """`ttseval evaluate` with TTSEVAL_DASK_ADDRESS and no PREFECT_API_URL (a temporary server on the client's
    loopback) and a local store: exit 2, no traceback, the worker named with both findings and what to do."""
    address, host = remote_cluster
    dataset, store = client_files / "two.jsonl", client_files / "store"
    demo_items(dataset, ["emo-a-d0", "emo-b-d0"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    env |= {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF, "TTSEVAL_DASK_ADDRESS": address,
            "PREFECT_HOME": str(client_files / "ph")}  # the shared server it leaves: stopped with the session
    done = subprocess.run([str(BIN / "ttseval"), "evaluate", "--dataset", str(dataset), "--systems", "espeak-ng:en-us",
                           "--judges", "", "--store", str(store), "--new-store", "--run-id", "r1"],
                          env=env, cwd=client_files, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    message = done.stderr
    assert f"worker tcp://{host.ip}:" in message
    assert "cannot open the Prefect API http://127.0.0.1:" in message  # the command's temporary server
    assert f"does not see the store's folder {client_files} (is another folder there)" in message
    assert "set PREFECT_API_URL=" in message and "--store s3://" in message and "Nothing was written." in message
    assert not store.exists()  # refused before the store was created


def test_reach_is_asked_of_each_worker(remote_cluster: tuple[str, Host], client_files: Path, shared_dask: str,
                                       prefect_api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same check in-process: the shared cluster (workers on this host) reaches the session's Prefect server
    and a local store, so nothing is raised; the worker on the other host reaches neither; no cluster, no check."""
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    monkeypatch.setattr(preflight, "_reached", set())
    store = str(client_files / "store-b")
    check_cluster_reach(Settings(dask_address=shared_dask, store=store))
    assert len(preflight._reached) == 1  # remembered: the flow the CLI starts does not ask again
    check_cluster_reach(Settings(store=store))  # a LocalCluster on this host: nothing to ask
    address, host = remote_cluster
    with pytest.raises(ConfigError) as refused:
        check_cluster_reach(Settings(dask_address=address, store=store))
    assert f"worker tcp://{host.ip}:" in str(refused.value)
    assert f"cannot open the Prefect API {prefect_api}" in str(refused.value)
    assert f"does not see the store's folder {client_files}" in str(refused.value)
    assert len(preflight._reached) == 1  # a refusal is not remembered
