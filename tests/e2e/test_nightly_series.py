"""Two nightly series in one store, through `ttseval nightly --series`: each night is compared and drawn only with its
own series' nights, a system added to a series is said as a change of the series, never flagged as drift, and a
series too small for its tests to flag anything says so every night. On the instant voices, recogniser and MOS
predictor (tests/support/instant.py): what is tested is which nights meet."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from tests.support import instant
from tests.support.harness import run_cli


def test_two_series_in_one_store_never_mention_each_other(
    shared_env: dict[str, str], small_dataset: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    env = shared_env | instant.ENV
    common = ["nightly", "--dataset", str(small_dataset), "--store", str(tmp_path), "--judges", ""]

    five = tmp_path / "five.jsonl"  # voices-b's dataset: too few items for its paired tests to flag anything
    five.write_text("".join(small_dataset.read_text().splitlines(keepends=True)[:5]))

    def night(series: str, systems: str) -> str:
        dataset = ["--dataset", str(five)] if series == "voices-b" else []
        result = run_cli([*common, "--series", series, "--systems", systems, *dataset], env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        [run_id] = re.findall(rf"nightly run (nightly-{series}-\d{{8}}T\d{{6}}Z) of series {series}:", result.stdout)
        return run_id

    a1 = night("voices-a", "instant:a1,instant:a2:pace=1.2")
    b1 = night("voices-b", "instant:b1:pace=1.4")
    a2 = night("voices-a", "instant:a1,instant:a2:pace=1.2,instant:a3:pace=1.1")
    b2 = night("voices-b", "instant:b1:pace=1.4")
    summary = json.loads((tmp_path / "runs" / a2 / "nightly.json").read_text())
    # compared with its own series' night, though voices-b's night is the latest in the store
    assert summary["series"] == "voices-a" and summary["previous_run"] == a1
    assert summary["series_change"] == ["systems added: instant:a3:pace=1.1"] and summary["flagged"] == 0
    drift = pd.read_json(tmp_path / "runs" / a2 / "drift.json")
    assert not drift["flagged"].any()
    [added] = drift[drift["metric"] == "presence"].to_dict("records")
    assert (added["system_spec"], added["direction"]) == ("instant:a3:pace=1.1", "added")
    page = (tmp_path / "runs" / a2 / "drift.md").read_text()
    assert "0 flagged change(s)" in page and "- systems added: instant:a3:pace=1.1" in page
    assert summary["blind"] == []  # 2 systems in both nights x WER, CER, MOS on 9 items: 6 x 2/512 = 0.023 < 0.05
    assert json.loads((tmp_path / "runs" / b1 / "nightly.json").read_text())["previous_run"] is None
    # voices-b's 5 items: no change of any size could be flagged, and its night says so with the items needed
    blind = json.loads((tmp_path / "runs" / b2 / "nightly.json").read_text())
    assert blind["previous_run"] == b1 and len(blind["blind"]) == 1
    # nothing moved (the same clips): no test has a p, so a lone change would be adjusted across itself alone
    assert blind["blind"][0].startswith("3 of 3 paired tests cannot flag a lone change of any size")
    assert blind["blind"][0].endswith(
        "adjusted across 1 test(s) 0.0625, not under alpha 0.05; at least 6 items are needed for one to be flagged"
    )
    assert blind["blind"][0] in (tmp_path / "runs" / b2 / "drift.md").read_text()
    # nothing of one series in the other's pages
    for run_id, other in ((a2, ("instant:b1", b1, b2)), (b2, ("instant:a1", "instant:a2", a1, a2))):
        for name in ("drift.md", "drift.json", "nightly.json", "trends.json", "html/trends.html"):
            path = tmp_path / "runs" / run_id / name
            if path.exists():
                text = path.read_text()
                assert not [o for o in other if o in text], (run_id, name)
    trends = pd.read_json(tmp_path / "runs" / a2 / "trends.json")
    assert set(trends["run_id"]) == {a1, a2}

    from ttseval.cli import main

    for name, value in instant.ENV.items():  # the trends command resolves the instant voices as the nights did
        monkeypatch.setenv(name, value)
    assert main(["trends", "--store", str(tmp_path), "--series", "voices-b"]) == 0
    out = capsys.readouterr().out
    assert "ttseval trends of series voices-b: 2 night(s)" in out and "instant:b1" in out and "instant:a" not in out
    assert main(["trends", "--store", str(tmp_path), "--series", "no-such"]) == 2
    assert "no night of series 'no-such' with a report" in capsys.readouterr().err
