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


def test_every_way_a_lost_scheduler_surfaces_is_recognised_and_nothing_else() -> None:
    """scheduler_lost: a future cancelled for the lost connection, a comm closed under a gather or a submit (in the
    error itself or the one it was raised from), and a connection error, timeout or cancellation while the client is
    reconnecting; not a programming error, nor a user's cancellation, a timeout or a file error while the client is
    running."""
    import asyncio
    from types import SimpleNamespace

    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    from ttseval.flows.runner import scheduler_lost

    reconnecting, running = SimpleNamespace(status="connecting"), SimpleNamespace(status="running")
    closed = CommClosedError("in <TCP (closed) ConnectionPool.gather local=tcp://10.0.0.1:38446>: Stream is closed")
    try:
        try:
            raise closed
        except CommClosedError as inner:
            raise RuntimeError("gathering the shard's result failed") from inner
    except RuntimeError as e:
        wrapped = e
    lost = [
        (FutureCancelledError("transcripts_task-1", "scheduler-connection-lost"), None),
        (closed, None),
        (closed, running),
        (wrapped, running),
        (TimeoutError("Timed out trying to connect to tcp://10.0.0.9:8786 after 30 s"), reconnecting),
        (OSError("Timed out during handshake"), reconnecting),
        (asyncio.CancelledError(), reconnecting),
    ]
    kept = [
        (FutureCancelledError("transcripts_task-1", "cancelled by the user"), running),
        (TimeoutError("the vendor did not answer in 30 s"), running),
        (FileNotFoundError("clip.wav"), running),
        (ValueError("a programming error"), reconnecting),
        (KeyboardInterrupt(), reconnecting),
    ]
    assert [scheduler_lost(e, client) for e, client in lost] == [True] * len(lost)
    assert [scheduler_lost(e, client) for e, client in kept] == [False] * len(kept)


def test_a_closed_comm_with_no_scheduler_to_come_back_ends_in_the_clear_message_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gather that met a closed comm is a lost scheduler like a cancelled future: with no client to wait on (no
    flow run here) and scheduler_wait_s 0, the run ends in the error naming the scheduler and the setting."""
    from distributed.comm.core import CommClosedError

    from ttseval.core.errors import TTSEvalError
    from ttseval.flows.runner import through_scheduler_restarts

    def gather() -> None:
        raise CommClosedError("in <TCP (closed) ConnectionPool.gather>: Stream is closed")

    monkeypatch.setenv("TTSEVAL_SCHEDULER_WAIT_S", "0")
    monkeypatch.setenv("TTSEVAL_DASK_ADDRESS", "tcp://10.0.0.9:8786")
    with pytest.raises(TTSEvalError, match=r"gather: the Dask scheduler at tcp://10\.0\.0\.9:8786 was lost mid-run"):
        through_scheduler_restarts(gather)()


def test_an_error_raised_while_handling_a_closed_comm_is_not_a_lost_scheduler() -> None:
    """Only the exception chain Python would print counts: an error raised `from None` inside `except
    CommClosedError`, and an interrupt, are the run's own."""
    from types import SimpleNamespace

    from distributed.comm.core import CommClosedError

    from ttseval.flows.runner import scheduler_lost

    running = SimpleNamespace(status="running")
    raised: list[BaseException] = []
    for own in (ValueError("a bug in the flow"), KeyboardInterrupt()):
        try:
            try:
                raise CommClosedError("Stream is closed")
            except CommClosedError:
                raise own from None
        except BaseException as e:  # noqa: BLE001 - collected to classify
            raised.append(e)
    assert [scheduler_lost(e, running) for e in raised] == [False, False]


def test_a_run_that_keeps_failing_as_if_the_scheduler_were_lost_stops_after_max_losses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a scheduler that answers at once, an error that keeps looking like a loss is run again at most
    MAX_SCHEDULER_LOSSES times, then fails saying so (the client, the scheduler's answer and the Prefect API are
    faked: the loop is what is tested; a real loss is tests/e2e/test_scheduler_lost.py)."""
    from types import SimpleNamespace

    import prefect.context
    from distributed.comm.core import CommClosedError

    import ttseval.flows.runner as runner
    from ttseval.core.errors import TTSEvalError

    client = SimpleNamespace(status="running")
    context = SimpleNamespace(task_runner=SimpleNamespace(_client=client))
    monkeypatch.setattr(prefect.context.FlowRunContext, "get", classmethod(lambda cls: context))
    monkeypatch.setattr(runner, "_scheduler_answers", lambda c: True)
    monkeypatch.setattr(runner, "_api_answers", lambda: True)
    monkeypatch.setenv("TTSEVAL_DASK_ADDRESS", "tcp://10.0.0.9:8786")
    calls = []

    def gather() -> None:
        calls.append(1)
        raise CommClosedError("in <TCP (closed) ConnectionPool.gather>: Stream is closed")

    with pytest.raises(TTSEvalError, match=rf"lost {runner.MAX_SCHEDULER_LOSSES} times in this run"):
        runner.through_scheduler_restarts(gather)()
    assert len(calls) == runner.MAX_SCHEDULER_LOSSES + 1
