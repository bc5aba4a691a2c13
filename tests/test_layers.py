"""The shape of the code: imports point one way, the CLI's cheap commands stay cheap, the package installs
whole, and the repository cites no file it does not hold."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


PARTS = sorted(p.name for p in (ROOT / "ttseval").iterdir() if (p / "__init__.py").is_file())
"""The parts of the one package, `ttseval.<part>`, each the folder ttseval/<part>/."""


def _copy_tree(target: Path) -> Path:
    """The package folder, pyproject.toml and README of the working tree, copied to `target`."""
    import shutil

    shutil.copytree(ROOT / "ttseval", target / "ttseval", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, target / name)
    return target


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
    tree = _copy_tree(tmp_path)
    store = tree / "ttseval" / "core" / "store.py"
    store.write_text(store.read_text() + "\n\ndef _bad():\n    from ttseval.flows.evaluate import evaluate  # noqa\n")
    out = _lint_imports(tree)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "ttseval.core.store -> ttseval.flows.evaluate" in out.stdout


def test_an_import_circle_is_caught(tmp_path: Path) -> None:
    # The acyclic contract is not vacuous: a copy of the tree where the settings import the store (which imports
    # the settings) breaks it, naming the import that closes the circle.
    tree = _copy_tree(tmp_path)
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
    # distributed and prefect_dask are about 0.5 s of a re-run's 5 s (issue 31): the flows' task runner imports
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


def test_a_built_wheel_holds_only_ttseval_and_runs_beside_a_users_own_metrics_and_tasks(tmp_path: Path) -> None:
    # A non-editable install (pip install ., not -e) must find the demo, the generation TOML and the seeds; its
    # top level is the one package `ttseval`; and a folder holding its own `metrics.py` and `tasks/` (as the
    # folder a Prefect worker runs a deployment from may) shadows nothing.
    source = _copy_tree(tmp_path / "src")  # a copy, so the build leaves nothing in the checkout
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = wheels.glob("ttseval-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {n.split("/")[0] for n in names} == {"ttseval", wheel.name.split("-py3")[0] + ".dist-info"}
    for data in (
        "corpus/data/demo.jsonl",
        "corpus/data/generation/emergenttts.toml",
        "corpus/data/generation/seeds.jsonl",
        "deployments/prefect.yaml",
        "tasks/report_html/app.js",
    ):
        assert f"ttseval/{data}" in names, data
    # every module in the wheel is the file its name gives in the source tree, and every module of the tree is in it
    modules = {n for n in names if n.endswith(".py")}
    assert {m for m in modules if not (ROOT / m).is_file()} == set()
    tracked = subprocess.run(
        ["git", "ls-files", "ttseval/*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert set(tracked) - modules == set()
    assert len(modules) > 150
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    user = tmp_path / "user"
    (user / "tasks").mkdir(parents=True)
    for own in (user / "metrics.py", user / "tasks" / "__init__.py", user / "flows.py", user / "corpus.py"):
        own.write_text("raise ImportError('the user\\'s own module was imported')\n")
    code = (
        "import sys, ttseval.corpus as corpus, ttseval.corpus.generation as g, ttseval.corpus.items as i\n"
        "import ttseval.flows.evaluate, ttseval.tasks.report, ttseval.metrics.wer\n"
        "assert sys.path[0] == '', sys.path[0]\n"
        "for m in (corpus, ttseval.flows.evaluate, ttseval.tasks.report, ttseval.metrics.wer):\n"
        f"    assert m.__file__.startswith({str(target)!r}), m.__file__\n"
        "spec = g.load_spec(); seeds = g.read_seeds(corpus.DEFAULT_SEEDS, spec)\n"
        "items = i.load_items(corpus.DEMO_DATASET)\n"
        "print(len(spec.categories), len(seeds), len(items))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=user,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(target), "PATH": str(BIN)},
    )
    assert out.returncode == 0, out.stderr
    n_categories, n_seeds, n_items = map(int, out.stdout.split())
    assert n_categories == 6 and n_seeds == 12 and n_items >= 55
