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


PACKAGES = ("ttseval", "corpus", "providers", "metrics", "tasks", "flows", "infra", "deployments")


def _copy_tree(target: Path) -> Path:
    """The packages, pyproject.toml and README of the working tree, copied to `target`."""
    import shutil

    for name in PACKAGES:
        shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, target / name)
    return target


def test_import_contracts_are_kept() -> None:
    # The contracts live in pyproject.toml ([tool.importlinter]); lint-imports exits 1 on a broken one.
    out = subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 2 kept, 0 broken." in out.stdout


def test_a_layer_violation_is_caught(tmp_path: Path) -> None:
    # The contract is not vacuous: a copy of the tree where the core imports a flow breaks it.
    _copy_tree(tmp_path)
    store = tmp_path / "ttseval" / "store.py"
    store.write_text(store.read_text() + "\n\ndef _bad():\n    from flows.evaluate import evaluate  # noqa\n")
    out = subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": str(tmp_path), "PATH": str(BIN)})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "ttseval.store -> flows.evaluate" in out.stdout


@pytest.mark.parametrize("argv", [["--help"], ["providers"], ["evaluate", "--help"]])
def test_cheap_commands_import_neither_prefect_nor_dask(argv: list[str]) -> None:
    code = ("import sys\nfrom ttseval.cli import main\ntry:\n    main(%r)\nexcept SystemExit:\n    pass\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'dask', 'distributed', 'torch'})\n"
            "print('HEAVY', heavy)\n" % argv)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout, out.stdout
    assert "usage: ttseval" in out.stdout or "tts:" in out.stdout


def test_no_file_cites_a_markdown_file_the_repository_lacks() -> None:
    # README, pyproject.toml, a test and the compose file cited a stack notes file never in the repository.
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    present = {Path(p).name for p in tracked}
    cited = {}
    for path in tracked:
        if Path(path).suffix not in {".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".txt", ""}:
            continue
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        for name in re.findall(r"\b([A-Z][A-Z0-9_-]+\.md)\b", text):
            if name not in present:
                cited.setdefault(name, []).append(path)
    assert cited == {}


def test_a_built_wheel_holds_every_data_file_and_runs_from_it(tmp_path: Path) -> None:
    # A non-editable install (pip install ., not -e) must find the demo, the generation TOML and the seeds.
    source = _copy_tree(tmp_path / "src")  # a copy, so the build leaves nothing in the checkout
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(source)], check=True, capture_output=True, timeout=300)
    [wheel] = wheels.glob("ttseval-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in ("corpus/data/demo.jsonl", "corpus/data/generation/emergenttts.toml",
                 "corpus/data/generation/seeds.jsonl", "deployments/prefect.yaml"):
        assert data in names, data
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    code = ("import corpus, corpus.generation as g, corpus.items as i\n"
            "assert corpus.__file__.startswith(%r), corpus.__file__\n"
            "spec = g.load_spec(); seeds = g.read_seeds(corpus.DEFAULT_SEEDS, spec)\n"
            "items = i.load_items(corpus.DEMO_DATASET)\n"
            "print(len(spec.categories), len(seeds), len(items))\n" % str(target))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(target), "PATH": str(BIN)})
    assert out.returncode == 0, out.stderr
    n_categories, n_seeds, n_items = map(int, out.stdout.split())
    assert n_categories == 6 and n_seeds == 12 and n_items >= 55
