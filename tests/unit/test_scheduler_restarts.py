"""ttseval.flows.runner.through_scheduler_restarts without any host or cluster: a scheduler that does not come back
within scheduler_wait_s fails the run naming the scheduler and the setting, and the flows under it keep their
parameters and their validation. The runs across separate hosts that lose and restart a scheduler are
tests/system/test_multi_host.py."""

from __future__ import annotations

import pytest


def test_a_scheduler_lost_for_longer_than_scheduler_wait_s_fails_the_run_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What through_scheduler_restarts does without a scheduler coming back (scheduler_wait_s 0, no client): a
    clear error naming the scheduler and the setting; any other error, or a lost scheduler on a cluster the run
    started itself (no dask_address), goes through unchanged."""
    from distributed.client import FutureCancelledError

    from ttseval.core.errors import TTSEvalError
    from ttseval.flows.runner import through_scheduler_restarts

    calls = []

    def lose(reason: str) -> None:
        calls.append(reason)
        raise FutureCancelledError("transcripts_task-1", reason)

    flow_body = through_scheduler_restarts(lose)
    monkeypatch.setenv("TTSEVAL_SCHEDULER_WAIT_S", "0")
    monkeypatch.delenv("TTSEVAL_DASK_ADDRESS", raising=False)
    with pytest.raises(FutureCancelledError):
        flow_body("scheduler-connection-lost")
    monkeypatch.setenv("TTSEVAL_DASK_ADDRESS", "tcp://10.0.0.9:8786")
    with pytest.raises(FutureCancelledError):
        flow_body("cancelled by the user")
    with pytest.raises(
        TTSEvalError,
        match=r"lose: the Dask scheduler at tcp://10\.0\.0\.9:8786 was lost mid-run and "
        r"did not come back within 0 s \(the scheduler_wait_s setting\).*run the same command again",
    ):
        flow_body("scheduler-connection-lost")
    assert calls == ["scheduler-connection-lost", "cancelled by the user", "scheduler-connection-lost"]


def test_the_flows_under_through_scheduler_restarts_keep_their_parameters_and_their_validation() -> None:
    """A flow function under through_scheduler_restarts is called by Prefect with its parameters validated against
    the flow's own annotations, evaluated in its module: `Literal` in backfill_judge's `kind` (flows/runner.py has no
    Literal; before its signature was evaluated there, every backfill-judge failed with PydanticUserError)."""
    from prefect.exceptions import ParameterTypeError

    from ttseval.flows.backfill_judge import backfill_judge
    from ttseval.flows.evaluate import evaluate

    checked = backfill_judge.validate_parameters({"run_id": "r", "judge": "objective", "kind": "instruction"})
    assert checked["kind"] == "instruction" and checked["baseline"] is None
    with pytest.raises(ParameterTypeError, match="Input should be 'pairwise' or 'instruction'"):
        backfill_judge.validate_parameters({"run_id": "r", "judge": "objective", "kind": "pairs"})
    assert backfill_judge.parameters.properties["kind"]["enum"] == ["pairwise", "instruction"]
    assert evaluate.validate_parameters({"budget_usd": "1.5"})["budget_usd"] == 1.5
    assert list(evaluate.parameters.properties)[:3] == ["dataset", "systems", "store"]
