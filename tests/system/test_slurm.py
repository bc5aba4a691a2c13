"""An evaluate run whose Dask workers are Slurm jobs: `cluster = "slurm"`, on a one-node Slurm
started here (tests/support/slurm.py: Debian's slurm-wlm and munge, as root). The command's process runs the Dask
scheduler and dask-jobqueue submits worker jobs with sbatch as the run needs them (adaptive); the jobs report to
the Prefect API at an address that is not loopback, as a compute node would. Also: what is refused before
anything is written (a loopback Prefect API, a GPU run without GPU jobs), and the job script the settings make."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.support.harness import ROOT, demo_items, run_cli
from tests.support.slurm import Slurm, available, start_slurm
from ttseval.core.config import Settings
from ttseval.core.telemetry import TELEMETRY_OFF


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    why = available()
    assert why is None, why  # not skipped: scripts/setup.sh test installs Slurm for this test
    cluster = start_slurm(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster
    finally:
        cluster.stop()


def host_address() -> str:
    """This host's address as another node would name it (not loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: it picks the outgoing interface
            return s.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())


def slurm_env(slurm: Slurm, api_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    return (
        env
        | slurm.env
        | {
            "PYTHONPATH": str(ROOT),
            **TELEMETRY_OFF,
            "PREFECT_API_URL": api_url,
            "TTSEVAL_CLUSTER": "slurm",
            "TTSEVAL_SLURM__CORES": "1",
            "TTSEVAL_SLURM__MEMORY": "2GB",
            "TTSEVAL_SLURM__MAXIMUM_JOBS": "2",
            "TTSEVAL_SLURM__WALLTIME": "00:20:00",
        }
        | extra
    )


def test_an_evaluate_runs_on_slurm_jobs(slurm: Slurm, prefect_api: str, tmp_path: Path) -> None:
    """Every row is computed by workers that were Slurm jobs (jobcomp records ttseval-worker jobs, and no job is
    left running), with the same values as the shared LocalCluster-like cluster's run of the same command."""
    import subprocess

    demo_items(tmp_path / "two.jsonl", ["emo-a-d0", "que-a-d0"])
    api = prefect_api.replace("127.0.0.1", host_address())  # the session's server listens on every address
    args = [
        "evaluate",
        "--dataset",
        "two.jsonl",
        "--systems",
        "espeak-ng:en-us,flite:slt",
        "--judges",
        "",
        "--store",
        str(tmp_path / "store"),
        "--run-id",
        "slurm",
    ]
    done = run_cli(
        args, slurm_env(slurm, api, TTSEVAL_SLURM__LOG_DIRECTORY=str(tmp_path / "jobs")), cwd=tmp_path, timeout_s=900
    )
    assert done.returncode == 0, done.stderr[-4000:] + slurm.log()
    assert "Creating a new Dask cluster with `dask_jobqueue.slurm.SLURMCluster`" in done.stderr
    jobs = [j for j in slurm.finished_jobs() if j.get("Name", j.get("JobName")) == "ttseval-worker"]
    assert jobs, slurm.jobcomp.read_text() if slurm.jobcomp.exists() else "no jobcomp.log"
    queued = subprocess.run(
        ["squeue", "-h", "-n", "ttseval-worker"], env=os.environ | slurm.env, capture_output=True, text=True
    )
    assert queued.returncode == 0 and queued.stdout.strip() == "", queued.stdout  # the command scaled them away
    # the task runs logged inside the jobs (slurm.log_directory): every stage's work ran there
    ran = "".join(p.read_text() for p in sorted((tmp_path / "jobs").glob("ttseval-worker-*.err")))
    for task in ("synthesize", "transcribe", "score-quality"):
        assert f"Task run '{task}-" in ran and "Finished in state Completed()" in ran, ran[-2000:]

    store = tmp_path / "store" / "runs" / "slurm"
    synthesis = pd.read_parquet(store / "synthesis")
    transcripts = pd.read_parquet(store / "transcripts")
    quality = pd.read_parquet(store / "quality")
    assert len(synthesis) == 4 and synthesis["status"].eq("ok").all()
    assert len(transcripts) == 4 and transcripts["status"].eq("ok").all()
    assert len(quality) == 4 and quality["status"].eq("ok").all() and quality["mos"].between(1, 5).all()
    log = json.loads(sorted((store / "log").glob("*.json"))[-1].read_text())
    assert log["settings"]["cluster"] == "slurm" and log["dask_started"] is True


def test_a_slurm_run_is_refused_before_anything_is_written_when_its_jobs_could_not_report_or_run(
    slurm: Slurm, prefect_api: str, tmp_path: Path
) -> None:
    """No PREFECT_API_URL: the command's own server is on its loopback, which a compute node does not reach. A job
    the partition can never run (more memory than the node has), which would leave the run waiting for workers
    forever: Slurm's own `sbatch --test-only` says so. Each: exit 2, no traceback, the fix named, no job submitted
    and no store made."""
    demo_items(tmp_path / "one.jsonl", ["emo-a-d0"])
    args = [
        "evaluate",
        "--dataset",
        "one.jsonl",
        "--systems",
        "espeak-ng:en-us",
        "--judges",
        "",
        "--store",
        str(tmp_path / "store"),
        "--run-id",
        "r",
    ]
    before = len(slurm.finished_jobs())
    env = slurm_env(slurm, "", PREFECT_HOME=str(tmp_path / "ph"), TTSEVAL_PREFECT_SERVER_KEEP_S="0")  # none left up
    env.pop("PREFECT_API_URL")
    done = run_cli(args, env, cwd=tmp_path, timeout_s=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "cluster = 'slurm' cannot run this" in done.stderr
    assert "set PREFECT_API_URL=http://<its name or address>:4200/api" in done.stderr
    huge = run_cli(
        args,
        slurm_env(slurm, prefect_api.replace("127.0.0.1", host_address()), TTSEVAL_SLURM__MEMORY="100000GB"),
        cwd=tmp_path,
        timeout_s=300,
    )
    assert huge.returncode == 2, huge.stderr[-3000:]
    assert "Traceback" not in huge.stderr and "Slurm refuses the worker job the slurm settings make" in huge.stderr
    assert "Requested node configuration is not available" in huge.stderr and "change slurm.cores" in huge.stderr
    assert not (tmp_path / "store").exists() and len(slurm.finished_jobs()) == before


def test_the_job_script_holds_the_settings(slurm: Slurm) -> None:
    """The sbatch script dask-jobqueue makes from the slurm settings: the partition, time, memory and cores, the
    extra #SBATCH lines and prologue, the worker's resources and its model threads; a GPU run needs GPU jobs."""
    from dask_jobqueue import SLURMCluster

    from ttseval.core.errors import ConfigError
    from ttseval.flows.runner import slurm_cluster_kwargs

    settings = Settings(
        cluster="slurm",
        gpu=True,
        slurm={
            "cores": 8,
            "processes": 2,
            "memory": "32GB",
            "walltime": "04:00:00",
            "queue": "gpu",
            "account": "tts",
            "gpu": True,
            "job_extra_directives": ["--gres=gpu:1", "--constraint=a100"],
            "job_script_prologue": ["module load cuda/12.6"],
        },
    )
    kwargs = slurm_cluster_kwargs(settings)
    os.environ.update(slurm.env)
    with SLURMCluster(**kwargs) as cluster:
        script = cluster.job_script()
    for line in (
        "#SBATCH -p gpu",
        "#SBATCH -A tts",
        "#SBATCH -t 04:00:00",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --constraint=a100",
        "#SBATCH -J ttseval-worker",
        "module load cuda/12.6",
        "export TTSEVAL_MODEL_THREADS=4",
    ):
        assert line in script, script
    assert "--resources CPU=4,GPU=1" in script and "--nworkers 2" in script and "--nthreads 1" in script, script
    with pytest.raises(ConfigError, match="set slurm.gpu = true"):
        slurm_cluster_kwargs(settings.model_copy(update={"slurm": settings.slurm.model_copy(update={"gpu": False})}))
