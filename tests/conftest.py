"""Shared fixtures: a real Prefect server, a real S3-compatible server (moto) and a Dask cluster on loopback; the
tier marker of every test and the order the test files are handed out in. The plain helpers (the CLI runner, its
environment, ports, ...) are tests/support/harness.py.

Subprocess runs of `ttseval` point at the session's Prefect server, so each run skips the 10-17 s start of a
temporary server; end-to-end runs that need no cluster of their own run on the session's Dask cluster
(`shared_env`), so they skip starting one and loading its models. Nothing here downloads anything.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.harness import BIN, ROOT, cli_env, demo_items, free_port, stop_group, wait_http
from tests.support.keys import ALLOWED, TEST_KEYS
from ttseval.core.telemetry import TELEMETRY_OFF
from ttseval.infra.dask_defaults import dask_env
from ttseval.providers import MODEL_THREADS_VARIABLE

# the local stack's fixtures (stack, deployed, nightly_zone, tiny_dataset) for tests/system/test_stack.py and
# tests/system/test_ui.py; module-scoped, so each module that asks for them starts its own stack. pytest reads
# pytest_plugins only in this top-level conftest.
pytest_plugins = ["tests.support.stack_fixtures"]

os.environ.update(ALLOWED)  # the operator of this test process lets keys go to the fake vendors on loopback
TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "e2e", "system")
"""A test's tier is the folder under tests/ it lives in; it is marked with the tier's name (the markers are declared
in pyproject.toml), so `-m unit` selects the same tests as the path tests/unit."""

SLOWEST_FIRST = (
    "system/test_multi_host.py",
    "e2e/test_evaluate_cli.py",
    "e2e/test_judging_cli.py",
    "system/test_ui.py",
    "system/test_faults.py",
    "system/test_stack.py",
    "system/test_nightly_week.py",
    "e2e/test_paid_run.py",
)
"""The test files that take longest (the suite prints its 25 slowest tests; `--durations=0` prints every test's), by
their path under tests/. They are collected first, so the two test workers (`--dist loadfile` hands out
files in collection order) start on them, and the last minutes of a run are short files on both workers, not one
long file on one worker while the other waits."""


def _under_tests(item: pytest.Item) -> str:
    """The item's file as a path relative to tests/ ('e2e/test_paid_run.py'); '' for a file outside tests/."""
    path = Path(item.path).resolve()
    return path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else ""


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    outside = []
    for item in items:
        tier = _under_tests(item).split("/", 1)[0]
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        else:
            outside.append(item.nodeid)
    if outside:
        raise pytest.UsageError(
            f"every test lives in one of tests/{{{','.join(TIERS)}}}/ (its folder is its tier and its marker); "
            f"these do not: {', '.join(outside)}"
        )
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(_under_tests(item), len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session", autouse=True)
def _no_shared_server_outlives_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A command run with no PREFECT_API_URL leaves the shared Prefect server running (ttseval.infra.prefect_server)
    in its PREFECT_HOME; the tests that do so stop theirs, and this stops any a test left under the session's
    temporary folders, so none outlives the run."""
    yield
    import psutil

    base = str(tmp_path_factory.getbasetemp())  # this test worker's, not another's still running
    for p in psutil.process_iter(["cmdline"]):
        line = p.info["cmdline"] or []
        if "ttseval.infra.prefect_server" in line and any(arg.startswith(base) for arg in line):
            with contextlib.suppress(psutil.Error):
                p.terminate()


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> str:
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    env = os.environ | {"PREFECT_HOME": str(home), **TELEMETRY_OFF, "PREFECT_UI_ENABLED": "false"}
    with open(home / "server.log", "w") as log:
        # on every address of this host, so test hosts made of network namespaces (tests/support/hosts.py) reach it
        # at their peer address; the tests on this host use loopback
        proc = subprocess.Popen(
            [str(BIN / "prefect"), "server", "start", "--host", "0.0.0.0", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}/api"
        try:
            wait_http(url + "/health", 90)
        except RuntimeError as e:
            stop_group(proc)
            raise RuntimeError((home / "server.log").read_text()[-3000:]) from e
        yield url
        stop_group(proc)


@pytest.fixture(scope="session")
def s3_server() -> dict[str, str]:
    """moto's S3-compatible server on loopback (and on every address of this host, for test hosts:
    tests/support/hosts.py); returns the AWS environment a client on this host needs."""
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "moto_server"), "-H", "0.0.0.0", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    wait_http(endpoint, 30)
    yield {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing-secret",
        "AWS_REGION": "us-east-1",
    }
    stop_group(proc)


@pytest.fixture
def s3_bucket(s3_server: dict[str, str], monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A fresh bucket; the AWS variables are set for this process too."""
    import boto3

    for k, v in s3_server.items():
        monkeypatch.setenv(k, v)
    name = "ttseval-" + request.node.name.lower().replace("_", "-").replace("[", "-").replace("]", "")[:40]
    boto3.client("s3", endpoint_url=s3_server["AWS_ENDPOINT_URL"]).create_bucket(Bucket=name)
    return name


# Variables the shared cluster's workers never get from the pytest process: settings and credentials a test sets
# for its own command (settings reach the workers inside the run's Settings object; keys are read on the worker).
_NOT_FOR_SHARED_WORKERS = ("TTSEVAL_", "AWS_")


def _shared_worker_env(prefect_api: str) -> dict[str, str]:
    """A shared cluster's worker environment: this process's, less ours and credentials, with the session's Prefect
    API and a flow's own LocalCluster's model threads per process under the default settings (not the env's)."""
    from ttseval.core.config import Settings
    from ttseval.flows.runner import local_cluster_kwargs

    model_threads = local_cluster_kwargs(Settings.model_construct())["env"][MODEL_THREADS_VARIABLE]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_NOT_FOR_SHARED_WORKERS) and not k.endswith(("_API_KEY", "_BASE_URL"))
    }
    return env | {
        "PREFECT_API_URL": prefect_api,
        "PYTHONPATH": str(ROOT),
        **TELEMETRY_OFF,
        **dask_env(env),
        "DASK_LOGGING__DISTRIBUTED": "warning",
        MODEL_THREADS_VARIABLE: model_threads,
    }


@pytest.fixture(scope="session")
def shared_dask(prefect_api: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Dask cluster per test worker (pytest-xdist process), for the end-to-end runs that need nothing of their
    own; yields its scheduler's tcp address (use `shared_env`, which passes it as TTSEVAL_DASK_ADDRESS).

    Why `dask scheduler` and `dask worker` subprocesses rather than a LocalCluster in the pytest process: the
    worker process gets exactly the environment built here (a LocalCluster's nannies would inherit the pytest
    process's, which tests change with monkeypatch), it is the kind of cluster the local stack and the deployments
    run on (ttseval.infra.stack), and each stops with one signal to its process group.
    Why one worker process of one thread: a flow's own LocalCluster (flows.runner.local_cluster_kwargs, default
    settings) runs 2 processes of 1 thread, each model on its share of the cores; under `pytest -n 2` the two test
    workers' clusters together run the same 2 tasks at once on the machine, each model on the same share, with
    threads per process as a flow's (no provider is run from two threads of a process), while each model is loaded
    once per test worker, not twice (a worker process holding the demo's models is about 1.5-1.8 GB).
    The worker starts in a folder of its own (nothing relative lands in the checkout) with ROOT on PYTHONPATH, so
    it imports ttseval and the tests' plugins from this checkout, the session's Prefect API, telemetry off, and no
    TTSEVAL_*, AWS_*, *_API_KEY or *_BASE_URL from the pytest process.
    """
    with _cluster(_shared_worker_env(prefect_api), tmp_path_factory.mktemp("shared-dask")) as address:
        yield address


@pytest.fixture(scope="session")
def keyed_dask(prefect_api: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second cluster per test worker, like `shared_dask`, whose worker also has the test keys (TEST_KEYS): for
    runs whose providers read a vendor key on the worker (a fake vendor on loopback named by its base_url in the
    system spec), so they need no cluster of their own to pass it. Its worker loads no model unless a run asks."""
    env = _shared_worker_env(prefect_api) | TEST_KEYS
    with _cluster(env, tmp_path_factory.mktemp("keyed-dask")) as address:
        yield address


@contextlib.contextmanager
def _cluster(env: dict[str, str], folder: Path) -> Iterator[str]:
    """`dask scheduler` and one `dask worker` of one thread on loopback, with `env`, started in `folder`; yields
    the scheduler's tcp address and records the worker's environment at start (`_STARTED_WITH`)."""
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    with open(folder / "dask.log", "w") as log:
        procs = [
            subprocess.Popen(
                [
                    str(BIN / "dask"),
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--dashboard-address",
                    "127.0.0.1:0",
                ],
                env=env,
                cwd=folder,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        ]
        try:
            procs.append(
                subprocess.Popen(
                    [
                        str(BIN / "dask"),
                        "worker",
                        address,
                        "--host",
                        "127.0.0.1",
                        "--nworkers",
                        "1",
                        "--nthreads",
                        "1",
                        "--dashboard-address",
                        "127.0.0.1:0",
                        "--local-directory",
                        str(folder),
                    ],
                    env=env,
                    cwd=folder,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
            with Client(address, timeout=60, set_as_default=False) as client:
                client.wait_for_workers(1, timeout=120)
            [_STARTED_WITH[address]] = _worker_environments(address).values()
        except Exception as e:
            for proc in reversed(procs):
                stop_group(proc)
            raise RuntimeError(
                f"the shared Dask cluster did not start: {e}\n{(folder / 'dask.log').read_text()[-3000:]}"
            ) from e
        yield address
        for proc in reversed(procs):  # the worker first, so it is not left looking for its scheduler
            stop_group(proc)


@pytest.fixture(scope="session")
def shared_env(prefect_api: str, shared_dask: str) -> dict[str, str]:
    """cli_env for a run on the session's shared Dask cluster; add a test's own settings with `shared_env | {...}`
    (read in the CLI process and handed to the workers in the run's Settings). A test needs its own cluster (plain
    cli_env) when its providers on the worker need environment it sets for its own command (API keys, vendor base
    URLs, AWS_* for an S3 store, settings read on the worker such as cascades), when it passes a relative provider
    path (a shared worker resolves it in its own folder; a relative --store is made absolute in the CLI's settings),
    or when it tests the cluster itself."""
    return cli_env(prefect_api, TTSEVAL_DASK_ADDRESS=shared_dask)


@pytest.fixture(scope="session")
def keyed_env(prefect_api: str, keyed_dask: str) -> dict[str, str]:
    """cli_env for a run on the session's keyed cluster (`keyed_dask`: its worker has TEST_KEYS), with the keys in
    the command's environment too (the CLI checks a vendor's key before it submits)."""
    return cli_env(prefect_api, TTSEVAL_DASK_ADDRESS=keyed_dask, **TEST_KEYS)


@pytest.fixture(autouse=True)
def _shared_workers_stay_clean(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test that ran on the shared cluster: no variable the workers started with has changed, and none of
    ours or a credential's (TTSEVAL_*, AWS_*, PREFECT_*, *_API_KEY, *_BASE_URL) has appeared: a run that set one on a
    worker would leak it into the next test's run. Variables a library adds when first loaded are let be (Intel
    OpenMP, loaded with the first model, adds KMP_INIT_AT_FORK): the models stay loaded on purpose."""
    yield
    for fixture in ("shared_dask", "keyed_dask"):
        if fixture in request.fixturenames:
            _assert_unchanged(request.getfixturevalue(fixture))


def _assert_unchanged(address: str) -> None:
    started = _STARTED_WITH[address]
    for worker, env in _worker_environments(address).items():
        changed = sorted(k for k in started if env.get(k) != started[k])
        added = sorted(
            k
            for k in env.keys() - started.keys()
            if k.startswith((*_NOT_FOR_SHARED_WORKERS, "PREFECT_")) or k.endswith(("_API_KEY", "_BASE_URL"))
        )
        assert not changed + added, f"a run changed the environment of shared Dask worker {worker}: {changed + added}"


def _worker_environments(address: str) -> dict[str, dict[str, str]]:
    from distributed import Client

    with Client(address, timeout=30, set_as_default=False) as client:
        return client.run(lambda: dict(os.environ))


_STARTED_WITH: dict[str, dict[str, str]] = {}  # scheduler address -> its worker's environment at start


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten demo items: one depth-0 and one depth-1 item of five categories... plus French and Pashto."""
    keep = {"emo-a-d0", "par-a-d0", "for-a-d0", "syn-a-d0", "pro-a-d0", "que-a-d0", "que-a-d1", "mul-fr", "mul-ps"}
    path = tmp_path_factory.mktemp("data") / "small.jsonl"
    demo_items(path, keep)
    return path
