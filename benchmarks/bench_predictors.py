"""Clips per second and peak memory of the local-weights models UTMOS22, NISQA, sherpa-onnx, SpeechBrain's
ECAPA and VoxLingua107, and Seed-TTS-eval's SIM encoder when asked for (`--only`: it is WavLM-Large's size).

    python benchmarks/bench_predictors.py --clips 16 --seconds 4 [--device cuda] [--only utmos22,seedtts-sim]

`--device` is the torch models' device option (UTMOS22, ECAPA, VoxLingua107, Seed-TTS-eval SIM; NISQA and sherpa-onnx
run on the CPU); on a GPU each child also reports the most GPU memory torch allocated.

Each predictor runs in a child process of its own, from files built with random weights by tests/support/tiny_models.py
(UTMOS22, NISQA, ECAPA and VoxLingua107 at their real sizes: 103 M, 0.2 M, 20.8 M and 21 M weights; the sherpa-onnx
model is a tiny x-vector, far smaller than CAM++, so its figures show sherpa-onnx's front end more than a real
model). The child reports the time to build and load the model, clips per second over `--clips` clips of `--seconds`
s (speech-like tones at 16 kHz, all of one length: UTMOS22 and NISQA batch them), and its peak resident memory
(ru_maxrss). A last child loads all of them at once and scores the same clips with each: its peak against the
largest single one is the memory that loading every model of a worker at once costs over one model at a time.

Then the setting models_in_memory, as a worker meets it: two children each run `--shards` shards through the
stages' own provider cache (ttseval.tasks.provider_cache.get_provider), every model on every shard in turn, one with
models_in_memory = 0 (each model loaded once) and one with 1 (one loaded at a time, freed before the next): each
child's peak, wall time and a digest of every score, which must be equal.
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
sys.path.append(str(ROOT))  # after an installed ttseval: the repository root would shadow it


def _clips(count: int, seconds: float) -> list:
    import numpy as np

    from ttseval.core.audio import Audio

    t = np.arange(int(16000 * seconds)) / 16000
    return [
        Audio(
            (0.2 * sum(np.sin(2 * np.pi * k * (110 + 10 * i) * t) / k for k in range(1, 6))).astype(np.float32), 16000
        )
        for i in range(count)
    ]


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


KINDS = {"sherpa-onnx": "speaker", "speechbrain-ecapa": "speaker", "speechbrain-lid": "lid", "seedtts-sim": "speaker"}
"""Each predictor's stage kind (the rest are MOS predictors, "quality"), and the method each kind is run by."""
RUN = {"speaker": "embed", "lid": "identify", "quality": "score"}


def _kind(spec: str) -> str:
    return KINDS.get(spec.split(":")[0], "quality")


def child(specs: list[str], count: int, seconds: float) -> None:
    """Load every spec, then score the clips with each: one JSON line per spec and one for the process."""
    from ttseval.providers.lid import LIDS
    from ttseval.providers.quality import QUALITY
    from ttseval.providers.speaker import SPEAKERS

    clips = _clips(count, seconds)
    before = _peak_mib()
    models = []
    for spec in specs:
        started = time.perf_counter()
        model = {"speaker": SPEAKERS, "lid": LIDS, "quality": QUALITY}[_kind(spec)].build(spec)
        run = getattr(model, RUN[_kind(spec)])
        run(clips[:1])  # loads the weights
        models.append((spec, run, time.perf_counter() - started))
    for spec, run, load_s in models:
        started = time.perf_counter()
        out = run(clips)
        elapsed = time.perf_counter() - started
        assert len(out) == count
        print(
            json.dumps(
                {"spec": spec.split(":")[0], "load_s": round(load_s, 2), "clips_per_s": round(count / elapsed, 2)}
            ),
            flush=True,
        )
    print(
        json.dumps(
            {"peak_mib": round(_peak_mib(), 1), "before_models_mib": round(before, 1), "gpu_mib": _gpu_peak_mib()}
        ),
        flush=True,
    )


def _gpu_peak_mib() -> float | None:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def worker(specs: list[str], count: int, seconds: float, shards: int, in_memory: int) -> None:
    """Run `shards` shards of the clips through every spec, as the model stages do, with this models_in_memory."""
    import hashlib

    from ttseval.core.config import Settings
    from ttseval.tasks.provider_cache import get_provider

    settings = Settings(models_in_memory=in_memory)
    clips = _clips(count, seconds)
    digest = hashlib.sha256()
    started = time.perf_counter()
    for _ in range(shards):
        for spec in specs:
            kind = _kind(spec)
            model = get_provider(kind, spec, settings)
            run = RUN[kind]
            digest.update(repr(getattr(model, run)(clips)).encode())
            del model
    print(
        json.dumps(
            {
                "peak_mib": round(_peak_mib(), 1),
                "wall_s": round(time.perf_counter() - started, 2),
                "digest": digest.hexdigest()[:16],
            }
        ),
        flush=True,
    )


def _tm():
    from tests.support import tiny_models

    return tiny_models


BUILDERS = {  # each predictor's spec, built with random weights into a folder, for a device
    "utmos22": lambda m, d: f"utmos22:weights={_tm().build_random_utmos22(m / 'utmos_state_dict.pt')}:device={d}",
    "nisqa": lambda m, d: f"nisqa:weights={_tm().build_random_nisqa(m / 'nisqa.tar')}",
    "sherpa-onnx": lambda m, d: f"sherpa-onnx:model={_tm().build_tiny_sherpa_speaker(m / 'tiny_xvector.onnx')}",
    "speechbrain-ecapa": lambda m, d: f"speechbrain-ecapa:model={_tm().build_random_ecapa(m / 'ecapa')}:device={d}",
    "speechbrain-lid": lambda m, d: (
        f"speechbrain-lid:model={_tm().build_random_voxlingua107(m / 'voxlingua107')}:device={d}"
    ),
    "seedtts-sim": lambda m, d: (
        "seedtts-sim:weights="
        + str(_tm().build_random_seedtts_sim(m / "wavlm_large_finetune.pth", sizes=_tm().SEEDTTS_SIM_LARGE))
        + f":device={d}"
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--shards", type=int, default=3, help="shards a worker runs through every model")
    parser.add_argument("--device", default="cpu", help="the torch models' device: cpu, cuda, cuda:N or auto")
    parser.add_argument(
        "--only",
        default="utmos22,nisqa,sherpa-onnx,speechbrain-ecapa,speechbrain-lid",
        help="predictors to run, comma-separated (seedtts-sim too, at WavLM-Large's size)",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--build", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        name, folder, device = args.build
        print(BUILDERS[name](Path(folder), device))
        return 0
    if args.child and args.worker is not None:
        worker(args.child, args.clips, args.seconds, args.shards, args.worker)
        return 0
    if args.child:
        child(args.child, args.clips, args.seconds)
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-predictors-") as folder:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        unknown = sorted(set(wanted) - set(BUILDERS))
        if unknown:
            parser.error(f"--only {', '.join(unknown)}: choose among {', '.join(BUILDERS)}")
        # each model is built in a process of its own: a child inherits its parent's peak resident memory (ru_maxrss
        # survives fork and exec), so building WavLM-Large here would count in every child's peak
        specs = [
            subprocess.run(
                [sys.executable, __file__, "--build", name, folder, args.device],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            .stdout.strip()
            .splitlines()[-1]
            for name in wanted
        ]
        device = args.device
        print(
            f"{args.clips} clips of {args.seconds:g} s at 16 kHz, device {device} (the torch models), each predictor "
            "in its own process"
        )
        peaks = []
        for spec in [*([s] for s in specs), specs]:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--clips",
                    str(args.clips),
                    "--seconds",
                    str(args.seconds),
                    "--child",
                    *spec,
                ],
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            if out.returncode != 0:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
            *rates, memory = lines
            if len(spec) == 1:
                peaks.append(memory["peak_mib"])
                rate = rates[0]
                gpu = f", GPU {memory['gpu_mib']:.1f} MiB" if memory.get("gpu_mib") is not None else ""
                print(
                    f"  {rate['spec']:<17} load {rate['load_s']:6.2f} s  {rate['clips_per_s']:8.2f} clips/s  "
                    f"peak {memory['peak_mib']:8.1f} MiB ({memory['before_models_mib']:.1f} before the model){gpu}"
                )
            else:
                print(
                    f"  all at once       peak {memory['peak_mib']:8.1f} MiB against {max(peaks):.1f} MiB for the "
                    f"largest one alone: {memory['peak_mib'] - max(peaks):+.1f} MiB"
                )
        print(f"a worker running {args.shards} shards through every model (setting models_in_memory):")
        seen = {}
        for in_memory in (0, 1):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--clips",
                    str(args.clips),
                    "--seconds",
                    str(args.seconds),
                    "--shards",
                    str(args.shards),
                    "--worker",
                    str(in_memory),
                    "--child",
                    *specs,
                ],
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            if out.returncode != 0:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            seen[in_memory] = json.loads(out.stdout.splitlines()[-1])
            print(
                f"  models_in_memory = {in_memory}: peak {seen[in_memory]['peak_mib']:8.1f} MiB, "
                f"{seen[in_memory]['wall_s']:7.2f} s, scores {seen[in_memory]['digest']}"
            )
        print(
            f"  one at a time / all kept: peak {seen[1]['peak_mib'] / seen[0]['peak_mib']:.2f}x, wall "
            f"{seen[1]['wall_s'] / seen[0]['wall_s']:.2f}x, same scores: {seen[0]['digest'] == seen[1]['digest']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
