"""The GPU benchmarks stay runnable: benchmarks/gpu_batch.py and gpu_evaluate.py with tiny models on the CPU (the
figures it prints are measured on a GPU machine and quoted in the README; nothing here asserts a speed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import rankdata

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_batch_benchmark_runs_every_backend_with_tiny_models() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu_batch.py"),
            "--size",
            "tiny",
            "--device",
            "cpu",
            "--items",
            "4",
            "--batch",
            "2",
            "--new-tokens",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "size=tiny device=cpu GPU=none" in result.stdout
    rows = re.findall(
        r"^  (\w+) +built .* one at a time +([\d.]+)/s, batched +([\d.]+)/s: batched / one-at-a-time "
        r"([\d.]+)x$",
        result.stdout,
        flags=re.M,
    )
    assert [r[0] for r in rows] == ["whisper", "ctc", "vits"], result.stdout
    for name, one, batched, ratio in rows:  # the printed ratio is the two throughputs' ratio
        assert float(one) > 0 and float(batched) > 0
        assert abs(float(ratio) - float(batched) / float(one)) <= 0.02 * float(ratio) + 0.01, (name, result.stdout)


def test_gpu_evaluate_benchmark_runs_a_gpu_run_with_tiny_models() -> None:
    """benchmarks/gpu_evaluate.py's gpu mode on the CPU: settings gpu = true, both systems' clips transcribed by the
    transformers recogniser it built, judged (its H100 figures are in docs/performance.md)."""
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu_evaluate.py"),
            "--size",
            "tiny",
            "--limit",
            "2",
            "--modes",
            "gpu",
            "--new-tokens",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"^--- gpu: exit 0, [\d.]+ s, GPU memory in use at most 0 MiB$", result.stdout, flags=re.M), (
        result.stdout[-3000:]
    )
    assert "computed rows: {'synthesis': 4, 'transcripts': 4, 'quality': 4, 'judgments': 2," in result.stdout, (
        result.stdout[-3000:]
    )


def test_dask_idle_benchmark_runs_and_its_ratio_is_the_ratio_of_its_totals() -> None:
    # runnable, and the printed ratio is the two printed totals' (which way is cheaper is the benchmark's to say)
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_dask_idle.py"), "--seconds", "2", "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    dask, ours = (float(x) for x in re.search(r"total\s+([\d.]+)\s+([\d.]+)", result.stdout).groups())
    ratio = float(re.search(r"ttseval / Dask defaults: ([\d.]+)", result.stdout).group(1))
    # Dask's defaults (a 20 ms tick) always spend CPU in 2 s; ttseval's slower pace can spend less than one 10 ms
    # CPU tick in 2 s of one idle worker, printed as 0.00 (seen in a fresh clone's run), so only the first is > 0
    assert dask > 0.005 and ours >= 0, result.stdout
    # the totals are printed to 0.01, the ratio to 0.001: the ratio of the unrounded totals lies within these bounds
    assert (ours - 0.005) / (dask + 0.005) - 0.0005 <= ratio <= (ours + 0.005) / (dask - 0.005) + 0.0005, result.stdout


def test_cascade_benchmark_runs_and_prints_w_and_the_cost_ratio() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_cascade.py"),
            "--items",
            "20",
            "--systems",
            "3",
            "--cheap-noise",
            "0.3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout.splitlines()
    at = [k for k, line in enumerate(out) if line.startswith("cheap noise 0.3")]
    assert len(at) == 3, result.stdout  # the default escalation rules, flips only, a fifth of the unsettled
    for k in at:
        line = out[k]
        w, ratio, cheap, strong = (
            float(x)
            for x in re.search(
                r"Kendall's W vs strong alone ([\d.]+) .* cost / strong alone ([\d.]+) .* \((\d+) cheap calls, "
                r"(\d+) strong\)",
                line,
            ).groups()
        )
        assert cheap == 2 * 60  # 3 systems x 20 items, both orders
        # W recomputed from the two win-rate rows printed under the line (multiples of 1/40, printed exactly), by
        # Kendall's formula with the tie correction worked out here: W = 12 S / (m^2 (n^3 - n) - m T)
        alone, cascade = ([float(x) for x in out[k + j].split(":")[1].split()] for j in (1, 2))
        ranks = np.vstack([rankdata(alone), rankdata(cascade)])
        m, n = ranks.shape
        spread = ((ranks.sum(axis=0) - m * (n + 1) / 2) ** 2).sum()
        ties = sum((c**3 - c).sum() for c in (np.unique(r, return_counts=True)[1] for r in ranks))
        assert w == pytest.approx(12 * spread / (m**2 * (n**3 - n) - m * ties), abs=0.0006), (alone, cascade)
        # per pair: the cheap judge's calls at 0.001 and the strong calls (escalated and audited) at 0.02, against
        # one strong call per pair alone
        assert ratio == pytest.approx((cheap * 0.001 + strong * 0.02) / (60 * 0.02), abs=0.002)


def test_judge_cost_benchmark_prints_the_dry_run_estimate_per_system() -> None:
    from ttseval.tasks.cost import JUDGE_PROMPT_TOKENS

    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_judge_cost.py"), "--items", "100"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    pro = next(line for line in result.stdout.splitlines() if "Gemini 2.5 Pro, 400 output tokens" in line)
    usd = float(re.search(r"USD +([\d.]+) per system", pro).group(1))
    # by hand: 100 pairs x (2 clips x 34 words at 133 words/min x 32 tokens/s + the prompt) x USD 1.25/M
    # + 100 x 400 output tokens x USD 10/M (printed to the cent)
    audio_s = 2 * 34 / (133 / 60)
    assert usd == pytest.approx(100 * ((audio_s * 32 + JUDGE_PROMPT_TOKENS) * 1.25 + 400 * 10.0) / 1e6, abs=0.006)


def test_predictor_benchmark_prints_each_predictors_rate_and_peak_and_all_at_once() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_predictors.py"),
            "--clips",
            "2",
            "--seconds",
            "1",
            "--shards",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = re.findall(
        r"^  ([\w-]+) +load +([\d.]+) s +([\d.]+) clips/s +peak +([\d.]+) MiB \(([\d.]+) before the "
        r"model\)$",
        result.stdout,
        flags=re.M,
    )
    assert [r[0] for r in rows] == ["utmos22", "nisqa", "sherpa-onnx", "speechbrain-ecapa", "speechbrain-lid"], (
        result.stdout
    )
    assert all(float(rate) > 0 and float(peak) >= float(before) > 0 for _, _, rate, peak, before in rows)
    [(together, largest, extra)] = re.findall(
        r"^  all at once +peak +([\d.]+) MiB against ([\d.]+) MiB for the "
        r"largest one alone: ([+-][\d.]+) MiB$",
        result.stdout,
        flags=re.M,
    )
    assert float(largest) == max(float(r[3]) for r in rows)  # the printed difference is the two peaks'
    assert float(extra) == pytest.approx(float(together) - float(largest), abs=0.11)
    # the setting models_in_memory: both workers print their peak, time and scores; the scores are the same
    workers = re.findall(
        r"^  models_in_memory = ([01]): peak +([\d.]+) MiB, +([\d.]+) s, scores ([0-9a-f]{16})$",
        result.stdout,
        flags=re.M,
    )
    assert [w[0] for w in workers] == ["0", "1"] and workers[0][3] == workers[1][3], result.stdout
    [(peak, _wall, same)] = re.findall(
        r"^  one at a time / all kept: peak ([\d.]+)x, wall ([\d.]+)x, same scores: "
        r"(\w+)$",
        result.stdout,
        flags=re.M,
    )
    assert same == "True" and float(peak) == pytest.approx(float(workers[1][1]) / float(workers[0][1]), abs=0.006)


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
