"""Vendor rate limits (tasks/limits.py): the clock that spaces calls is the scheduler's, shared by every worker of a
Dask cluster (a LocalCluster of two worker processes here). The clock itself is tests/unit/test_limits.py."""

from __future__ import annotations

from tests.support.dask_probe import book_three_from_a_thread, has_clock
from ttseval.tasks import limits


def test_the_clock_is_the_schedulers_and_binds_both_workers() -> None:
    from distributed import Client, LocalCluster

    # At 0.1/s calls are 10 s apart. Six bookings made within a few seconds from two worker processes get waits
    # near 0, 10, ..., 50 s when one clock serves both; a clock per process would give 0, 10, 20 twice.
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        client.wait_for_workers(2)
        workers = list(client.scheduler_info()["workers"])
        futures = [
            client.submit(book_three_from_a_thread, "test-shared", 0.1, workers=[w], pure=False) for w in workers
        ]
        waits = sorted(w for f in futures for w in f.result(timeout=60))
        assert [round(w / 10) * 10 for w in waits] == [0, 10, 20, 30, 40, 50], waits
        # the LocalCluster's scheduler runs in this process: the clock is here, not in the workers
        assert "test-shared" in limits._clocks
        assert client.run(has_clock, "test-shared") == dict.fromkeys(workers, False)
