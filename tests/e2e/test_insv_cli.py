"""INSV-A screening on the embedded default, through `ttseval evaluate`: real espeak-ng voices and Whisper.

The negative control is espeak-ng's Urdu voice reading the Pashto item (PashtoTTS-Bench's Urdu control): Whisper
writes what it hears in Latin letters, so the card's S gate (Script Fidelity Rate) fails and the card says the
control was caught; espeak-ng's own automatic voice has no Pashto and is a confirmed F1 (an unsupported row).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.support import instant
from tests.support.harness import DEAD_API, cli_env, run_cli


@pytest.fixture(scope="module")
def screened(shared_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    from ttseval.corpus import DEMO_DATASET

    rows = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines()]
    folder = tmp_path_factory.mktemp("insv")
    dataset = folder / "items.jsonl"
    dataset.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows if r["item_id"] in {"mul-ps", "mul-fr"}),
        encoding="utf-8",
    )
    store = folder / "store"
    result = run_cli(
        [
            "evaluate",
            "--dataset",
            str(dataset),
            "--systems",
            "espeak-ng",
            "--controls",
            "espeak-ng:ur",
            "--store",
            str(store),
            "--run-id",
            "insv",
            "--judges",
            "",
        ],
        shared_env | {"TTSEVAL_PROSODY": "true"},
        cwd=folder,
    )  # and the prosody stage
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
    # What Whisper (int8, temperature 0) hears in Urdu speech of Pashto text depends on the CPU's kernels: Latin
    # letters on the machines this was written on, nothing at all on an AVX2-only AMD EPYC. Either
    # way the S gate does not pass the control, and it says which case it was.
    transcripts = pd.read_parquet(store / "runs" / "insv" / "transcripts").set_index(["system_id", "item_id"])
    heard = transcripts.xs("mul-ps", level="item_id")["hypothesis"].iloc[0]
    letters = [c for c in heard if c.isalpha()]
    if letters:
        assert not [c for c in letters if "\u0600" <= c <= "\u06ff"], heard  # no Perso-Arabic letter heard
        assert control[4].endswith("(fail)") and control[4].startswith("0.000")  # S: SFR 0 -> fail
    else:
        assert control[4] == "–, 1 undefined (undefined)"  # an empty transcript has no SFR (metrics/script.py)
    assert control[12] == "confirmed (negative control caught)"  # F2
    auto = card["espeak-ng"].split(" | ")
    assert auto[3] == "0.0% (0/1) (fail)" and auto[11] == "confirmed"  # F1 from the unsupported row
    assert "espeak-ng:ur (negative control)" in result.stdout  # the printed table shows the role too
    sentences = pd.read_csv(store / "runs" / "insv" / "per_sentence.csv")  # every clip, transcribed or not
    assert sentences.loc[sentences["item_id"] == "mul-ps", "synthesis_status"].tolist() == ["unsupported", "ok"]
    ps = sentences[(sentences["item_id"] == "mul-ps") & (sentences["transcript_status"] == "ok")]
    assert len(ps) == 1
    if letters:
        assert ps["sfr"].iloc[0] == 0.0 and ps["transcript"].str.contains("[A-Za-z]").all()
    else:
        assert pd.isna(ps["sfr"].iloc[0])
    fr = sentences[sentences["item_id"] == "mul-fr"]
    assert len(fr) == 2 and (fr["sfr"] == 1.0).all()  # French in Latin letters, from both voices


def test_two_recognisers_then_a_third_added_computes_only_the_third_s_rows(
    shared_env: dict[str, str], tmp_path
) -> None:
    # Mechanics (which rows a run adds), so instant voices and recognisers: "instant-asr:b" and its beam_size=2
    # option are distinct recognisers to the pipeline, as faster-whisper:base and base:beam_size=2 would be.
    from ttseval.corpus import DEMO_DATASET

    rows = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines()]
    dataset = tmp_path / "items.jsonl"
    dataset.write_text(
        "".join(json.dumps(r) + "\n" for r in rows if r["item_id"] in {"que-a-d0", "emo-a-d0"}), encoding="utf-8"
    )
    two = ["instant-asr:a", "instant-asr:b"]
    args = [
        "evaluate",
        "--dataset",
        str(dataset),
        "--systems",
        "instant,instant:slow:drop=3",
        "--store",
        str(tmp_path / "s"),
        "--run-id",
        "asr",
        "--judges",
        "",
    ]

    def recognisers(specs: list[str]) -> dict[str, str]:
        return shared_env | instant.ENV | {"TTSEVAL_ASR": json.dumps({"*": "instant-asr", "en": specs})}

    first = run_cli(args, recognisers(two), cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    second = run_cli(args, recognisers([*two, "instant-asr:b:beam_size=2"]), cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    logs = sorted((tmp_path / "s" / "runs" / "asr" / "log").glob("*.json"))
    assert json.loads(logs[0].read_text())["computed"]["transcripts"] == 8  # 2 items x 2 systems x 2 recognisers
    computed = json.loads(logs[-1].read_text())["computed"]
    assert (computed["synthesis"], computed["transcripts"], computed["quality"]) == (0, 4, 0)  # the third's only
    transcripts = pd.read_parquet(tmp_path / "s" / "runs" / "asr" / "transcripts")
    assert transcripts.groupby("asr_spec").size().to_dict() == {
        "instant-asr:a": 4,
        "instant-asr:b": 4,
        "instant-asr:b:beam_size=2": 4,
    }
    report = (tmp_path / "s" / "runs" / "asr" / "report.md").read_text(encoding="utf-8")
    section = report.split("## Recognisers", 1)[1]
    assert "ranked by `instant-asr:a`" in section
    header = next(line for line in section.splitlines() if line.startswith("| system"))
    assert header == "| system | WER % instant-asr:a | WER % instant-asr:b | WER % instant-asr:b:beam_size=2 |"
    # every recogniser hears the instant voices alike: the plain voice's WER is 0, the one dropping every third
    # word's is above it, in each column
    table = section.split(header + "\n|---|---|---|---|\n", 1)[1].split("\n\n", 1)[0]
    wer = {row.split(" | ")[0].strip("| "): row.strip("| ").split(" | ")[1:] for row in table.splitlines()}
    assert wer["instant"] == ["0.0"] * 3 and all(float(v) > 0 for v in wer["instant:slow:drop=3"]), table
    summary = pd.read_parquet(tmp_path / "s" / "runs" / "asr" / "report")
    assert len(summary) == 6  # one row per system and recogniser
    assert (summary.loc[summary["system_spec"] == "instant", "wer"] == 0).all()
    assert (summary.loc[summary["system_spec"] == "instant:slow:drop=3", "wer"] > 0).all()


def test_native_mos_forms_from_the_run_then_the_ratings_analysed(screened, tmp_path) -> None:
    import subprocess

    from tests.support.harness import BIN

    store, _ = screened
    out = tmp_path / "forms"
    made = subprocess.run(
        [
            str(BIN / "ttseval"),
            "mos-forms",
            "--store",
            str(store),
            "--run-id",
            "insv",
            "--language",
            "fr",
            "--out",
            str(out),
            "--seed",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(DEAD_API, TTSEVAL_CONTROLS=json.dumps(["espeak-ng:ur"])),
    )
    assert made.returncode == 0, made.stderr[-3000:]
    key = pd.read_csv(out / "key.csv")
    # one French sentence, one TTS system (espeak-ng), its repeat, and both clips of the negative control
    assert sorted(key["kind"]) == ["control", "control", "repeat", "test"]
    assert set(key.loc[key["kind"] == "control", "system_id"]) == {
        pd.read_parquet(store / "runs" / "insv" / "synthesis")
        .query("system_spec == 'espeak-ng:ur'")["system_id"]
        .iloc[0]
    }
    assert sorted(p.name for p in (out / "audio").iterdir()) == sorted(key["file"].unique())
    form = pd.read_csv(out / "forms" / "form_1.csv")
    assert list(form.columns) == ["position", "file"] and len(form) == 4  # nothing of the system in a form
    scores = {"test": [4, 3], "repeat": [4, 2], "control": [1, 2]}
    rows = []
    for k, rater in enumerate(["ana", "bo"]):
        for r in key.itertuples():
            rows.append({"rater_id": rater, "form": 1, "position": r.position, "score": scores[r.kind][k]})
    ratings = tmp_path / "ratings.csv"
    pd.DataFrame(rows).to_csv(ratings, index=False)
    analysed = subprocess.run(
        [str(BIN / "ttseval"), "mos-analyze", "--forms", str(out), "--ratings", str(ratings)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert analysed.returncode == 0, analysed.stderr[-3000:]
    assert "| 3.50 [3.00, 4.00] | 2 |" in analysed.stdout  # the test clip's two scores; controls and repeats apart
    assert "**Preliminary:** fewer than 16 raters (2)." in analysed.stdout
    # ana: repeat 4 = test 4, controls 1 and 1; bo: repeat 2 against test 3, controls 2 and 2
    assert "| ana | 1 | 4 | 0.00 | 1.00 |" in analysed.stdout and "| bo | 1 | 4 | 1.00 | 2.00 |" in analysed.stdout
    assert (out / "analysis.md").read_text(encoding="utf-8") == analysed.stdout.rstrip("\n") + "\n"
    pd.DataFrame(rows).drop(columns="score").to_csv(ratings, index=False)
    refused = subprocess.run(
        [str(BIN / "ttseval"), "mos-analyze", "--forms", str(out), "--ratings", str(ratings)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "missing column(s) ['score']" in refused.stderr


def test_a_run_exports_without_its_audio(screened, tmp_path) -> None:
    import subprocess

    from tests.support.harness import BIN

    store, _ = screened
    out = tmp_path / "share"
    done = subprocess.run(
        [str(BIN / "ttseval"), "export", "--store", str(store), "--run-id", "insv", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert not [f for f in files if f.endswith((".wav", ".mp3", ".flac"))]
    for name in (
        "items.csv",
        "synthesis.csv",
        "transcripts.csv",
        "quality.csv",
        "report.csv",
        "report.md",
        "per_sentence.csv",
        "README.md",
        "manifest.json",
    ):
        assert name in files, files
    assert any(f.startswith("log/") and f.endswith(".json") for f in files)
    synthesis = pd.read_csv(out / "synthesis.csv")
    stored = pd.read_parquet(store / "runs" / "insv" / "synthesis")
    assert len(synthesis) == len(stored) == 4  # 2 items x 2 systems, failures (unsupported) included
    ok = synthesis[synthesis["status"] == "ok"]
    assert ok["audio_sha256"].str.fullmatch(r"[0-9a-f]{64}").all() and ok["provider_metadata"].notna().all()
    assert (
        "no run 'nope'"
        in subprocess.run(
            [str(BIN / "ttseval"), "export", "--store", str(store), "--run-id", "nope", "--out", str(tmp_path / "x")],
            capture_output=True,
            text=True,
            timeout=120,
        ).stderr
    )


def test_the_prosody_stage_measures_every_clip_and_the_report_summarises_it(screened) -> None:
    from ttseval.core.audio import Audio
    from ttseval.core.store import ArtifactStore
    from ttseval.metrics.prosody import f0_stats, speech_segments, timing

    store, _ = screened
    prosody = pd.read_parquet(store / "runs" / "insv" / "prosody")
    synthesis = pd.read_parquet(store / "runs" / "insv" / "synthesis")
    ok = synthesis[synthesis["status"] == "ok"]
    assert len(prosody) == len(ok) == 3 and (prosody["status"] == "ok").all()
    assert prosody["prosody_id"].unique().tolist() == ["prosody-v1"]
    # the stored figures are the pure functions' on the stored clip
    row = prosody.iloc[0]
    sha = ok.set_index(["item_id", "system_id"]).loc[(row["item_id"], row["system_id"]), "audio_sha256"]
    clip = Audio.from_wav_bytes(ArtifactStore(str(store)).get_audio(sha))
    assert row["f0_mean_hz"] == pytest.approx(f0_stats(clip.samples, clip.sample_rate_hz)["f0_mean_hz"])
    expected = timing(speech_segments(clip.samples, clip.sample_rate_hz), len(clip.samples) / clip.sample_rate_hz)
    assert row["speech_s"] == pytest.approx(expected.speech_s) and row["speech_s"] > 1.0
    assert 60 < row["f0_mean_hz"] < 300  # a speaking voice
    report = (store / "runs" / "insv" / "report.md").read_text(encoding="utf-8")
    section = report.split("## Prosody and timing", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| espeak-ng")]
    assert [r.split(" | ")[:2] for r in rows] == [["| espeak-ng", "1"], ["| espeak-ng:ur", "2"]]  # clips measured
