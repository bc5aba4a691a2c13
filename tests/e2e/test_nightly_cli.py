"""Nightly re-runs: dated runs, audio reused across runs for unchanged engines, drift against the last night.

The one end-to-end test of a nightly's two nights (tests/system/test_stack.py checks the nightly deployment's schedule
and parameters; it ran the same two nights through the stack and asserted a subset of what is asserted here). The
runs are on the instant voices, recogniser and MOS predictor (tests/support/instant.py): what is tested is the
reuse and the drift report, not what a model hears."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.support import instant
from tests.support.harness import run_cli


def test_two_nights_reuse_audio_and_report_drift(
    shared_env: dict[str, str], small_dataset: Path, tmp_path: Path
) -> None:
    env = shared_env | instant.ENV
    systems = "instant:plain,instant:slow:pace=1.3"
    args = ["nightly", "--dataset", str(small_dataset), "--systems", systems, "--store", str(tmp_path)]
    first = run_cli([*args, "--run-id", "nightly-20261121T020000Z"], env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "previous night none" in first.stdout
    assert not (tmp_path / "runs" / "nightly-20261121T020000Z" / "drift.md").exists()  # nothing to compare with
    second = run_cli([*args, "--run-id", "nightly-20261122T020000Z"], env, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    run = tmp_path / "runs" / "nightly-20261122T020000Z"
    s = pd.read_parquet(run / "synthesis")
    ok = s[s["status"] == "ok"]
    # unchanged engine versions: every clip of night 2 is night 1's clip (9 items, 2 voices)
    assert len(ok) == 18 and ok["cache_hit"].all()
    night1 = pd.read_parquet(tmp_path / "runs" / "nightly-20261121T020000Z" / "synthesis")
    assert set(ok["audio_sha256"]) == set(night1.loc[night1["status"] == "ok", "audio_sha256"])
    assert not night1["cache_hit"].fillna(False).any()
    summary = json.loads((run / "nightly.json").read_text())
    assert summary["previous_run"] == "nightly-20261121T020000Z" and summary["cache_hits"] == 18
    assert summary["flagged"] == 0
    assert set(summary["provider_versions"]) == {"instant:plain", "instant:slow:pace=1.3"}
    drift = pd.read_json(run / "drift.json")
    # same audio, same recogniser: every metric is unchanged and nothing is flagged
    assert set(drift["metric"]) == {"completion_rate", "wer", "cer", "mos"} and len(drift) == 8
    assert (drift["delta"].abs() < 1e-12).all() and not drift["flagged"].any()
    assert "# Drift: `nightly-20261122T020000Z` against `nightly-20261121T020000Z`" in (run / "drift.md").read_text()
    # the two nights side by side in the HTML report (opened in tests/system/test_html_report.py)
    assert (
        f"file://{run}/html/compare.html?a=nightly-20261121T020000Z&b=nightly-20261122T020000Z"
        in (run / "drift.md").read_text()
    )
    assert (run / "html" / "compare.html").is_file() and (
        run.parent / "nightly-20261121T020000Z" / "html" / "data.js"
    ).is_file()
    assert "0 flagged change(s)" in second.stdout
    # the command ends with the night's per-system table, its drift page, then the verdict as its last line
    assert "ttseval run 'nightly-20261122T020000Z'" in second.stdout and "instant:slow:pace=1.3" in second.stdout
    assert second.stdout.strip().splitlines()[-1] == (
        "nightly run nightly-20261122T020000Z of series nightly: 18 clips reused from earlier runs; previous night "
        "nightly-20261121T020000Z; flagged changes: 0"
    )
