"""The shape of the code: imports point one way, the CLI's cheap commands stay cheap, and the repository cites no file
it does not hold. That the package installs whole (a built wheel) is tests/system/test_wheel.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import BIN, ROOT, copy_package_tree

PARTS = sorted(p.name for p in (ROOT / "ttseval").iterdir() if (p / "__init__.py").is_file())
"""The parts of the one package, `ttseval.<part>`, each the folder ttseval/<part>/."""


def _lint_imports(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(tree), "PATH": str(BIN)},
    )


def test_import_contracts_are_kept(tmp_path: Path) -> None:
    # The contracts live in pyproject.toml ([tool.importlinter]), with no ignore_imports: the CLI is the top layer.
    out = _lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 3 kept, 0 broken." in out.stdout
    assert "ignore_imports" not in (ROOT / "pyproject.toml").read_text()


def test_a_layer_violation_is_caught(tmp_path: Path) -> None:
    # The contract is not vacuous: a copy of the tree where the core imports a flow breaks it.
    tree = copy_package_tree(tmp_path)
    store = tree / "ttseval" / "core" / "store.py"
    store.write_text(store.read_text() + "\n\ndef _bad():\n    from ttseval.flows.evaluate import evaluate  # noqa\n")
    out = _lint_imports(tree)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "ttseval.core.store -> ttseval.flows.evaluate" in out.stdout


def test_an_import_circle_is_caught(tmp_path: Path) -> None:
    # The acyclic contract is not vacuous: a copy of the tree where the settings import the store (which imports
    # the settings) breaks it, naming the import that closes the circle.
    tree = copy_package_tree(tmp_path)
    config = tree / "ttseval" / "core" / "config.py"
    config.write_text(
        config.read_text() + "\n\ndef _bad():\n    from ttseval.core.store import ArtifactStore  # noqa\n"
    )
    out = _lint_imports(tree)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "No import circles" in out.stdout and "BROKEN" in out.stdout
    assert "No cycles are allowed in ttseval.core." in out.stdout and "- .store -> .config (1 import)" in out.stdout


def test_nothing_imports_a_part_by_its_old_top_level_name() -> None:
    # Before the one import root, `flows`, `tasks`, `metrics`, ... were top-level packages; an import of one by
    # that name would now find a user's own module of the name, or nothing.
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    parts = "|".join(PARTS)
    pattern = re.compile(rf"^\s*(?:from|import) (?:{parts})(?:\.|\s|$)", re.M)
    found = {path: pattern.findall((ROOT / path).read_text(encoding="utf-8")) for path in tracked}
    assert {p: f for p, f in found.items() if f} == {}
    assert len(tracked) > 200


@pytest.mark.parametrize("argv", [["--help"], ["providers"], ["evaluate", "--help"]])
def test_cheap_commands_import_neither_prefect_nor_dask(argv: list[str]) -> None:
    code = (
        f"import sys\nfrom ttseval.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'dask', 'distributed', 'torch'})\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout, out.stdout
    assert "usage: ttseval" in out.stdout or "tts:" in out.stdout


def test_the_flows_import_dask_only_when_a_task_is_submitted() -> None:
    # distributed and prefect_dask are about 0.5 s of a re-run's 5 s: the flows' task runner imports
    # them at its first submitted task (flows/runner.py SettingsDaskTaskRunner), so a re-run with nothing to
    # compute never does; building the runner the CLI builds does not either
    code = (
        "import sys\nimport ttseval.flows.evaluate, ttseval.flows.backfill_judge, ttseval.flows.nightly\n"
        "from ttseval.core.config import load_settings\nfrom ttseval.flows.runner import task_runner\n"
        "runner = task_runner(load_settings()).__enter__()\nrunner.__exit__(None, None, None)\n"
        "print('PREFECT', 'prefect' in sys.modules)\n"
        "print('DASK', sorted({m.split('.')[0] for m in sys.modules} & {'dask', 'distributed', 'prefect_dask'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "PREFECT True" in out.stdout and "DASK []" in out.stdout, out.stdout


def test_no_file_cites_a_markdown_file_the_repository_lacks() -> None:
    # README, pyproject.toml, a test and the compose file cited a stack notes file never in the repository.
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    present = {Path(p).name for p in tracked}
    cited = {}
    for path in tracked:
        if (
            Path(path).suffix not in {".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".txt", ""}
            or (ROOT / path).is_dir()
        ):
            continue  # a link at the root (flows, tasks, ...) is a folder
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        for name in re.findall(r"\b([A-Z][A-Z0-9_-]+\.md)\b", text):
            if name not in present:
                cited.setdefault(name, []).append(path)
    assert cited == {}
