"""The faults table tried many times under load: each fault dealt to an evaluate across separate hosts, at a random
moment, with CPU-bound processes beside the hosts; what it cost counted per run and per fault.

Stands up the hosts of tests/support/lan.py on this machine (network and mount namespaces; needs root): a scheduler
host (Dask scheduler, Prefect server), an S3 host (moto), two single-thread worker hosts, a vendor host (a fake paid
TTS API that counts what it would bill) and the client. The run and the faults are tests/support/host_faults.py's
(the ones tests/system/test_multi_host.py deals once each): 3 items x two instant voices and the paid system, the
recogniser taking 1 s a clip, so what is measured is the pipeline's recovery, not a model.

First one undisturbed run, checked whole. Then `--trials` rounds, each dealing every fault once, in turn, at a
random point of the run's progress: once it has stored k of its 27 row parts (9 clips x synthesis, transcripts and
quality), k drawn uniformly from 1-27 (the seed is printed; `--seed` replays a sequence), so the moment does not
depend on the machine's speed or its load; at k = 27 the fault lands in the end phase (compaction, the report).
For each run: the exit code (for the SIGKILL and SIGTERM of the command, the exit code of the same command run
again, as a user resumes), whether the fault hit mid-run (the run was going, with rows still to compute), keys lost
and rows duplicated over the synthesis, transcripts and quality tables (every row of the parts as written), rows not
ok, paid calls billed beyond one per paid item, and the seconds from the fault's end to the run's end. A run whose
fault could not be dealt (the condition it waits on never came) counts as not survived, with why.

Usage (as root):
  python benchmarks/faults_hosts.py [--trials 10] [--seed N] [--load 1] [--faults "S3 away,worker killed"]
      [--json out.jsonl] [--parts 27]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.host_faults import (  # noqa: E402  (the faults the system tier deals)
    FAULTS,
    ITEMS,
    KEYS,
    SYSTEMS,
    Fault,
    after_row_parts,
    evaluate_through,
    first_error_and_end,
    make_whole,
)
from tests.support.lan import Lan, open_lan  # noqa: E402

ROW = "{:<20} {:>5} {:>6} {:>4} {:>4} {:>5} {:>4} {:>6} {:>6} {:>8} {:>8}"
UNDISTURBED = Fault("undisturbed", lambda lan, run: None, "synthesis", 0)
ROW_PARTS = len(ITEMS) * SYSTEMS * len(KEYS)  # one part a clip and table at shard size 1: 27


def undisturbed(lan: Lan) -> float:
    """The seconds of the run with no fault, checked whole (what each fault's recovery is set against)."""
    started = time.monotonic()
    got = evaluate_through(lan, "undisturbed", UNDISTURBED, after_row_parts(1))
    if got.exit_code != 0 or got.lost or got.duplicated:
        raise SystemExit(f"the undisturbed run failed:\n{first_error_and_end(got.output)}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--load", type=int, default=1, help="CPU-bound processes beside the hosts")
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--json", type=Path, default=None, help="one JSON line per run")
    parser.add_argument(
        "--parts",
        type=int,
        default=None,
        help=f"deal every fault after this many row parts (1-{ROW_PARTS}), not a drawn number",
    )
    args = parser.parse_args()
    # SIGTERM (a kill, a CI timeout) unwinds like Ctrl-C, so the hosts and the CPU-bound processes are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    seed = random.SystemRandom().randrange(10**6) if args.seed is None else args.seed
    rng = random.Random(seed)
    chosen = [FAULTS[name.strip()] for name in args.faults.split(",")]
    print(f"seed {seed}; {args.trials} trials of {len(chosen)} faults; {args.load} CPU-bound process(es) beside")
    print(f"machine: {os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    load = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    results: dict[str, list[dict]] = {f.name: [] for f in chosen}
    log = open(args.json, "w") if args.json else None  # noqa: SIM115 - written run by run, closed at the end
    try:
        with tempfile.TemporaryDirectory() as d, open_lan(Path(d)) as lan:
            print(f"the undisturbed run: {undisturbed(lan):.1f} s", flush=True)
            head = ("fault", "trial", "into", "exit", "mid", "lost", "dup", "not ok", "paid+", "recover", "parts")
            print(ROW.format(*head))
            for trial in range(args.trials):
                for fault in chosen:
                    parts = rng.randint(1, ROW_PARTS) if args.parts is None else args.parts
                    name = f"{fault.name.replace(' ', '-').lower()}-{trial}"
                    row: dict = {"fault": fault.name, "trial": trial, "seed": seed, "after_parts": parts}
                    try:
                        got = evaluate_through(lan, name, fault, after_row_parts(parts))
                        row |= {k: v for k, v in vars(got).items() if k != "output"}
                        if got.exit_code != 0 or got.lost or got.duplicated or got.not_ok:
                            row["why"] = first_error_and_end(got.output, 1500)
                    except (
                        AssertionError,
                        RuntimeError,
                        OSError,
                        subprocess.TimeoutExpired,
                    ) as e:  # not dealt: not survived
                        row |= {"exit_code": None, "why": f"{type(e).__name__}: {str(e)[:1500]}"}
                    finally:
                        make_whole(lan)
                    results[fault.name].append(row)
                    if log:
                        log.write(json.dumps(row) + "\n")
                        log.flush()
                    print(
                        ROW.format(
                            fault.name,
                            trial,
                            f"{row['into_s']:.1f}" if "into_s" in row else "-",
                            str(row["exit_code"]),
                            "yes" if row.get("mid_run") else "no",
                            row.get("lost", "-"),
                            row.get("duplicated", "-"),
                            row.get("not_ok", "-"),
                            row.get("paid_again", "-"),
                            f"{row['recovered_s']:.1f}" if "recovered_s" in row else "-",
                            f"{parts}/{ROW_PARTS}",
                        ),
                        flush=True,
                    )
                    if "why" in row:
                        print("   " + row["why"].strip().replace("\n", "\n   ")[-3000:], flush=True)
    finally:
        for p in load:
            p.kill()
        if log:
            log.close()
    print()
    print(f"{'fault':<20} {'survived':>9} {'mid-run':>8} {'lost':>5} {'dup':>4} {'paid again':>11} {'recover s':>16}")
    for name, rows in results.items():
        ok = [r for r in rows if r["exit_code"] == 0 and not r.get("lost") and not r.get("duplicated")]
        mid = sum(bool(r.get("mid_run")) for r in rows)
        lost, dup = sum(r.get("lost", 0) for r in rows), sum(r.get("duplicated", 0) for r in rows)
        paid = [r.get("paid_again", 0) for r in rows]
        rec = [r["recovered_s"] for r in rows if "recovered_s" in r]
        recover = f"{statistics.median(rec):.1f} (max {max(rec):.1f})" if rec else "-"
        survived = f"{len(ok)} of {len(rows)}"
        paid_again = f"{sum(paid)} (max {max(paid, default=0)})"
        print(f"{name:<20} {survived:>9} {mid:>8} {lost:>5} {dup:>4} {paid_again:>11} {recover:>16}")


if __name__ == "__main__":
    main()
