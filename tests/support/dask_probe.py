"""Functions the tests run on Dask's servers (Client.run, run_on_scheduler, submit). Dask pickles them by reference,
so they live in this importable module: a worker imports tests.support.dask_probe from the checkout on its
PYTHONPATH (the shared cluster's workers and a flow's LocalCluster get ROOT; a LocalCluster started by the test
process inherits its sys.path), whatever folder the test that sends them lives in."""

from __future__ import annotations

from ttseval.tasks import limits


def ms(value: str) -> float:
    """A Dask interval setting ("500ms", "2s") in milliseconds."""
    from dask.utils import parse_timedelta

    return parse_timedelta(value) * 1000


def callbacks(dask_worker=None, dask_scheduler=None) -> dict[str, float]:
    """Run on a server by Client.run / run_on_scheduler: each periodic callback's interval in ms (the settings of
    QUIET_DASK pace 'tick', 'monitor', 'profile' and 'memory_monitor')."""
    server = dask_worker or dask_scheduler
    return {name: pc.callback_time for name, pc in server.periodic_callbacks.items()}


def log_bounds(dask_worker=None, dask_scheduler=None) -> dict[str, int | None]:
    """Run on a server by Client.run / run_on_scheduler: how many entries its low-level logs keep (SMALL_LOGS): a
    worker's message log to the scheduler and its state machine's stimulus log, the scheduler's transition log."""
    server = dask_worker or dask_scheduler
    if hasattr(server, "batched_stream"):  # a worker (Dask passes the scheduler as either keyword)
        return {
            "messages": server.batched_stream.recent_message_log.maxlen,
            "stimuli": server.state.stimulus_log.maxlen,
        }
    return {"transitions": server.transition_log.maxlen}


def book_three_from_a_thread(name: str, per_second: float) -> list[float]:
    """Runs as a Dask task: resolve the clock in the task's thread, book from a thread the task starts (as a judge's
    batch does)."""
    from concurrent.futures import ThreadPoolExecutor

    clock = limits.rate_clock()
    with ThreadPoolExecutor(1) as pool:
        return [pool.submit(clock, name, per_second).result() for _ in range(3)]


def has_clock(name: str) -> bool:
    return name in limits._clocks
