"""The local-weights predictors through `ttseval evaluate` (one run, then a second that reuses every score): UTMOS22 and
NISQA as MOS predictors, sherpa-onnx and SpeechBrain's ECAPA as speaker encoders and VoxLingua107 as the LID model, each
from files built in tests/support/tiny_models.py with random weights of the real architecture. A 100 ms clip is too
short for NISQA: a failed row with the reason, final, while UTMOS22 scores it. Values are checked against the providers
called in this process (their own parity tests check them against the packages' own calls)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pandas as pd
import pytest

from tests.support.harness import run_cli
from tests.support.scorer_env import SCORER, make_scorer_venv
from tests.support.tiny_models import (
    build_random_ecapa,
    build_random_nisqa,
    build_random_seedtts_sim,
    build_random_utmos22,
    build_random_voxlingua107,
    build_tiny_sherpa_speaker,
)
from ttseval.core.audio import Audio
from ttseval.core.registry import Spec
from ttseval.providers.lid import LIDS
from ttseval.providers.quality import QUALITY
from ttseval.providers.speaker import SPEAKERS

TEXTS = {
    "p1": "The weather was mild and the river ran slowly past the town.",
    "p2": "Please call me when you arrive home tonight.",
    "p3": "Yes.",
}


@pytest.fixture(scope="module")
def predictors_run(shared_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("predictors")
    models = root / "models"
    models.mkdir()
    specs = {
        "utmos22": f"utmos22:weights={build_random_utmos22(models / 'utmos_state_dict.pt')}:device=cpu",
        "nisqa": f"nisqa:weights={build_random_nisqa(models / 'nisqa.tar')}",
        "sherpa": f"sherpa-onnx:model={build_tiny_sherpa_speaker(models / 'campplus_tiny.onnx')}",
        "ecapa": f"speechbrain-ecapa:model={build_random_ecapa(models / 'spkrec-ecapa-voxceleb')}:device=cpu",
        "voxlingua": f"speechbrain-lid:model={build_random_voxlingua107(models / 'voxlingua107')}:device=cpu",
    }
    scorer = f"command:level:run={make_scorer_venv(root / 'scorer-venv')} {SCORER}"  # a second venv's scorer
    specs["seedtts"] = f"seedtts-sim:weights={build_random_seedtts_sim(models / 'wavlm_large_finetune.pth')}:device=cpu"
    specs |= {"level": scorer, "crash": f"{scorer} --crash", "hang": f"{scorer} --hang:timeout_s=3"}
    specs = {name: Spec.parse(spec).canonical for name, spec in specs.items()}  # as the tables spell them
    (root / "prompts").mkdir()
    (root / "outputs").mkdir()
    rows = []
    for item, text in TEXTS.items():
        subprocess.run(
            ["espeak-ng", "-w", str(root / "prompts" / f"{item}.wav"), "A quiet evening over the hills."],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            ["espeak-ng", "-w", str(root / "outputs" / f"{item}.wav"), text], check=True, capture_output=True
        )
        rows.append(
            {
                "item_id": item,
                "text": text,
                "language": "en-US",
                "category": "cloning",
                "depth": 0,
                "prompt_audio_uri": f"prompts/{item}.wav",
                "prompt_text": "A quiet evening over the hills.",
            }
        )
    spoken = Audio.from_wav_bytes((root / "outputs" / "p3.wav").read_bytes())  # p3: its first 100 ms only
    start = int(np.argmax(np.abs(spoken.samples) > 0.01))
    clip = Audio(spoken.samples[start : start + spoken.sample_rate_hz // 10], spoken.sample_rate_hz)
    (root / "outputs" / "p3.wav").write_bytes(clip.to_wav_bytes())
    (root / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    qualities = [specs[k] for k in ("utmos22", "nisqa", "level", "crash", "hang")]
    env = shared_env | {
        "TTSEVAL_QUALITY": json.dumps(qualities),
        "TTSEVAL_SIMILARITY": json.dumps([specs["sherpa"], specs["ecapa"], specs["seedtts"]]),
        "TTSEVAL_LID": json.dumps([specs["voxlingua"]]),
    }
    args = [
        "evaluate",
        "--dataset",
        str(root / "items.jsonl"),
        "--systems",
        f"files:sys:dir={root / 'outputs'}",
        "--store",
        str(root / "store"),
        "--run-id",
        "p",
        "--judges",
        "",
    ]
    first = run_cli(args, env, cwd=root)
    assert first.returncode == 0, first.stderr[-4000:]
    quality_first = pd.read_parquet(root / "store" / "runs" / "p" / "quality")
    again = run_cli([*args, "--run-id", "p2"], env | {"TTSEVAL_WER_PROTOCOL": "seed-tts-eval"}, cwd=root)
    assert again.returncode == 0, again.stderr[-4000:]
    return root, specs, quality_first


def test_utmos22_and_nisqa_rows_equal_the_providers_and_the_short_clip_is_a_reasoned_row(predictors_run) -> None:
    root, specs, quality = predictors_run
    clips = {item: Audio.from_wav_bytes((root / "outputs" / f"{item}.wav").read_bytes()) for item in TEXTS}
    quality = quality[quality["quality_spec"].isin([specs["utmos22"], specs["nisqa"]])]
    by = quality.set_index(["quality_spec", "item_id"])
    assert len(quality) == 6 and quality["status"].value_counts().to_dict() == {"ok": 5, "failed": 1}
    utmos = QUALITY.build(specs["utmos22"]).score(list(clips.values()))
    for item, score in zip(TEXTS, utmos):
        row = by.loc[(specs["utmos22"], item)]
        assert row["status"] == "ok" and row["mos"] == pytest.approx(score.mos, abs=1e-4)
    nisqa = QUALITY.build(specs["nisqa"]).score([clips["p1"], clips["p2"]])
    for item, score in zip(("p1", "p2"), nisqa):
        row = by.loc[(specs["nisqa"], item)]
        assert row["mos"] == pytest.approx(score.mos, abs=1e-4)
        assert json.loads(row["details"]) == pytest.approx(score.details, abs=1e-4)
        assert set(json.loads(row["details"])) == {"mos", "noi", "dis", "col", "loud"}
    short = by.loc[(specs["nisqa"], "p3")]
    assert short["status"] == "failed" and not short["retryable"] and pd.isna(short["mos"])
    assert short["error_message"] == (
        "nisqa needs at least 140 ms of audio (one 15-frame mel segment); the clip has 100.00 ms"
    )


def test_sherpa_onnx_and_ecapa_similarity_rows_equal_the_encoders_and_a_second_run_reuses_every_score(
    predictors_run,
) -> None:
    from ttseval.metrics.similarity import cosine_similarity

    root, specs, first_quality = predictors_run
    runs = root / "store" / "runs"
    sim = pd.read_parquet(runs / "p" / "similarity")
    assert len(sim) == 9 and (sim["status"] == "ok").all()
    assert set(sim["encoder_spec"]) == {specs["sherpa"], specs["ecapa"], specs["seedtts"]}
    by = sim.set_index(["encoder_spec", "item_id"])
    for name in ("sherpa", "ecapa", "seedtts"):
        encoder = SPEAKERS.build(specs[name])
        for item in TEXTS:
            clip = Audio.from_wav_bytes((root / "outputs" / f"{item}.wav").read_bytes())
            prompt = Audio.from_wav_bytes((root / "prompts" / f"{item}.wav").read_bytes())
            want = cosine_similarity(*encoder.embed([clip, prompt]))
            assert by.loc[(specs[name], item), "similarity"] == pytest.approx(want, abs=1e-5)
    quality = pd.read_parquet(runs / "p2" / "quality")
    scorers = quality["quality_spec"].isin([specs["crash"], specs["hang"]])  # failures are never cached
    quality, first_quality = (
        quality[~scorers],
        first_quality[~first_quality["quality_spec"].isin([specs["crash"], specs["hang"]])],
    )
    assert quality["cache_hit"].all() and not first_quality["cache_hit"].any()
    merged = quality.merge(first_quality, on=["item_id", "quality_spec"], suffixes=("", "_first"))
    assert merged["status"].tolist() == merged["status_first"].tolist()
    assert np.allclose(merged["mos"], merged["mos_first"], equal_nan=True)
    assert pd.read_parquet(runs / "p2" / "similarity")["cache_hit"].all()
    report = (runs / "p" / "report.md").read_text(encoding="utf-8")
    assert (
        f"## Speaker similarity: `{specs['sherpa']}`" in report
        and f"## Speaker similarity: `{specs['ecapa']}`" in report
    )


def test_voxlingua107_lid_rows_equal_the_model(predictors_run) -> None:
    root, specs, _ = predictors_run
    lid = pd.read_parquet(root / "store" / "runs" / "p" / "lid").set_index("item_id")
    assert len(lid) == 3 and (lid["status"] == "ok").all() and set(lid["lid_spec"]) == {specs["voxlingua"]}
    model = LIDS.build(specs["voxlingua"])
    for item in TEXTS:
        [guess] = model.identify([Audio.from_wav_bytes((root / "outputs" / f"{item}.wav").read_bytes())])
        assert lid.loc[item, "language"] == guess.language and lid.loc[item, "prob"] == pytest.approx(
            guess.prob, abs=1e-5
        )
    assert pd.read_parquet(root / "store" / "runs" / "p2" / "lid")["cache_hit"].all()


def test_a_scorer_in_its_own_venv_runs_as_a_stage_cached_and_its_crash_and_hang_are_retryable_rows(
    predictors_run,
) -> None:
    root, specs, first = predictors_run
    clips = {item: Audio.from_wav_bytes((root / "outputs" / f"{item}.wav").read_bytes()) for item in TEXTS}
    level = first[first["quality_spec"] == specs["level"]].set_index("item_id")
    for item in ("p1", "p2"):  # the scorer's RMS level (tinylevel, its own venv) against numpy's here
        stored = clips[item].samples.astype(np.float64)
        assert level.loc[item, "status"] == "ok"
        rms = 20 * np.log10(np.sqrt(np.mean(stored**2)))
        assert level.loc[item, "mos"] == pytest.approx(np.clip(5 + rms / 15, 1, 5), abs=1e-6)  # -60 dBFS 1, 0 dBFS 5
        assert json.loads(level.loc[item, "details"])["rms_dbfs"] == pytest.approx(rms, abs=1e-6)
        assert json.loads(level.loc[item, "details"])["peak_dbfs"] == pytest.approx(
            20 * np.log10(np.max(np.abs(stored))), abs=1e-6
        )
    assert level.loc["p3", "status"] == "failed" and not level.loc["p3", "retryable"]
    assert level.loc["p3", "error_message"] == "level: clip shorter than 200 ms (100 ms)"
    for name, reason in (
        ("crash", "RuntimeError: the level model is corrupt (a test crash)"),
        ("hang", "waiting for a GPU that never frees"),
    ):
        rows = first[first["quality_spec"] == specs[name]]
        assert len(rows) == 3 and (rows["status"] == "failed").all() and rows["retryable"].all()
        assert rows["error_type"].eq("TransientProviderError").all()
        assert rows["error_message"].str.endswith(reason).all()
    again = pd.read_parquet(root / "store" / "runs" / "p2" / "quality")
    assert again.loc[again["quality_spec"] == specs["level"], "cache_hit"].all()
    asked_again = again[again["quality_spec"].isin([specs["crash"], specs["hang"]])]
    assert len(asked_again) == 6 and not asked_again["cache_hit"].any() and (asked_again["status"] == "failed").all()


def test_the_seed_tts_eval_protocol_scores_cached_transcripts_its_way_and_only_its_report_carries_the_label(
    predictors_run,
) -> None:
    import jiwer

    from ttseval.metrics.normalize import seedtts_en_v1

    root, _, _ = predictors_run
    runs = root / "store" / "runs"
    default, seed = (pd.read_parquet(runs / run / "transcripts").set_index("item_id") for run in ("p", "p2"))
    assert set(default["normalizer"]) == {"english-v1"} and set(seed["normalizer"]) == {"seedtts-en-v1"}
    assert seed["cache_hit"].all() and (seed["hypothesis"] == default.loc[seed.index, "hypothesis"]).all()
    # average_wer.py: the mean of per-utterance WER (jiwer here, on the texts normalized as run_wer.py does), in %
    wers = [
        jiwer.wer(seedtts_en_v1(TEXTS[item]), seedtts_en_v1(seed.loc[item, "hypothesis"]))
        for item in TEXTS
        if seed.loc[item, "status"] == "ok"
    ]
    assert len(wers) >= 2 and seed.loc[
        [i for i in TEXTS if seed.loc[i, "status"] == "ok"], "wer"
    ].tolist() == pytest.approx(wers, abs=1e-12)
    report = (runs / "p2" / "report.md").read_text(encoding="utf-8")
    section = report.split("## WER comparable with Seed-TTS-eval", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| files:sys"))
    assert f"| {len(wers)} | {round(sum(wers) / len(wers) * 100, 3):g} |" in row
    sim = pd.read_parquet(runs / "p2" / "similarity")
    seed_sim = sim.loc[sim["encoder_spec"].str.startswith("seedtts-sim:"), "similarity"]
    assert len(seed_sim) == 3
    section = report.split("## SIM comparable with Seed-TTS-eval", 1)[1].split("\n## ", 1)[0]
    assert f"| 3 | {seed_sim.mean():.3f} |" in section and "sherpa" not in section and "ecapa" not in section
    assert "Seed-TTS-eval" not in (runs / "p" / "report.md").read_text(encoding="utf-8")
