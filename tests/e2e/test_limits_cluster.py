"""Vendor rate limits (tasks/limits.py): the clock that spaces calls is the scheduler's, shared by every worker of a
Dask cluster (a LocalCluster of two worker processes here). The clock itself is tests/unit/test_limits.py."""

from __future__ import annotations

import types

import pytest

from tests.support.dask_probe import book_three_from_a_thread, has_clock
from ttseval.tasks import limits


def test_the_clock_is_the_schedulers_and_binds_both_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import Client, LocalCluster

    # At 0.1/s calls are 10 s apart. The LocalCluster's scheduler runs in this process, so holding this module's
    # clock still holds the moment every booking is made at, however late either worker books under load: six
    # bookings from two worker processes get waits of exactly 0, 10, ..., 50 s when one clock serves both; a clock
    # per process would give 0, 10, 20 twice. A fresh table of clocks keeps other tests' bookings out.
    monkeypatch.setattr(limits, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))
    monkeypatch.setattr(limits, "_clocks", {})
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        client.wait_for_workers(2, timeout=120)
        workers = list(client.scheduler_info()["workers"])
        futures = [
            client.submit(book_three_from_a_thread, "test-shared", 0.1, workers=[w], pure=False) for w in workers
        ]
        per_worker = [f.result(timeout=120) for f in futures]
        assert sorted(w for waits in per_worker for w in waits) == pytest.approx([0, 10, 20, 30, 40, 50], abs=1e-6)
        for waits in per_worker:  # each worker's own three bookings are in the order it made them
            assert waits == sorted(waits) and len(set(waits)) == 3, per_worker
        # the clock is here, in the scheduler's process, not in the workers
        assert limits._clocks == {"test-shared": pytest.approx(1000.0 + 60.0, abs=1e-6)}
        assert client.run(has_clock, "test-shared") == dict.fromkeys(workers, False)
