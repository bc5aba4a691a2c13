"""What a run's parameters may not override: the operator's budget cap (any run may only lower it) and, for a run
started from a deployment or the Prefect UI, the operator's store (or one of allowed_stores). Prefect's runtime says
whether a run came from a deployment; the tests set its environment variable, as tests/unit/test_hostile_inputs.py
does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttseval.core.errors import ConfigError, SpecError

DEPLOYMENT = {"PREFECT__RUNTIME__DEPLOYMENT__ID": "5f1c3a52-0000-4000-8000-000000000053"}


def test_a_runs_budget_only_lowers_the_operators_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from ttseval.flows.common import run_settings

    monkeypatch.delenv("TTSEVAL_BUDGET_USD", raising=False)
    assert run_settings(budget_usd=5.0).budget_usd == 5.0  # no cap set: the run's own
    monkeypatch.setenv("TTSEVAL_BUDGET_USD", "1")
    assert run_settings().budget_usd == 1.0
    assert run_settings(budget_usd=0.25).budget_usd == 0.25
    assert run_settings(budget_usd=1.0).budget_usd == 1.0
    with pytest.raises(ConfigError, match=r"budget_usd 1e\+06: above the operator's cap of 1 USD .* ask for 1 or less"):
        run_settings(budget_usd=1e6)
    for key, value in DEPLOYMENT.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match="above the operator's cap"):
        run_settings(budget_usd=2.0)


def test_a_deployment_run_writes_only_to_the_operators_store_or_an_allowed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttseval.flows.common import run_settings

    operator = tmp_path / "operator-store"
    monkeypatch.setenv("TTSEVAL_STORE", str(operator))
    monkeypatch.delenv("TTSEVAL_ALLOWED_STORES", raising=False)
    assert run_settings(store="/etc").store == "/etc"  # a command-line run: the user's own store
    for key, value in DEPLOYMENT.items():
        monkeypatch.setenv(key, value)
    for elsewhere in ["/etc", str(tmp_path / "other"), "s3://someone-elses-bucket/runs"]:
        with pytest.raises(ConfigError, match=r"writes only to the operator's store or one the setting allowed_stores"):
            run_settings(store=elsewhere)
    assert Path(run_settings().store) == operator
    assert Path(run_settings(store=str(operator / "sub" / "..")).store).resolve() == operator  # the same folder
    monkeypatch.setenv("TTSEVAL_ALLOWED_STORES", '["s3://team-bucket/tts/"]')
    assert run_settings(store="s3://team-bucket/tts").store.rstrip("/") == "s3://team-bucket/tts"


def test_the_flows_refuse_a_store_or_budget_beyond_the_operators_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttseval.flows.evaluate import evaluate

    operator = tmp_path / "operator-store"
    monkeypatch.setenv("TTSEVAL_STORE", str(operator))
    monkeypatch.setenv("TTSEVAL_BUDGET_USD", "1")
    for key, value in DEPLOYMENT.items():
        monkeypatch.setenv(key, value)
    escape = tmp_path / "escape"
    with pytest.raises(ConfigError, match="allowed_stores"):
        evaluate.fn(store=str(escape), run_id="r")
    with pytest.raises(ConfigError, match="above the operator's cap"):
        evaluate.fn(budget_usd=1e6, run_id="r")
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == []


def test_a_deployment_run_that_sets_its_own_environment_command_or_folder_is_refused_before_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A custom run's job variables (Prefect's runtime holds the run's own, not its deployment's) may not change
    the worker's environment, command or working folder: every flow refuses it in run_settings, naming the
    variables, never their values; a run without them, or a command-line run, goes on."""
    from prefect.runtime import flow_run

    from ttseval.flows.common import run_settings
    from ttseval.flows.generate_dataset import generate_dataset

    monkeypatch.setenv("TTSEVAL_STORE", str(tmp_path / "store"))
    custom = {"env": {"TTSEVAL_CONFIG": "/srv/other.toml", "AWS_SECRET_ACCESS_KEY": "canary-secret"}, "command": "sh"}
    monkeypatch.setitem(flow_run.FIELDS, "job_variables", lambda: custom)
    assert run_settings().store == str(tmp_path / "store")  # a command-line run is not a deployment's
    for key, value in DEPLOYMENT.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError) as refused:
        run_settings()
    assert str(refused.value).startswith(
        "job variables env TTSEVAL_CONFIG, env AWS_SECRET_ACCESS_KEY, command: a run started from a deployment"
    )
    assert "canary-secret" not in str(refused.value) and "/srv" not in str(refused.value)
    with pytest.raises(ConfigError, match="may not change the worker's environment"):
        generate_dataset.fn(name="d", version="1")
    assert not (tmp_path / "store").exists()
    for harmless in ({}, {"env": {}}, {"stream_output": False}, None):
        monkeypatch.setitem(flow_run.FIELDS, "job_variables", lambda harmless=harmless: harmless)
        assert run_settings().store == str(tmp_path / "store")


def test_the_stacks_pool_fixes_the_command_and_folder_a_custom_run_could_set() -> None:
    """The stack's work pool template: Prefect's process template with `command` and `working_dir` fixed to
    Prefect's defaults and gone from the variables a run may set; the environment stays a variable (a series'
    deployment sets TTSEVAL_CONFIG; check_job_variables refuses a run's own)."""
    from prefect.workers.process import ProcessWorker

    from ttseval.infra.stack import pool_template

    template, default = pool_template(), ProcessWorker.get_default_base_job_template()
    assert template["job_configuration"] == {**default["job_configuration"], "command": None, "working_dir": None}
    assert set(template["variables"]["properties"]) == set(default["variables"]["properties"]) - {
        "command",
        "working_dir",
    }
    assert template["job_configuration"]["env"] == "{{ env }}"


def test_the_command_line_refuses_a_budget_above_the_cap_dry_run_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ttseval.cli import main

    monkeypatch.setenv("TTSEVAL_BUDGET_USD", "1")
    for extra in ([], ["--dry-run"]):
        code = main(["evaluate", "--budget-usd", "5", "--store", str(tmp_path / "s"), *extra])
        assert code == 2 and "budget_usd 5: above the operator's cap of 1 USD" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_a_deployment_runs_path_parameters_stay_inside_allowed_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a flow reads or writes on the worker besides the store (a listening test's folder and ratings, seeds,
    categories, reference manifests) lies inside allowed_paths or ttseval's bundled data, or the run is refused
    before anything happens, its message naming the parameter and nothing of the file."""
    from ttseval.flows.generate_dataset import generate_dataset
    from ttseval.flows.generate_instructions import generate_instructions
    from ttseval.flows.human_eval import human_eval

    monkeypatch.setenv("TTSEVAL_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("TTSEVAL_ALLOWED_PATHS", raising=False)
    for key, value in DEPLOYMENT.items():
        monkeypatch.setenv(key, value)
    refusals = [
        (lambda: human_eval.fn(run_id="r", step="export", out="/etc/cron.d"), "human_eval: out '/etc/cron.d'"),
        (lambda: human_eval.fn(run_id="r", results=["/etc/shadow"]), "human_eval: results '/etc/shadow'"),
        (lambda: generate_dataset.fn(seeds="/etc/passwd"), "generate_dataset: seeds '/etc/passwd'"),
        (lambda: generate_instructions.fn(references="../../etc/hosts"), "references '../../etc/hosts'"),
    ]
    for call, named in refusals:
        with pytest.raises(ConfigError, match="reads and writes files only inside the setting allowed_paths") as no:
            call()
        assert named in str(no.value) and "root:" not in str(no.value)
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == []
    # whoever runs the worker widens it; the bundled seeds are always readable
    monkeypatch.setenv("TTSEVAL_ALLOWED_PATHS", json.dumps([str(tmp_path / "tests")]))
    with pytest.raises(SpecError, match="run 'r' is not in store"):  # past the check: there is no such run
        human_eval.fn(run_id="r", step="export", out=str(tmp_path / "tests" / "web"))
