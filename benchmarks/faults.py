"""The fault suite's scenarios, run and counted: nothing lost, nothing duplicated, nothing paid twice.

Scenarios (each prints one row: faults injected, items expected and present, duplicate rows, paid calls made
again for a key already paid, and the time the recovery took):
  provider   a fault per item from the OpenAI-compatible fake on loopback (429 with Retry-After, a 503 burst,
             a reset mid-body, truncated audio, a body that is not audio, a timeout, silence, clipping), then
             a second pass as a resumed run makes it; paid calls counted per text at the fake
  recompute  every synthesis shard run a second time, as Dask does when the worker holding a finished task's
             result dies (ttseval.tasks.synthesize.synthesize_items), provider calls counted
  racers     12 invocations taking one run id's lease at once (ttseval.core.lease), locally
  worker     one of the two Dask workers of `ttseval evaluate` (flite, counted calls, 9 items, shard size 1,
             the audio reuse cache off) killed with SIGKILL once 6 synthesis parts are stored; "paid again" is
             synthesis calls made again for a key stored before the kill; raw rows per key in every table
  store-full the store a 300 kB tmpfs (a private mount namespace: `unshare`) that fills mid-run (exit 2, the
             fix said), then grown; the same run id run again to the end
  sigkill    `ttseval evaluate` (espeak-ng, 9 items, shard size 1) killed with SIGKILL at a random moment
             (seeded), then run again to the end: rows per key in the raw Parquet parts, synthesis computed
             again for keys that were stored before the kill, and keys whose values (clip SHA-256, transcript,
             WER, CER, MOS) differ from an undisturbed run's; `--trials` of them

Usage: python benchmarks/faults.py [--trials 10] [--seed 0] [--skip-sigkill]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent
ROW = "{:<11} {:>6} {:>9} {:>9} {:>11} {:>14} {:>11} {:>14}"
VALUES = {"synthesis": ["audio_sha256"], "transcripts": ["hypothesis", "wer", "cer"], "quality": ["mos"]}


def provider_scenario(tmp: Path) -> tuple:
    from tests.support.fake_tts import FakeOpenAISpeech, TTSReply
    from ttseval.core.config import load_settings
    from ttseval.core.registry import Spec
    from ttseval.providers.tts import TTS
    from ttseval.tasks.synthesize import synthesize_rows

    faults = {
        "rate limited": [TTSReply.error(429, "slow down", retry_after="0")],
        "overloaded": [TTSReply.error(503, "busy")] * 2,
        "reset": [TTSReply(cut_after=100)],
        "truncated": [TTSReply.truncated()],
        "not audio": [TTSReply.not_audio()],
        "slow": [TTSReply(delay_s=2.5)],
        "silent": [TTSReply.empty()],
    }
    texts = [f"{name} item {k}" for name in faults for k in range(3)] + [f"clean item {k}" for k in range(9)]
    os.environ["OPENAI_API_KEY"] = "sk-bench"
    with FakeOpenAISpeech(api_key="sk-bench") as fake:
        for name, replies in faults.items():
            for k in range(3):
                fake.script(f"{name} item {k}", list(replies))
        spec = Spec.parse(f"openai:alloy:base_url={fake.base_url}:timeout_s=1")
        provider = TTS.build(spec)
        items = [
            {"item_id": f"p{n}", "text": t, "language": "en", "category": "q", "instruction": None}
            for n, t in enumerate(texts)
        ]
        settings = load_settings(store=str(tmp / "provider"), retry_backoff_s=0.01, item_retries=2)
        from ttseval.core.store import open_store

        store = open_store(settings)
        started = time.perf_counter()
        first = synthesize_rows(provider, spec, items, settings, store)
        settled = {i["text"] for i, r in zip(items, first) if not r.get("retryable")}
        paid_before = len(fake.paid_keys)
        # the resumed run: only keys without a settled row are asked again
        retry = [i for i, r in zip(items, first) if r.get("retryable")]
        second = synthesize_rows(provider, spec, retry, settings, store)
        seconds = time.perf_counter() - started
        repeated = len({t for t in fake.paid_keys[paid_before:] if t in settled})
        rows = {r["item_id"]: r for r in [*first, *second]}
    injected = sum(len(v) for v in faults.values()) * 3
    # a duplicate: a key with two settled rows (a retried key's new row replaces its retryable one)
    settled_rows = [r["item_id"] for r in [*first, *second] if not r.get("retryable")]
    return ("provider", injected, len(items), len(rows), len(settled_rows) - len(set(settled_rows)), repeated, seconds)


def recompute_scenario(tmp: Path) -> tuple:
    import pandas as pd

    from tests.support.healing import CALLS, SPEC, items_frame, settings_for
    from ttseval.tasks.parts import get_store
    from ttseval.tasks.plan import plan_synthesis
    from ttseval.tasks.synthesize import synthesize_items

    items = [(f"r{k}", f"plain words number {k}") for k in range(24)]
    settings = settings_for(tmp / "recompute", "BuggyTTS")
    plan = plan_synthesis(get_store(settings.store, settings.store_wait_s), "r", items_frame(items), [SPEC], settings)
    for shard in plan.shards:
        synthesize_items(settings, "r", shard)
    calls = len(CALLS)
    started = time.perf_counter()
    for shard in plan.shards:  # every task run again, as after a lost worker
        synthesize_items(settings, "r", shard)
    seconds = time.perf_counter() - started
    raw = pd.read_parquet(tmp / "recompute" / "runs" / "r" / "synthesis")
    return (
        "recompute",
        len(plan.shards),
        len(items),
        raw["item_id"].nunique(),
        int(raw.duplicated(["item_id", "system_id"]).sum()),
        len(CALLS) - calls,
        seconds,
    )


def racers_scenario(tmp: Path) -> tuple:
    from ttseval.core.lease import RunLease
    from ttseval.core.store import ArtifactStore

    store = ArtifactStore(str(tmp / "racers"))
    leases = [RunLease(store, "race") for _ in range(12)]
    results: list = [None] * len(leases)
    barrier = threading.Barrier(len(leases))

    def go(k: int) -> None:
        barrier.wait()
        results[k] = leases[k].try_acquire()

    started = time.perf_counter()
    threads = [threading.Thread(target=go, args=(k,)) for k in range(len(leases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = sum(r is None for r in results)
    return ("racers", len(leases), 1, winners, winners - 1, 0, time.perf_counter() - started)


def raw_duplicates(run: Path) -> int:
    import pandas as pd

    from ttseval.core.schemas import TABLES

    return sum(
        int(pd.read_parquet(run / table).duplicated(list(TABLES[table].key)).sum())
        for table in VALUES
        if (run / table).is_dir()
    )


def worker_scenario(tmp: Path, dataset: Path, env: dict[str, str]) -> tuple:
    import pandas as pd
    import psutil

    folder = tmp / "worker"
    folder.mkdir()
    calls = folder / "calls.log"
    env = env | {
        "TTSEVAL_PLUGINS": json.dumps({"tts": {"counting-flite": "tests.support.fakes:CountingFliteTTS"}}),
        "TTSEVAL_REUSE_AUDIO": "false",
        "PYTHONPATH": str(ROOT),
    }  # the counting engine is in tests/support/
    args = [
        str(BIN / "ttseval"),
        "evaluate",
        "--dataset",
        str(dataset),
        "--systems",
        f"counting-flite:slt:log={calls}",
        "--store",
        str(folder),
        "--run-id",
        "w",
        "--shard-size",
        "1",
        "--judges",
        "",
    ]
    with open(folder / "evaluate.log", "w") as out:
        proc = subprocess.Popen(args, env=env, cwd=folder, stdout=out, stderr=subprocess.STDOUT)
        synth = folder / "runs" / "w" / "synthesis"
        while not synth.is_dir() or len(list(synth.glob("part-*.parquet"))) < 6:
            if proc.poll() is not None:
                raise SystemExit(
                    "the run ended before a worker could be killed: " + (folder / "evaluate.log").read_text()[-2000:]
                )
            time.sleep(0.05)
        workers = [
            p for p in psutil.Process(proc.pid).children(recursive=True) if "spawn_main" in " ".join(p.cmdline())
        ]
        stored = set(pd.read_parquet(synth)["item_id"])
        os.kill(workers[0].pid, signal.SIGKILL)
        started = time.perf_counter()
        if proc.wait(timeout=900) != 0:
            raise SystemExit("the run with a killed worker failed")
        seconds = time.perf_counter() - started
    texts = [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines()]
    item_of = {
        json.loads(line)["text"]: json.loads(line)["item_id"]
        for line in dataset.read_text(encoding="utf-8").splitlines()
    }
    again = sum(1 for k, t in enumerate(texts) if t in texts[:k] and item_of[t] in stored)
    present = pd.read_parquet(synth)["item_id"].nunique()
    return "worker", 1, 9, present, raw_duplicates(folder / "runs" / "w"), again, seconds


STORE_FULL = """
mount -t tmpfs -o size=300k tmpfs "$2" || exit 9
"$1" "$@" >/dev/null 2>&1; echo "first $?"
mount -o remount,size=64m "$2"
start=$(date +%s%N); "$1" "$@" >/dev/null 2>&1; echo "second $? $(( ($(date +%s%N) - start) / 1000000 ))"
cp -a "$2" "$2.copy"
"""


def store_full_scenario(tmp: Path, dataset: Path, env: dict[str, str]) -> tuple:
    import pandas as pd

    store = tmp / "full"
    store.mkdir()
    args = evaluate_args(store, dataset)
    script = STORE_FULL.replace('"$1" "$@"', " ".join(f"'{a}'" for a in args)).replace("$2", str(store))
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    if not said.get("first", "").startswith("2") or not said.get("second", "").startswith("0 "):
        raise SystemExit(f"store-full: {done.stdout} {done.stderr[-2000:]}")
    run = Path(f"{store}.copy") / "runs" / "k"
    present = pd.read_parquet(run / "synthesis")["item_id"].nunique()
    return "store-full", 1, 9, present, raw_duplicates(run), 0, int(said["second"].split()[1]) / 1000


def evaluate_args(store: Path, dataset: Path) -> list[str]:
    return [
        str(BIN / "ttseval"),
        "evaluate",
        "--dataset",
        str(dataset),
        "--systems",
        "espeak-ng",
        "--store",
        str(store),
        "--run-id",
        "k",
        "--shard-size",
        "1",
        "--judges",
        "",
    ]


def stored_values(store: Path) -> dict[tuple, tuple]:
    """Each key's deterministic values in a finished run (the newest row per key, as every reader sees it)."""
    import pandas as pd

    from ttseval.core.schemas import TABLES
    from ttseval.core.store import ArtifactStore

    found = {}
    for table, columns in VALUES.items():
        frame = ArtifactStore(str(store)).read("k", table)
        for row in frame.to_dict("records"):
            key = (table, *(row[k] for k in TABLES[table].key))
            found[key] = tuple(
                None if pd.isna(v) else round(v, 6) if isinstance(v, float) else v for v in (row[c] for c in columns)
            )  # a missing value is None (NaN != NaN)
    return found


def sigkill_trial(tmp: Path, dataset: Path, delay_s: float, env: dict[str, str], calm: dict[tuple, tuple]) -> tuple:
    import pandas as pd

    args = evaluate_args(tmp, dataset)
    proc = subprocess.Popen(
        args, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    time.sleep(delay_s)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    synth = tmp / "runs" / "k" / "synthesis"
    before = set(pd.read_parquet(synth)["item_id"]) if synth.is_dir() and any(synth.glob("part-*")) else set()
    started = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=tmp, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the resumed run failed: {done.stderr[-2000:]}")
    log = json.loads(sorted((tmp / "runs" / "k" / "log").glob("*.json"))[-1].read_text())
    dup = raw_duplicates(tmp / "runs" / "k")
    present = pd.read_parquet(synth)["item_id"].nunique()
    again = max(0, log["computed"]["synthesis"] - (9 - len(before)))  # computed beyond what was missing
    got = stored_values(tmp)
    differ = sum(got.get(key) != value for key, value in calm.items()) + len(set(got) - set(calm))
    return len(before), present, dup, again, seconds, differ


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-sigkill", action="store_true")
    args = parser.parse_args()
    print(
        ROW.format(
            "scenario", "faults", "expected", "present", "duplicates", "paid again", "recover s", "values differ"
        )
    )
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for scenario in (provider_scenario, recompute_scenario, racers_scenario):
            name, faults, expected, present, dup, again, seconds = scenario(tmp)
            print(ROW.format(name, faults, expected, present, dup, again, f"{seconds:.2f}", "-"), flush=True)
        if args.skip_sigkill:
            return
        from ttseval.corpus import DEMO_DATASET

        keep = {"emo-a-d0", "par-a-d0", "for-a-d0", "syn-a-d0", "pro-a-d0", "que-a-d0", "que-a-d1", "mul-fr", "mul-ps"}
        rows = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines()]
        dataset = tmp / "small.jsonl"
        dataset.write_text("".join(json.dumps(r) + "\n" for r in rows if r["item_id"] in keep), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "PREFECT_API_URL"))}
        for scenario in (worker_scenario, store_full_scenario):
            name, faults, expected, present, dup, again, seconds = scenario(tmp, dataset, env)
            print(ROW.format(name, faults, expected, present, dup, again, f"{seconds:.2f}", "-"), flush=True)
        calm_store = tmp / "undisturbed"
        calm_store.mkdir()
        done = subprocess.run(
            evaluate_args(calm_store, dataset), env=env, cwd=calm_store, capture_output=True, text=True, timeout=900
        )
        if done.returncode != 0:
            raise SystemExit(f"the undisturbed run failed: {done.stderr[-2000:]}")
        calm = stored_values(calm_store)
        rng = random.Random(args.seed)
        for trial in range(args.trials):
            delay = round(rng.uniform(3.0, 25.0), 2)
            folder = tmp / f"kill{trial}"
            folder.mkdir()
            stored, present, dup, again, seconds, differ = sigkill_trial(folder, dataset, delay, env, calm)
            print(
                ROW.format(f"sigkill#{trial}", 1, 9, present, dup, again, f"{seconds:.2f}", f"{differ} of {len(calm)}")
                + f"   seed {args.seed}, killed after {delay} s with {stored} of 9 clips stored",
                flush=True,
            )


if __name__ == "__main__":
    main()
