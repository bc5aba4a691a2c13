"""A store made by release 0.1.0 (commit 09914ce, tests/data/release_0_1) is reused whole by this code: the clip
stages' table keys, model output ids, request-cache keys and namespaces did not change when the stages became
declarations (ttseval.tasks.stages).

The store was made in that folder by:

    TTSEVAL_PLUGINS='{"lid": {"always-en": "tests.support.release_plugins:EnglishLID"}}' TTSEVAL_LID='["always-en"]' \
    TTSEVAL_SIMILARITY='["resemblyzer"]' TTSEVAL_PROSODY=true ttseval evaluate --dataset items.jsonl \
    --systems espeak-ng:en-us,flite:slt --store store --run-id r1

which computed synthesis 4, transcripts 4, quality 4, lid 4, prosody 4, similarity 2 and judgments 2.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.support.harness import ROOT, cli_env, run_cli

RELEASE = ROOT / "tests" / "data" / "release_0_1"
STAGES = ("synthesis", "transcripts", "quality", "lid", "prosody", "similarity", "judgments")
MADE = {"synthesis": 4, "transcripts": 4, "quality": 4, "lid": 4, "prosody": 4, "similarity": 2, "judgments": 2}
ENV = {
    "TTSEVAL_PLUGINS": json.dumps({"lid": {"always-en": "tests.support.release_plugins:EnglishLID"}}),
    "TTSEVAL_LID": '["always-en"]',
    "TTSEVAL_SIMILARITY": '["resemblyzer"]',
    "TTSEVAL_PROSODY": "true",
}


def evaluate(folder: Path, run_id: str, env: dict[str, str]):
    return run_cli(
        [
            "evaluate",
            "--dataset",
            "items.jsonl",
            "--systems",
            "espeak-ng:en-us,flite:slt",
            "--store",
            "store",
            "--run-id",
            run_id,
        ],
        env,
        cwd=folder,
    )


def rows(store: Path, run_id: str, table: str) -> pd.DataFrame:
    """The table's rows, in key order, without the columns a re-run may rightly differ in."""
    from ttseval.core.schemas import TABLES

    frame = pd.read_parquet(store / "runs" / run_id / table)
    return frame.drop(columns=["created_at"]).sort_values(list(TABLES[table].key)).reset_index(drop=True)


def logs(store: Path, run_id: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((store / "runs" / run_id / "log").glob("*.json"))]


@pytest.fixture(scope="module")
def release(prefect_api: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    folder = tmp_path_factory.mktemp("release") / "release_0_1"
    shutil.copytree(RELEASE, folder)  # the committed store stays as release 0.1.0 wrote it
    return folder, cli_env(prefect_api, **ENV)


def test_the_same_command_on_a_release_0_1_store_reuses_every_row(release) -> None:
    folder, env = release
    store = folder / "store"
    [made] = logs(store, "r1")
    assert made["code"].startswith("09914ce")
    assert made["computed"] == MADE | {"instruction_judgments": 0, "position_audit": 0}
    before = {table: rows(store, "r1", table) for table in STAGES}

    result = evaluate(folder, "r1", env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    first, rerun = logs(store, "r1")
    assert first == made  # the release's own log is untouched; the newest is the re-run's
    assert rerun["computed"] == dict.fromkeys(STAGES, 0) | {"instruction_judgments": 0, "position_audit": 0}
    assert rerun["reused"] == MADE | {"instruction_judgments": 0, "position_audit": 0}
    for table in STAGES:
        pd.testing.assert_frame_equal(rows(store, "r1", table), before[table], obj=table)


def test_a_new_run_on_that_store_answers_every_clip_stage_from_its_request_cache(release) -> None:
    # A new run id has no rows, so every stage runs; the clip stages (and synthesis) find every answer under the
    # request-cache keys release 0.1.0 wrote: the digested dicts and the namespaces are byte for byte the same.
    folder, env = release
    store = folder / "store"
    cached = {p.relative_to(store / "cache") for p in (store / "cache").rglob("*.json")}
    result = evaluate(folder, "r2", env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [log] = logs(store, "r2")
    assert log["computed"] == MADE | {"instruction_judgments": 0, "position_audit": 0}
    for table in ("synthesis", "transcripts", "quality", "lid", "prosody", "similarity"):
        frame = rows(store, "r2", table)
        assert len(frame) == MADE[table] and (frame["status"] == "ok").all(), table
        assert frame["cache_hit"].all(), f"{table}: a request-cache key changed, so the release's answer was missed"
        old = rows(store, "r1", table)
        if table == "synthesis":  # reused audio: the same clips, with no call made (attempt 0)
            assert list(frame["audio_sha256"]) == list(old["audio_sha256"]) and (frame["attempt"] == 0).all()
        else:  # the same answers, rows and output ids as release 0.1.0 wrote, but now from its cache
            pd.testing.assert_frame_equal(frame.drop(columns=["cache_hit"]), old.drop(columns=["cache_hit"]), obj=table)
    assert {p.relative_to(store / "cache") for p in (store / "cache").rglob("*.json")} == cached  # nothing new
