"""CPU an idle Dask LocalCluster spends on its own housekeeping, with Dask's defaults and with ttseval's
(ttseval.infra.dask_defaults), side by side in one run.

Each way runs in a fresh process (Dask's configuration is per process): a LocalCluster as the flows make it
(2 worker processes of one thread by default), one trivial task so that every part has started, then nothing for
--seconds while psutil reads the CPU seconds of the process (scheduler and nannies) and of each worker process.

Prints CPU-seconds a minute for each way, by process, and their ratio. Usage:
  python benchmarks/bench_dask_idle.py [--seconds 60] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def one(mode: str, seconds: float, workers: int) -> dict:
    """In this process: the cluster with `mode`'s configuration; CPU seconds a minute of this process and its
    worker processes while idle."""
    import psutil

    if mode == "ttseval":
        from ttseval.infra.dask_defaults import dask_defaults

        dask_defaults()
    from distributed import Client, LocalCluster

    me = psutil.Process()
    with (
        LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        client.submit(sum, [1, 2]).result()
        time.sleep(2)
        procs = [me, *me.children(recursive=True)]
        before = {p.pid: sum(p.cpu_times()[:2]) for p in procs}
        time.sleep(seconds)
        used = {p.pid: sum(p.cpu_times()[:2]) - before[p.pid] for p in procs}
    per_min = 60.0 / seconds
    return {
        "command process (scheduler, nannies)": used[me.pid] * per_min,
        "worker processes": sum(v for pid, v in used.items() if pid != me.pid) * per_min,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--one", choices=["dask", "ttseval"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.seconds, args.workers)))
        return
    results = {}
    for mode in ("dask", "ttseval"):
        out = subprocess.run(
            [sys.executable, __file__, "--one", mode, "--seconds", str(args.seconds), "--workers", str(args.workers)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        results[mode] = json.loads(out.strip().splitlines()[-1])
    print(f"idle LocalCluster, {args.workers} worker processes, {args.seconds:.0f} s each way; CPU-seconds a minute:")
    print(f"  {'process':<40} {'Dask defaults':>14} {'ttseval':>10}")
    for name in results["dask"]:
        print(f"  {name:<40} {results['dask'][name]:14.2f} {results['ttseval'][name]:10.2f}")
    total = {mode: sum(r.values()) for mode, r in results.items()}
    print(f"  {'total':<40} {total['dask']:14.2f} {total['ttseval']:10.2f}")
    print(f"ttseval / Dask defaults: {total['ttseval'] / total['dask']:.3f}")


if __name__ == "__main__":
    main()
