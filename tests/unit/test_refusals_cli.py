"""Every refusal is clean: the documented refusals run through the real `ttseval` command end with
exit 2, our message and no traceback anywhere in stdout or stderr; a user error raised inside a flow run is
logged as its message alone (no Prefect traceback). These refusals come before any Prefect server starts; the errors
raised inside flow and task runs are tests/e2e/test_refusals_in_runs.py."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.harness import BIN, ROOT
from tests.support.items import item_line
from ttseval.core.telemetry import TELEMETRY_OFF


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
        {"items.jsonl": item_line(text=["Hello", "there"])},
        _evaluate("items.jsonl"),
        {},
        "rule 'text is a string' (column text) fails on 1 row(s): row 1 (item_id='a')",
    ),
    "items: depth a JSON object": (
        {"items.jsonl": item_line(depth={"d": 1})},
        _evaluate("items.jsonl"),
        {},
        "rule 'depth is an integer' (column depth)",
    ),
    "items: an id with U+202E": (
        {"items.jsonl": item_line(item_id="abc\u202edef")},
        _evaluate("items.jsonl"),
        {},
        "rule 'item_id has no invisible or direction-changing characters'",
    ),
    "items: a 5,000-character id": (
        {"items.jsonl": item_line(item_id="x" * 5_000)},
        _evaluate("items.jsonl"),
        {},
        "rule 'item_id is at most 128 characters (200 bytes as UTF-8)'",
    ),
    "items: no such file": ({}, _evaluate("absent.jsonl"), {}, "dataset 'absent.jsonl' does not exist"),
    "an unknown system": (
        {"items.jsonl": item_line()},
        _evaluate("items.jsonl", "pipr:joe"),
        {},
        "unknown tts provider 'pipr'; did you mean 'piper'?",
    ),
    "a missing API key": ({"items.jsonl": item_line()}, _evaluate("items.jsonl", "openai:alloy"), {}, "OPENAI_API_KEY"),
    "a malformed settings file": (
        {"items.jsonl": item_line(), "bad.toml": 'shard_size = "eight"\n'},
        _evaluate("items.jsonl"),
        {"TTSEVAL_CONFIG": "bad.toml"},
        "shard_size",
    ),
    "items: French under the Seed-TTS-eval WER protocol": (
        {
            "items.jsonl": item_line() + item_line(item_id="b", language="fr-FR"),
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
