"""A bounded window of submitted work: a run holds at most `SUBMIT_WINDOW` shards' tasks on the cluster at once (fewer
when shards are large: `window_for`) and submits the next shard as one finishes, so the flow's futures and the
scheduler's task graph stay the same size however large the run is (a 100,000-clip run would otherwise hold every
task of every stage at once)."""

from __future__ import annotations

import functools
import queue
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prefect.futures import PrefectFuture

SUBMIT_WINDOW = 256
"""Shards whose tasks may be submitted and unfinished at once: enough to keep a large cluster's workers busy (each
shard is one task per stage), few enough that the scheduler holds thousands of tasks, not hundreds of thousands."""

CLIPS_IN_FLIGHT = 8192
"""Clips (or judged pairs) the submitted shards may hold together. Shards grow with the run
(ttseval.tasks.plan.shard_size_for: 200 clips at 100,000), so a window counted in shards alone would hold half of
such a run's work in the flow's process at once; counted in clips it holds the same however large the run is."""

SMALLEST_WINDOW = 32
"""Shards in flight however large they are: enough for a cluster's workers to start the next while others finish."""


def window_for(largest_shard: int) -> int:
    """Shards to hold submitted at once when the largest holds `largest_shard` clips: SUBMIT_WINDOW, fewer when that
    many would hold more than CLIPS_IN_FLIGHT clips, never fewer than SMALLEST_WINDOW."""
    return max(SMALLEST_WINDOW, min(SUBMIT_WINDOW, CLIPS_IN_FLIGHT // max(largest_shard, 1)))


Job = Callable[[], Sequence[PrefectFuture[Any]]]
"""Submits one shard's tasks (its synthesis and the stage tasks that read its clips, or one backlog task) and
returns their futures."""


def _finished(
    finished: queue.SimpleQueue[tuple[int, PrefectFuture[Any]]], number: int, future: PrefectFuture[Any]
) -> None:
    finished.put((number, future))


def in_window(jobs: Iterable[Job], limit: int = SUBMIT_WINDOW) -> Iterator[PrefectFuture[Any]]:
    """Run `jobs` with at most `limit` of them unfinished at once, each submitted as an earlier one's last task
    finishes; yields every future as it finishes (in the order they finish)."""
    finished: queue.SimpleQueue[tuple[int, PrefectFuture[Any]]] = queue.SimpleQueue()
    pending = iter(jobs)
    open_tasks: dict[int, int] = {}  # job number -> its tasks not finished yet
    number = 0

    def fill() -> None:
        nonlocal number
        while len(open_tasks) < limit and (job := next(pending, None)) is not None:
            futures = job()
            if not futures:
                continue
            number += 1
            open_tasks[number] = len(futures)
            for future in futures:  # called at once for a future already finished
                future.add_done_callback(functools.partial(_finished, finished, number))

    fill()
    while open_tasks:
        n, future = finished.get()
        open_tasks[n] -= 1
        if not open_tasks[n]:
            del open_tasks[n]
        yield future
        fill()
