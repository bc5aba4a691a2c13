"""The Dask task runner every ttseval flow uses, configured from settings when a flow run starts.

A deployment runs a flow with its decorator's task runner, built when the module is imported; reading the
settings at start instead means a worker's TTSEVAL_DASK_ADDRESS (a shared cluster with GPU workers) applies
without editing code, and a plain local run still gets a LocalCluster.

Nothing computed, nothing started: the flows plan first (ttseval.tasks.plan) and submit a task only for a stage
with work, and the cluster is started (or the scheduler at dask_address connected to) on the first submit, not
when the flow starts. A re-run of a finished run therefore starts no LocalCluster and no worker process: it writes
the report from the store in the flow's own process (`started` says which happened; the run log records it).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from prefect.futures import PrefectFuture
from prefect.task_runners import TaskRunner

from ttseval.core.config import Settings, load_settings
from ttseval.core.errors import ConfigError, TTSEvalError
from ttseval.infra.dask_defaults import dask_defaults
from ttseval.providers import MODEL_THREADS_VARIABLE

T = TypeVar("T")


def local_cluster_kwargs(settings: Settings) -> dict[str, Any]:
    # Each worker's CPU models get its share of the cores (providers.model_threads): measured on the demo with 2
    # workers on 2 cores, work inside tasks took 2x its time alone when every ONNX session used all cores.
    share = max(1, (os.cpu_count() or 1) // max(1, settings.n_workers))
    kwargs: dict[str, Any] = {
        "n_workers": settings.n_workers,
        "threads_per_worker": settings.threads_per_worker,
        "processes": True,
        "dashboard_address": ":0",
        "env": {MODEL_THREADS_VARIABLE: str(share)},
    }
    if settings.gpu:  # one machine: every worker has the GPU and the CPUs (ttseval.flows.common.placement)
        kwargs["resources"] = {"GPU": 1, "CPU": settings.threads_per_worker}
    return kwargs


def slurm_cluster_kwargs(settings: Settings) -> dict[str, Any]:
    """dask-jobqueue's SLURMCluster arguments from the `slurm` settings. Each job runs `processes` workers of one
    thread (a worker runs one task at a time, as a LocalCluster's), each with its share of the job's cores for its
    models, declaring CPU (and GPU=1 when slurm.gpu) as a GPU run's placement expects (flows.common.placement)."""
    import sys

    slurm = settings.slurm
    if settings.gpu and not slurm.gpu:
        raise ConfigError(
            "gpu = true sends the model stages to workers declaring the Dask resource GPU, and the "
            "Slurm jobs' workers declare none: set slurm.gpu = true (and ask Slurm for the GPU, "
            "slurm.job_extra_directives = ['--gres=gpu:1']), or gpu = false"
        )
    share = max(1, slurm.cores // slurm.processes)
    resources = f"CPU={share}" + (",GPU=1" if slurm.gpu else "")
    # dask-jobqueue gives each worker cores // processes threads: one each, the job's cores booked with job_cpu
    return {
        "cores": slurm.processes,
        "processes": slurm.processes,
        "job_cpu": slurm.cores,
        "memory": slurm.memory,
        "walltime": slurm.walltime,
        "queue": slurm.queue,
        "account": slurm.account,
        "job_name": "ttseval-worker",
        "job_extra_directives": list(slurm.job_extra_directives),
        "job_script_prologue": [*slurm.job_script_prologue, f"export {MODEL_THREADS_VARIABLE}={share}"],
        "python": slurm.python or sys.executable,
        "interface": slurm.interface,
        "log_directory": slurm.log_directory,
        "worker_extra_args": ["--resources", resources],
        "scheduler_options": {"dashboard_address": ":0"},
    }


def slurm_job_script(settings: Settings, scheduler: str = "tcp://scheduler:8786") -> str:
    """The sbatch script of one worker job, as dask-jobqueue writes it from the slurm settings."""
    from dask_jobqueue.slurm import SLURMJob

    kwargs = {k: v for k, v in slurm_cluster_kwargs(settings).items() if k != "scheduler_options"}
    # dask-jobqueue has no annotations
    job = SLURMJob(scheduler=scheduler, name="ttseval-worker", **kwargs)  # type: ignore[no-untyped-call]
    script: str = job.job_script()  # type: ignore[no-untyped-call]
    return script


def kubernetes_specs(settings: Settings) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The DaskCluster manifest a `cluster = "kubernetes"` run creates and its DaskWorkerGroups: the documents of
    the kubernetes.spec file as they are (infra/k8s/dask-cluster.yaml is one), else made by the operator's
    make_cluster_spec and make_worker_spec from the settings: CPU workers of one thread declaring CPU=1 and, with
    gpu_workers, a group '<name>-gpu' declaring GPU=1 with one nvidia.com/gpu each; their environment from
    kubernetes.env_from."""
    k8s = settings.kubernetes
    if k8s.spec is not None:
        return _spec_file(k8s.spec)
    if settings.gpu and not k8s.gpu_workers:
        raise ConfigError(
            "gpu = true sends the model stages to workers declaring the Dask resource GPU, and the "
            "Kubernetes cluster has none: set kubernetes.gpu_workers (or gpu = false)"
        )
    from dask_kubernetes.operator import make_cluster_spec, make_worker_spec

    env_from = []
    for source in k8s.env_from:
        kind, _, name = source.partition(":")
        if kind not in ("configmap", "secret") or not name:
            raise ConfigError(f"kubernetes.env_from: {source!r} is neither configmap:<name> nor secret:<name>")
        env_from.append({"configMapRef" if kind == "configmap" else "secretRef": {"name": name}})
    threads = k8s.worker_cpu if k8s.worker_cpu.isdigit() else "1"  # a model's threads: the pod's whole cores
    resources = {
        "requests": {"cpu": k8s.worker_cpu, "memory": k8s.worker_memory},
        "limits": {"memory": k8s.worker_memory},
    }
    cluster = make_cluster_spec(
        name=k8s.name,
        image=k8s.image,
        n_workers=k8s.workers,
        resources=resources,
        env=[{"name": MODEL_THREADS_VARIABLE, "value": threads}],
        worker_command=["dask", "worker", "--nthreads", "1", "--resources", "CPU=1"],
    )
    for container in cluster["spec"]["worker"]["spec"]["containers"]:
        container["envFrom"] = env_from
    groups = []
    if k8s.gpu_workers:
        worker = make_worker_spec(
            image=k8s.gpu_image or k8s.image,
            n_workers=k8s.gpu_workers,
            resources={
                "requests": {"memory": k8s.gpu_memory},
                "limits": {"memory": k8s.gpu_memory, "nvidia.com/gpu": "1"},
            },
            env=[{"name": MODEL_THREADS_VARIABLE, "value": "1"}],
            worker_command=["dask", "worker", "--nthreads", "1", "--resources", "GPU=1"],
        )
        for container in worker["spec"]["containers"]:
            container["envFrom"] = env_from
        # GPU nodes are commonly tainted so that only pods asking for a GPU land there
        worker["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        groups.append(
            {
                "apiVersion": "kubernetes.dask.org/v1",
                "kind": "DaskWorkerGroup",
                "metadata": {"name": f"{k8s.name}-gpu"},
                "spec": {"cluster": k8s.name, "worker": worker},
            }
        )
    return cluster, groups


def _spec_file(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            documents = [d for d in yaml.safe_load_all(f) if d]
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"kubernetes.spec: cannot read {path!r} as YAML: {e}") from e
    clusters = [d for d in documents if isinstance(d, dict) and d.get("kind") == "DaskCluster"]
    groups = [d for d in documents if isinstance(d, dict) and d.get("kind") == "DaskWorkerGroup"]
    if len(clusters) != 1 or len(clusters) + len(groups) != len(documents):
        raise ConfigError(
            f"kubernetes.spec: {path!r} must hold one DaskCluster and any DaskWorkerGroups, nothing "
            f"else (found: {', '.join(str(d.get('kind')) for d in documents) or 'nothing'})"
        )
    return clusters[0], groups


def kube_cluster(cluster: dict[str, Any], groups: list[dict[str, Any]], namespace: str | None) -> Any:
    """The operator's KubeCluster for these manifests (kubernetes_specs), with its worker groups; deleted when the
    run's task runner closes it."""
    from dask_kubernetes.operator import KubeCluster

    kube = KubeCluster(custom_cluster_spec=cluster, namespace=namespace, shutdown_on_close=True)
    for group in groups:  # the operator names a group <cluster>-<name>
        worker, name = group["spec"]["worker"], group["metadata"]["name"]
        kube.add_worker_group(
            name=name.removeprefix(f"{cluster['metadata']['name']}-"),
            n_workers=worker.get("replicas", 1),
            custom_spec=worker,
        )
    return kube


def runner_kwargs(settings: Settings) -> dict[str, Any]:
    """The task runner's arguments for the cluster the settings name: an existing scheduler (dask_address), Slurm
    jobs (cluster = 'slurm', adaptive between slurm.minimum_jobs and slurm.maximum_jobs), a DaskCluster of the
    dask-kubernetes operator (cluster = 'kubernetes'), or a LocalCluster."""
    if settings.dask_address:  # the client tries to reach it (and reconnects to it) for scheduler_wait_s
        return {"address": settings.dask_address, "client_kwargs": {"timeout": settings.scheduler_wait_s or 30}}
    if settings.cluster == "slurm":
        from dask_jobqueue.slurm import SLURMCluster

        return {
            "cluster_class": SLURMCluster,
            "cluster_kwargs": slurm_cluster_kwargs(settings),
            "adapt_kwargs": {"minimum_jobs": settings.slurm.minimum_jobs, "maximum_jobs": settings.slurm.maximum_jobs},
        }
    if settings.cluster == "kubernetes":
        cluster, groups = kubernetes_specs(settings)
        return {
            "cluster_class": kube_cluster,
            "cluster_kwargs": {"cluster": cluster, "groups": groups, "namespace": settings.kubernetes.namespace},
        }
    return {"cluster_kwargs": local_cluster_kwargs(settings)}


NOT_STARTED = "no task was submitted (nothing to compute): no Dask cluster was started or connected to"
"""What a flow logs when it ends without having needed Dask. The flow says it, not the runner's __exit__: every
task run on a Dask worker enters and leaves a duplicate of the runner (prefect.context hydrates the flow run's
context there), which never starts a cluster, so the runner would say it after every task."""


class SettingsDaskTaskRunner(TaskRunner[PrefectFuture[Any]]):
    """The flows' task runner: a prefect_dask DaskTaskRunner made at the first submitted task, its cluster from
    ttseval settings unless given explicitly. A flow with nothing to compute starts no cluster and never imports
    Dask (distributed and prefect_dask are 0.5 s of imports on a re-run that otherwise takes about 5 s).

    Hand-written because prefect_dask imports distributed at its top, so subclassing its runner, as this class did
    before, costs the import in every command; Prefect's TaskRunner.map submits through `submit`, so `submit`,
    `duplicate` and the context-manager methods are all it has to carry."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Prefect's TaskRunner.__init__ is unannotated
        self.kwargs = kwargs
        self._dask: Any = None  # the DaskTaskRunner, entered, once a task is submitted

    def duplicate(self) -> SettingsDaskTaskRunner:
        return type(self)(**self.kwargs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SettingsDaskTaskRunner) and other.kwargs == self.kwargs

    __hash__ = TaskRunner.__hash__

    @property
    def _client(self) -> Any:
        """The Dask client, once a task was submitted; None before."""
        return None if self._dask is None else self._dask._client

    @property
    def started_cluster(self) -> bool:
        """Whether this run has started (or connected to) a Dask cluster: some task was submitted."""
        return self._client is not None

    def dask_runner(self) -> Any:
        """The DaskTaskRunner, made and entered on first use; its client (and cluster) start at its first task."""
        if self._dask is None:
            from prefect_dask.task_runners import DaskTaskRunner

            dask_defaults()  # Dask's housekeeping at ttseval's pace in the clusters this process makes
            runner = DaskTaskRunner(**(self.kwargs or runner_kwargs(load_settings())))
            self._dask = runner.__enter__()  # type: ignore[no-untyped-call]  # prefect_dask's __enter__ is unannotated
        return self._dask

    def submit(self, task: Any, parameters: dict[str, Any], wait_for: Any = None, dependencies: Any = None) -> Any:
        if not self._started:
            raise RuntimeError("The task runner must be started before submitting work.")
        return self.dask_runner().submit(task, parameters, wait_for=wait_for, dependencies=dependencies)

    def __exit__(self, *exc_info: Any) -> None:
        """Close the cluster, if one was started. A LocalCluster whose worker processes take longer to exit than
        distributed waits (seen once, on a loaded 2-core machine, after every row was stored) is a warning, not a
        failed run: the work is done and the processes are already told to stop. With an exception in flight,
        that one wins."""
        try:
            if self._dask is not None:
                self._dask.__exit__(*exc_info)
        except TimeoutError:
            if exc_info[0] is not None:
                raise
            logging.getLogger("ttseval").warning(
                "the Dask cluster's workers took too long to stop; the run's "
                "results are stored, the processes are exiting"
            )
        finally:
            super().__exit__(*exc_info)


def task_runner(settings: Settings) -> SettingsDaskTaskRunner:
    """The runner for explicit settings (the CLI's): an existing scheduler, Slurm jobs or a LocalCluster."""
    return SettingsDaskTaskRunner(**runner_kwargs(settings))


def dask_started() -> bool | None:
    """Inside a flow run: whether its task runner has started (or connected to) a Dask cluster so far; None when
    the flow runs with another kind of runner (tests) or outside a flow run."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    runner = getattr(context, "task_runner", None)
    return runner.started_cluster if isinstance(runner, SettingsDaskTaskRunner) else None


def _chain(e: BaseException) -> list[BaseException]:
    """`e` and the exceptions it was raised from or while handling, each once."""
    seen: list[BaseException] = []
    link: BaseException | None = e
    while link is not None and all(link is not x for x in seen):
        seen.append(link)
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    return seen


def scheduler_lost(e: BaseException, client: Any = None) -> bool:
    """Whether `e` is one of the ways a flow meets a Dask client that lost its scheduler (a scheduler restarted, its
    host rebooted or cut off), in `e` itself or the exceptions it was raised from:

    - a future cancelled with reason "scheduler-connection-lost" (every future of the run is, once the client notices);
    - a closed comm (`CommClosedError`), when the scheduler went while a gather or a submit was talking to it;
    - any connection error or timeout (an `OSError`) or cancellation while `client` is not running: it is
      reconnecting, so the call failed because the scheduler is away.

    Which of these a run meets depends on the moment of the loss, so a busy machine meets all three."""
    import concurrent.futures

    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    if not isinstance(e, Exception | asyncio.CancelledError):  # KeyboardInterrupt, SystemExit: never a loss
        return False
    chain = _chain(e)
    if any(isinstance(x, FutureCancelledError) and x.reason == "scheduler-connection-lost" for x in chain):
        return True
    if any(isinstance(x, CommClosedError) for x in chain):
        return True
    away = client is not None and getattr(client, "status", "running") != "running"
    failed = (OSError, asyncio.CancelledError, concurrent.futures.CancelledError)
    return away and any(isinstance(x, failed) for x in chain)


def _scheduler_answers(client: Any) -> bool:
    """Whether the scheduler answers the client now: a client that has not yet noticed a loss still says running."""
    if client.status != "running":
        return False
    try:
        client.sync(client.scheduler.identity, callback_timeout=5)
    except (OSError, RuntimeError):  # a closed comm, a refused connection, the 5 s timeout; a loop just closed
        return False
    return True


def _api_answers() -> bool:
    """Whether the Prefect API this process reports to answers."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.api_healthcheck() is None


MAX_SCHEDULER_LOSSES = 5
"""How many lost schedulers one run rides out before it fails (a later run resumes)."""


def through_scheduler_restarts(fn: Callable[..., T]) -> Callable[..., T]:
    """A flow function that, when the Dask scheduler at dask_address is lost mid-run, runs again once it is back.

    A lost scheduler cancels every future of the run, or fails the call that was talking to it (scheduler_lost says
    which errors count), and the workers stop (their supervisors start them again) while the client keeps trying to
    reconnect. Once it has and the scheduler answers it (and the Prefect API answers), within `scheduler_wait_s` of the
    loss, `fn` runs again in the same flow run: it plans from the store, so what was stored is kept and only
    what was lost is computed again (a paid call whose answer was stored is not made again). Used under @flow, so
    the flow's parameters and docstring are `fn`'s.

    Why a whole new pass rather than resubmitting the lost futures: the scheduler held the task graph and nothing of
    it survives; the store is what says what is done, and planning from it is what a re-run does anyway.

    Raises:
        TTSEvalError: the scheduler did not come back within scheduler_wait_s (exit 1; a later run resumes).
    """

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        from prefect.context import FlowRunContext

        log = logging.getLogger("ttseval")
        losses = 0
        while True:
            try:
                return fn(*args, **kwargs)
            except BaseException as e:  # a cancellation may be an asyncio.CancelledError, not an Exception
                client = getattr(getattr(FlowRunContext.get(), "task_runner", None), "_client", None)
                if not scheduler_lost(e, client):
                    raise
                settings = load_settings()
                if not settings.dask_address:
                    raise
                where, wait_s = settings.dask_address, settings.scheduler_wait_s
                losses += 1
                if losses > MAX_SCHEDULER_LOSSES:  # an error that keeps looking like a loss is not one
                    raise TTSEvalError(
                        f"{fn.__name__}: the Dask scheduler at {where} was lost {MAX_SCHEDULER_LOSSES} times in "
                        "this run and the run failed again the same way; what is stored is kept: run the same "
                        "command again to resume"
                    ) from e
                deadline = time.monotonic() + wait_s  # each loss gets the whole wait
                log.warning(
                    "%s: the Dask scheduler at %s was lost mid-run; what is stored is kept; "
                    "waiting up to %.0f s (the scheduler_wait_s setting) for it to come back",
                    fn.__name__,
                    where,
                    wait_s,
                )
                while client is not None and not _scheduler_answers(client) and time.monotonic() < deadline:
                    time.sleep(0.5)
                if client is None or not _scheduler_answers(client):
                    raise TTSEvalError(
                        f"{fn.__name__}: the Dask scheduler at {where} was lost mid-run and did not "
                        f"come back within {wait_s:.0f} s (the scheduler_wait_s setting); what is "
                        "stored is kept: run the same command again to resume"
                    ) from e
                # a restarted host brings its Dask scheduler back before its Prefect server: the next pass reads
                # the flow run from the API, so it waits for that too, within the same deadline
                while not _api_answers() and time.monotonic() < deadline:
                    time.sleep(0.5)
                log.warning("%s: the Dask scheduler at %s is back; planning again from the store", fn.__name__, where)

    # the flow's parameters, their annotations evaluated where `fn` was written: Prefect validates a call against
    # this signature, resolving names in the wrapper's module otherwise (Literal, for one, is not imported here)
    run.__signature__ = inspect.signature(fn, eval_str=True)  # type: ignore[attr-defined]
    return run
