"""InstructTTSEval: a judge that cannot judge instructions is refused before any work (against a Prefect API address
nothing answers on). The import, synthesis, judging and scores end to end are tests/e2e/test_instruct_cli.py."""

from __future__ import annotations

from pathlib import Path

from tests.support.harness import DEAD_API, cli_env, run_cli


def test_a_judge_that_cannot_judge_instructions_is_refused_before_any_work(tmp_path: Path) -> None:
    # The objective judge compares two clips; it has no judge_instructions, so every row would have failed.
    items = tmp_path / "items.jsonl"
    items.write_text(
        '{"item_id": "a", "text": "Hi.", "language": "en", "category": "instruction_following", '
        '"depth": 0, "instruction": "Whisper it."}\n'
    )
    result = run_cli(
        [
            "evaluate",
            "--dataset",
            str(items),
            "--systems",
            "flite:slt",
            "--store",
            str(tmp_path / "s"),
            "--instruction-judges",
            "objective",
        ],
        cli_env(DEAD_API),
        cwd=tmp_path,
        timeout_s=120,
    )
    assert result.returncode == 2, result.stderr
    assert "judge 'objective' cannot judge instruction comparisons (it has no judge_instructions)" in result.stderr
    assert not (tmp_path / "s").exists()
