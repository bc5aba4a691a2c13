"""`ttseval voices`, `serve` and `stack` through the real command, in their own processes (issue 35).

voices lists the engines' installed voices (espeak-ng's and flite's own lists, read back here from the programs);
serve answers a stored run's report, clips and index over HTTP and stops cleanly on Ctrl-C (SIGINT); stack goes up,
reports its live processes and comes down in a temporary folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urljoin

import pandas as pd
import psutil
import pytest

from tests.conftest import BIN, cli_env, demo_items, run_cli

ITEMS = ("que-a-d0", "syn-b-d0")


def test_voices_lists_the_installed_espeak_and_flite_voices(prefect_api: str, tmp_path: Path) -> None:
    env = cli_env(prefect_api)
    espeak = run_cli(["voices", "espeak-ng"], env, cwd=tmp_path, timeout_s=120)
    assert espeak.returncode == 0, espeak.stderr[-2000:]
    rows = [line.split("\t") for line in espeak.stdout.splitlines()]
    # espeak-ng's own list (its second column is the language; ttseval keeps language tags lower-case)
    listed = subprocess.run(["espeak-ng", "--voices"], capture_output=True, text=True, check=True).stdout
    languages = {line.split()[1].lower() for line in listed.splitlines()[1:]}
    assert {r[2] for r in rows} == languages and ["en-us", "en-us", "en-us", ""] in rows
    assert espeak.stderr.strip().endswith(f"{len(rows)} voice(s) of espeak-ng")
    flite = run_cli(["voices", "flite"], env, cwd=tmp_path, timeout_s=120)
    assert flite.returncode == 0, flite.stderr[-2000:]
    compiled = subprocess.run(["flite", "-lv"], capture_output=True, text=True, check=True).stdout
    assert [line.split("\t")[0] for line in flite.stdout.splitlines()] == compiled.split(":", 1)[1].split()
    assert "slt\tslt\ten\t16 kHz" in flite.stdout.splitlines() and "kal\tkal\ten\t8 kHz" in flite.stdout.splitlines()


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("espeak", ["unknown tts provider 'espeak'", "did you mean 'espeak-ng'", "available: "]),
        (
            "piper:joe",
            ["tts provider 'piper' offers no voice list", "providers that list theirs: ", "espeak-ng, flite"],
        ),
    ],
)
def test_voices_of_an_unknown_or_listless_engine_is_exit_2_naming_the_fix(
    prefect_api: str, tmp_path: Path, spec: str, words: list[str]
) -> None:
    out = run_cli(["voices", spec], cli_env(prefect_api), cwd=tmp_path, timeout_s=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("ttseval: error: ") and "Traceback" not in out.stderr
    for w in words:
        assert w in out.stderr, out.stderr


@pytest.fixture(scope="module")
def stored_run(shared_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("served")
    dataset = root / "items.jsonl"
    demo_items(dataset, ITEMS)
    store = root / "store"
    run = run_cli(
        [
            "evaluate",
            "--dataset",
            str(dataset),
            "--systems",
            "espeak-ng",
            "--store",
            str(store),
            "--run-id",
            "s",
            "--judges",
            "",
        ],
        shared_env | {"TTSEVAL_SIMILARITY": "[]"},
        cwd=root,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return store


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_serve_answers_the_stored_run_and_stops_on_ctrl_c(prefect_api: str, stored_run: Path) -> None:
    env = cli_env(prefect_api)
    # Ctrl-C as from a terminal: a suite started in the background (`cmd &` in a script) inherits SIGINT ignored,
    # and Python then keeps ignoring it, so the child gets the default disposition back first
    proc = subprocess.Popen(
        [str(BIN / "ttseval"), "serve", "--store", str(stored_run), "--port", "0"],
        env=env,
        cwd=stored_run.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = proc.stdout.readline()  # printed (flushed) once the socket is bound
        assert line.startswith(f"serving the reports of {stored_run} at http://127.0.0.1:"), line
        base = line.split(" at ", 1)[1].split()[0]
        status, index = get(base)
        assert status == 200 and b'<a href="runs/s/html/index.html">s</a>' in index
        status, page = get(base + "runs/s/html/index.html")
        assert status == 200 and b"<html" in page.lower()
        # the page's data (window.TTSEVAL_RUNS["s"] = {...}): each clip's transcript, WER and audio are the run's
        status, data = get(base + "runs/s/html/data.js")
        assert status == 200
        line = next(x for x in data.decode().splitlines() if x.startswith('window.TTSEVAL_RUNS["s"] = '))
        served = {i["id"]: i for i in json.loads(line.split(" = ", 1)[1].rstrip(";"))["items"]}
        transcripts = pd.read_parquet(stored_run / "runs" / "s" / "transcripts")
        synthesis = pd.read_parquet(stored_run / "runs" / "s" / "synthesis").set_index("item_id")
        assert set(served) == set(ITEMS) == set(transcripts["item_id"])
        for row in transcripts.itertuples():
            clip = served[row.item_id]["clips"][row.system_id]
            asr = clip["asr"][row.asr_id]
            assert asr["wer"] == pytest.approx(row.word_errors / row.ref_words, abs=5e-5)
            assert " ".join(w[2] for w in asr["words"] if w[2]) == row.hyp_norm
            sha = synthesis.loc[row.item_id, "audio_sha256"]
            assert clip["audio"] == f"../../../blobs/audio/{sha[:2]}/{sha}.wav"
            # the clip itself, where the page's player asks for it (the link resolved as a browser does)
            status, audio = get(urljoin(base + "runs/s/html/index.html", clip["audio"]))
            assert status == 200 and hashlib.sha256(audio).hexdigest() == sha
        # tables are not served
        assert get(base + "runs/s/transcripts")[0] == 404
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]


def test_serve_a_missing_store_is_exit_2(prefect_api: str, tmp_path: Path) -> None:
    typo = tmp_path / "nope"
    out = run_cli(["serve", "--store", str(typo), "--port", "0"], cli_env(prefect_api), cwd=tmp_path, timeout_s=120)
    assert out.returncode == 2 and f"no store at {typo}" in out.stderr and not typo.exists()


def test_stack_up_status_down_through_the_command(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "AWS_", "PREFECT_API"))}
    folder = tmp_path / "stack"
    empty = run_cli(["stack", "status", "--folder", str(folder)], env, cwd=tmp_path, timeout_s=120)
    assert empty.returncode == 0 and json.loads(empty.stdout) == {"running": False, "components": {}}
    up = run_cli(["stack", "up", "--folder", str(folder), "--no-gpu"], env, cwd=tmp_path, timeout_s=300)
    pids: list[int] = []
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        status = json.loads(
            run_cli(["stack", "status", "--folder", str(folder)], env, cwd=tmp_path, timeout_s=120).stdout
        )
        assert status["running"] is True
        assert {"prefect-server", "prefect-worker", "dask-scheduler", "s3"} <= set(status["components"])
        pids = [c["pid"] for c in status["components"].values()]
        assert all(c["alive"] for c in status["components"].values()) and all(map(psutil.pid_exists, pids))
        assert f"Prefect API    {status['api_url']}" in up.stdout and f"folder         {folder}" in up.stdout
        with urllib.request.urlopen(status["api_url"] + "/health", timeout=10) as r:
            assert json.loads(r.read()) is True
    finally:
        down = run_cli(["stack", "down", "--folder", str(folder)], env, cwd=tmp_path, timeout_s=120)
    assert down.returncode == 0 and down.stdout.strip() == f"stack in {folder} stopped", down.stderr[-2000:]
    after = json.loads(run_cli(["stack", "status", "--folder", str(folder)], env, cwd=tmp_path, timeout_s=120).stdout)
    assert after["running"] is False and not any(c["alive"] for c in after["components"].values())
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
