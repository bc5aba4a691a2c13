"""The two importers that write the `files` TTS provider's manifests (audio made elsewhere, as a system), end to end
through the CLI: an EmergentTTS-Eval release with its baseline clips and InstructTTSEval's generated clips, judged
without synthesis. The provider itself is tests/unit/test_files_provider.py."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest
import soundfile as sf

from tests.support import instant
from tests.support.clip_files import ETTE_ROWS, write_clip
from tests.support.harness import run_cli
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore

# --- importers, end to end through the CLI -------------------------------------------------------------------------


def test_emergenttts_baseline_clips_judged_without_synthesis(shared_env: dict[str, str], tmp_path: Path) -> None:
    """Import a tiny EmergentTTS-Eval release with its baseline_audios, then evaluate espeak-ng against it."""
    import subprocess

    data = tmp_path / "emergent_tts_eval_data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ETTE_ROWS))
    folder = tmp_path / "baseline_audios"
    folder.mkdir()
    for index, row in enumerate(ETTE_ROWS):  # as download_data.py saves them: <row position>.wav
        subprocess.run(
            ["espeak-ng", "-v", "en-gb", "-s", "150", "-w", str(folder / f"{index}.wav"), row["text_to_synthesize"]],
            check=True,
        )
    env = shared_env  # the manifest's paths are absolute, so the shared cluster's workers read the same files
    items_path = tmp_path / "items.jsonl"
    imported = run_cli(
        [
            "import-dataset",
            "--format",
            "emergenttts",
            str(data),
            "--out",
            str(items_path),
            "--baseline-audios",
            str(folder),
        ],
        env,
        cwd=tmp_path,
        timeout_s=120,
    )
    assert imported.returncode == 0, imported.stderr
    manifest = tmp_path / "items.baseline.jsonl"
    spec = f"files:gpt-4o-mini-tts-alloy:manifest={manifest}"
    assert f"system: {spec}\n" in imported.stdout
    assert f"--systems {spec},piper:joe --baseline {spec}" in imported.stdout
    assert [json.loads(line) for line in manifest.read_text().splitlines()] == [
        {"item_id": f"ette-{i}", "path": str(folder / f"{i}.wav")} for i in range(3)
    ]

    result = run_cli(
        [
            "evaluate",
            "--dataset",
            str(items_path),
            "--systems",
            f"{spec},espeak-ng:en-us",
            "--baseline",
            spec,
            "--store",
            str(tmp_path / "store"),
            "--run-id",
            "ette",
        ],
        env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    store = ArtifactStore(str(tmp_path / "store"))
    synthesis = store.read("ette", "synthesis")
    # the run names the baseline by its label (its clips were stored first: ttseval.tasks.staging), never a path
    baseline = synthesis[synthesis["system_spec"] == "files:gpt-4o-mini-tts-alloy"].set_index("item_id").sort_index()
    assert list(baseline.index) == ["ette-0", "ette-1", "ette-2"]
    assert baseline["status"].eq("ok").all() and not baseline["cache_hit"].any()
    for index in range(3):  # the stored clip is the file itself: nothing was synthesized for the baseline
        clip = (folder / f"{index}.wav").read_bytes()
        row = baseline.loc[f"ette-{index}"]
        assert row["audio_sha256"] == hashlib.sha256(clip).hexdigest()
        blob = tmp_path / "store" / "blobs" / "audio" / row["audio_sha256"][:2] / f"{row['audio_sha256']}.wav"
        assert blob.read_bytes() == clip
    winrates = store.read("ette", "winrates")
    overall = winrates[winrates["level"] == "overall"]
    baseline_id = Spec.parse("files:gpt-4o-mini-tts-alloy").id
    assert str(manifest) not in (tmp_path / "store" / "runs" / "ette" / "report.md").read_text()
    assert len(overall) == 1 and overall["baseline_id"].eq(baseline_id).all()
    assert overall["system_id"].eq(Spec.parse("espeak-ng:en-us").id).all()
    # the win-rate recomputed from the stored verdicts: EmergentTTS-Eval scores a win 1, a tie 0.5, a loss 0
    judgments = store.read("ette", "judgments")
    scored = judgments[
        judgments["status"].eq("ok") & judgments["parse_ok"].astype(bool) & judgments["baseline_id"].eq(baseline_id)
    ]
    by_hand = scored["winner"].map({"candidate": 1.0, "tie": 0.5, "baseline": 0.0}).mean()
    assert overall["n_judged"].iloc[0] == 3 == len(scored)
    assert overall["win_rate"].iloc[0] == pytest.approx(by_hand)
    categories = winrates[winrates["level"] == "category"].set_index("category")
    assert categories.loc["questions", "n_judged"] == 2 and categories.loc["emotions", "n_judged"] == 1


def test_instructttseval_generated_clips_judged_for_instructions_without_synthesis(
    keyed_env: dict[str, str], tmp_path: Path
) -> None:
    """An InstructTTSEval evaluation file whose gen_path fields name a system's clips (one missing): imported
    with --system-name, judged by the Gemini instruction judge (fake server), never synthesized."""
    from tests.support.fake_gemini import INSTRUCTION_OK, FakeGemini, Reply

    (tmp_path / "gen").mkdir()
    write_clip(tmp_path / "gen" / "en_1_aps.wav", "WAV", "PCM_16", 24000, 220.0)
    write_clip(tmp_path / "gen" / "en_1_dsd.flac", "FLAC", "PCM_16", 16000, 330.0)
    records = [
        {
            "id": "en_1",
            "text": "No matter what, this will become public.",
            "APS": {"instruction": "Pitch: high. Speed: fast.", "gen_path": "gen/en_1_aps.wav"},
            "DSD": {"instruction": "A frightened young woman.", "gen_path": str(tmp_path / "gen/en_1_dsd.flac")},
            "RP": {"instruction": "On the phone to emergency services.", "gen_path": "gen/en_1_rp.wav"},
        }
    ]
    published = tmp_path / "eval.jsonl"
    published.write_text("".join(json.dumps(r) + "\n" for r in records))
    # the keyed cluster: the judge's key is on its worker; what is tested is which clips reach the judge, so the
    # clips are heard by the instant recogniser and MOS predictor
    env = keyed_env | instant.ENV
    items_path = tmp_path / "items.jsonl"
    imported = run_cli(
        [
            "import-dataset",
            "--format",
            "instructttseval",
            str(published),
            "--out",
            str(items_path),
            "--system-name",
            "my-model",
        ],
        env,
        cwd=tmp_path,
        timeout_s=120,
    )
    assert imported.returncode == 0, imported.stderr
    manifest = tmp_path / "items.generated.jsonl"
    spec = f"files:my-model:manifest={manifest}"
    assert f"system: {spec}\n" in imported.stdout and "2 of 3 generated clips" in imported.stdout
    assert [json.loads(line) for line in manifest.read_text().splitlines()] == [
        {"item_id": "en_1-aps", "path": str(tmp_path / "gen/en_1_aps.wav")},
        {"item_id": "en_1-dsd", "path": str(tmp_path / "gen/en_1_dsd.flac")},
        {"item_id": "en_1-rp", "path": str(tmp_path / "gen/en_1_rp.wav")},
    ]

    with FakeGemini() as fake:
        fake.script("Pitch: high. Speed: fast.", [Reply.ok(INSTRUCTION_OK | {"follows": False})])
        judge = f"gemini:gemini-2.5-pro:base_url={fake.base_url}:backoff_s=0.01:max_attempts=2"
        result = run_cli(
            [
                "evaluate",
                "--dataset",
                str(items_path),
                "--systems",
                spec,
                "--store",
                str(tmp_path / "store"),
                "--run-id",
                "i",
                "--judges",
                "",
                "--instruction-judges",
                judge,
                "--new-store",
            ],  # a paid judge on a store made here on purpose
            env,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-4000:]
        sent = [r.audio_parts() for r in fake.requests]
    store = ArtifactStore(str(tmp_path / "store"))
    synthesis = store.read("i", "synthesis").set_index("item_id").sort_index()
    assert synthesis.loc["en_1-aps", "status"] == "ok" and synthesis.loc["en_1-aps", "sample_rate_hz"] == 24000
    assert synthesis.loc["en_1-dsd", "status"] == "ok" and synthesis.loc["en_1-dsd", "sample_rate_hz"] == 16000
    rp = synthesis.loc["en_1-rp"]
    assert rp["status"] == "failed" and rp["retryable"] and str(tmp_path / "gen/en_1_rp.wav") in rp["error_message"]
    judged = store.read("i", "instruction_judgments").set_index("item_id")
    assert judged.loc["en_1-aps", "follows"] == False and judged.loc["en_1-dsd", "follows"] == True  # noqa: E712
    # the missing clip's judgment waits for it (skipped, retryable): the next run judges it once the file exists
    assert judged.loc["en_1-rp", "status"] == "skipped" and judged.loc["en_1-rp", "retryable"]
    # the judge heard the generated clips themselves, at their own rates
    assert len(sent) == 2 and all(len(parts) == 1 for parts in sent)
    heard = sorted(sf.info(io.BytesIO(parts[0][1])).samplerate for parts in sent)
    assert heard == [16000, 24000]
