"""Pure helpers of the benchmarks, loaded from benchmarks/ by path: bench_evaluate.py's phases cut at the flow's log
lines and profile_workers.py's py-spy samples sorted by process role and kind. The benchmarks run as tests are
tests/system/test_benchmarks.py."""

from __future__ import annotations

from tests.support.harness import ROOT


def test_bench_evaluate_cuts_a_command_s_wall_time_at_its_flow_s_log_lines() -> None:
    """benchmarks/bench_evaluate.py's phases: a hand-written log (local-time stamps as Prefect prints them) cut
    at the flow's own lines, a task run's 'Finished in state' ignored, the phases summing to the wall time."""
    import importlib.util
    from datetime import datetime

    spec = importlib.util.spec_from_file_location("bench_evaluate", ROOT / "benchmarks" / "bench_evaluate.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    start = datetime(2026, 11, 25, 2, 37, 50).timestamp()  # the process started at 02:37:50.000 local time
    output = "\n".join(
        [
            "02:37:51.500 | INFO    | prefect - Starting temporary server on http://127.0.0.1:8834",
            "02:37:56.000 | INFO    | Flow run 'loose-wombat' - Beginning flow run 'loose-wombat' for flow 'evaluate'",
            "02:37:57.000 | INFO    | Task run 'synthesize-1' - Finished in state Completed()",
            "02:38:10.250 | INFO    | Flow run 'loose-wombat' - rows written: synthesis 4",
            "02:38:11.000 | INFO    | Flow run 'loose-wombat' - parts compacted: ",
            "02:38:12.000 | INFO    | Flow run 'loose-wombat' - report: /tmp/s/runs/own/report.md (2.5 s)",
            "02:38:12.500 | INFO    | Flow run 'loose-wombat' - Finished in state Completed()",
            "a table the report prints",
        ]
    )
    cut = bench.phases(output, start, start + 25.0)
    assert [round(s, 3) for _, s in cut] == [1.5, 4.5, 14.25, 0.75, 1.0, 0.5, 2.5]  # by hand from the stamps
    assert abs(sum(s for _, s in cut) - 25.0) < 1e-6
    assert [name for name, _ in cut] == [name for _, name in bench.MARKS] + [bench.END]
    # under PREFECT_API_URL there is no temporary server: start-up runs to the flow's first line
    shared = bench.phases(output.split("\n", 1)[1], start, start + 25.0)
    assert round(shared[0][1], 3) == 6.0 and shared[0][0] == f"{bench.MARKS[0][1]} + {bench.MARKS[1][1]}"


def test_profile_workers_sorts_py_spy_samples_by_process_role_and_kind() -> None:
    """benchmarks/profile_workers.py's reading of py-spy's raw output: hand-written samples (the format py-spy
    writes: the process, then frames from the outermost, then a count), worked out by hand at 50 samples/s."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("profile_workers", ROOT / "benchmarks" / "profile_workers.py")
    profile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(profile)
    worker = 'process 10:"";process 12:"python -c from multiprocessing.spawn import spawn_main"'
    raw = [
        (
            f"{worker};predict (tasks/quality.py:20);DNSMOSQuality.score (providers/quality/dnsmos.py:125);"
            "Session.run (onnxruntime/capi/onnxruntime_inference_collection.py:395) 100\n"
        ),
        (
            f"{worker};_speak (tasks/synthesize.py:142);PiperTTS._load (providers/tts/piper.py:91);"
            "InferenceSession._create_inference_session (onnxruntime/capi/onnxruntime_inference_collection.py:789) 25\n"
        ),
        # a model's module imported under a task: an import, not a load
        (
            f"{worker};PiperTTS._load (providers/tts/piper.py:84);"
            "_find_and_load (<frozen importlib._bootstrap>:1176) 10\n"
        ),
        f"{worker};Worker.handle_scheduler (distributed/worker.py:1215);loads (distributed/protocol/core.py:175) 5\n",
        (
            'process 10:"";BaseEventLoop._run_once (asyncio/base_events.py:1922);'
            "EpollSelector.select (selectors.py:468) 50\n"
        ),
        'process 10:"";paired_table (metrics/paired.py:170);_wilcoxon (metrics/paired.py:67) 20\n',
        "not a sample line\n",
    ]
    seconds = profile.classify(raw, 50)
    assert dict(seconds["worker"]) == {
        "onnx run (Piper, DNSMOS)": 2.0,
        "model load": 0.5,
        "import": 0.2,
        "dask and asyncio": 0.1,
    }
    assert dict(seconds["command"]) == {"waiting (select, locks, queues)": 1.0, "ttseval's own code": 0.4}
