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
import random
import subprocess
from collections.abc import Iterator

import pandas as pd
import pytest

from tests.support.harness import BIN, FAULT_SEED, ROOT, a_zone_where_2am_is_hours_away, demo_items, run_cli
from tests.support.host_faults import FAULTS, ITEMS, after_first_part, evaluate_through, first_error_and_end, make_whole
from tests.support.lan import Lan, open_lan
from ttseval.core.store import ArtifactStore


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


# The fault's moment: the first part of its table stored, then a random delay drawn from harness.FAULT_SEED. Up to
# 1.5 s: the run is still at least 2.5 s from its end then (host_faults.SLOW_HEARING).
HOST_FAULTS = ["worker link cut", "worker killed", "S3 away", "scheduler restarted", "Prefect restarted"]


@pytest.mark.parametrize("name", HOST_FAULTS)
def test_a_fault_across_the_hosts_mid_run_loses_no_row_and_bills_no_item_twice(
    lan: Lan, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Each fault of the docs' faults table that takes a host or a server away (tests/support/host_faults.py), dealt
    at a random moment once the run is going:

    - a worker host's link cut (the scheduler drops it after lan.WORKER_TTL) or its worker killed (the scheduler
      sees the connection close): its tasks go to worker-b;
    - the S3 host away until the run says it waits for the store: every store operation, on the workers and the
      client, is tried again for up to `store_wait_s`, so an answer that came meanwhile is stored, not bought again;
    - the scheduler host restarted (its Dask scheduler and Prefect server, the database kept): the workers stop and
      their supervisor starts them again; the flow waits up to `scheduler_wait_s` for the scheduler (flows/runner.py
      through_scheduler_restarts), plans again from the store and computes only what was not stored;
    - only the Prefect server restarted: the Prefect client's retries and the events of the tasks ride it out.

    The fault hit mid-run (the run was going, with rows still to compute); the run exits 0 with every key once in each
    table's parts (every row as written: a reader would hide a key written twice), every row ok, and each paid item
    billed once, but for the call a lost worker had in flight (billed, its answer never back)."""
    fault = FAULTS[name]
    delay = round(random.Random(f"{FAULT_SEED}/{name}").uniform(0.0, 1.5), 2)
    moment = f"fault seed {FAULT_SEED}: {delay} s after the first part of {fault.after}"
    try:
        got = evaluate_through(
            lan, name.replace(" ", "-").lower(), fault, after_first_part(fault.after, delay), monkeypatch
        )
        if fault.name.startswith("worker"):  # the scheduler dropped the lost host
            assert set(lan.worker_hosts()) == {lan.hosts["worker-b"].ip}, moment
    finally:
        make_whole(lan)
    said = f"{moment}; it printed:\n{first_error_and_end(got.output)}"
    assert got.exit_code == 0 and got.mid_run, said
    assert (got.lost, got.duplicated, got.not_ok) == (0, 0, 0), said
    assert 0 <= got.paid_again <= fault.in_flight, said
    replanned = f"the Dask scheduler at {lan.scheduler} was lost mid-run" in got.output and (
        "is back; planning again from the store" in got.output
    )
    assert replanned == (name == "scheduler restarted"), said
    print(f"{name} {got.into_s:.1f} s into the run ({moment}); the run ended {got.recovered_s:.1f} s after")
