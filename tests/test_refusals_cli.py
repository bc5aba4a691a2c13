"""Every refusal is clean (issue 30): the documented refusals run through the real `ttseval` command end with
exit 2, our message and no traceback anywhere in stdout or stderr; a user error raised inside a flow run is
logged as its message alone (no Prefect traceback) and the run is marked failed with it. Refusals before any
Prefect server starts are cheap; one flow run (an unreadable voice prompt, one item, espeak-ng) covers errors
raised inside a flow."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import uuid
from datetime import UTC
from pathlib import Path

import pytest

from tests.conftest import BIN, ROOT, cli_env, run_cli
from ttseval.core.telemetry import TELEMETRY_OFF


def _item(**fields: object) -> str:
    return (
        json.dumps(
            {"item_id": "a", "text": "Hello there.", "language": "en", "category": "q", "depth": 0} | fields,
            ensure_ascii=False,
        )
        + "\n"
    )


def _evaluate(dataset: str, systems: str = "espeak-ng") -> list[str]:
    return ["evaluate", "--dataset", dataset, "--systems", systems, "--store", "store", "--run-id", "r", "--judges", ""]


def _mos_forms(folder: Path) -> Path:
    from ttseval.metrics.mos_forms import FORM_COLUMNS, counterbalanced_forms

    forms = folder / "forms"
    forms.mkdir()
    counterbalanced_forms(["i0"], ["a"], repeats=0, seed=0)[list(FORM_COLUMNS)].to_csv(forms / "key.csv", index=False)
    (forms / "manifest.json").write_text(json.dumps({"run_id": "r", "language": "en", "forms": 1, "items": 1}))
    return forms


# name -> (files to write in the working folder, the command's arguments, extra environment, the message's words)
REFUSALS: dict[str, tuple[dict[str, str], list[str], dict[str, str], str]] = {
    "items: text a JSON list": (
        {"items.jsonl": _item(text=["Hello", "there"])},
        _evaluate("items.jsonl"),
        {},
        "rule 'text is a string' (column text) fails on 1 row(s): row 1 (item_id='a')",
    ),
    "items: depth a JSON object": (
        {"items.jsonl": _item(depth={"d": 1})},
        _evaluate("items.jsonl"),
        {},
        "rule 'depth is an integer' (column depth)",
    ),
    "items: an id with U+202E": (
        {"items.jsonl": _item(item_id="abc\u202edef")},
        _evaluate("items.jsonl"),
        {},
        "rule 'item_id has no invisible or direction-changing characters'",
    ),
    "items: a 5,000-character id": (
        {"items.jsonl": _item(item_id="x" * 5_000)},
        _evaluate("items.jsonl"),
        {},
        "rule 'item_id is at most 128 characters (200 bytes as UTF-8)'",
    ),
    "items: no such file": ({}, _evaluate("absent.jsonl"), {}, "dataset 'absent.jsonl' does not exist"),
    "an unknown system": (
        {"items.jsonl": _item()},
        _evaluate("items.jsonl", "pipr:joe"),
        {},
        "unknown tts provider 'pipr'; did you mean 'piper'?",
    ),
    "a missing API key": ({"items.jsonl": _item()}, _evaluate("items.jsonl", "openai:alloy"), {}, "OPENAI_API_KEY"),
    "a malformed settings file": (
        {"items.jsonl": _item(), "bad.toml": 'shard_size = "eight"\n'},
        _evaluate("items.jsonl"),
        {"TTSEVAL_CONFIG": "bad.toml"},
        "shard_size",
    ),
    "items: French under the Seed-TTS-eval WER protocol": (
        {
            "items.jsonl": _item() + _item(item_id="b", language="fr-FR"),
            "seed.toml": 'wer_protocol = "seed-tts-eval"\n',
        },
        _evaluate("items.jsonl"),
        {"TTSEVAL_CONFIG": "seed.toml"},
        (
            "rule 'language is en or zh under wer_protocol = \"seed-tts-eval\"' (column language) fails on 1 row(s): "
            "row 2 (item_id='b', language='fr-FR'). Fix: leave those items out of this run, or set wer_protocol = "
            '"ttseval"'
        ),
    ),
    "MOS ratings: a score that is a word": (
        {"ratings.csv": "rater_id,form,position,score\nr1,1,1,good\n"},
        ["mos-analyze", "--forms", "forms", "--ratings", "ratings.csv"],
        {},
        "column score must be a number from 1 to 5 (or empty: not rated); 1 row(s) are not: row 1 (score='good')",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_each_documented_refusal_exits_2_with_our_message_and_no_traceback(case: str, tmp_path: Path) -> None:
    files, args, extra, message = REFUSALS[case]
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    if "mos-analyze" in args:
        _mos_forms(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "OPENAI_", "PREFECT_API"))}
    env |= {"PYTHONPATH": str(ROOT), **TELEMETRY_OFF, **{k: str(tmp_path / v) for k, v in extra.items()}}
    result = subprocess.run(
        [str(BIN / "ttseval"), *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert message in result.stderr, result.stderr[-3000:]
    assert result.stderr.count("ttseval: error: ") == 1
    assert not (tmp_path / "store").exists()  # nothing written


def test_a_user_error_is_logged_without_traceback_and_a_bug_keeps_it(caplog: pytest.LogCaptureFixture) -> None:
    import ttseval.tasks.logs  # noqa: F401 - installs the filter on Prefect's run loggers
    from ttseval.core.errors import DatasetError, StoreUnwritableError

    for name in ("prefect.flow_runs", "prefect.task_runs"):
        run_logger = logging.getLogger(name)
        for error in (DatasetError("row 1: bad"), StoreUnwritableError("the store is full"), KeyError("bug")):
            caplog.clear()
            try:
                raise error
            except Exception as e:
                run_logger.exception("Encountered exception during execution: %r", e)
            (record,) = caplog.records
            if isinstance(error, KeyError):  # a bug: its traceback is what someone must read
                assert record.exc_info is not None and "Traceback" in caplog.text
            else:
                assert record.exc_info is None and "Traceback" not in caplog.text
                assert record.getMessage() == f"refused: {error}"


def test_a_user_error_inside_a_flow_run_prints_no_traceback_and_fails_the_run_with_the_message(
    prefect_api: str, tmp_path: Path
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL, temporary_settings

    (tmp_path / "not-audio.wav").write_text("hello", encoding="utf-8")
    (tmp_path / "items.jsonl").write_text(_item(prompt_audio_uri="not-audio.wav"), encoding="utf-8")
    run_id = f"prompt-{uuid.uuid4().hex[:8]}"
    args = [
        "evaluate",
        "--dataset",
        "items.jsonl",
        "--systems",
        "espeak-ng",
        "--store",
        "store",
        "--run-id",
        run_id,
        "--judges",
        "",
    ]
    result = run_cli(args, cli_env(prefect_api), cwd=tmp_path, timeout_s=300)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    message = "dataset items.jsonl: 1 voice prompt clip(s) cannot be read:\n- row 1 (item_id='a') prompt_audio_uri"
    assert f"ttseval: error: {message}" in result.stderr
    assert f"refused: {message}" in result.stderr  # the flow run's log line: the message alone
    assert not (tmp_path / "store" / "runs" / run_id).exists()
    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as client:
        newest = client.read_flow_runs(limit=200, sort=FlowRunSort.EXPECTED_START_TIME_DESC)  # the server is shared
        runs = [r for r in newest if r.parameters.get("run_id") == run_id]
    assert len(runs) == 1 and runs[0].state.is_failed()
    assert message in runs[0].state.message


DEPLOYMENT_RUN = """
import asyncio, json, sys
from prefect import get_client
from prefect.runner import Runner
from ttseval.flows.evaluate import evaluate

parameters = json.loads(sys.argv[1])
deployment_id = evaluate.to_deployment(name="issue-30-confinement").apply()


async def main():
    async with get_client() as client:
        run = await client.create_flow_run_from_deployment(deployment_id, parameters=parameters)
    await Runner().execute_flow_run(run.id)  # the way a worker runs it: a process of its own, from the deployment
    async with get_client() as client:
        run = await client.read_flow_run(run.id)
    print("STATE", json.dumps({"type": run.state.type.value, "message": run.state.message,
                               "deployment_id": str(run.deployment_id)}))

asyncio.run(main())
"""


def test_a_deployment_run_is_confined_to_the_dataset_folder_and_refuses_without_traceback(
    prefect_api: str, tmp_path: Path
) -> None:
    """A real deployment run (created from the evaluate flow's deployment, executed by a Prefect runner in a process
    of its own, as a worker does): a prompt outside the dataset's folder is refused before any work, the run is
    Failed with the message, and nothing of it prints a traceback."""
    data = tmp_path / "data"
    data.mkdir()
    up = "../" * 30 + "etc/passwd"
    (data / "items.jsonl").write_text(_item(prompt_audio_uri=up), encoding="utf-8")
    store = tmp_path / "store"
    parameters = {
        "dataset": str(data / "items.jsonl"),
        "systems": ["espeak-ng"],
        "store": str(store),
        "run_id": "confined",
        "judges": [],
    }
    env = cli_env(prefect_api) | {"TTSEVAL_N_WORKERS": "1"}
    result = subprocess.run(
        [str(BIN / "python"), "-c", DEPLOYMENT_RUN, json.dumps(parameters)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    state = json.loads(output.split("STATE ", 1)[1].splitlines()[0])
    assert state["type"] == "FAILED" and state["deployment_id"] != "None", state
    message = (
        f"dataset {data / 'items.jsonl'}: 1 path(s) lie outside what this run may read (the dataset's folder "
        f"and the setting allowed_paths: {data})"
    )
    assert message in state["message"] and "row 1 (item_id='a') prompt_audio_uri '/etc/passwd'" in state["message"]
    assert f"refused: {message}" in output  # the flow run's log line
    assert "Traceback" not in output, output[-4000:]
    assert not (store / "runs" / "confined").exists()


def test_a_user_error_inside_a_task_run_of_a_flow_prints_no_traceback(prefect_api: str, tmp_path: Path) -> None:
    """human-eval analyze ingests inside the human_eval flow, in a Prefect task: a results file for a listening
    test the run does not have is a SpecError raised in the task run, then in the flow run; both log it alone."""
    from datetime import datetime

    from ttseval.core.schemas import table_from_rows
    from ttseval.core.store import ArtifactStore

    row = {
        "item_id": "a",
        "system_id": "s",
        "system_spec": "espeak-ng",
        "status": "failed",
        "created_at": datetime.now(UTC),
    }
    ArtifactStore(str(tmp_path / "store")).write_part(
        "r", "synthesis", table_from_rows("synthesis", [row]), label="s"
    )  # a run, without a listening test
    (tmp_path / "results.csv").write_text("rater_id,trial_id,stimulus,score\nr1,p1,s1.wav,70\n", encoding="utf-8")
    result = run_cli(
        ["human-eval", "analyze", "--store", "store", "--run-id", "r", "--test-id", "t1", "results.csv"],
        cli_env(prefect_api),
        cwd=tmp_path,
        timeout_s=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    message = "run 'r' has no listening test 't1'; export one with ttseval human-eval export"
    assert f"ttseval: error: {message}" in result.stderr, result.stderr[-3000:]
    assert output.count(f"refused: {message}") == 2, output[-3000:]  # the task run's log line, the flow run's
