"""`ttseval serve` through the real command, in its own process: it answers a stored run's report, clips
and index over HTTP and stops cleanly on Ctrl-C (SIGINT). voices and serve's refusals are
tests/unit/test_commands_without_server.py; stack is tests/system/test_stack_command.py.
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
import pytest

from tests.support.harness import BIN, cli_env, demo_items, run_cli

ITEMS = ("que-a-d0", "syn-b-d0")


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
