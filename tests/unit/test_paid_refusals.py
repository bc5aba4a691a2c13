"""A paid provider's missing API key or unknown voice is refused by `ttseval evaluate` with exit 2 before any work
(before any Prefect server; the command runs against an address nothing answers on). The paid runs themselves are
tests/e2e/test_paid_run.py."""

from __future__ import annotations

from tests.support.harness import DEAD_API, cli_env, run_cli
from tests.support.paid import KEY, dataset


def test_a_missing_key_or_an_unknown_voice_is_exit_2_before_any_work(tmp_path) -> None:
    data = dataset(tmp_path)
    store = tmp_path / "store"
    env = cli_env(DEAD_API)  # no OPENAI_API_KEY
    result = run_cli(
        ["evaluate", "--dataset", str(data), "--systems", "openai:alloy", "--store", str(store)], env, cwd=tmp_path
    )
    assert result.returncode == 2 and "OPENAI_API_KEY" in result.stderr and not store.exists()
    result = run_cli(
        ["evaluate", "--dataset", str(data), "--systems", "openai:alloyy", "--store", str(store)],
        cli_env(DEAD_API, OPENAI_API_KEY=KEY),
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "did you mean 'alloy'" in result.stderr and not store.exists()
    assert KEY not in result.stderr + result.stdout
