"""`ttseval human-eval` export, analyze and ingest through the human_eval flow (flows/human_eval.py) on the session's
Prefect server, from a stored run. The export, results and analysis themselves are tests/unit/test_listening.py."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.harness import cli_env, run_cli
from tests.support.listening import (
    RUN,
    mushra_csv,
    stimuli_key,
    stored_run,
)


def test_human_eval_cli_exports_and_analyses_through_the_flow(prefect_api: str, tmp_path: Path) -> None:
    store = stored_run(tmp_path / "store")
    env = cli_env(prefect_api, TTSEVAL_NATURAL='["nat"]')
    out = tmp_path / "web"
    done = run_cli(
        [
            "human-eval",
            "export",
            "--store",
            str(tmp_path / "store"),
            "--run-id",
            RUN,
            "--test-id",
            "cli",
            "--kind",
            "mushra-nmr",
            "--raters",
            "3",
            "--items",
            "4",
            "--out",
            str(out),
        ],
        env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "3 rater configs" in done.stdout and len(list((out / "configs").glob("cli-r*.yaml"))) == 3
    (tmp_path / "mushra.csv").write_text(mushra_csv(out, "cli", stimuli_key(store, "cli")), encoding="utf-8")
    # the evaluate's record, whose provenance lines the report re-rendered after the analysis keeps
    record = {"command": "evaluate", "run_id": RUN, "dataset_sha256": "0123abcd", "wall_s": 1.0, "settings": {}}
    store.write_bytes(f"runs/{RUN}/log/20261127T000000000000.json", json.dumps(record).encode())
    done = run_cli(
        [
            "human-eval",
            "analyze",
            str(tmp_path / "mushra.csv"),
            "--store",
            str(tmp_path / "store"),
            "--run-id",
            RUN,
            "--test-id",
            "cli",
        ],
        env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "MUSHRA-NMR (0-100)" in done.stdout and "Listeners x utterances" in done.stdout
    report = store.read_bytes(f"runs/{RUN}/report.md").decode()
    assert "## Listening tests" in report and "- dataset_sha256: 0123abcd" in report and "- wall_s" not in report
    refused = run_cli(
        [
            "human-eval",
            "ingest",
            "--store",
            str(tmp_path / "store"),
            "--run-id",
            RUN,
            "--test-id",
            "cli",
            str(tmp_path / "nothere.csv"),
        ],
        env,
        tmp_path,
    )  # the file after the options
    assert refused.returncode == 2 and "nothere.csv: cannot read it" in refused.stderr
