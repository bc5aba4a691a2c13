"""What the flows share: up-front checks of systems and judges, the run's items, code identity, artifact keys
and the GPU annotation of model stages. Flows import these instead of each other's private helpers."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from ttseval.core.config import Settings, load_settings
from ttseval.core.errors import ConfigError, DatasetError, SpecError, TTSEvalError
from ttseval.core.ids import slug
from ttseval.core.memory import give_back_freed_memory
from ttseval.core.paths import resolve_against, within
from ttseval.core.registry import Spec
from ttseval.core.schemas import table_from_rows
from ttseval.core.store import ArtifactStore, open_store
from ttseval.core.validation import check_table, rule_columns
from ttseval.providers.judges import JUDGES
from ttseval.providers.tts import TTS
from ttseval.tasks.logs import logger
from ttseval.tasks.provider_cache import build_provider


def check_systems(systems: list[str], settings: Settings) -> list[Spec]:
    """Parse and construct every system once before any work, so a typo fails in seconds, not mid-run."""
    if not systems:
        raise SpecError("--systems is empty; give provider specs such as piper:joe,espeak-ng,flite:slt")
    specs = [Spec.parse(s) for s in systems]
    seen: dict[str, str] = {}
    for spec in specs:
        if spec.id in seen:
            raise SpecError(
                f"systems {seen[spec.id]!r} and {spec.canonical!r} are the same configuration; list each system once"
            )
        seen[spec.id] = spec.canonical
        provider = build_provider("tts", spec.canonical, settings)
        # a provider built without a key for an estimate (tasks.provider_cache.estimate_only) may not ask its vendor
        if callable(check_voice := getattr(provider, "check_voice", None)) and not getattr(
            provider, "estimate_only", False
        ):
            try:
                check_voice()  # an unknown voice fails here, not on every item
            except ValueError as e:
                raise SpecError(f"system {spec.canonical!r}: {e}", spec=spec.canonical) from e
            except TTSEvalError as e:  # the voice list could not be read: the run finds out per item
                logger().warning(f"system {spec.canonical!r}: could not check the voice ({e})")
        prompt = spec.option("prompt")
        if prompt is not None and prompt != "category":
            raise SpecError(
                f"system {spec.canonical!r}: prompt={prompt!r} is not known; the only value is prompt=category"
            )
        if prompt and not getattr(provider, "accepts_instruction", False):
            raise SpecError(
                f"system {spec.canonical!r} is strongly prompted, but {spec.provider} takes no "
                "instruction; drop ':prompt=category' or choose a provider that accepts one"
            )
    return specs


def deployment_run() -> bool:
    """Whether this runs inside a flow run started from a deployment (the Prefect UI, a schedule, `prefect
    deployment run`, `ttseval serve`), as Prefect's runtime tells it (tests mock it with the environment variable
    PREFECT__RUNTIME__DEPLOYMENT__ID, Prefect's own mechanism). A process that has not imported Prefect runs no
    flow (the command line's early checks): answered without importing it, which costs seconds."""
    if "prefect" not in sys.modules and not os.environ.get("PREFECT__RUNTIME__DEPLOYMENT__ID"):
        return False
    from prefect.runtime import deployment

    return bool(deployment.id)


def check_job_variables() -> None:
    """Refuse a run started from a deployment whose own job variables (a custom run's, from the Prefect UI or
    `prefect deployment run --job-variable`) change the flow run's environment, command or working folder: they
    would point it at other settings, stores, keys or code on the worker. The deployment's job variables (a declared
    series' TTSEVAL_CONFIG) are the operator's and are not these. The message names the variables, never values.

    Raises:
        ConfigError: such a job variable, before anything is read or written.
    """
    if not deployment_run():
        return
    from prefect.runtime import flow_run

    given = flow_run.job_variables or {}
    named = [f"env {k}" for k in (given.get("env") or {})] + [k for k in ("command", "working_dir") if given.get(k)]
    if named:
        raise ConfigError(
            f"job variables {', '.join(named)}: a run started from a deployment or the Prefect UI may not change the "
            "worker's environment, command or working folder; start it without them (whoever runs the worker sets "
            "the environment, and a deployment's own job variables)"
        )


def _same_store(a: str, b: str) -> bool:
    """Whether two store settings name one place: URIs as written (less a trailing '/'), folders once resolved."""
    if "://" in a or "://" in b:
        return a.rstrip("/") == b.rstrip("/")
    return Path(a).resolve() == Path(b).resolve()


def run_settings(**overrides: Any) -> Settings:
    """A flow run's settings: the operator's (the environment and ttseval.toml) with the run's parameters on top,
    within the operator's limits. A run's `budget_usd` only lowers the operator's cap; a run started from a
    deployment or the UI (deployment_run) writes to the operator's store or one in allowed_stores.

    Raises:
        ConfigError: a budget above the operator's, a deployment run naming a store it may not, or one that changes
            the worker's environment through its job variables (check_job_variables): exit 2, before anything is
            read or written.
    """
    check_job_variables()
    settings = load_settings(**overrides)
    budget, store = overrides.get("budget_usd"), overrides.get("store")
    if budget is None and (store is None or not deployment_run()):
        return settings
    operator = load_settings()
    if budget is not None and operator.budget_usd is not None and budget > operator.budget_usd:
        raise ConfigError(
            f"budget_usd {budget:g}: above the operator's cap of {operator.budget_usd:g} USD (the setting budget_usd, "
            f"TTSEVAL_BUDGET_USD or ttseval.toml); a run may only lower it: ask for {operator.budget_usd:g} or less"
        )
    allowed = [operator.store, *operator.allowed_stores]
    if store is not None and deployment_run() and not any(_same_store(store, s) for s in allowed):
        raise ConfigError(
            f"store {store!r}: a run started from a deployment or the Prefect UI writes only to the operator's store "
            "or one the setting allowed_stores lists; leave store empty for the operator's, or have whoever runs "
            "the worker add it to allowed_stores"
        )
    return settings


def confinement_roots(settings: Settings, dataset: str) -> list[str] | None:
    """The folders (and URI prefixes) a run may read when the setting confine_paths confines it: the dataset
    file's folder, then allowed_paths; None when the run is not confined."""
    if settings.confine_paths == "never" or (settings.confine_paths == "deployments" and not deployment_run()):
        return None
    folder = [str(Path(dataset).resolve().parent)] if Path(dataset).is_file() else []
    return folder + list(settings.allowed_paths)


def check_paths_confined(settings: Settings, flow: str, **paths: str | list[str] | None) -> None:
    """Refuse, before any work, a confined run (confine_paths) whose path parameters lie outside the setting
    allowed_paths and ttseval's bundled data: what a flow reads (seeds, references, ratings) or writes (a listening
    test's folder) on the worker. The message names the parameter and the path as given, nothing of the file.

    Raises:
        ConfigError: a path outside, each named by its parameter.
    """
    if settings.confine_paths == "never" or (settings.confine_paths == "deployments" and not deployment_run()):
        return
    from ttseval.corpus import DATA

    roots = [*settings.allowed_paths, str(DATA)]
    given = [(name, p) for name, value in paths.items() for p in ([value] if isinstance(value, str) else value or [])]
    outside = [f"{name} {p!r}" for name, p in given if not within(p, roots)]
    if outside:
        raise ConfigError(
            f"{flow}: {', '.join(outside)}: a run started from a deployment or the Prefect UI reads and writes "
            f"files only inside the setting allowed_paths ({', '.join(settings.allowed_paths) or 'none set'}) and "
            "ttseval's bundled data; have whoever runs the worker add the folder to allowed_paths"
        )


def check_confined(items: pd.DataFrame, systems: list[Spec], settings: Settings, *, dataset: str, source: str) -> None:
    """Refuse, before any work, a confined run (confinement_roots) whose dataset or `files` systems reference a
    file outside the dataset's folder and allowed_paths: a voice prompt or reference recording, a system's
    folder, manifest or clip (`../../../../etc/passwd`, an absolute path, a symbolic link that points out).

    Raises:
        DatasetError: items' paths outside, each named by row, item id, column and path.
        SpecError: a files system's folder, manifest or clips outside.
    """
    roots = confinement_roots(settings, dataset)
    if roots is None:
        return
    allowed = f"the dataset's folder and the setting allowed_paths: {', '.join(roots) or 'none'}"

    # the run's own store's audio is always readable: `datasets push` stores a pushed dataset's voice prompts there
    readable = [*roots, open_store(settings).display("blobs", "audio")]
    fix = (
        "Fix: move the files into the dataset's folder, or have whoever runs the worker add their folder to "
        "allowed_paths (confine_paths confines runs started from a deployment or the UI)"
    )
    problems = []
    for column in ("prompt_audio_uri", "reference_audio_uri"):
        for row, (item_id, path) in enumerate(zip(items["item_id"], items.get(column, [None] * len(items))), start=1):
            if isinstance(path, str) and path.strip() and not within(resolve_against(dataset, path), readable):
                problems.append(f"row {row} (item_id={item_id!r}) {column} {path!r}")
    if problems:
        raise DatasetError(
            f"dataset {source}: {len(problems)} path(s) lie outside what this run may read "
            f"({allowed}):\n- " + "\n- ".join(problems[:20]) + f"\n{fix}",
            source=source,
            problems=problems,
        )
    for spec in systems:
        listed = getattr(build_provider("tts", spec.canonical, settings), "referenced_paths", None)
        outside = [p for p in (listed() if callable(listed) else []) if not within(p, readable)]
        if outside:
            raise SpecError(
                f"system {spec.canonical!r} reads {len(outside)} path(s) outside what this run may read "
                f"({allowed}): {', '.join(map(repr, outside[:5]))}. {fix}",
                spec=spec.canonical,
            )


def check_judges(judges: list[str], settings: Settings, *, role: str = "pairwise") -> list[str]:
    """Build each judge once up front (a bad spec or missing API key fails before any work); canonical specs.

    `role` is 'pairwise' (judge_pairs) or 'instruction' (judge_instructions): a judge that cannot play it is
    refused here rather than failing every row of its stage."""
    method = {"pairwise": "judge_pairs", "instruction": "judge_instructions"}[role]
    for judge in judges:
        built = build_provider("judge", judge, settings)
        if not callable(getattr(built, method, None)):
            raise SpecError(
                f"judge {Spec.parse(judge).canonical!r} cannot judge {role} comparisons (it has no "
                f"{method}); choose another judge for --{'instruction-' if role == 'instruction' else ''}"
                "judges",
                spec=judge,
            )
        if getattr(built, "estimate_only", False):
            continue
        if (problem := getattr(built, "unreachable", lambda: None)()) is not None:
            raise SpecError(
                f"judge {Spec.parse(judge).canonical!r}: {problem}; start the server or fix base_url", spec=judge
            )
    return [Spec.parse(j).canonical for j in judges]


def register_items(store: ArtifactStore, run_id: str, items: pd.DataFrame) -> int:
    """Add the dataset's items to the run; an item id already there with other content is refused."""
    existing = store.read(run_id, "items")
    if not existing.empty:
        merged = items.merge(existing, on="item_id", suffixes=("", "_old"))
        changed = merged[(merged["text"] != merged["text_old"]) | (merged["language"] != merged["language_old"])]
        if not changed.empty:
            ids = ", ".join(changed["item_id"].head(5))
            raise DatasetError(
                f"run {run_id!r} already holds different text or language for item(s) {ids}; "
                "results would mix two datasets. Use a new --run-id, or give changed items new ids."
            )
    new = items[~items["item_id"].isin(existing["item_id"])]
    if not new.empty:
        store.write_part(run_id, "items", table_from_rows("items", new.to_dict("records")), label="items")
    return len(new)


def check_stage_tables(store: ArtifactStore, run_id: str, tables: tuple[str, ...]) -> None:
    """Check each stage table of the run against its declared rules (ttseval.core.validation, Great Expectations);
    a broken rule is a bug in the stage that wrote it, so the run fails (exit 1) naming table, rule and rows."""
    problems = []
    for table in tables:  # the columns the rules read, one table at a time, its memory given back after it
        problems += check_table(table, store.read(run_id, table, columns=rule_columns(table)))
        give_back_freed_memory()
    if problems:
        raise TTSEvalError("stage output breaks expectations:\n- " + "\n- ".join(problems))


def stored_systems(store: ArtifactStore, run_id: str) -> tuple[list[str], dict[str, str]]:
    """System ids of a stored run in the order they were first synthesized, and their specs."""
    synthesis = store.read(run_id, "synthesis")
    if synthesis.empty:
        raise TTSEvalError(
            f"run {run_id!r} in {store.display()} has no synthesis rows; runs there: "
            f"{', '.join(store.runs()) or 'none'}"
        )
    first = synthesis.sort_values("created_at", kind="stable").drop_duplicates("system_id")
    return first["system_id"].tolist(), dict(zip(first["system_id"], first["system_spec"]))


def git_commit() -> str | None:
    """The commit of the running code, when it runs from a git checkout."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).resolve().parent
        )
        return out.stdout.strip() or None
    return None


LOG_ONLY = ("command", "wall_s", "finished_at", "reused", "computed", "from_cache", "dask_started", "settings")
"""The fields of an evaluate's log record that are not its report's provenance lines (report_meta)."""


def report_meta(record: dict[str, Any]) -> dict[str, Any]:
    """A report's provenance lines (run, store, dataset and its hash, systems, recognisers, baseline, date, code
    version) from the evaluate's log record that wrote them."""
    return {k: v for k, v in record.items() if k not in LOG_ONLY}


def artifact_key(kind: str, run_id: str) -> str:
    """The Prefect artifact key of a run's `kind` artifact ('report', 'drift', 'progress'); keys allow only
    lower-case letters, digits and dashes."""
    return f"ttseval-{kind}-" + slug(run_id, "run")


def gpu_annotation(settings: Settings) -> contextlib.AbstractContextManager[None]:
    """Send the tasks submitted inside to Dask workers that declare the GPU resource, when settings.gpu."""
    if not settings.gpu:
        return contextlib.nullcontext()
    from dask.base import annotate

    return annotate(resources={"GPU": 1})


def cpu_workers_declared(settings: Settings) -> bool:
    """Whether a GPU run's cluster has workers declaring the resource CPU, where CPU-bound tasks then go (infra's
    compose file, Kubernetes manifests and local stack start them beside the GPU workers; a LocalCluster's
    workers declare both). A cluster without them runs CPU-bound tasks anywhere, rather than never."""
    if not settings.gpu:
        return False
    if not settings.dask_address:
        return True
    from distributed import Client

    # distributed's Client is unannotated
    with Client(settings.dask_address, timeout=20, set_as_default=False) as client:  # type: ignore[no-untyped-call]
        workers = client.scheduler_info(n_workers=-1)["workers"].values()
        return any("CPU" in w.get("resources", {}) for w in workers)


def placement(settings: Settings, on_gpu: bool, cpu_workers: bool) -> contextlib.AbstractContextManager[None]:
    """Where the tasks submitted inside run in a GPU run: a model that can use the GPU on the GPU workers, the
    rest on the CPU workers (when `cpu_workers`, from cpu_workers_declared); anywhere otherwise."""
    if on_gpu:
        return gpu_annotation(settings)
    if not (settings.gpu and cpu_workers):
        return contextlib.nullcontext()
    from dask.base import annotate

    return annotate(resources={"CPU": 1})


def judge_runs_on_gpu(judge: str, settings: Settings) -> bool:
    """Whether a judge's class declares it can use a GPU (a local audio LLM); remote and objective judges do not."""
    return bool(JUDGES.info(Spec.parse(judge).provider, settings.plugins.get("judge")).gpu)


def runs_on_gpu(system: str, settings: Settings) -> bool:
    """Whether a TTS system's class declares it can use a GPU (a transformers model): its synthesis shards then
    carry the GPU annotation when settings.gpu is set."""
    return bool(TTS.info(Spec.parse(system).provider, settings.plugins.get("tts")).gpu)
