"""A cluster whose workers cannot reach the Prefect API or the store is refused before anything is written.

The worker here runs on another host (tests/support/hosts.py: its own network and mount namespaces): it reaches the
scheduler over a veth link, but neither the client's loopback (where a command's temporary Prefect server listens)
nor the client's files (the test's folder is an empty tmpfs there). A two-host trial crashed this way with
`RuntimeError: Failed to reach API at http://127.0.0.1:<port>/api/` from every task.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import instant
from tests.support.harness import BIN, ROOT, dask_worker_args, demo_items, stop_group
from tests.support.hosts import Host
from ttseval.core.config import Settings
from ttseval.core.errors import ConfigError
from ttseval.core.telemetry import TELEMETRY_OFF
from ttseval.flows import preflight
from ttseval.flows.preflight import check_cluster_reach


@pytest.fixture(scope="module")
def client_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client's folder: datasets and stores of this module's runs; empty on the worker host."""
    return tmp_path_factory.mktemp("client-files")


def worker_env(**extra: str) -> dict[str, str]:
    """A Dask worker's environment: this checkout importable, none of the test process's ttseval, AWS or Prefect
    settings (a worker gets a run's settings from the client, never from its own environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    return env | {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF, "DASK_LOGGING__DISTRIBUTED": "warning", **extra}


def peer_url(url: str, host: Host) -> str:
    """A server of this host (bound on every address: tests/conftest.py) as `host` reaches it."""
    return url.replace("127.0.0.1", host.peer_ip)


@pytest.fixture(scope="module")
def remote_cluster(
    tmp_path_factory: pytest.TempPathFactory, client_files: Path, s3_server: dict[str, str]
) -> Iterator[tuple[str, Host]]:
    """A scheduler on the client's side of a veth link and one worker on another host; yields (address, host).
    The worker has the session's S3 server's credentials and reaches it at the client's address (as a worker
    reaches an object store: its own credentials, never the run's), and as many model threads as the shared
    cluster's worker, so their results can be compared. Its environment also holds ttseval settings of its own:
    one that no settings may hold (shard_size 0: any settings loaded there fail) and one that would change every
    transcript (another recogniser for English). A run's tasks use the settings the client resolved, so neither
    may show."""
    from distributed import Client

    from ttseval.flows.runner import local_cluster_kwargs
    from ttseval.providers import MODEL_THREADS_VARIABLE

    host = Host.make("ttw", 200 + os.getpid() % 50)
    folder = tmp_path_factory.mktemp("worker-host")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    share = local_cluster_kwargs(Settings.model_construct())["env"][MODEL_THREADS_VARIABLE]
    env |= {
        "PYTHONPATH": str(ROOT),
        **TELEMETRY_OFF,
        "DASK_LOGGING__DISTRIBUTED": "warning",
        MODEL_THREADS_VARIABLE: share,
        **s3_server,
        "AWS_ENDPOINT_URL": peer_url(s3_server["AWS_ENDPOINT_URL"], host),
        "TTSEVAL_SHARD_SIZE": "0",
        "TTSEVAL_ASR__EN": "faster-whisper:base",
    }
    address = f"tcp://{host.peer_ip}:8786"
    with open(folder / "dask.log", "w") as log:
        procs = [
            subprocess.Popen(
                [
                    str(BIN / "dask"),
                    "scheduler",
                    "--host",
                    host.peer_ip,
                    "--port",
                    "8786",
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
                host.spawn(
                    dask_worker_args(address, host.ip, folder),
                    hide=[client_files],
                    env=env,
                    cwd=folder,
                    log=log,
                )
            )
            with Client(address, timeout=60, set_as_default=False) as client:
                client.wait_for_workers(1, timeout=120)
            yield address, host
        finally:
            for proc in reversed(procs):
                stop_group(proc)
            host.remove()


def test_a_run_on_another_host_without_a_reachable_api_or_store_is_refused_before_anything_is_written(
    remote_cluster: tuple[str, Host], client_files: Path
) -> None:
    """`ttseval evaluate` with TTSEVAL_DASK_ADDRESS and no PREFECT_API_URL (a temporary server on the client's
    loopback) and a local store: exit 2, no traceback, the worker named with both findings and what to do."""
    address, host = remote_cluster
    dataset, store = client_files / "two.jsonl", client_files / "store"
    demo_items(dataset, ["emo-a-d0", "emo-b-d0"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    env |= {
        "PYTHONPATH": str(ROOT),
        **TELEMETRY_OFF,
        "TTSEVAL_DASK_ADDRESS": address,
        "PREFECT_HOME": str(client_files / "ph"),
        "TTSEVAL_PREFECT_SERVER_KEEP_S": "0",
    }  # none left running
    done = subprocess.run(
        [
            str(BIN / "ttseval"),
            "evaluate",
            "--dataset",
            str(dataset),
            "--systems",
            "espeak-ng:en-us",
            "--judges",
            "",
            "--store",
            str(store),
            "--new-store",
            "--run-id",
            "r1",
        ],
        env=env,
        cwd=client_files,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    message = done.stderr
    assert f"worker tcp://{host.ip}:" in message
    assert "cannot open the Prefect API http://127.0.0.1:" in message  # the command's temporary server
    assert f"does not see the store's folder {client_files} (is another folder there)" in message
    assert "set PREFECT_API_URL=" in message and "--store s3://" in message and "Nothing was written." in message
    assert not store.exists()  # refused before the store was created


def test_reach_is_asked_of_each_worker(
    remote_cluster: tuple[str, Host],
    client_files: Path,
    shared_dask: str,
    prefect_api: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The same check in-process: the shared cluster (workers on this host) reaches the session's Prefect server
    and a local store, so nothing is raised; the worker on the other host reaches neither; no cluster, no check.
    Then one scheduler with a worker on each host, each lacking a model folder the other holds: the refusal names
    both workers, each with exactly its own findings, so every worker was asked, not one standing for all."""
    import re

    from distributed import Client

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
    # model weights named by a local path: each worker must hold them itself (the other host sees none of the
    # client's folder); a files: system's folder is not asked for (the run stores its clips first)
    weights = client_files / "lid-model"
    weights.mkdir()
    named = Settings(dask_address=shared_dask, store=store, lid=[f"transformers:{weights}"])
    check_cluster_reach(named, [f"files:mine:dir={client_files / 'nowhere'}"])  # this host has them
    with pytest.raises(ConfigError) as lacking:
        check_cluster_reach(
            named.model_copy(update={"dask_address": address}),
            [f"files:mine:dir={client_files / 'nowhere'}", "piper:joe"],
        )
    assert f"worker tcp://{host.ip}:" in str(lacking.value) and f"lacks {weights}, which a spec" in str(lacking.value)
    assert "nowhere" not in str(lacking.value) and "same path on every worker host" in str(lacking.value)
    # a worker on this host joins the other host's scheduler for this part only
    with open(tmp_path / "local-worker.log", "w") as log:
        local = subprocess.Popen(
            dask_worker_args(address, host.peer_ip, tmp_path),
            env=worker_env(),
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    only_here, only_there = client_files / "only-here", client_files / "only-there"
    try:
        with Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=120)
            workers = sorted(client.scheduler_info()["workers"])
            [there] = [w for w in workers if w.startswith(f"tcp://{host.ip}:")]
            [here] = [w for w in workers if w != there]
            # the other host sees its own empty folder at the client's path: a folder made there is not here
            client.run(os.mkdir, str(only_there), workers=[there])
        only_here.mkdir()
        assert not only_there.exists()
        both = Settings(
            dask_address=address, store=store, lid=[f"transformers:{only_here}", f"transformers:{only_there}"]
        )
        remembered = set(preflight._reached)
        with pytest.raises(ConfigError) as each:
            check_cluster_reach(both)
        message = str(each.value)
        findings = message.split(" cannot run this: ", 1)[1].split(". To fix: ", 1)[0].split("; ")
        by_worker: dict[str, list[str]] = {}
        for finding in findings:
            named = re.fullmatch(r"worker (\S+) (.*)", finding)
            assert named, f"a finding that names no worker: {finding!r} in {message}"
            by_worker.setdefault(named[1], []).append(named[2])
        assert sorted(by_worker) == sorted([here, there]), message
        [lacks_there] = by_worker[here]  # this host reaches the API and the store; it lacks the other's folder only
        assert re.fullmatch(
            rf"\(host [^)]*\) lacks {re.escape(str(only_there))}, which a spec of the run names", lacks_there
        )
        assert len(by_worker[there]) == 3, by_worker[there]
        assert any(re.search(rf"lacks {re.escape(str(only_here))}, which a spec", f) for f in by_worker[there])
        assert any(f.startswith(f"cannot open the Prefect API {prefect_api}") for f in by_worker[there])
        assert any(f.startswith(f"does not see the store's folder {client_files}") for f in by_worker[there])
        assert preflight._reached == remembered  # a refusal is not remembered
    finally:
        stop_group(local)
        with Client(address, timeout=60, set_as_default=False) as client:
            client.run(  # ignore_errors: a failure before the folder was made must stay the failure reported
                shutil.rmtree,
                str(only_there),
                True,
                workers=[w for w in client.scheduler_info()["workers"] if w.startswith(f"tcp://{host.ip}:")],
            )
            deadline = time.monotonic() + 120  # the module's later tests expect the other host's worker alone
            while len(client.scheduler_info()["workers"]) != 1:
                assert time.monotonic() < deadline, (
                    f"the scheduler still lists {sorted(client.scheduler_info()['workers'])}"
                )
                time.sleep(0.1)  # polls a condition, with the deadline above


def test_a_files_system_with_clips_on_the_client_completes_on_another_host_named_by_its_label(
    remote_cluster: tuple[str, Host],
    client_files: Path,
    prefect_api: str,
    s3_server: dict[str, str],
    shared_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A two-host trial gave `files:mine:dir=clips` 0 of 3 clips (the relative folder was looked for on the
    worker) and exited 0. Now the client stores the clips before any work: on a worker that sees none of the
    client's files, every clip completes; the system is `files:mine` in the tables, the report and the leaderboard;
    and every per-key result equals a run of the same command on one host (the shared cluster, a local store):
    clip SHA-256, transcript, WER, CER, MOS, although the worker's own environment names other settings
    (remote_cluster). The second system, the recogniser and the MOS predictor are instant (tests/support/instant.py):
    what is tested is where the clips are read; the real models across hosts are tests/system/test_multi_host.py's."""
    import boto3
    import pandas as pd

    from tests.support.harness import run_cli
    from ttseval.core.audio import Audio, sha256_hex
    from ttseval.core.store import ArtifactStore

    address, host = remote_cluster
    rows = demo_items(client_files / "three.jsonl", ["emo-a-d0", "que-a-d0", "for-a-d0"])
    clips = client_files / "clips"
    clips.mkdir()
    for r in rows:
        subprocess.run(
            ["flite", "-voice", "slt", "-t", r["text"], "-o", str(clips / f"{r['item_id']}.wav")], check=True
        )
    boto3.client(
        "s3",
        endpoint_url=s3_server["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing-secret",
    ).create_bucket(Bucket="two-hosts")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    env |= {
        "PYTHONPATH": str(ROOT),
        **TELEMETRY_OFF,
        "TTSEVAL_DASK_ADDRESS": address,
        "PREFECT_API_URL": peer_url(prefect_api, host),
        **s3_server,
        "AWS_ENDPOINT_URL": peer_url(s3_server["AWS_ENDPOINT_URL"], host),
        **instant.ENV,
    }
    args = ["evaluate", "--dataset", "three.jsonl", "--systems", "files:mine:dir=clips,instant", "--judges", ""]
    done = run_cli([*args, "--store", "s3://two-hosts/ttseval", "--new-store", "--run-id", "r2"], env, cwd=client_files)
    assert done.returncode == 0, done.stderr[-4000:]
    single = run_cli(
        [*args, "--store", str(client_files / "one-host"), "--run-id", "r1"], shared_env | instant.ENV, cwd=client_files
    )
    assert single.returncode == 0, single.stderr[-4000:]

    for k, v in (s3_server | {"AWS_ENDPOINT_URL": env["AWS_ENDPOINT_URL"]}).items():
        monkeypatch.setenv(k, v)
    two, one = ArtifactStore("s3://two-hosts/ttseval"), ArtifactStore(str(client_files / "one-host"))
    synthesis = two.read("r2", "synthesis")
    mine = synthesis[synthesis["system_spec"] == "files:mine"].set_index("item_id")
    assert sorted(mine.index) == sorted(r["item_id"] for r in rows) and mine["status"].eq("ok").all(), synthesis[
        ["system_spec", "item_id", "status", "error_message"]
    ].to_string()
    for r in rows:  # the clip each row describes is the client's file, decoded and stored as 16-bit WAV
        wav = Audio.from_wav_bytes((clips / f"{r['item_id']}.wav").read_bytes()).to_wav_bytes()
        assert mine.loc[r["item_id"], "audio_sha256"] == sha256_hex(wav)
    report = two.read_bytes("runs/r2/report.md").decode()
    assert "files:mine" in report and "dir=" not in report and str(clips) not in report
    board = run_cli(["leaderboard", "--store", "s3://two-hosts/ttseval"], env, cwd=client_files)
    assert board.returncode == 0 and "files:mine " in board.stdout and "dir=" not in board.stdout, board.stderr

    keys = {
        "synthesis": (["item_id", "system_id"], ["status", "audio_sha256"]),
        "transcripts": (["item_id", "system_id", "asr_id"], ["hypothesis", "wer", "cer"]),
        "quality": (["item_id", "system_id", "quality_id"], ["mos"]),
    }
    for table, (key, values) in keys.items():
        a = two.read("r2", table).set_index(key).sort_index()[values]
        b = one.read("r1", table).set_index(key).sort_index()[values]
        assert len(a) == 6, table
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=table)
