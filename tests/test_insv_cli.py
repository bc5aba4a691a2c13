"""INSV-A screening on the embedded default, through `ttseval evaluate`: real espeak-ng voices and Whisper.

The negative control is espeak-ng's Urdu voice reading the Pashto item (PashtoTTS-Bench's Urdu control): Whisper
writes what it hears in Latin letters, so the card's S gate (Script Fidelity Rate) fails and the card says the
control was caught; espeak-ng's own automatic voice has no Pashto and is a confirmed F1 (an unsupported row).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.conftest import cli_env, run_cli


@pytest.fixture(scope="module")
def screened(prefect_api: str, tmp_path_factory: pytest.TempPathFactory):
    from corpus import DEMO_DATASET

    rows = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines()]
    folder = tmp_path_factory.mktemp("insv")
    dataset = folder / "items.jsonl"
    dataset.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows
                               if r["item_id"] in {"mul-ps", "mul-fr"}), encoding="utf-8")
    store = folder / "store"
    result = run_cli(["evaluate", "--dataset", str(dataset), "--systems", "espeak-ng", "--controls", "espeak-ng:ur",
                      "--store", str(store), "--run-id", "insv", "--judges", ""], cli_env(prefect_api), cwd=folder)
    assert result.returncode == 0, result.stderr[-4000:]
    return store, result


def test_a_negative_control_speaks_every_item_and_the_card_says_it_was_caught(screened) -> None:
    store, result = screened
    synthesis = pd.read_parquet(store / "runs" / "insv" / "synthesis").set_index(["system_spec", "item_id"])
    assert synthesis.loc[("espeak-ng:ur", "mul-ps"), "status"] == "ok"  # a control is never "unsupported"
    assert synthesis.loc[("espeak-ng", "mul-ps"), "status"] == "unsupported"  # espeak-ng 1.51 has no Pashto voice
    report = (store / "runs" / "insv" / "report.md").read_text(encoding="utf-8")
    assert "## INSV-A screening (PashtoTTS-Bench)" in report
    card = {line.split(" | ")[0].lstrip("| "): line for line in report.splitlines() if " | ps-AF | " in line}
    control = card["espeak-ng:ur (negative control)"].split(" | ")
    assert control[4].endswith("(fail)") and control[4].startswith("0.000")  # S: SFR 0 -> fail
    assert control[12] == "confirmed (negative control caught)"  # F2
    auto = card["espeak-ng"].split(" | ")
    assert auto[3] == "0.0% (0/1) (fail)" and auto[11] == "confirmed"  # F1 from the unsupported row
    assert "espeak-ng:ur (negative control)" in result.stdout  # the printed table shows the role too
    sentences = pd.read_csv(store / "runs" / "insv" / "per_sentence.csv")
    ps = sentences[(sentences["item_id"] == "mul-ps")]
    assert len(ps) == 1 and ps["sfr"].iloc[0] == 0.0 and ps["hypothesis"].str.contains("[A-Za-z]").all()
    fr = sentences[sentences["item_id"] == "mul-fr"]
    assert len(fr) == 2 and (fr["sfr"] == 1.0).all()  # French in Latin letters, from both voices


def test_two_recognisers_then_a_third_added_computes_only_the_third_s_rows(prefect_api: str, tmp_path) -> None:
    from corpus import DEMO_DATASET

    rows = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines()]
    dataset = tmp_path / "items.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows if r["item_id"] in {"que-a-d0", "emo-a-d0"}),
                       encoding="utf-8")
    two = ["faster-whisper:tiny.en", "faster-whisper:base"]
    args = ["evaluate", "--dataset", str(dataset), "--systems", "flite:slt,espeak-ng", "--store",
            str(tmp_path / "s"), "--run-id", "asr", "--judges", ""]
    first = run_cli(args, cli_env(prefect_api, TTSEVAL_ASR__EN=json.dumps(two)), cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    second = run_cli(args, cli_env(prefect_api, TTSEVAL_ASR__EN=json.dumps([*two, "faster-whisper:base:beam_size=2"])),
                     cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    logs = sorted((tmp_path / "s" / "runs" / "asr" / "log").glob("*.json"))
    assert json.loads(logs[0].read_text())["computed"]["transcripts"] == 8  # 2 items x 2 systems x 2 recognisers
    computed = json.loads(logs[-1].read_text())["computed"]
    assert (computed["synthesis"], computed["transcripts"], computed["quality"]) == (0, 4, 0)  # the third's only
    transcripts = pd.read_parquet(tmp_path / "s" / "runs" / "asr" / "transcripts")
    assert transcripts.groupby("asr_spec").size().to_dict() == {
        "faster-whisper:base": 4, "faster-whisper:base:beam_size=2": 4, "faster-whisper:tiny.en": 4}
    report = (tmp_path / "s" / "runs" / "asr" / "report.md").read_text(encoding="utf-8")
    section = report.split("## Recognisers", 1)[1]
    assert "ranked by `faster-whisper:tiny.en`" in section
    header = next(line for line in section.splitlines() if line.startswith("| system"))
    assert header == ("| system | WER % faster-whisper:tiny.en | WER % faster-whisper:base | "
                      "WER % faster-whisper:base:beam_size=2 |")
    summary = pd.read_parquet(tmp_path / "s" / "runs" / "asr" / "report")
    assert len(summary) == 6  # one row per system and recogniser
