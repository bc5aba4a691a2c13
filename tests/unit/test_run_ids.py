"""Run ids name a folder of the store (runs/<run id>), so every way in refuses one that is not a single plain path
component, before anything is read or written: the CLI's --run-id (exit 2), the flows, the run lease and the store's
table paths."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from ttseval.core.errors import ConfigError
from ttseval.core.schemas import table_from_rows
from ttseval.core.store import ArtifactStore, check_run_id

GOOD = ["demo", "r1", "nightly-20261127T020000Z", "v2.1_final", "A" * 128]
BAD = ["../../escaped-run", "a/b", "..", ".hidden", "-flag", "_x", "", "with space", "tab\there", "A" * 129, "é"]


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def test_run_ids_take_one_plain_path_component() -> None:
    assert [check_run_id(r) for r in GOOD] == GOOD
    for run_id in BAD:
        with pytest.raises(ConfigError, match=r"names the folder runs/<run id> inside the store"):
            check_run_id(run_id)
    with pytest.raises(ConfigError, match=r"for example 'escaped-run'"):
        check_run_id("../../escaped-run")


def test_the_store_and_the_lease_refuse_an_escaping_run_id_and_write_nothing(tmp_path: Path) -> None:
    from ttseval.core.lease import RunLease

    store = ArtifactStore(str(tmp_path / "deep" / "store"))
    row = {
        "item_id": "a",
        "system_id": "s",
        "system_spec": "espeak-ng",
        "status": "ok",
        "created_at": datetime.now(UTC),
    }
    with pytest.raises(ConfigError):
        store.write_part("../../escaped-run", "synthesis", table_from_rows("synthesis", [row]))
    with pytest.raises(ConfigError):
        store.part_files("../escaped-run", "synthesis")
    with pytest.raises(ConfigError):
        RunLease(store, "../../escaped-run")
    assert files_under(tmp_path) == []


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "--dataset", "missing.jsonl"],
        ["backfill-judge", "--judge", "objective"],
        ["report"],
    ],
)
def test_every_command_refuses_an_escaping_run_id_with_exit_2_before_it_starts(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ttseval.cli import main

    store = tmp_path / "store"
    with pytest.raises(SystemExit) as exited:
        main([*command, "--store", str(store), "--run-id", "../../escaped-run"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --run-id: run id '../../escaped-run'" in err and "for example 'escaped-run'" in err
    assert files_under(tmp_path) == []


def test_the_flows_refuse_an_escaping_run_id_before_reading_anything(tmp_path: Path) -> None:
    """The flow functions themselves (what a deployment run calls, with the UI's parameters), called undecorated:
    the check is their first step, so no settings, store or dataset is touched."""
    from ttseval.flows.backfill_judge import backfill_judge
    from ttseval.flows.evaluate import evaluate
    from ttseval.flows.human_eval import human_eval

    for flow, kwargs in [
        (evaluate, {"dataset": str(tmp_path / "missing.jsonl")}),
        (backfill_judge, {"judge": "objective"}),
        (human_eval, {}),
    ]:
        with pytest.raises(ConfigError, match="run id '../../escaped-run'"):
            flow.fn(run_id="../../escaped-run", store=str(tmp_path / "store"), **kwargs)
    assert files_under(tmp_path) == []


def test_a_folder_under_runs_that_is_no_run_id_is_not_listed_as_a_run(tmp_path: Path) -> None:
    """An editor's `.ipynb_checkpoints` or a hand-made `my run` folder beside real runs is not a run: commands that
    go over every run (leaderboard, trends) read only run ids."""
    store = ArtifactStore(str(tmp_path / "store"))
    for name in ("r1", "nightly-20261127T020000Z", ".ipynb_checkpoints", "my run"):
        (tmp_path / "store" / "runs" / name).mkdir(parents=True)
    assert store.runs() == ["nightly-20261127T020000Z", "r1"]
