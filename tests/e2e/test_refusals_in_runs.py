"""Every refusal is clean, inside runs on the session's Prefect server: a user error raised inside a flow
run or a task run is logged as its message alone (no Prefect traceback) and the run is marked failed with it, and a
deployment run is confined to the dataset's folder. One flow run (an unreadable voice prompt, one item, espeak-ng)
covers errors raised inside a flow. The refusals before any server starts are tests/unit/test_refusals_cli.py."""

from __future__ import annotations

import json
import subprocess
import uuid
from datetime import UTC
from pathlib import Path

from tests.support.harness import BIN, ROOT, cli_env, run_cli
from tests.support.items import item_line


def test_a_user_error_inside_a_flow_run_prints_no_traceback_and_fails_the_run_with_the_message(
    prefect_api: str, tmp_path: Path
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL, temporary_settings

    (tmp_path / "not-audio.wav").write_text("hello", encoding="utf-8")
    (tmp_path / "items.jsonl").write_text(item_line(prompt_audio_uri="not-audio.wav"), encoding="utf-8")
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
    (data / "items.jsonl").write_text(item_line(prompt_audio_uri=up), encoding="utf-8")
    store = tmp_path / "store"
    parameters = {
        "dataset": str(data / "items.jsonl"),
        "systems": ["espeak-ng"],
        "store": str(store),
        "run_id": "confined",
        "judges": [],
    }
    # the operator's store (a deployment run may name no other: tests/unit/test_operator_limits.py)
    env = cli_env(prefect_api) | {"TTSEVAL_N_WORKERS": "1", "TTSEVAL_STORE": str(store)}
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
