"""What keeps a large run's orchestration the size of its cluster, not of its work: the bounded window of submitted
shards (ttseval.tasks.window) and the shard size chosen by the work (ttseval.tasks.plan.shard_size_for). The
costs they bound are measured by benchmarks/bench_scale.py."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.registry import Spec
from ttseval.tasks.parts import get_store
from ttseval.tasks.plan import LARGEST_SHARD, SMALLEST_SHARD, TASKS_PER_STAGE, plan_synthesis, shard_size_for
from ttseval.tasks.window import CLIPS_IN_FLIGHT, SMALLEST_WINDOW, SUBMIT_WINDOW, in_window, window_for


def test_the_window_counts_clips_once_shards_grow_so_it_holds_the_same_work_at_any_size() -> None:
    """Small shards: SUBMIT_WINDOW of them. Shards of 200 clips (a 100,000-clip run's): 8,192 // 200 = 40 shards,
    8,000 clips in flight rather than 256 x 200 = 51,200. The largest shards still get SMALLEST_WINDOW."""
    assert (CLIPS_IN_FLIGHT, SUBMIT_WINDOW, SMALLEST_WINDOW) == (8192, 256, 32)
    assert window_for(8) == 256 and window_for(32) == 256 and window_for(33) == 248
    assert window_for(200) == 40 and window_for(200) * 200 <= CLIPS_IN_FLIGHT
    assert window_for(LARGEST_SHARD) == 32 and window_for(10_000) == 32 and window_for(0) == 256


def test_the_window_holds_at_most_limit_shards_unfinished_and_yields_every_future_once() -> None:
    """40 jobs of 3 tasks each (a synthesis and two stage tasks) on 8 threads, window 5: the tasks wait until five
    jobs are in flight (so the window fills), and from then on never more than 5 jobs have tasks submitted and
    unfinished; every one of the 120 futures is yielded once, when it is done."""
    lock, open_jobs, most = threading.Lock(), [0], [0]
    filled = threading.Event()

    def work(job: int, task: int, left: list[int]) -> tuple[int, int]:
        assert filled.wait(30)
        with lock:
            left[0] -= 1
            if not left[0]:
                open_jobs[0] -= 1
        return job, task

    with ThreadPoolExecutor(8) as pool:

        def job(n: int) -> Callable[[], list[Future[tuple[int, int]]]]:
            def submit() -> list[Future[tuple[int, int]]]:
                with lock:
                    open_jobs[0] += 1
                    most[0] = max(most[0], open_jobs[0])
                    if open_jobs[0] == 5:
                        filled.set()
                left = [3]
                return [pool.submit(work, n, t, left) for t in range(3)]

            return submit

        seen = []
        for future in in_window((job(n) for n in range(40)), limit=5):  # type: ignore[arg-type]
            assert future.done()
            seen.append(future.result())
    assert sorted(seen) == [(n, t) for n in range(40) for t in range(3)]
    assert most[0] == 5  # the window filled, and never went past its limit


def test_a_job_with_nothing_to_submit_takes_no_place_in_the_window() -> None:
    done: Future[int] = Future()
    done.set_result(7)
    jobs = [list, lambda: [done], list]
    assert [f.result() for f in in_window(jobs, limit=1)] == [7]  # type: ignore[arg-type]


def test_shard_size_is_the_setting_when_set_else_grows_so_a_stage_has_at_most_tasks_per_stage() -> None:
    auto = Settings(store="/tmp/unused")
    assert auto.shard_size is None
    assert shard_size_for(auto, 40) == SMALLEST_SHARD == 8  # a small run: shards of 8, as before
    assert shard_size_for(auto, SMALLEST_SHARD * TASKS_PER_STAGE) == 8  # 4,000 items: exactly 500 tasks of 8
    assert shard_size_for(auto, SMALLEST_SHARD * TASKS_PER_STAGE + 1) == 9  # one more: 445 tasks of 9
    assert shard_size_for(auto, 100_000) == 200  # 100,000 clips: 500 tasks of 200
    assert shard_size_for(auto, 2_000_000) == LARGEST_SHARD == 256  # 2,000,000: 7,813 tasks of at most 256
    forced = Settings(store="/tmp/unused", shard_size=8)
    assert shard_size_for(forced, 100_000) == 8  # the setting forces it: 12,500 tasks


def test_synthesis_shards_are_sized_by_the_run_s_whole_work_across_systems(tmp_path: Path) -> None:
    """900 items x 5 systems = 4,500 clips: auto gives shards of ceil(4,500 / 500) = 9, so each system's 900 items
    are 100 shards (500 in all); shard_size 300 forces 3 shards per system."""
    items = pd.DataFrame(
        {
            "item_id": [f"i{n}" for n in range(900)],
            "language": "en",
            "text": "words",
            "category": "plain",
            "depth": 0,
        }
    )
    systems = [Spec.parse(f"instant:v{n}") for n in range(5)]
    settings = Settings(store=str(tmp_path))
    plan = plan_synthesis(get_store(settings.store), "r", items, systems, settings)
    assert len(plan.shards) == 500 and {len(s["items"]) for s in plan.shards} == {9}
    assert plan.wanted == plan.to_compute == 4500
    forced = settings.model_copy(update={"shard_size": 300})
    plan = plan_synthesis(get_store(settings.store), "r", items, systems, forced)
    assert [(s["index"], s["of"], len(s["items"])) for s in plan.shards[:3]] == [(1, 3, 300), (2, 3, 300), (3, 3, 300)]
    assert len(plan.shards) == 15
