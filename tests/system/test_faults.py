"""Process and storage faults in a real run: a Dask worker killed in the middle of the synthesis stage,
and the S3-compatible server stopped in the middle of a run. Provider faults are in each provider's tests
(tests/unit/test_tts_*.py, tests/unit/test_judge_*.py), the run lease in tests/unit/test_lease.py, SIGKILL of the
whole command in tests/system/test_evaluate_lifecycle.py, and many seeded SIGKILL trials in benchmarks/faults.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import psutil

from tests.support import instant
from tests.support.harness import BIN, cli_env, free_port, wait_http

TABLES = {
    "synthesis": ["item_id", "system_id"],
    "transcripts": ["item_id", "system_id", "asr_id"],
    "quality": ["item_id", "system_id", "quality_id"],
}


def _parts(folder: Path) -> int:
    return len(list(folder.glob("part-*.parquet"))) if folder.is_dir() else 0


def test_a_dask_worker_killed_mid_stage_costs_no_call_twice_and_no_duplicate(
    prefect_api: str, small_dataset: Path, tmp_path: Path
) -> None:
    """Killing one of the two Dask workers used to make Dask run the synthesis shards whose results died with it
    again: 16 duplicate raw rows and 16 calls made twice on the demo. The counting engine logs every call and holds
    its first call until the kill (tests.support.fakes.hold_first_call), so the synthesis stage is mid-way when
    the worker dies however fast the machine; the instant recogniser and MOS predictor hear the clips."""
    calls, gate = tmp_path / "calls.log", tmp_path / "gate"
    gate.mkdir()
    # without the audio reuse cache, so a second synthesis of a key is a second call to the engine
    env = cli_env(
        prefect_api,
        **instant.env({"tts": {"counting-flite": "tests.support.fakes:CountingFliteTTS"}}),
        TTSEVAL_REUSE_AUDIO="false",
    )
    args = [
        str(BIN / "ttseval"),
        "evaluate",
        "--dataset",
        str(small_dataset),
        "--systems",
        f"counting-flite:slt:log={calls}:gate={gate}",
        "--store",
        str(tmp_path / "store"),
        "--run-id",
        "w",
        "--shard-size",
        "1",
        "--judges",
        "",
    ]
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    synth = tmp_path / "store" / "runs" / "w" / "synthesis"
    deadline = time.monotonic() + 300
    while not ((gate / "held").exists() and _parts(synth) >= 6):
        assert proc.poll() is None and time.monotonic() < deadline, (
            f"within 300 s: held call {(gate / 'held').exists()}, {_parts(synth)} of 6 parts stored"
        )
        time.sleep(0.05)  # polls a condition, with the deadline above
    workers = []
    for p in psutil.Process(proc.pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):  # a flite call that ended since the listing
            if "spawn_main" in " ".join(p.cmdline()):
                workers.append(p)
    assert len(workers) == 2, [p.cmdline() for p in workers]
    stored_before = set(pd.read_parquet(synth)["item_id"])  # committed before the worker dies
    os.kill(workers[0].pid, signal.SIGKILL)  # the nanny starts a new one; Dask reschedules what it held
    (gate / "open").touch()
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    for table, key in TABLES.items():
        raw = pd.read_parquet(tmp_path / "store" / "runs" / "w" / table)  # every part, before any dedup
        assert not raw.duplicated(key).any(), (table, raw[raw.duplicated(key, keep=False)][key])
    made = Counter(calls.read_text(encoding="utf-8").splitlines())
    synthesis = pd.read_parquet(synth)
    assert set(synthesis["status"]) <= {"ok", "unsupported"} and (synthesis["status"] == "ok").sum() == 7
    # no key stored before the kill is synthesized again (before the fix, every shard the dead worker had
    # finished was, its result having died with it); a call in flight on the dead worker, never stored, may be
    item_of = {
        json.loads(line)["text"]: json.loads(line)["item_id"]
        for line in small_dataset.read_text(encoding="utf-8").splitlines()
    }
    again = {item_of[json.loads(text)]: n - 1 for text, n in made.items() if n > 1}
    assert not set(again) & stored_before, (again, stored_before)
    assert sum(again.values()) <= 1, again  # the one call in flight on the dead worker
    # each of the 7 clips made once, but for that one call (the flow's log cannot say it: it counts the rows of
    # the attempt whose result it got, and a re-run shard that found its first attempt's part computed none)
    assert sum(made.values()) == 7 + sum(again.values()), made


def test_the_s3_server_gone_for_good_mid_run_fails_clearly_after_the_wait_and_a_later_run_completes(
    prefect_api: str, small_dataset: Path, tmp_path: Path
) -> None:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"

    def moto() -> subprocess.Popen:
        server = subprocess.Popen(
            [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_http(endpoint, 30)
        import boto3

        boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"
        ).create_bucket(Bucket="fault-bucket")
        return server

    aws = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_REGION": "us-east-1",
        "TTSEVAL_TASK_RETRIES": "0",
        "TTSEVAL_STORE_WAIT_S": "5",
    }
    # the instant voice, recogniser and MOS predictor: what is tested is the store's failure and the later run
    env = cli_env(prefect_api, **aws, **instant.ENV)
    args = [
        str(BIN / "ttseval"),
        "evaluate",
        "--dataset",
        str(small_dataset),
        "--systems",
        "instant",
        "--store",
        "s3://fault-bucket/ttseval",
        "--run-id",
        "s3",
        "--shard-size",
        "1",
        "--judges",
        "",
    ]
    server = moto()
    import boto3

    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"
    )
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while True:  # wait for the first synthesis parts, then take the store away
        listing = s3.list_objects_v2(Bucket="fault-bucket", Prefix="ttseval/runs/s3/synthesis/").get("KeyCount", 0)
        if listing >= 2:
            break
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
        time.sleep(0.1)
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1, out[-3000:]
    # said as a store failure, naming it, once the store has been waited for (store_wait_s);
    # tests/system/test_multi_host.py has a store that comes back within the wait
    assert "ttseval: run failed:" in out and "s3://fault-bucket/ttseval" in out, out[-3000:]
    assert "waited 5 s, the store_wait_s setting" in out, out[-3000:]
    server = moto()  # back (empty: moto keeps nothing), and a later run completes from there
    try:
        again = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr[-3000:]
        import io

        keys = [
            o["Key"] for o in s3.list_objects_v2(Bucket="fault-bucket", Prefix="ttseval/runs/s3/synthesis/")["Contents"]
        ]
        rows = pd.concat(
            [
                pd.read_parquet(io.BytesIO(s3.get_object(Bucket="fault-bucket", Key=k)["Body"].read()))
                for k in keys
                if k.rsplit("/", 1)[-1].startswith("part-")
            ]
        )
        assert len(rows) == 9 and not rows.duplicated(["item_id", "system_id"]).any()
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


STORE_FAULTS = r"""
set -u
T=$1 D=$2 S=$3 OUT=$4
run() { "$T" evaluate --dataset "$D" --systems espeak-ng --store "$S" --run-id r --judges "" --workers 1 \
          >"$OUT/$1.out" 2>&1; echo $? >"$OUT/$1.rc"
        (cd "$S" && find . -type f | sort | xargs -r sha256sum) >"$OUT/$1.files"; }
mount -t tmpfs -o size=300k tmpfs "$S" || exit 9
run full
mount -o remount,size=64m "$S"
run freed
mount -o remount,ro "$S"
run readonly
cp -a "$S" "$OUT/store"
"""


def test_a_full_or_read_only_store_says_so_with_the_fix_and_changes_nothing(
    prefect_api: str, small_dataset: Path, tmp_path: Path
) -> None:
    """A real tmpfs of 300 kB (in a private mount namespace: `unshare`, no privileges needed) fills up in the
    middle of a run; then it is grown and the same run completes; then it is made read-only. Before, a full store
    was a 'run failed' with pyarrow's OSError retried three times, and a read-only one an OSError traceback from
    the lease (exit 1)."""
    lines = [json.loads(line) for line in small_dataset.read_text(encoding="utf-8").splitlines()]
    dataset = tmp_path / "two.jsonl"
    dataset.write_text(
        "".join(json.dumps(r) + "\n" for r in lines if r["item_id"] in ("emo-a-d0", "par-a-d0")), encoding="utf-8"
    )
    store, out = tmp_path / "mnt", tmp_path / "out"
    store.mkdir()
    out.mkdir()
    done = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            STORE_FAULTS,
            "sh",
            str(BIN / "ttseval"),
            str(dataset),
            str(store),
            str(out),
        ],
        env=cli_env(prefect_api),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr

    def last_said(text: str) -> str:
        # the CLI's last line of its own; what may come after it at shutdown is Prefect's (EventsWorker's "Still
        # processing items", seen once in a full run) or Python's (a multiprocessing resource_tracker warning)
        return ([line for line in text.strip().splitlines() if line.startswith("ttseval: ")] or [""])[-1]

    said = {
        step: (
            int((out / f"{step}.rc").read_text()),
            last_said((out / f"{step}.out").read_text()),
            dict(reversed(line.split()) for line in (out / f"{step}.files").read_text().splitlines()),
        )
        for step in ("full", "freed", "readonly")
    }
    rc, last, files = said["full"]
    assert rc == 2 and last.startswith(f"ttseval: error: the store {store} is full (no space left on device) "), last
    assert "free space there or point --store at another place" in last and "same --run-id resumes" in last
    assert not [f for f in files if f.endswith(".tmp")], files  # no half-written file left behind
    rc, last, freed = said["freed"]
    assert rc == 0, (out / "freed.out").read_text()[-3000:]
    assert {f: h for f, h in freed.items() if f in files} == files  # what the full store held is unchanged
    synthesis = pd.read_parquet(out / "store" / "runs" / "r" / "synthesis")
    assert sorted(synthesis["item_id"]) == ["emo-a-d0", "par-a-d0"] and set(synthesis["status"]) == {"ok"}
    rc, last, after = said["readonly"]
    assert rc == 2 and last == (
        f"ttseval: error: the store {store} is read-only (writing {store}/runs/r/.lease): "
        f"point --store at a writable place, or give this process write access there; "
        f"nothing stored there was changed"
    ), last
    assert after == freed
