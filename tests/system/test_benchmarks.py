"""The GPU benchmarks stay runnable: benchmarks/gpu_batch.py and gpu_evaluate.py with tiny models on the CPU (the
figures it prints are measured on a GPU machine and quoted in the README; nothing here asserts a speed)."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import rankdata

from tests.support.harness import ROOT


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
