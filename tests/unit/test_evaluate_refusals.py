"""`ttseval evaluate` refuses a malformed dataset or an unknown system with exit 2 in its preflight, before any Prefect
server or Dask cluster is started and before the store is touched: the command runs against a Prefect API address
nothing answers on (tests/e2e/test_evaluate_cli.py runs the evaluate itself)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.harness import DEAD_API, cli_env, run_cli

BAD_DATASETS = {
    "missing column": (
        '{"item_id": "a", "text": "Hi.", "language": "en", "category": "questions"}\n',
        "missing required column(s) depth",
    ),
    "empty text": (
        '{"item_id": "a", "text": "  ", "language": "en", "category": "questions", "depth": 0}\n',
        "rule 'text is non-empty' (column text) fails on 1 row(s): row 1 (item_id='a')",
    ),
    "duplicate ids": (
        (
            '{"item_id": "a", "text": "Hi.", "language": "en", "category": "questions", "depth": 0}\n'
            '{"item_id": "a", "text": "Yo.", "language": "en", "category": "questions", "depth": 1}\n'
        ),
        "rule 'item_id is unique' (column item_id) fails on 2 row(s)",
    ),
    "unknown language": (
        '{"item_id": "a", "text": "Hi.", "language": "klingon", "category": "questions", "depth": 0}\n',
        "rule 'language is a known BCP-47 / ISO 639 code' (column language) fails on 1 row(s): row 1",
    ),
    "wrong types": (
        '{"item_id": "a", "text": 42, "language": "en", "category": "questions", "depth": "deep"}\n',
        "rule 'depth is an integer' (column depth) fails on 1 row(s): row 1 (item_id='a')",
    ),
    # hostile inputs that reach the CLI (the rest: tests/unit/test_hostile_inputs.py)
    "path-like id": (
        '{"item_id": "../../etc/passwd", "text": "Hi.", "language": "en", "category": "q", "depth": 0}\n',
        "rule 'item_id is a plain name' (column item_id) fails on 1 row(s): row 1",
    ),
    "200,000 characters": (
        '{"item_id": "a", "text": "%s", "language": "en", "category": "q", "depth": 0}\n' % ("word " * 40_000),
        "rule 'text is at most 5,000 characters' (column text)",
    ),
}


@pytest.mark.parametrize("case", list(BAD_DATASETS))
def test_malformed_dataset_is_refused_with_exit_2_and_nothing_written(case: str, tmp_path: Path) -> None:
    content, message = BAD_DATASETS[case]
    dataset = tmp_path / "bad.jsonl"
    dataset.write_text(content)
    store = tmp_path / "store"
    result = run_cli(
        ["evaluate", "--dataset", str(dataset), "--store", str(store), "--run-id", "bad"],
        cli_env(DEAD_API),
        cwd=tmp_path,
        timeout_s=120,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Fix:" in result.stderr or "Fix: add them" in result.stderr
    assert not store.exists()


def test_unknown_system_is_refused_with_a_suggestion(small_dataset: Path, tmp_path: Path) -> None:
    result = run_cli(
        ["evaluate", "--dataset", str(small_dataset), "--systems", "pipr:joe", "--store", str(tmp_path / "s")],
        cli_env(DEAD_API),
        cwd=tmp_path,
        timeout_s=120,
    )
    assert result.returncode == 2
    assert "unknown tts provider 'pipr'; did you mean 'piper'?" in result.stderr
    assert not (tmp_path / "s").exists()
