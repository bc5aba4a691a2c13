"""The evaluate flow's preflight: everything a user can get wrong about a run's inputs (the dataset's rows, the
systems, the judges of both roles, the baseline), checked before any work and before the store is touched.

It lives here once and runs once per invocation. The evaluate flow always calls `preflight_evaluate`, so a run
started from the Prefect UI, a deployment or a schedule is checked like any other. `ttseval evaluate` calls it
too, early, so bad input is refused (exit 2, naming the field, row or spec and the fix) before a Prefect server
or a Dask cluster starts; it then hands its result to the flow it starts with `handed_over`, and the flow's call
returns that result instead of checking again. The hand-over is one-shot, lives in this process only, and holds
only for the same inputs and settings: any other call (another process, other inputs, a later run) checks.

Voice prompt clips are checked where they are stored (ttseval.tasks.voices.store_prompts, the flow's next
step), since reading them there is the check: checking them here as well would read each clip twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.errors import ConfigError, DatasetError, SpecError
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore, open_store
from ttseval.corpus.items import read_items
from ttseval.flows.common import check_confined, check_judges, check_systems

# Settings that say where the work runs, not what it is: the CLI sets them for its task runner, the flow does not.
PLACEMENT_SETTINGS = {"dask_address", "n_workers", "threads_per_worker"}


@dataclass(frozen=True)
class CheckedInputs:
    """What the preflight read and checked: the run's items, the dataset's identity, and canonical specs."""

    items: pd.DataFrame
    dataset_sha256: str
    dataset_read: str  # the file, or NAME@VERSION with NAME@latest resolved
    systems: list[Spec]
    baseline: Spec
    judges: list[str]
    instruction_judges: list[str]
    key: str = field(repr=False, default="")
    new_store: bool = False  # nothing was stored under settings.store yet: this run creates the store


def _key(
    dataset: str,
    systems: list[str],
    baseline: str | None,
    judges: list[str] | None,
    instruction_judges: list[str] | None,
    settings: Settings,
) -> str:
    """The inputs and settings a preflight result holds for (placement settings left out)."""
    return json.dumps(
        [
            dataset,
            list(systems),
            baseline,
            judges,
            instruction_judges,
            settings.model_dump(mode="json", exclude=PLACEMENT_SETTINGS),
        ],
        sort_keys=True,
        default=str,
    )


_lock = threading.Lock()
_handed: CheckedInputs | None = None


def preflight_evaluate(
    dataset: str,
    systems: list[str],
    settings: Settings,
    *,
    baseline: str | None = None,
    judges: list[str] | None = None,
    instruction_judges: list[str] | None = None,
    paying: bool = True,
) -> CheckedInputs:
    """Check an evaluate run's inputs; None for `judges` / `instruction_judges` means the configured ones.

    A store that does not exist yet is noted in the result (`new_store`); when the run is `paying` (not a dry
    run) and would call paid systems or judges, it is refused unless the setting `allow_new_store` is on.

    Returns the result handed over by the caller (`handed_over`) when it is for the same inputs and settings,
    without checking again; otherwise reads the dataset and builds every system and judge once.

    Raises:
        DatasetError: a dataset row breaks a rule (row, column and fix named), or, in a confined run (setting
            confine_paths: deployment runs by default), references a file outside the dataset's folder and
            allowed_paths.
        SpecError / ConfigError: an unknown or unbuildable system or judge, a judge that cannot play its role,
            a baseline that is not one of the systems, a files system reading outside a confined run's folders, a
            paid run on a new store without allow_new_store.
    """
    global _handed
    key = _key(dataset, systems, baseline, judges, instruction_judges, settings)
    with _lock:
        if _handed is not None and _handed.key == key:
            checked, _handed = _handed, None
            from ttseval.tasks.logs import logger

            logger().info(
                f"preflight: {checked.dataset_read} ({len(checked.items)} items), "
                f"{len(checked.systems)} systems and the judges were checked before the flow started; "
                "not checked again"
            )
            return checked
    items, sha256, read = read_items(dataset, settings)
    check_wer_protocol(items, settings, source=read)
    specs = check_systems(systems, settings)
    check_confined(items, specs, settings, dataset=dataset, source=read)  # deployment runs: setting confine_paths
    judge_specs = check_judges(judges if judges is not None else settings.judges, settings)
    instruction_specs = check_judges(
        instruction_judges if instruction_judges is not None else settings.instruction_judges,
        settings,
        role="instruction",
    )
    baseline_spec = Spec.parse(baseline) if baseline else specs[0]
    if baseline_spec.id not in {s.id for s in specs}:
        raise SpecError(f"baseline {baseline_spec.canonical!r} is not one of the systems; add it to --systems")
    store = open_store(settings)
    new_store = store.is_new()
    if new_store and paying and not settings.allow_new_store:
        _refuse_paid_new_store(store, items, specs, baseline_spec, judge_specs, instruction_specs, settings)
    return CheckedInputs(items, sha256, read, specs, baseline_spec, judge_specs, instruction_specs, key, new_store)


def check_wer_protocol(items: pd.DataFrame, settings: Settings, *, source: str) -> None:
    """Raise DatasetError when the setting wer_protocol = "seed-tts-eval" meets items in a language it does not define
    WER for (it defines English and Chinese): refused before any work, naming the rows, rather than a transcript row
    for each such item that fails again on every run."""
    if settings.wer_protocol != "seed-tts-eval":
        return
    from ttseval.metrics.normalize import normalizer_for

    bad = []
    for row, (item_id, language) in enumerate(zip(items["item_id"], items["language"]), start=1):
        try:
            normalizer_for(language, settings.wer_protocol)
        except ValueError:
            bad.append(f"row {row} (item_id={item_id!r}, language={language!r})")
    if bad:
        shown = ", ".join(bad[:8]) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "")
        problem = (
            f"rule 'language is en or zh under wer_protocol = \"seed-tts-eval\"' (column language) fails on "
            f"{len(bad)} row(s): {shown}. Fix: leave those items out of this run, or set wer_protocol = "
            '"ttseval" (TTSEVAL_WER_PROTOCOL=ttseval)'
        )
        raise DatasetError(f"dataset {source} breaks 1 rule(s):\n- {problem}", source=source, problems=[problem])


def _refuse_paid_new_store(
    store: ArtifactStore,
    items: pd.DataFrame,
    specs: list[Spec],
    baseline: Spec,
    judges: list[str],
    instruction_judges: list[str],
    settings: Settings,
) -> None:
    """Raise ConfigError when a run on a store that does not exist yet would pay: priced the way the dry run
    prices it (ttseval.tasks.cost), so a mistyped --store is caught before it pays for everything again."""
    from ttseval.tasks.cost import estimate_judges, estimate_synthesis
    from ttseval.tasks.plan import plan_synthesis

    run_id = "new-store"  # any run id: a store with nothing in it has no rows of any run (not '': S3 refuses '//')
    plan = plan_synthesis(store, run_id, items, specs, settings)
    paid = [
        e
        for e in estimate_synthesis(plan, store, settings)
        + estimate_judges(
            items, [s.id for s in specs], baseline.id, judges, instruction_judges, store, run_id, settings
        )
        if e.usd > 0
    ]
    if paid:
        raise ConfigError(
            f"the store {store.display()} does not exist yet, and this run would pay about USD "
            f"{sum(e.usd for e in paid):.4f} ({', '.join(e.what for e in paid)}) to compute everything there: check "
            "--store (a mistyped one starts over and pays again); to create it, pass --new-store (or set "
            "TTSEVAL_ALLOW_NEW_STORE=true)"
        )


@contextlib.contextmanager
def handed_over(checked: CheckedInputs) -> Iterator[None]:
    """Inside, the first preflight_evaluate call with `checked`'s inputs and settings (the flow the caller starts,
    in this process) returns `checked` instead of checking again. Nothing is left behind on exit."""
    global _handed
    with _lock:
        _handed = checked
    try:
        yield
    finally:
        with _lock:
            _handed = None


# The clusters whose workers were seen to reach the Prefect API and the store, in this process (address, API, store):
# the CLI checks before the flow starts, and the flow (a run from the UI or a deployment) would otherwise ask again.
_reached: set[str] = set()


LOCAL_PATH = ("/", "~/")
"""How a spec's voice or option value that is a path on the worker's disk begins (model weights, a voice file)."""
WRITTEN_OPTIONS = frozenset({"cache_dir"})
"""Options naming where a provider writes, made when missing (faster-whisper's joined weights): not asked for."""
COMMAND_OPTIONS = frozenset({"run"})
"""Options holding a command (`command:label:run=/venv/bin/python /opt/score.py`): each word that is a path is."""


def local_paths(specs: list[str]) -> list[str]:
    """The paths on disk that `specs` name (the voice slot or an option value beginning with '/' or '~/', or such a
    word of a command): model weights, voice files and scorer programs, which every worker must hold itself. A
    files: system's folder or manifest is not among them: the run stores its clips before any work
    (ttseval.tasks.staging)."""
    paths: set[str] = set()
    for text in specs:
        spec = Spec.parse(text)
        if spec.provider in ("files", "pushed"):
            continue
        values = [spec.voice, *(v for k, v in spec.options if k not in WRITTEN_OPTIONS | COMMAND_OPTIONS)]
        values += [w for k, v in spec.options if k in COMMAND_OPTIONS for w in _words(v)]
        paths.update(v for v in values if v and v.startswith(LOCAL_PATH))
    return sorted(paths)


def _words(value: str) -> list[str]:
    """A value holding a command (`command:label:run=/venv/bin/python /opt/score.py`), split as a shell would."""
    import shlex

    try:
        return shlex.split(value)
    except ValueError:  # unbalanced quotes: the provider refuses the spec, naming the fix
        return [value]


def run_model_specs(settings: Settings, *more: list[str]) -> list[str]:
    """Every model spec the run's settings name (recognisers, MOS predictors, speaker encoders, LID models, judges
    of both kinds) and `more` (its systems, the judges it was given)."""
    asr = [s for v in settings.asr.values() for s in ([v] if isinstance(v, str) else v)]
    return [
        *asr,
        *settings.qualities,
        *settings.similarity,
        *settings.lid,
        *settings.judges,
        *settings.instruction_judges,
        *(s for specs in more for s in specs),
    ]


def check_cluster_reach(settings: Settings, specs: Sequence[str] = ()) -> None:
    """On a cluster (setting dask_address), refuse a run whose workers cannot reach what every task needs: the
    Prefect API the run reports to, a local-folder store, and the model weights and voice files the run's specs
    (run_model_specs of the settings and `specs`) name by a local path (local_paths). Nothing is written before;
    no-op without a cluster.

    Why ask the workers rather than look at addresses: a worker on the client's host reaches its loopback, one on
    another host does not, and a folder mounted at the same path on every host (NFS on a Slurm cluster) is a store
    they share. Each worker opens the API's /health and looks at the store folder (or its nearest existing parent,
    for a store not created yet): the same folder when its inode is the client's and one listing holds the other.
    An s3:// store is not probed here (credentials and endpoint are each host's own; the store's retries report
    it). A cluster with no worker yet (one scaling up) has nothing to ask: the run goes on.

    Raises:
        ConfigError: naming each worker, what it cannot reach and what to start and set instead.
    """
    if not settings.dask_address:
        if settings.cluster == "slurm":
            _check_slurm(settings)
        if settings.cluster == "kubernetes":
            _check_kubernetes(settings)
        return
    api_url = _api_url() or None
    local_store = not settings.store.startswith("s3://")
    paths = local_paths(run_model_specs(settings, list(specs)))
    key = json.dumps([settings.dask_address, api_url, settings.store, paths])
    if key in _reached:
        return
    folder, seen = _folder_seen(settings.store) if local_store else (None, None)
    from distributed import Client

    # distributed's Client is unannotated
    with Client(settings.dask_address, timeout=20, set_as_default=False) as client:  # type: ignore[no-untyped-call]
        answers = client.run(worker_reach, api_url, folder, seen, paths)
    problems = [f"worker {worker} {problem}" for worker, found in sorted(answers.items()) for problem in found]
    if problems:
        hints = []
        if any("Prefect API" in p for p in problems):
            hints.append(
                "start a Prefect server the workers can reach (`prefect server start --host 0.0.0.0`, or "
                "infra/docker-compose.yml's) and set PREFECT_API_URL=http://<that host>:4200/api "
                "for this command; without PREFECT_API_URL a command's temporary server listens on its own "
                "loopback only"
            )
        if any("store" in p for p in problems):
            hints.append(
                "use a store every host reaches: --store s3://bucket/prefix (with AWS_ENDPOINT_URL and "
                "credentials on every host), or a folder mounted at the same path on every worker"
            )
        if any("lacks" in p for p in problems):
            hints.append(
                "put the model files at the same path on every worker host (or a folder mounted there), "
                "as each worker loads the weights a spec names itself"
            )
        raise ConfigError(
            "the Dask cluster at "
            + settings.dask_address
            + " cannot run this: "
            + "; ".join(problems)
            + ". To fix: "
            + "; ".join(hints)
            + ". Nothing was written."
        )
    _reached.add(key)


def _check_slurm(settings: Settings) -> None:
    """A run whose workers will be Slurm jobs: none exists yet to ask, so what can be known here is checked. The
    jobs must reach the Prefect API: a command with no PREFECT_API_URL has the shared (or temporary) server on
    its own loopback, which a compute node does not reach. Slurm's sbatch must be on PATH."""
    import shutil

    problems = _loopback_api("the Slurm jobs' workers", "a compute node")
    if shutil.which("sbatch") is None:
        problems.append("sbatch is not on PATH: run on a Slurm login node (or install Slurm's client commands)")
    else:  # the worker job as it will be submitted, tested by Slurm without submitting it (a job the cluster can
        # never run would otherwise leave the run waiting for workers that never come)
        import subprocess

        from ttseval.flows.runner import slurm_job_script

        tried = subprocess.run(
            ["sbatch", "--test-only"], input=slurm_job_script(settings), capture_output=True, text=True, timeout=60
        )
        if tried.returncode != 0:
            said = " ".join(tried.stderr.split())[-600:] or f"exit {tried.returncode}"
            problems.append(
                f"Slurm refuses the worker job the slurm settings make ({said}); change slurm.cores, "
                "slurm.memory, slurm.walltime, slurm.queue or slurm.job_extra_directives to what the "
                "partition offers (sinfo -o '%P %c %m %l')"
            )
    if problems:
        raise ConfigError(
            "cluster = 'slurm' cannot run this: " + "; ".join(problems) + ". The store must be a "
            "folder mounted at the same path on every node, or s3://. Nothing was written."
        )


def _api_url() -> str:
    """The Prefect API this command reports to: a profile's, or the environment's; '' when none is set."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url or os.environ.get("PREFECT_API_URL") or ""


def _loopback_api(workers: str, where: str) -> list[str]:
    """The problem, if any, of a Prefect API on this host's loopback for workers started elsewhere."""
    import ipaddress
    from urllib.parse import urlsplit

    api_url = _api_url()
    host = urlsplit(api_url).hostname or ""
    with contextlib.suppress(ValueError):
        host = "localhost" if ipaddress.ip_address(host).is_loopback else host
    if host not in ("", "localhost"):
        return []
    return [
        (
            f"{workers} report to the Prefect API, and {api_url or 'no API'} is on this host's loopback (without "
            f"PREFECT_API_URL a command's own server listens there), which {where} does not reach: start a server "
            "they reach (`prefect server start --host 0.0.0.0`, or infra/k8s's) and set "
            "PREFECT_API_URL=http://<its name or address>:4200/api"
        )
    ]


def _check_kubernetes(settings: Settings) -> None:
    """A run whose workers will be pods of a DaskCluster: the manifests are made (or the spec file read) here, so a
    bad one is refused before anything is written; the pods must reach the Prefect API and the store."""
    from ttseval.flows.runner import kubernetes_specs

    kubernetes_specs(settings)  # ConfigError: the spec file or the settings
    problems = _loopback_api("the pods' workers", "a pod")
    if not settings.store.startswith("s3://") and settings.kubernetes.spec is None:
        problems.append(
            f"the store {settings.store!r} is a folder on this host, which the pods the kubernetes "
            "settings make do not mount: use --store s3://bucket/prefix (credentials from "
            "kubernetes.env_from), or a kubernetes.spec whose pods mount it at the same path"
        )
    if problems:
        raise ConfigError("cluster = 'kubernetes' cannot run this: " + "; ".join(problems) + ". Nothing was written.")


FolderIdentity = tuple[int, list[str]]
"""What identifies a folder seen from two hosts: (inode, sorted entry names)."""


def _folder_identity(folder: str) -> FolderIdentity:
    return os.stat(folder).st_ino, sorted(os.listdir(folder))


def _folder_seen(store: str) -> tuple[str, FolderIdentity]:
    """The store folder, or its nearest existing parent, and what identifies it (FolderIdentity)."""
    folder = os.path.abspath(store)
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder, _folder_identity(folder)


def worker_reach(
    api_url: str | None, folder: str | None, seen: FolderIdentity | None, paths: Sequence[str] = ()
) -> list[str]:
    """Run on each worker by check_cluster_reach: what this worker cannot reach, one phrase each ([] when all)."""
    import socket
    import urllib.request

    problems = [
        f"(host {socket.gethostname()}) lacks {path}, which a spec of the run names"
        for path in paths
        if not os.path.exists(os.path.expanduser(path))
    ]
    if api_url:
        import urllib.error

        for attempt in range(3):  # a server busy with other runs may miss a timeout; three in a row are the finding
            try:
                with urllib.request.urlopen(api_url.rstrip("/") + "/health", timeout=10) as response:
                    response.read()
                break
            except urllib.error.HTTPError as e:
                if e.code >= 500:  # it answered: reached, only busy (Prefect's own client retries such answers)
                    break
                problems.append(
                    f"cannot open the Prefect API {api_url} (HTTP {e.code} for /health: is the URL the "
                    "API's, ending in /api?)"
                )
                break
            except Exception as e:  # noqa: BLE001 - any failure to open it is the finding
                timed_out = isinstance(e, TimeoutError) or isinstance(getattr(e, "reason", None), TimeoutError)
                if attempt == 2 or not timed_out:  # refused or unknown: final at once
                    problems.append(f"cannot open the Prefect API {api_url} ({type(e).__name__}: {e})")
                    break
    if folder is not None and seen is not None:  # check_cluster_reach passes both or neither
        here: FolderIdentity | str
        try:
            here = _folder_identity(folder)
        except OSError as e:
            here = f"{type(e).__name__}: {e.strerror}"
        # the same folder: the same inode, and one listing holds the other (a run may add an entry in between)
        same = (
            not isinstance(here, str)
            and here[0] == seen[0]
            and (set(here[1]) <= set(seen[1]) or set(seen[1]) <= set(here[1]))
        )
        if not same:
            what = "is missing there" if isinstance(here, str) else "is another folder there"
            problems.append(f"does not see the store's folder {folder} ({what})")
    return problems
