"""Clips per second and peak memory of the local-weights models of issue 28: UTMOS22, NISQA, sherpa-onnx, SpeechBrain's
ECAPA and VoxLingua107.

    python benchmarks/bench_predictors.py --clips 16 --seconds 4

Each predictor runs in a child process of its own, from files built with random weights by tests/tiny_models.py
(UTMOS22, NISQA, ECAPA and VoxLingua107 at their real sizes: 103 M, 0.2 M, 20.8 M and 21 M weights; the sherpa-onnx model is a tiny x-vector, far
smaller than CAM++, so its figures show sherpa-onnx's front end more than a real model). The child reports the time
to build and load the model, clips per second over `--clips` clips of `--seconds` s (speech-like tones at 16 kHz, all
of one length: UTMOS22 and NISQA batch them), and its peak resident memory (ru_maxrss). A last child loads all of them
at once and scores the same clips with each: its peak against the largest single one is the memory that loading
every model of a worker at once costs over one model at a time.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _clips(count: int, seconds: float) -> list:
    import numpy as np

    from ttseval.core.audio import Audio

    t = np.arange(int(16000 * seconds)) / 16000
    return [Audio((0.2 * sum(np.sin(2 * np.pi * k * (110 + 10 * i) * t) / k for k in range(1, 6))).astype(np.float32),
                  16000) for i in range(count)]


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(specs: list[str], count: int, seconds: float) -> None:
    """Load every spec, then score the clips with each: one JSON line per spec and one for the process."""
    from ttseval.core.registry import LIDS, QUALITY, SPEAKERS

    clips = _clips(count, seconds)
    before = _peak_mib()
    models = []
    for spec in specs:
        started = time.perf_counter()
        registry = {"sherpa-onnx": SPEAKERS, "speechbrain-ecapa": SPEAKERS, "speechbrain-lid": LIDS}.get(
            spec.split(":")[0], QUALITY)
        model = registry.build(spec)
        run = {SPEAKERS: getattr(model, "embed", None), LIDS: getattr(model, "identify", None)}.get(
            registry, getattr(model, "score", None))
        run(clips[:1])  # loads the weights
        models.append((spec, run, time.perf_counter() - started))
    for spec, run, load_s in models:
        started = time.perf_counter()
        out = run(clips)
        elapsed = time.perf_counter() - started
        assert len(out) == count
        print(json.dumps({"spec": spec.split(":")[0], "load_s": round(load_s, 2),
                          "clips_per_s": round(count / elapsed, 2)}), flush=True)
    print(json.dumps({"peak_mib": round(_peak_mib(), 1), "before_models_mib": round(before, 1)}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.clips, args.seconds)
        return 0

    from tests.tiny_models import (build_random_ecapa, build_random_nisqa, build_random_utmos22,
                                   build_random_voxlingua107, build_tiny_sherpa_speaker)

    with tempfile.TemporaryDirectory(prefix="bench-predictors-") as folder:
        models = Path(folder)
        specs = [f"utmos22:weights={build_random_utmos22(models / 'utmos_state_dict.pt')}:device=cpu",
                 f"nisqa:weights={build_random_nisqa(models / 'nisqa.tar')}",
                 f"sherpa-onnx:model={build_tiny_sherpa_speaker(models / 'tiny_xvector.onnx')}",
                 f"speechbrain-ecapa:model={build_random_ecapa(models / 'ecapa')}:device=cpu",
                 f"speechbrain-lid:model={build_random_voxlingua107(models / 'voxlingua107')}:device=cpu"]
        print(f"{args.clips} clips of {args.seconds:g} s at 16 kHz, CPU, each predictor in its own process")
        peaks = []
        for spec in [*([s] for s in specs), specs]:
            out = subprocess.run([sys.executable, __file__, "--clips", str(args.clips), "--seconds",
                                  str(args.seconds), "--child", *spec], capture_output=True, text=True, cwd=ROOT)
            if out.returncode != 0:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
            *rates, memory = lines
            if len(spec) == 1:
                peaks.append(memory["peak_mib"])
                rate = rates[0]
                print(f"  {rate['spec']:<17} load {rate['load_s']:6.2f} s  {rate['clips_per_s']:8.2f} clips/s  "
                      f"peak {memory['peak_mib']:8.1f} MiB ({memory['before_models_mib']:.1f} before the model)")
            else:
                print(f"  all at once       peak {memory['peak_mib']:8.1f} MiB against {max(peaks):.1f} MiB for the "
                      f"largest one alone: {memory['peak_mib'] - max(peaks):+.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
