"""A demo evaluate with gpu = true: the model stages on the GPU, the rest on the CPU, timed against the same run
with the GPU hidden.

The embedded default's engines that can use a GPU are the transformers ones (ttseval.flows.common.runs_on_gpu:
a TTS class with gpu = True, the `transformers` recogniser); faster-whisper's CTranslate2 wheels need CUDA 12's
cuBLAS. So the run speaks the bundled benchmark with espeak-ng (CPU) and an MMS-TTS-sized VITS model
(`transformers-tts`, GPU), transcribes every clip with a Whisper-sized model (`transformers`, GPU; `--size full`:
Whisper large-v3's dimensions), scores it with DNSMOS (ONNX, CPU) and judges objectively. The models are built from
their configs with random weights by benchmarks/gpu_batch.py's builders (nothing is downloaded): the transcripts
are noise, the placement and the times are real.

`--quality dnsmos,utmos22,nisqa` adds MOS predictors built with random weights at their real sizes by
tests/support/tiny_models.py (UTMOS22 on the GPU with gpu = true; NISQA runs on the CPU); `--shard-size` is the setting
(the recogniser batches a whole shard: 32 for the batch sizes docs/performance.md measured).

Each mode runs `ttseval evaluate` in a fresh folder with its own store and prints its wall time, exit code and the
most GPU memory nvidia-smi saw in use (sampled every 0.5 s), then the ratio. Usage:
  python benchmarks/gpu_evaluate.py [--size full] [--limit 24] [--modes gpu,cpu] [--shard-size 32]
                                    [--quality dnsmos,utmos22]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from gpu_batch import DIMS, build_vits, build_whisper  # this script's folder is first on sys.path

from ttseval.corpus import DEMO_DATASET


def gpu_memory_sampler(stop: threading.Event, peak: list[int]) -> None:
    """The most GPU memory in use (MiB) while the run goes, from nvidia-smi."""
    while not stop.is_set():
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.split()
            peak[0] = max(peak[0], max((int(x) for x in out), default=0))
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return
        stop.wait(0.5)


def predictors(names: list[str], models: Path) -> list[str]:
    """The quality specs: dnsmos as it ships, the others from random weights of their real architectures."""
    # by path: the repository is not on sys.path (it would shadow ttseval)
    where = Path(__file__).resolve().parent.parent / "tests" / "support" / "tiny_models.py"
    spec = importlib.util.spec_from_file_location("tiny_models", where)
    tm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tm)
    built = {
        "dnsmos": lambda: "dnsmos",
        "utmos22": lambda: f"utmos22:weights={tm.build_random_utmos22(models / 'utmos_state_dict.pt')}",
        "nisqa": lambda: f"nisqa:weights={tm.build_random_nisqa(models / 'nisqa.tar')}",
    }
    unknown = sorted(set(names) - set(built))
    if unknown:
        raise SystemExit(f"--quality {', '.join(unknown)}: choose among {', '.join(built)}")
    return [built[n]() for n in names]


def evaluate(
    mode: str, models: Path, limit: int, tmp: Path, new_tokens: int, shard_size: int, quality: list[str]
) -> tuple[float, int, int, str]:
    folder = tmp / mode
    folder.mkdir()
    dataset = folder / "items.jsonl"
    lines = Path(DEMO_DATASET).read_text(encoding="utf-8").splitlines()
    dataset.write_text("\n".join(lines[:limit]) + "\n", encoding="utf-8")
    whisper = f"transformers:model={models / 'whisper'}:max_new_tokens={new_tokens}"
    (folder / "ttseval.toml").write_text(
        f"gpu = {'true' if mode == 'gpu' else 'false'}\nsimilarity = []\nshard_size = {shard_size}\n"
        f"quality = {json.dumps(quality)}\n"
        f'[asr]\nen = "{whisper}"\n"*" = "{whisper}"\n',
        encoding="utf-8",
    )
    env = dict(os.environ, HF_HUB_DISABLE_PROGRESS_BARS="1")
    if mode == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    systems = f"espeak-ng:en-us,transformers-tts:model={models / 'vits'}"
    stop, peak = threading.Event(), [0]
    sampler = threading.Thread(target=gpu_memory_sampler, args=(stop, peak), daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ttseval.cli",
            "evaluate",
            "--dataset",
            str(dataset),
            "--systems",
            systems,
            "--run-id",
            f"gpu-demo-{mode}",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    problems = [
        line for line in done.stderr.splitlines() if any(w in line for w in ("Error", "Traceback", "Crashed", "Failed"))
    ]
    return wall, done.returncode, peak[0], "\n".join(problems[-12:] + done.stdout.splitlines()[-25:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", choices=sorted(DIMS), default="tiny")
    parser.add_argument("--limit", type=int, default=24, help="items of the bundled benchmark")
    parser.add_argument("--modes", default="gpu,cpu", help="gpu (gpu = true), cpu (the GPU hidden), or both")
    parser.add_argument("--new-tokens", type=int, default=32, help="Whisper's max_new_tokens")
    parser.add_argument("--shard-size", type=int, default=8, help="the setting shard_size (items per task)")
    parser.add_argument("--quality", default="dnsmos", help="MOS predictors: dnsmos, utmos22, nisqa (comma-separated)")
    args = parser.parse_args()
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    print(
        f"{time.strftime('%Y-%m-%d')} size={args.size} GPU={gpu} torch={torch.__version__} items={args.limit} "
        f"shard_size={args.shard_size} quality={args.quality}"
    )
    walls = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        models = tmp / "models"
        build_whisper(models / "whisper", DIMS[args.size]["whisper"])
        build_vits(models / "vits", DIMS[args.size]["vits"])
        quality = predictors([q.strip() for q in args.quality.split(",") if q.strip()], models)
        for mode in args.modes.split(","):
            wall, code, peak, tail = evaluate(mode, models, args.limit, tmp, args.new_tokens, args.shard_size, quality)
            walls[mode] = wall
            print(f"--- {mode}: exit {code}, {wall:.1f} s, GPU memory in use at most {peak} MiB\n{tail}")
    if {"gpu", "cpu"} <= walls.keys():
        print(f"evaluate wall: GPU hidden / gpu = true = {walls['cpu'] / walls['gpu']:.2f}x")


if __name__ == "__main__":
    main()
