"""An evaluate of a pushed dataset and a pushed system: pushed in-process (ttseval.cli.main), then run
by name (NAME@VERSION, pushed:LABEL) through the real command on the shared Dask cluster, with the user's files
gone. The push commands themselves are tests/unit/test_datasets_push.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.support.harness import demo_items, run_cli
from tests.support.push import clips, ttseval

ITEMS = ("emo-a-d0", "que-a-d0", "que-a-d1", "mul-fr")


@pytest.fixture(autouse=True)
def _no_prefect_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)  # the form refresh is the UI test's (tests/system/test_ui.py)
    monkeypatch.delenv("TTSEVAL_STORE", raising=False)


def test_evaluate_a_pushed_dataset_and_system(
    shared_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = tmp_path / "store"
    demo_items(tmp_path / "mine.jsonl", ITEMS[:2])
    assert (
        ttseval(
            capsys,
            "datasets",
            "push",
            str(tmp_path / "mine.jsonl"),
            "--name",
            "mine",
            "--version",
            "v1",
            "--store",
            str(store),
        )[0]
        == 0
    )
    clips(tmp_path / "clips", [ITEMS[0]])  # the second item's clip was never made
    assert (
        ttseval(capsys, "systems", "push", "--label", "rec", "--dir", str(tmp_path / "clips"), "--store", str(store))[0]
        == 0
    )
    shutil.rmtree(tmp_path / "clips")
    (tmp_path / "mine.jsonl").unlink()  # nothing of the user's side is read by the run
    pushed = json.loads((store / "systems/rec/manifest.json").read_text())["clips"]
    # an unknown label is refused before any work, naming what is there
    bad = run_cli(
        [
            "evaluate",
            "--dataset",
            "mine@v1",
            "--systems",
            "pushed:rex,espeak-ng",
            "--store",
            str(store),
            "--run-id",
            "bad",
        ],
        shared_env,
        cwd=tmp_path,
        timeout_s=300,
    )
    assert bad.returncode == 2, bad.stderr[-2000:]
    assert f"no system 'rex' was pushed to store {store} (pushed systems: pushed:rec)" in bad.stderr
    assert not (store / "runs/bad").exists()
    out = run_cli(
        [
            "evaluate",
            "--dataset",
            "mine@v1",
            "--systems",
            "pushed:rec,espeak-ng",
            "--store",
            str(store),
            "--run-id",
            "r1",
        ],
        shared_env,
        cwd=tmp_path,
        timeout_s=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    synthesis = pd.read_parquet(store / "runs/r1/synthesis")
    mine = synthesis[synthesis["system_spec"] == "pushed:rec"].set_index("item_id")
    assert mine.loc[ITEMS[0], "status"] == "ok" and mine.loc[ITEMS[0], "audio_sha256"] == pushed[ITEMS[0]]
    assert mine.loc[ITEMS[1], "status"] == "failed"
    assert "no clip was pushed for it" in mine.loc[ITEMS[1], "error_message"]
    report = (store / "runs/r1/report.md").read_text()
    assert "- dataset: mine@v1" in report and "- systems: pushed:rec, espeak-ng" in report
