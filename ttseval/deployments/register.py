"""Register the deployments in deployments/prefect.yaml with a Prefect server (`prefect --no-prompt deploy --all`).

    python -m ttseval.deployments.register --api-url http://127.0.0.1:4200/api [--pool ttseval-local] [--timezone UTC]
        [--store URI]   (the adhoc run form then lists the store's datasets and pushed systems: choices.py)

The work pool must exist (`ttseval stack up` creates it). Another pool name or nightly time zone is applied to
a rendered copy of prefect.yaml in a temporary folder; the repository's file is never rewritten.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from ttseval.core.config import NightlySeries, Settings
from ttseval.core.errors import ConfigError, TTSEvalError
from ttseval.core.paths import SOURCE_ROOT
from ttseval.core.telemetry import TELEMETRY_OFF
from ttseval.deployments import choices

PREFECT_FILE = Path(__file__).resolve().parent / "prefect.yaml"
DEFAULT_POOL = "ttseval-local"


class RegisterError(RuntimeError):
    """`prefect deploy` failed or did not create every deployment; the message carries its output."""


def _captured(output: str | bytes | None) -> str:
    """Output a TimeoutExpired captured: bytes even under text=True (on POSIX run() does not decode it), or None."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def _render(source: Path, pool: str | None, timezone: str | None, out_dir: Path) -> Path:
    config = yaml.safe_load(source.read_text())
    for deployment in config.get("deployments", []):
        if pool:
            deployment.setdefault("work_pool", {})
            deployment["work_pool"] = dict(deployment["work_pool"] or {}, name=pool)
        if timezone:
            for schedule in deployment.get("schedules") or []:
                schedule["timezone"] = timezone
    config.pop("definitions", None)  # anchors are already expanded
    target = out_dir / "prefect.yaml"
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target


def register(
    api_url: str,
    pool: str = DEFAULT_POOL,
    repo_root: Path | str = SOURCE_ROOT,
    *,
    timezone: str | None = None,
    prefect_file: Path | None = None,
    timeout_s: float = 600,
    store: str | None = None,
) -> list[str]:
    """Create or update every deployment of prefect.yaml on the server at `api_url`; returns 'flow/deployment' names.
    With `store`, the adhoc run form then lists that store's datasets and pushed systems (deployments/choices.py;
    a deploy rewrites the parameter schema from the flow's signature, so this comes after it).

    Runs with cwd=`repo_root` (entrypoints are relative to it) and TTSEVAL_REPO=`repo_root`. Raises RegisterError
    with the CLI's output when it fails or when a deployment of the file was not created.
    """
    repo_root = Path(repo_root).resolve()
    source = Path(prefect_file) if prefect_file else repo_root / "deployments" / "prefect.yaml"
    wanted = [d["name"] for d in yaml.safe_load(source.read_text()).get("deployments", [])]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= {
        "PREFECT_API_URL": api_url,
        "TTSEVAL_REPO": str(repo_root),
        "TTSEVAL_WORK_POOL": pool,
        "PYTHONPATH": os.pathsep.join([str(repo_root), *filter(None, [os.environ.get("PYTHONPATH")])]),
        **TELEMETRY_OFF,
        "COLUMNS": "400",
        "NO_COLOR": "1",
        "PREFECT_CLI_COLORS": "false",
        "PREFECT_CLI_WRAP_LINES": "false",
    }
    if "PREFECT_HOME" in os.environ:
        env["PREFECT_HOME"] = os.environ["PREFECT_HOME"]
    prefect = Path(sys.executable).parent / "prefect"
    with tempfile.TemporaryDirectory(prefix="ttseval-deploy-") as tmp:
        file = source if (pool == DEFAULT_POOL and not timezone) else _render(source, pool, timezone, Path(tmp))
        argv = [
            str(prefect) if prefect.exists() else "prefect",
            "--no-prompt",
            "deploy",
            "--all",
            "--prefect-file",
            str(file),
        ]
        try:
            out = subprocess.run(argv, cwd=repo_root, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            raise RegisterError(
                f"prefect deploy did not finish within {timeout_s:.0f} s:\n{_captured(e.stdout)}{_captured(e.stderr)}"
            ) from e
    output = out.stdout + out.stderr
    if out.returncode != 0:
        raise RegisterError(f"prefect deploy failed (exit code {out.returncode}):\n{output[-6000:]}")
    created = list(dict.fromkeys(re.findall(r"Deployment '([^'/]+/[^']+)' successfully created", output)))
    missing = [name for name in wanted if not any(c.split("/", 1)[1] == name for c in created)]
    if missing:
        raise RegisterError(f"prefect deploy did not create deployment(s) {', '.join(missing)}:\n{output[-6000:]}")
    if store and any(c == choices.DEPLOYMENT for c in created):
        try:
            choices.refresh_adhoc_form(api_url, store)
        except choices.ChoicesError as e:
            raise RegisterError(f"deployed, but the adhoc form's choices were not written: {e}") from e
    return created


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ttseval.deployments.register", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--api-url", default=os.environ.get("PREFECT_API_URL"), required=not os.environ.get("PREFECT_API_URL")
    )
    parser.add_argument("--pool", default=os.environ.get("TTSEVAL_WORK_POOL", DEFAULT_POOL))
    parser.add_argument("--timezone", default=None, help="IANA time zone of the nightly schedule (default UTC)")
    parser.add_argument("--repo-root", default=str(SOURCE_ROOT))
    parser.add_argument(
        "--store",
        default=os.environ.get("TTSEVAL_STORE"),
        help="store whose datasets and pushed systems the adhoc form lists (default TTSEVAL_STORE)",
    )
    args = parser.parse_args(argv)
    try:
        names = register(args.api_url, args.pool, args.repo_root, timezone=args.timezone, store=args.store)
    except RegisterError as e:
        print(f"register: {e}", file=sys.stderr)
        return 1
    print("\n".join(names))
    return 0


def register_series(
    api_url: str,
    settings: Settings,
    pool: str = DEFAULT_POOL,
    repo_root: Path | str = SOURCE_ROOT,
    *,
    timeout_s: float = 600,
) -> list[str]:
    """Register every series the settings file declares ([series.NAME]) as its own deployment of the nightly flow,
    `nightly/NAME`, on its schedule, with the one parameter series=NAME: the worker reads the rest from the same
    settings file, whose absolute path the deployment hands it (TTSEVAL_CONFIG in the flow run's environment).
    Returns the deployments' names.

    Checked before anything is registered, each refusal naming the series, the field and the fix (ConfigError, exit
    code 2): a series name that cannot name runs, a schedule that is not cron, a dataset that cannot be read here (a
    relative path is taken from `repo_root`, the deployment's working folder) or that is too small for any night to
    flag a change, an alert block the server does not hold.

    Raises:
        ConfigError: no series is declared, or one is refused as above.
        RegisterError: `prefect deploy` failed.
    """
    from ttseval.core.config import settings_file

    path = settings_file()
    if not settings.series or path is None:
        raise ConfigError(
            "no nightly series is declared: add one to the settings file (TTSEVAL_CONFIG, else ./ttseval.toml) as "
            '[series.NAME] with at least dataset = "items.jsonl" and systems = ["espeak-ng"] (docs: Monitoring)'
        )
    repo_root = Path(repo_root).resolve()
    for name, declared in settings.series.items():
        _check_declared(api_url, name, declared, settings, repo_root)
    config = yaml.safe_load(PREFECT_FILE.read_text())
    nightly = next(d for d in config["deployments"] if d["entrypoint"].endswith(":nightly"))
    config["deployments"] = [
        {
            **{k: nightly[k] for k in ("entrypoint", "tags")},
            # prefect.yaml's place for a flow run's environment: the pool's job variables
            "work_pool": {**nightly["work_pool"], "job_variables": {"env": {"TTSEVAL_CONFIG": str(path)}}},
            "name": name,
            "description": f"Nightly series {name} (declared in {path}): {declared.dataset}, systems "
            f"{', '.join(declared.systems)}; compared only with earlier nights of the series.",
            "schedules": [{"cron": declared.schedule, "timezone": declared.timezone, "active": True}],
            "parameters": {"series": name},
        }
        for name, declared in settings.series.items()
    ]
    config.pop("definitions", None)
    with tempfile.TemporaryDirectory(prefix="ttseval-series-") as tmp:
        rendered = Path(tmp) / "prefect.yaml"
        rendered.write_text(yaml.safe_dump(config, sort_keys=False))
        return register(api_url, pool, repo_root, prefect_file=rendered, timeout_s=timeout_s)


def _check_declared(api_url: str, name: str, declared: NightlySeries, settings: Settings, repo_root: Path) -> None:
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    from ttseval.corpus.items import read_items
    from ttseval.metrics.paired import items_needed, smallest_p
    from ttseval.tasks.trends import check_series

    check_series(name)
    where = f"series {name!r} ([series.{name}] in the settings file)"
    try:
        CronSchedule(cron=declared.schedule, timezone=declared.timezone)
    except ValidationError:
        raise ConfigError(
            f"{where}: schedule {declared.schedule!r} is not cron; give five fields, minute hour day month weekday, "
            "e.g. '30 1 * * *' for 01:30 every day"
        ) from None
    dataset = declared.dataset
    local = Path(dataset) if Path(dataset).is_absolute() else repo_root / dataset
    night = declared.apply(settings)
    try:
        items, _, _ = read_items(str(local) if local.exists() else dataset, night)
    except (OSError, ValueError, TTSEvalError) as e:  # a missing file, a bad one, no such dataset in the store
        raise ConfigError(
            f"{where}: dataset {dataset!r} cannot be read here ({e}); registration reads it as the worker will (a "
            f"relative path from {repo_root}, or NAME@VERSION in the store {settings.store})"
        ) from None
    needed = items_needed(1, night.alpha, night.permutation_resamples)
    if needed is None or len(items) < needed:
        floor = smallest_p(len(items), night.permutation_resamples)
        raise ConfigError(
            f"{where}: with {len(items)} items the smallest p a night's paired test can reach is {floor:.3g}, not "
            f"under alpha {night.alpha:g}, so no night could flag a change of any size; give the dataset at least "
            f"{needed} items (more with several systems and recognisers: each night's drift report says how many)"
            if needed is not None
            else f"{where}: no item count lets a test flag at alpha {night.alpha:g} with permutation_resamples "
            f"{night.permutation_resamples}; raise permutation_resamples"
        )
    for block in declared.alert_blocks if declared.alert_blocks is not None else settings.alert_blocks:
        slug, _, block_name = block.partition("/")
        if not (slug and block_name) or not _block_exists(api_url, slug, block_name):
            raise ConfigError(
                f"{where}: alert block {block!r} does not exist on the Prefect server {api_url}; create it there "
                "(the UI's Blocks page, or a block's .save() in Python: docs, Monitoring) as 'block-type-slug/"
                "block-name', or leave it out of alert_blocks"
            )


def _block_exists(api_url: str, slug: str, name: str) -> bool:
    """Whether the Prefect server holds block document `name` of block type `slug`.

    Raises:
        ConfigError: the server does not answer.
    """
    import httpx

    url = f"{api_url.rstrip('/')}/block_types/slug/{slug}/block_documents/name/{name}"
    try:
        response = httpx.get(url, timeout=30)
    except httpx.HTTPError as e:
        raise ConfigError(f"the Prefect server {api_url} does not answer ({e}); start it or fix --api-url") from None
    return response.status_code == 200


if __name__ == "__main__":
    sys.exit(main())
