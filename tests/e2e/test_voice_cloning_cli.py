"""Voice prompts, Seed-TTS-eval's meta.lst, and speaker similarity (SIM) end to end (the parts without a run:
tests/unit/test_voice_cloning.py).

The Seed-TTS-eval folder is made here: prompt clips from two real engines (espeak-ng, flite), and two systems'
outputs as `files` folders: one that speaks each item in its prompt's voice (a perfect cloner) and one that speaks
it in the other engine's voice. Resemblyzer's real GE2E encoder must rank the first above the second.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.support.harness import cli_env, run_cli
from tests.support.voices import PROMPT_TEXTS, TEXTS, speak
from ttseval.core.store import ArtifactStore

ENGINE = {"u1": "espeak", "u2": "espeak", "u3": "flite", "u4": "flite"}  # the voice of each item's prompt


# -- end to end: import, evaluate with WER and SIM through the files provider --------------------------------------


@pytest.fixture(scope="module")
def seedtts_run(shared_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("seedtts")
    en = root / "seedtts_testset" / "en"
    for folder in ("prompt-wavs", "cloner", "mismatch"):
        (en / folder).mkdir(parents=True, exist_ok=True)
    lines = []
    for utt, text in TEXTS.items():
        other = "flite" if ENGINE[utt] == "espeak" else "espeak"
        speak(ENGINE[utt], PROMPT_TEXTS[utt], en / "prompt-wavs" / f"{utt}.wav")
        speak(ENGINE[utt], text, en / "cloner" / f"{utt}.wav")
        speak(other, text, en / "mismatch" / f"{utt}.wav")
        lines.append(f"{utt}|{PROMPT_TEXTS[utt]}|prompt-wavs/{utt}.wav|{text}")
    (en / "meta.lst").write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = shared_env | {"TTSEVAL_QUALITY": '["dnsmos", "distillmos"]'}  # and two MOS predictors
    imported = run_cli(
        ["import-dataset", "--format", "seedtts", str(en / "meta.lst"), "--out", str(root / "items.jsonl")],
        env,
        cwd=root,
    )
    assert imported.returncode == 0, imported.stderr[-3000:]
    systems = f"files:cloner:dir={en / 'cloner'},files:mismatch:dir={en / 'mismatch'}"
    args = [
        "evaluate",
        "--dataset",
        str(root / "items.jsonl"),
        "--systems",
        systems,
        "--store",
        str(root / "store"),
        "--run-id",
        "seed",
        "--judges",
        "",
    ]
    first = run_cli(args, env, cwd=root)
    assert first.returncode == 0, first.stderr[-4000:]
    again = run_cli(args, env, cwd=root)
    assert again.returncode == 0, again.stderr[-4000:]
    return root / "store" / "runs" / "seed", imported


def test_the_imported_items_carry_their_prompts(seedtts_run) -> None:
    run, imported = seedtts_run
    assert "4 items with voice prompts" in imported.stdout
    items = pd.read_parquet(run / "items").set_index("item_id")
    assert items["prompt_text"].to_dict() == PROMPT_TEXTS
    store = ArtifactStore(str(run.parents[1]))
    assert all(store.exists(store.audio_rel_path(sha)) for sha in items["prompt_audio_sha256"])  # stored once each
    assert items["prompt_audio_sha256"].nunique() == 4


def test_sim_ranks_the_cloner_above_the_other_voice_and_wer_comes_from_the_same_clips(seedtts_run) -> None:
    run, _ = seedtts_run
    sim = pd.read_parquet(run / "similarity")
    assert len(sim) == 8 and (sim["status"] == "ok").all() and set(sim["encoder_spec"]) == {"resemblyzer"}
    assert set(sim["reference"]) == {"prompt"}
    by = sim.assign(system=sim["system_id"].map(lambda s: "cloner" if "cloner" in s else "mismatch")).pivot(
        index="item_id", columns="system", values="similarity"
    )
    assert (by["cloner"] > by["mismatch"] + 0.15).all(), by  # same speaker above a different one, item by item
    transcripts = pd.read_parquet(run / "transcripts")
    assert len(transcripts) == 8 and (transcripts["status"] == "ok").all()
    assert transcripts["wer"].median() < 0.2  # both engines speak the target text: Whisper tiny.en hears most of it
    report = (run / "report.md").read_text(encoding="utf-8")
    section = report.split("## Speaker similarity: `resemblyzer`", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| files:")]
    assert len(rows) == 2 and all(" | yes | prompt | 4 | " in row for row in rows)  # files declares cloning
    paired = report.split("## Paired comparisons with the baseline", 1)[1].split("\n## ", 1)[0]
    sim_row = next(line.split(" | ") for line in paired.splitlines() if "| SIM: resemblyzer | sim |" in line)
    delta = (by["mismatch"] - by["cloner"]).mean()  # item by item, the other voice minus the cloner
    # 4 items: no interval ("n too small"), and the exact sign-flip test cannot say "differs": with every item's
    # difference of one sign its two-sided p is 2 / 2^4 = 0.125, worked by hand, above alpha 0.05 before any adjustment
    assert sim_row[6] == f"{delta:.3f} n too small" and float(sim_row[7]) == pytest.approx(0.125)
    assert sim_row[-1] == "no |"
    # the per-system table a reader sees first (report.md's and the terminal's, from the view stored with the report)
    # has each system's SIM: the mean over its clips, computed here from the rows; 4 clips, so no interval
    view = json.loads((run / "report.terminal.json").read_text(encoding="utf-8"))
    shown = {r["system"].split(":")[1]: r["SIM ↑ [95% CI]"] for r in view["rows"]}
    assert shown == {k: f"{by[k].mean():.3f} (n too small)" for k in ("cloner", "mismatch")}
    assert "| SIM ↑ [95% CI] |" in report.split("\n## ", 1)[0]


def test_two_mos_predictors_each_have_their_rows_and_column_and_the_first_is_the_summarys(seedtts_run) -> None:
    run, _ = seedtts_run
    quality = pd.read_parquet(run / "quality")
    assert quality.groupby("quality_spec").size().to_dict() == {"distillmos": 8, "dnsmos": 8}
    assert (quality["status"] == "ok").all() and quality["mos"].between(1, 5).all()
    summary = pd.read_parquet(run / "report").drop_duplicates("system_id").set_index("system_id")
    dnsmos = quality[quality["quality_spec"] == "dnsmos"].groupby("system_id")["mos"].mean()
    assert summary["mos"].to_dict() == pytest.approx(dnsmos.to_dict())  # the first predictor listed
    report = (run / "report.md").read_text(encoding="utf-8")
    section = report.split("## MOS predictors", 1)[1].split("\n## ", 1)[0]
    assert "| system | MOS (dnsmos) | MOS (distillmos) |" in section
    distill = quality[quality["quality_spec"] == "distillmos"].groupby("system_id")["mos"].mean()
    for system_id, value in distill.items():
        row = next(
            line for line in section.splitlines() if line.startswith(f"| {summary.loc[system_id, 'system_spec']} |")
        )
        assert row.split(" | ")[2] == f"{value:.2f} (n too small) (n=4) |"  # 4 clips: no interval (the one rule)


def test_a_second_run_recomputes_no_similarity(seedtts_run) -> None:
    run, _ = seedtts_run
    logs = sorted((run / "log").glob("*.json"))
    assert json.loads(logs[0].read_text())["computed"]["similarity"] == 8
    assert json.loads(logs[-1].read_text())["computed"]["similarity"] == 0
    assert json.loads(logs[-1].read_text())["reused"]["similarity"] == 8


def test_a_prompt_path_relative_to_the_items_file_is_resolved_and_a_missing_one_exits_2(
    prefect_api: str, tmp_path: Path
) -> None:
    from ttseval.corpus.items import load_items

    (tmp_path / "data" / "prompts").mkdir(parents=True)
    speak("espeak", PROMPT_TEXTS["u1"], tmp_path / "data" / "prompts" / "p.wav")
    rows = [
        {
            "item_id": "a",
            "text": TEXTS["u1"],
            "language": "en",
            "category": "c",
            "depth": 0,
            "prompt_audio_uri": "prompts/p.wav",
            "prompt_text": PROMPT_TEXTS["u1"],
        },
        {
            "item_id": "b",
            "text": TEXTS["u2"],
            "language": "en",
            "category": "c",
            "depth": 0,
            "prompt_audio_uri": "prompts/absent.wav",
        },
    ]
    dataset = tmp_path / "data" / "items.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    items = load_items(dataset).set_index("item_id")
    assert items.loc["a", "prompt_audio_uri"] == str(tmp_path / "data" / "prompts" / "p.wav")
    result = run_cli(
        [
            "evaluate",
            "--dataset",
            str(dataset),
            "--systems",
            "espeak-ng",
            "--store",
            str(tmp_path / "store"),
            "--run-id",
            "bad",
            "--judges",
            "",
        ],
        cli_env(prefect_api),
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "row 2 (item_id='b') prompt_audio_uri" in result.stderr and "absent.wav" in result.stderr
    assert not (tmp_path / "store" / "runs" / "bad").exists()  # refused before anything of the run was written
