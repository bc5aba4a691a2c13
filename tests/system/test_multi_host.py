"""A run across separate hosts, on the hosts of tests/support/lan.py: a client (the test
itself, with the dataset, the clips of a `files:` system and the voice prompts), a scheduler host (Dask scheduler and
Prefect server), an S3 host, two worker hosts (one declaring GPU=1) that see none of the client's files, and a vendor
host with a fake paid TTS API that counts what it would bill.

The run's results are compared key by key with the same command on one host (the session's shared cluster and a
local store), and the vendor's bill says that no paid call was made twice. Faults across hosts:
a worker host's link cut or its worker killed, the S3 host away, the scheduler host restarted, the Prefect server
restarted; each run completes with no key lost or stored twice and no item billed twice. The evaluate and the night
run the real engines and models on the hosts; the faults' runs, whose assertions are about rows and bills, run the
instant voices, recogniser and MOS predictor (tests/support/instant.py) on the same real hosts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pandas as pd
import pyarrow.dataset as ds
import pytest

from tests.support import instant
from tests.support.harness import BIN, ROOT, a_zone_where_2am_is_hours_away, demo_items, run_cli, stop_group, wait_http
from tests.support.lan import Lan, open_lan
from ttseval.core.store import ArtifactStore

ITEMS = ["emo-a-d0", "que-a-d0", "for-a-d0"]
SLOW_HEARING = instant.ENV | {"TTSEVAL_ASR": json.dumps({"*": "instant-asr:seconds=1", "en": "instant-asr:seconds=1"})}
"""The faults' runs: the hosts are real, the voices, recogniser and MOS predictor instant, the recogniser taking 1 s
a clip, so a run is at least 4 s from its end when its first transcript is stored (9 clips, two single-thread
workers) and a fault started then lands mid-run whatever the machine's speed."""


def _keyed(store: ArtifactStore, run_id: str, table: str, key: list[str], values: list[str]) -> pd.DataFrame:
    """A run's table as `read` gives it, indexed by `key` in order, with only the `values` columns compared."""
    return store.read(run_id, table).set_index(key).sort_index()[values]


@pytest.fixture(scope="module")
def lan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lan]:
    """The hosts (tests/support/lan.py), shared by the module's tests."""
    with open_lan(tmp_path_factory.mktemp("lan")) as hosts:
        yield hosts


def test_an_evaluate_across_separate_hosts_equals_the_same_run_on_one_host(
    lan: Lan, shared_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the client: `files:` clips and voice prompts only on the client's disk, espeak-ng, and a paid system on
    the vendor's host. Every row completes; each per-key result (clip SHA-256, transcript, WER, CER, MOS, speaker
    similarity to the prompt) equals the one-host run's; the vendor billed each item once per run that had to
    make it (3 here, 3 for the one-host run with its own store), and a second run on the hosts, computing nothing,
    billed nothing. A backfill-judge over the stored clips gives the same verdicts on the hosts as on one host."""
    files = lan.client_files
    rows = demo_items(files / "lan.jsonl", ITEMS)
    (files / "clips").mkdir()
    (files / "prompts").mkdir()
    for r in rows:
        subprocess.run(
            ["flite", "-voice", "slt", "-t", r["text"], "-o", str(files / "clips" / f"{r['item_id']}.wav")], check=True
        )
    for r in rows[:2]:  # two items carry a voice prompt: the similarity stage compares each clip with it
        subprocess.run(
            [
                "flite",
                "-voice",
                "kal",
                "-t",
                "A voice to imitate, said once.",
                "-o",
                str(files / "prompts" / f"{r['item_id']}.wav"),
            ],
            check=True,
        )
        r |= {"prompt_audio_uri": f"prompts/{r['item_id']}.wav", "prompt_text": "A voice to imitate, said once."}
    (files / "lan.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    paid = lan.paid
    args = [
        "evaluate",
        "--dataset",
        "lan.jsonl",
        "--systems",
        f"files:mine:dir=clips,espeak-ng:en-us,{paid}",
        "--judges",
        "",
    ]

    billed = lan.vendor_counters()["paid_calls"]
    hosts = run_cli(
        [*args, "--store", "s3://lan/ttseval", "--new-store", "--run-id", "h1"], lan.client_env(), cwd=files
    )
    assert hosts.returncode == 0, hosts.stderr[-4000:]
    assert lan.vendor_counters()["paid_calls"] - billed == 3
    one = run_cli([*args, "--store", str(files / "one-host"), "--run-id", "o1"], shared_env, cwd=files)
    assert one.returncode == 0, one.stderr[-4000:]
    again = run_cli([*args, "--store", "s3://lan/ttseval", "--run-id", "h2"], lan.client_env(), cwd=files)
    assert again.returncode == 0, again.stderr[-4000:]
    counters = lan.vendor_counters()
    assert counters["paid_calls"] - billed == 6  # 3 for the hosts' store, 3 for the one-host store, none for the re-run
    assert sorted(counters["paid_keys"][billed:]) == sorted([r["text"] for r in rows] * 2)

    on_hosts, on_one = lan.store("s3://lan/ttseval", monkeypatch), ArtifactStore(str(files / "one-host"))
    keys = {
        "synthesis": (["item_id", "system_id"], ["system_spec", "status", "audio_sha256"], 9),
        "transcripts": (["item_id", "system_id", "asr_id"], ["status", "hypothesis", "wer", "cer"], 9),
        "quality": (["item_id", "system_id", "quality_id"], ["status", "mos"], 9),
        "similarity": (["item_id", "system_id", "encoder_id"], ["status", "reference", "similarity"], 6),
    }
    synthesis = on_hosts.read("h1", "synthesis")
    paid_id = synthesis.loc[synthesis["system_spec"] == paid, "system_id"].iloc[0]
    for table, (key, values, count) in keys.items():
        for run_id in ("h1", "h2"):
            a, b = _keyed(on_hosts, run_id, table, key, values), _keyed(on_one, "o1", table, key, values)
            # the fake vendor's audio is a tone: Resemblyzer finds no speech in it, a final row on either side
            toned = (a.index.get_level_values("system_id") == paid_id) & (table == "similarity")
            assert len(a) == count and a.loc[~toned, "status"].eq("ok").all(), (run_id, table, a.to_string())
            assert a.loc[toned, "status"].eq("failed").all() and toned.sum() == (2 if table == "similarity" else 0)
            pd.testing.assert_frame_equal(a, b, check_exact=True, obj=f"{table} of {run_id}")
    # a new judge over the stored clips (backfill-judge), on the hosts and on one host: the same verdicts
    backfill = ["backfill-judge", "--judge", "objective", "--run-id"]
    judged = run_cli([*backfill, "h1", "--store", "s3://lan/ttseval"], lan.client_env(), cwd=files)
    assert judged.returncode == 0, judged.stderr[-4000:]
    judged_one = run_cli([*backfill, "o1", "--store", str(files / "one-host")], shared_env, cwd=files)
    assert judged_one.returncode == 0, judged_one.stderr[-4000:]
    verdicts = ["status", "winner", "candidate_first", "score_candidate", "score_baseline"]
    a = on_hosts.read("h1", "judgments").set_index(["item_id", "system_id", "judge_id"]).sort_index()[verdicts]
    b = on_one.read("o1", "judgments").set_index(["item_id", "system_id", "judge_id"]).sort_index()[verdicts]
    assert len(a) == 6 and a["status"].eq("ok").all() and a["winner"].notna().all(), a.to_string()
    pd.testing.assert_frame_equal(a, b, check_exact=True, obj="judgments")
    specs = set(on_hosts.read("h1", "synthesis")["system_spec"])
    assert specs == {"files:mine", "espeak-ng:en-us", paid}, specs  # the files system by its label, no path
    report = on_hosts.read_bytes("runs/h1/report.md").decode()
    assert "files:mine" in report and str(files) not in report


def test_a_nightly_deployment_picked_up_by_a_process_worker_on_another_host_equals_the_night_on_one_host(
    lan: Lan, shared_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deployments registered on the scheduler host's Prefect server; a Prefect process worker on a sixth host
    (the repository and a dataset folder of its own, the store's credentials, no client files) picks up a run of
    the nightly deployment started from the client, as the nightly schedule starts one, and the flow fans out on
    the Dask workers. Its per-key results equal `ttseval nightly` with the same parameters on one host, and the
    vendor billed each item once per store. The schedule is registered in a zone whose 02:00 is hours away: the
    runner stays up for the module, and a night it started at 02:00 UTC once held both workers for ten minutes."""
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from ttseval.deployments.register import register

    pool, run_id = "ttseval-lan", "nightly-20261126T020000Z"
    data = tmp_path_factory.mktemp("lan-runner-data")  # the runner's own disk (the hosts hide only the client's)
    rows = demo_items(data / "night.jsonl", ITEMS)
    paid = lan.paid
    systems = ["espeak-ng:en-us", paid]
    prefect = str(BIN / "prefect")
    created = subprocess.run(
        [prefect, "--no-prompt", "work-pool", "create", pool, "--type", "process"],
        env=lan.base | {"PREFECT_API_URL": lan.prefect_api},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    assert "nightly/nightly" in register(lan.prefect_api, pool, ROOT, timezone=a_zone_where_2am_is_hours_away())
    runner = lan.net.host("ttrunr")
    lan.start(
        runner,
        "runner",
        [prefect, "worker", "start", "--pool", pool, "--type", "process", "--name", "runner"],
        lan.base
        | lan.s3_env
        | {
            "PREFECT_API_URL": lan.prefect_api,
            "PREFECT_HOME": str(tmp_path_factory.mktemp("lan-runner-home")),
            "TTSEVAL_STORE": "s3://lan/nightly",
            "TTSEVAL_ALLOW_NEW_STORE": "true",
            "TTSEVAL_DASK_ADDRESS": lan.scheduler,
            "TTSEVAL_REPO": str(ROOT),
        },
    )
    billed = lan.vendor_counters()["paid_calls"]
    with temporary_settings({PREFECT_API_URL: lan.prefect_api}):
        flow_run = run_deployment(
            "nightly/nightly",
            parameters={"dataset": str(data / "night.jsonl"), "systems": systems, "run_id": run_id},
            timeout=480,
            poll_interval=2,
        )
    assert flow_run.state is not None and flow_run.state.is_completed(), (flow_run.state, lan.log_tail("runner"))
    assert flow_run.work_pool_name == pool
    assert lan.vendor_counters()["paid_calls"] - billed == 3

    one_store = tmp_path_factory.mktemp("lan-nightly-one-host")
    one = run_cli(
        [
            "nightly",
            "--dataset",
            str(data / "night.jsonl"),
            "--systems",
            ",".join(systems),
            "--store",
            str(one_store),
            "--run-id",
            run_id,
            "--new-store",
        ],
        shared_env,
        cwd=one_store,
    )
    assert one.returncode == 0, one.stderr[-4000:]
    assert lan.vendor_counters()["paid_calls"] - billed == 6
    on_hosts, on_one = lan.store("s3://lan/nightly", monkeypatch), ArtifactStore(str(one_store))
    keys = {
        "synthesis": (["item_id", "system_id"], ["system_spec", "status", "audio_sha256"]),
        "transcripts": (["item_id", "system_id", "asr_id"], ["status", "hypothesis", "wer", "cer"]),
        "quality": (["item_id", "system_id", "quality_id"], ["status", "mos"]),
        "judgments": (["item_id", "system_id", "judge_id"], ["status", "winner", "candidate_first"]),
    }
    for table, (key, values) in keys.items():
        a, b = _keyed(on_hosts, run_id, table, key, values), _keyed(on_one, run_id, table, key, values)
        assert len(a) == len(rows) * (1 if table == "judgments" else 2), (table, a.to_string())
        assert a["status"].eq("ok").all(), (table, a.to_string())
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=f"{table} of the night")
    assert on_hosts.read_bytes(f"runs/{run_id}/report.md") and on_hosts.read_bytes(f"runs/{run_id}/nightly.json")


class Run:
    """The evaluate a fault hits, as the fault sees it: what it has printed so far, what it has stored, and a wait
    for a condition on them (a fault lasts until the run is seen to have met it, not for a time)."""

    def __init__(self, lan: Lan, name: str, proc: subprocess.Popen) -> None:
        self.lan, self.name, self.proc, self.lines = lan, name, proc, []
        # the output is read as it comes, so a condition can look at it, and a full pipe never stalls the run
        self.reader = threading.Thread(target=lambda: self.lines.extend(iter(proc.stdout.readline, "")), daemon=True)
        self.reader.start()

    def output(self) -> str:
        return "".join(self.lines)

    def worker_logs(self) -> str:
        return "\n".join(self.lan.log_tail(w, 10**7) for w in ("worker-a", "worker-b"))

    def parts(self) -> int:
        """How many objects the run has stored (the store must be reachable)."""
        prefix = f"{self.name}/runs/{self.name}/"
        return sum(
            page.get("KeyCount", 0)
            for page in self.lan.s3().get_paginator("list_objects_v2").paginate(Bucket="lan", Prefix=prefix)
        )

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = 300) -> None:
        """Return once `condition()` holds; fail, saying `what` was awaited, if the run ends first or it does not
        hold within `timeout_s` (generous: the conditions come in seconds to a minute on an idle machine)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                ended = f"the run ended (exit {self.proc.returncode})" if self.proc.poll() is not None else "timed out"
                raise AssertionError(
                    f"waited for {what}: {ended}; it printed:\n{_first_error_and_end(self.output())}\n"
                    f"--- workers:\n{self.worker_logs()[-4000:]}"
                )
            time.sleep(0.2)


def _first_error_and_end(output: str, n: int = 4000) -> str:
    """The part of a command's output a failure is read from: from a little before its first traceback (the error
    that started it; what follows is often a second error while reporting the first), then its end."""
    first = output.find("Traceback (most recent call last)")
    if first < 0 or first >= len(output) - n:
        return output[-n:]
    return f"{output[max(0, first - 1000) : first + n]}\n[...]\n{output[-n:]}"


def _evaluate_through_a_fault(
    lan: Lan,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    after_first: str,
    fault: Callable[[Run], None],
    lost_in_flight: int = 0,
) -> tuple[float, float, str]:
    """An evaluate from the client (3 items x two instant voices and the paid system, one item per task, store
    s3://lan/<name>) with `fault(run)` called once the first part of table `after_first` is stored. Asserts that the
    fault hit mid-run (the run was going when it began, and stored more after), that the run completes, that every
    key is once in each table's parts (every row as written: a reader would hide a key written twice) with every
    row ok, and that the vendor billed each item once, but for at most `lost_in_flight` calls (a call in flight on
    a host that is lost is billed, and its answer never comes back). Returns the seconds from the run's start to
    the fault and from the fault's end to the run's, and what the command printed."""
    files = lan.client_files / name
    files.mkdir()
    rows = demo_items(files / "items.jsonl", ITEMS)
    paid = lan.paid
    billed = lan.vendor_counters()["paid_calls"]
    s3 = lan.s3()
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            str(BIN / "ttseval"),
            "evaluate",
            "--dataset",
            "items.jsonl",
            "--systems",
            f"instant:a,instant:b:pace=1.2,{paid}",
            "--store",
            f"s3://lan/{name}",
            "--new-store",
            "--run-id",
            name,
            "--shard-size",
            "1",
            "--judges",
            "",
        ],
        env=lan.client_env() | SLOW_HEARING,
        cwd=files,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    run = Run(lan, name, proc)
    try:
        run.wait_for(
            lambda: bool(s3.list_objects_v2(Bucket="lan", Prefix=f"{name}/runs/{name}/{after_first}/").get("KeyCount")),
            f"the first part of {after_first} before the fault",
            timeout_s=400,
        )
        stored_at_fault = run.parts()
        fault_at = time.monotonic()
        fault(run)
        fault_end = time.monotonic()
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        run.reader.join(timeout=60)
    ended = time.monotonic()
    out = run.output()
    assert proc.returncode == 0, out[-4000:]
    # the fault hit mid-run: begun while the run was going (above), and the run stored more after it
    assert run.parts() > stored_at_fault, f"the run had stored all {stored_at_fault} parts when the fault hit"
    assert 3 <= lan.vendor_counters()["paid_calls"] - billed <= 3 + lost_in_flight
    store = lan.store(f"s3://lan/{name}", monkeypatch)
    for table, key in (
        ("synthesis", ["item_id", "system_id"]),
        ("transcripts", ["item_id", "system_id", "asr_id"]),
        ("quality", ["item_id", "system_id", "quality_id"]),
    ):
        raw = ds.dataset(store.part_files(name, table), format="parquet", filesystem=store.fs).to_table().to_pandas()
        assert len(raw) == 3 * len(rows) and not raw.duplicated(key).any(), (table, raw[key].to_string())
        assert raw["status"].eq("ok").all(), (table, raw.to_string())
    return fault_at - started, ended - fault_end, out


@pytest.mark.parametrize("fault", ["link cut", "killed"])
def test_a_worker_host_lost_mid_run_loses_no_row_and_bills_no_item_twice(
    lan: Lan, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """A worker host lost mid-run once the first transcript is stored: its link cut (a pulled cable;
    the scheduler drops it after tests/support/lan.py WORKER_TTL) or its worker killed (SIGKILL of the whole process
    group: the scheduler sees the connection close). Its tasks go to worker-b; nothing is lost, no key is stored twice
    and no item billed twice (what a worker finished was in the store before it was lost; the one call a single-thread
    worker may have in flight when it is lost is billed and bought again). The host is then restarted (what is left of
    its worker killed, the link mended, a new worker started), so the module's cluster is whole."""
    worker_a = lan.hosts["worker-a"]

    def lose(_: Run) -> None:
        if fault == "link cut":
            worker_a.cut()
        else:
            os.killpg(lan.procs["worker-a"].pid, signal.SIGKILL)

    try:
        # the stages overlap, so worker-a may be in a paid call when it is lost: that one call may be bought again
        into, recovered, _ = _evaluate_through_a_fault(
            lan, monkeypatch, fault.replace(" ", "-"), "transcripts", lose, lost_in_flight=1
        )
        assert set(lan.worker_hosts()) == {lan.hosts["worker-b"].ip}  # the scheduler dropped the lost host
    finally:
        stop_group(lan.procs.pop("worker-a"))
        worker_a.mend()
        lan.start_worker("worker-a")
        lan.wait_workers(2)
    print(f"worker host {fault} {into:.1f} s into the run; the run ended {recovered:.1f} s after")


def test_the_s3_host_away_mid_run_is_waited_for_and_nothing_is_lost_or_bought_twice(
    lan: Lan, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's host away mid-run: the S3 host's link is cut once the first clip is stored, while
    the other clips, the paid ones among them, are being made, and mended once the run says it is waiting for the
    store: longer than a task's own retries ride out (each try of a store operation that gets no answer takes the
    AWS SDK about 10 s; the store says it waits once they are spent). Every store operation that cannot reach the
    store is tried again for up to `store_wait_s` (120 s by default), on the workers and on the client, so the run
    completes as above: an answer that came while the store was away was kept and stored when it came back, not
    bought again."""
    store_host = lan.hosts["s3"]
    waiting = "the store s3://lan/s3-away cannot be reached"
    away_s = []

    def away(run: Run) -> None:
        cut = time.monotonic()
        store_host.cut()
        try:
            run.wait_for(lambda: waiting in run.output() + run.worker_logs(), f"the run to say {waiting!r}")
        finally:
            store_host.mend()
            away_s.append(time.monotonic() - cut)

    into, recovered, out = _evaluate_through_a_fault(lan, monkeypatch, "s3-away", "synthesis", away)
    # the wait happened: the client or a worker said it was waiting for the store, and the run still completed
    assert waiting in out + "\n".join(lan.log_tail(w, 10**7) for w in ("worker-a", "worker-b")), out[-4000:]
    print(f"S3 host away {away_s[0]:.1f} s from {into:.1f} s into the run; the run ended {recovered:.1f} s after")


@pytest.mark.parametrize("fault", ["scheduler host", "prefect server"])
def test_the_scheduler_host_or_the_prefect_server_restarted_mid_run_loses_nothing_and_bills_no_item_twice(
    lan: Lan, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """Once the first transcript is stored: the scheduler host restarted (its Dask scheduler and
    Prefect server stopped, and started again once the run has said it lost the scheduler, the Prefect database
    kept on its disk), or only the Prefect server restarted (started again once the run has stored a part more
    without it: its tasks report to the server through events, which wait for it).

    A lost scheduler cancels every future of the run and the workers stop; their supervisor starts them again
    (Lan.start_worker) and they join the new scheduler. The client reconnects, and the flow, which waits up to
    `scheduler_wait_s` for that (flows/runner.py through_scheduler_restarts), plans again from the store and
    computes only what was not stored: the run completes with no key twice and no item billed twice. Before that
    wait the command failed (exit 1, FutureCancelledError: scheduler-connection-lost). A Prefect server away for a
    while is ridden out by the Prefect client's own retries of its API calls."""
    names = ["scheduler", "prefect"] if fault == "scheduler host" else ["prefect"]

    lost = f"the Dask scheduler at {lan.scheduler} was lost mid-run"

    def restart(run: Run) -> None:
        for name in names:
            stop_group(lan.procs.pop(name))
        stored = run.parts()
        # down until the run has met the outage: it noticed the lost scheduler, or went on without the server
        if "scheduler" in names:
            run.wait_for(lambda: lost in run.output(), f"the run to say {lost!r}")
        else:
            run.wait_for(lambda: run.parts() > stored, "a part stored while the Prefect server was down")
        lan.start_prefect()
        if "scheduler" in names:
            lan.start_scheduler()
        wait_http(lan.prefect_api + "/health", 120)

    try:
        into, recovered, out = _evaluate_through_a_fault(
            lan, monkeypatch, fault.replace(" ", "-"), "transcripts", restart
        )
    finally:
        # whatever failed, the module's hosts are whole again for the next test (a failure before the restart
        # left the scheduler host's servers stopped, and the next test would fail on that instead of its own)
        if "prefect" not in lan.procs:
            lan.start_prefect()
        if "scheduler" not in lan.procs:
            lan.start_scheduler()
        wait_http(lan.prefect_api + "/health", 120)
        lan.wait_workers(2)
    assert (lost in out and "is back; planning again from the store" in out) == (fault == "scheduler host"), out
    print(f"{fault} restarted {into:.1f} s into the run; the run ended {recovered:.1f} s after")
