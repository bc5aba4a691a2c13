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


if __name__ == "__main__":
    sys.exit(main())
