"""The demo on one host against the same run spread over separate hosts, side by side in one run.

Stands up the hosts of tests/support/lan.py on this machine (network and mount namespaces; needs root): a scheduler host
(Dask scheduler, Prefect server), an S3 host (moto), two worker hosts (one thread each) and the client. Then runs
`ttseval evaluate` on the demo items (the default systems, recognisers, MOS predictor and judge) twice from the
client, each into a new store on the S3 host and reporting to the same Prefect server:

  one host   the command's own LocalCluster (2 workers, 1 thread each: the demo's default) on the client;
  hosts      the same command with TTSEVAL_DASK_ADDRESS: its tasks run on the two worker hosts.

and once more on the hosts with a fifth of the items, so that what a run costs per clip is told from what it costs
whatever its size. For each it prints the wall time; the requests the store served (moto's request log, by method)
and the bytes on the S3 host's link each way; what each host's processes spent in CPU (user + system, their reaped
children included); and, for the hosts, the packets on the scheduler host's link (Dask and Prefect together) and the
scheduler's task transitions and resident memory. It then holds 20,000 tasks with a synthesis shard's arguments in
the scheduler to measure its memory per waiting task, and from the per-clip figures derives what 100,000 items x 20
systems would cost (docs/cluster.md, "One host against separate hosts, and 100,000 items x 20 systems").

Usage (as root):
  python benchmarks/bench_hosts.py [--items 55] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.lan import Lan, open_lan  # noqa: E402  (the harness the multi-host tests use)

BIN = Path(sys.executable).parent
REQUEST = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) ')


def link_stats(lan: Lan, name: str) -> dict[str, int]:
    """Bytes and packets on host `name`'s link, seen from the client's side: rx is what the host sent."""
    out = subprocess.run(
        ["ip", "-s", "-j", "link", "show", lan.hosts[name].link], check=True, capture_output=True, text=True
    ).stdout
    stats = json.loads(out)[0]["stats64"]
    return {
        "sent": stats["rx"]["bytes"],
        "received": stats["tx"]["bytes"],
        "packets": stats["rx"]["packets"] + stats["tx"]["packets"],
    }


def requests(lan: Lan) -> dict[str, int]:
    """Requests moto has served so far, by method."""
    log = next(Path(f.name) for f in lan.logs if Path(f.name).stem == "s3")
    counts: dict[str, int] = {}
    for match in REQUEST.finditer(log.read_text(errors="replace")):
        counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return counts


def host_cpu(lan: Lan) -> dict[str, float]:
    """CPU seconds (user + system) of each host's processes and their descendants, reaped ones included."""
    import psutil

    totals = {}
    for name, proc in lan.procs.items():
        try:
            root = psutil.Process(proc.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        seconds = 0.0
        for p in tree:
            try:
                t = p.cpu_times()
                seconds += t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                pass
        host = "scheduler" if name in ("scheduler", "prefect") else name
        totals[host] = totals.get(host, 0.0) + seconds
    return totals


def scheduler_state(lan: Lan) -> dict[str, float]:
    """The lan scheduler's task transitions so far and its resident memory."""
    import psutil
    from distributed import Client

    with Client(lan.scheduler, timeout=60, set_as_default=False) as client:
        transitions = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
    return {"transitions": transitions, "rss_mib": psutil.Process(lan.procs["scheduler"].pid).memory_info().rss / 2**20}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(lan: Lan, name: str, env: dict[str, str], dataset: Path) -> dict:
    """One evaluate from the client into s3://lan/<name>; what it cost, as deltas over the run."""
    before = {
        "links": {h: link_stats(lan, h) for h in ("s3", "scheduler")},
        "requests": requests(lan),
        "cpu": host_cpu(lan),
        "client": children_cpu(),
        "scheduler": scheduler_state(lan),
    }
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            str(BIN / "ttseval"),
            "evaluate",
            "--dataset",
            str(dataset),
            "--store",
            f"s3://lan/{name}",
            "--new-store",
            "--run-id",
            name,
        ],
        env=env,
        cwd=lan.client_files,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{name}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    links = {h: link_stats(lan, h) for h in ("s3", "scheduler")}
    after_requests, cpu, sched = requests(lan), host_cpu(lan), scheduler_state(lan)
    s3 = lan.s3()
    objects = [
        o
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="lan", Prefix=f"{name}/")
        for o in page.get("Contents", [])
    ]
    clips = int(re.search(r"computed rows: \{'synthesis': (\d+)", done.stdout).group(1))
    return {
        "wall_s": wall,
        "clips": clips,
        "requests": {m: after_requests.get(m, 0) - before["requests"].get(m, 0) for m in after_requests},
        "s3_sent": links["s3"]["sent"] - before["links"]["s3"]["sent"],
        "s3_received": links["s3"]["received"] - before["links"]["s3"]["received"],
        "scheduler_packets": links["scheduler"]["packets"] - before["links"]["scheduler"]["packets"],
        "cpu": {
            "client": children_cpu() - before["client"],
            **{h: cpu.get(h, 0.0) - before["cpu"].get(h, 0.0) for h in cpu if h != "vendor"},
        },
        "transitions": sched["transitions"] - before["scheduler"]["transitions"],
        "scheduler_rss_mib": sched["rss_mib"],
        "objects": len(objects),
        "stored_bytes": sum(o["Size"] for o in objects),
        "audio_bytes": sum(o["Size"] for o in objects if "/blobs/" in o["Key"] or o["Key"].endswith(".wav")),
    }


def held_task_bytes(lan: Lan, payload: int, n: int = 20_000) -> float:
    """Scheduler memory per task it holds (bytes): `n` tasks of a `payload`-byte argument that no worker can run
    (a resource none declares), as the tasks of a run wait in the scheduler before their turn."""
    import psutil
    from distributed import Client

    proc = psutil.Process(lan.procs["scheduler"].pid)
    with Client(lan.scheduler, timeout=60, set_as_default=False) as client:
        before = proc.memory_info().rss
        futures = [client.submit(len, os.urandom(payload), pure=False, resources={"NOWHERE": 1}) for _ in range(n)]
        deadline = time.monotonic() + 120
        while client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) < n:
            if time.monotonic() > deadline:
                raise SystemExit("the scheduler did not take the probe's tasks within 120 s")
            time.sleep(0.5)
        held = proc.memory_info().rss - before
        client.cancel(futures)
    return held / n


def shard_payload(items: int) -> int:
    """The pickled arguments of one synthesis task of `items` items: what the scheduler holds per task."""
    import cloudpickle

    from ttseval.core.config import load_settings

    settings = load_settings(store="s3://lan/x")
    shard = {
        "spec": "espeak-ng:en-us",
        "items": [{"item_id": f"item-{i:06d}", "text": "x" * 190, "language": "en"} for i in range(items)],
    }
    return len(cloudpickle.dumps((settings, "run-id", shard, f"shard 1/{items}")))


def scale(small: dict, hosts: dict, per_task: float, shard: int, items: int, systems: int) -> list[str]:
    """What `items` x `systems` clips would cost: per clip, the difference between the two hosts runs over the
    difference in clips (what a run costs whatever its size, such as the report, cancels out)."""
    clips = items * systems
    extra = hosts["clips"] - small["clips"]

    def marginal(f) -> float:
        return (f(hosts) - f(small)) / extra

    per = {
        "requests": marginal(lambda r: sum(r["requests"].values())),
        "stored": marginal(lambda r: r["stored_bytes"]),
        "audio": marginal(lambda r: r["audio_bytes"]),
        "to_store": marginal(lambda r: r["s3_received"] + r["s3_sent"]),
        "transitions": marginal(lambda r: r["transitions"]),
        "worker_cpu": marginal(lambda r: r["cpu"].get("worker-a", 0) + r["cpu"].get("worker-b", 0)),
    }
    # one task per shard of `shard` items of one system, per stage: synthesis, transcripts, quality, judgments
    tasks = clips / shard * 4
    return [
        (
            f"per clip (hosts run of {hosts['clips']} clips minus the one of {small['clips']}): "
            f"{per['requests']:.1f} store requests, {per['to_store'] / 1024:.0f} KiB over the store's link, "
            f"{per['stored'] / 1024:.0f} KiB stored ({per['audio'] / 1024:.0f} KiB of it audio), "
            f"{per['transitions']:.2f} scheduler transitions, {per['worker_cpu']:.2f} worker CPU-s"
        ),
        f"scheduler memory per held task: {per_task / 1024:.1f} KiB (with a {shard}-item shard's arguments)",
        f"{items:,} items x {systems} systems = {clips:,} clips, shard size {shard}:",
        (
            f"  store requests {per['requests'] * clips:,.0f}; over the store's link "
            f"{per['to_store'] * clips / 2**30:,.0f} GiB; stored {per['stored'] * clips / 2**30:,.0f} GiB"
        ),
        (
            f"  about {tasks:,.0f} tasks; scheduler memory if all are submitted at once "
            f"{tasks * per_task / 2**30:,.1f} GiB"
        ),
        *(
            f"  worker CPU {per['worker_cpu'] * clips / 3600:,.0f} core-hours: "
            f"{per['worker_cpu'] * clips / n / 3600:,.1f} h on {n} one-core workers"
            for n in (8, 64, 256)
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=55, help="the first N demo items (the demo has 55)")
    parser.add_argument("--keep", action="store_true", help="keep the hosts' folders (logs) after the run")
    args = parser.parse_args()
    from ttseval.corpus import DEMO_DATASET

    root = Path(tempfile.mkdtemp(prefix="bench-hosts-"))
    with open_lan(root) as lan:
        dataset = lan.client_files / "items.jsonl"
        lines = DEMO_DATASET.read_text(encoding="utf-8").splitlines()[: args.items]
        dataset.write_text("\n".join(lines) + "\n", encoding="utf-8")
        common = lan.base | lan.s3_env | {"PREFECT_API_URL": lan.prefect_api}
        one = measure(lan, "one-host", common | {"TTSEVAL_N_WORKERS": "2"}, dataset)
        on_hosts = common | {"TTSEVAL_DASK_ADDRESS": lan.scheduler}
        small_set = lan.client_files / "small.jsonl"
        small_set.write_text("\n".join(lines[: max(1, args.items // 5)]) + "\n", encoding="utf-8")
        small = measure(lan, "hosts-small", on_hosts, small_set)
        hosts = measure(lan, "hosts", on_hosts, dataset)
        print(
            f"{args.items} demo items, default systems; {os.cpu_count()} cores; "
            f"{time.strftime('%Y-%m-%d', time.gmtime())}"
        )
        print(f"{'':34}{'one host':>14}{'hosts':>14}{'hosts/one':>11}")
        rows = [
            ("wall time (s)", one["wall_s"], hosts["wall_s"]),
            ("clips", one["clips"], hosts["clips"]),
            ("store requests", sum(one["requests"].values()), sum(hosts["requests"].values())),
            *(
                (f"  {m}", one["requests"].get(m, 0), hosts["requests"].get(m, 0))
                for m in sorted(set(one["requests"]) | set(hosts["requests"]))
            ),
            ("bytes to the store (MiB)", one["s3_received"] / 2**20, hosts["s3_received"] / 2**20),
            ("bytes from the store (MiB)", one["s3_sent"] / 2**20, hosts["s3_sent"] / 2**20),
            ("objects stored", one["objects"], hosts["objects"]),
            ("stored (MiB)", one["stored_bytes"] / 2**20, hosts["stored_bytes"] / 2**20),
            ("scheduler host packets", one["scheduler_packets"], hosts["scheduler_packets"]),
            ("scheduler transitions", None, hosts["transitions"]),
            *(
                (f"CPU-s {h}", one["cpu"].get(h), hosts["cpu"].get(h))
                for h in ("client", "scheduler", "s3", "worker-a", "worker-b")
            ),
            ("CPU-s all hosts", sum(one["cpu"].values()), sum(hosts["cpu"].values())),
        ]
        for label, a, b in rows:
            cells = [
                f"{v:14.1f}" if isinstance(v, float) else f"{v:14}" if v is not None else f"{'-':>14}" for v in (a, b)
            ]
            ratio = f"{b / a:11.2f}" if a and b is not None else f"{'':11}"
            print(f"{label:34}{''.join(cells)}{ratio}")
        print(f"scheduler resident memory after the hosts run: {hosts['scheduler_rss_mib']:.0f} MiB")
        shard = 8
        per_task = held_task_bytes(lan, shard_payload(shard))
        print("\n".join(scale(small, hosts, per_task, shard, 100_000, 20)))
    if not args.keep:
        subprocess.run(["rm", "-rf", str(root)], check=False)


if __name__ == "__main__":
    main()
