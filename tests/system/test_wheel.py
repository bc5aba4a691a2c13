"""The package installs whole: a built wheel holds only `ttseval` and runs beside a user's own folders named like its
parts. The rest of the code's shape (imports, cheap commands, cited files) is tests/unit/test_layers.py."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.harness import BIN, ROOT, copy_package_tree


def test_a_built_wheel_holds_only_ttseval_and_runs_beside_a_users_own_metrics_and_tasks(tmp_path: Path) -> None:
    # A non-editable install (pip install ., not -e) must find the demo, the generation TOML and the seeds; its
    # top level is the one package `ttseval`; and a folder holding its own `metrics.py` and `tasks/` (as the
    # folder a Prefect worker runs a deployment from may) shadows nothing.
    source = copy_package_tree(tmp_path / "src")  # a copy, so the build leaves nothing in the checkout
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
