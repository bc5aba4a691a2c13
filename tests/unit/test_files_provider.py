"""The `files` TTS provider (audio made elsewhere, as a system) on real clips written here: WAV, FLAC, MP3 and OGG
at their own rates, the dir and manifest forms (local and on S3), the errors that defer an item, and the
synthesis stage's rows for it; the refusals of the two importers that write its manifests (their runs through the
CLI: tests/e2e/test_files_provider_runs.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from tests.support.clip_files import ETTE_ROWS, tone, write_clip
from tests.support.harness import ROOT
from ttseval.core.config import load_settings
from ttseval.core.errors import DeferredProviderError, SpecError
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore
from ttseval.providers.tts import TTS
from ttseval.tasks.synthesize import synthesize_rows

# (suffix, soundfile format, subtype, sample rate, tone Hz, channels)
CLIPS = [
    ("wav", "WAV", "PCM_16", 16000, 440.0, 1),
    ("flac", "FLAC", "PCM_16", 44100, 660.0, 2),
    ("mp3", "MP3", "MPEG_LAYER_III", 24000, 550.0, 1),
    ("ogg", "OGG", "VORBIS", 48000, 880.0, 2),
]


def peak_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples))
    return float(np.fft.rfftfreq(len(samples), 1 / rate)[int(np.argmax(spectrum))])


@pytest.fixture
def clips(tmp_path: Path) -> Path:
    folder = tmp_path / "clips"
    folder.mkdir()
    for suffix, fmt, subtype, rate, hz, channels in CLIPS:
        write_clip(folder / f"item-{suffix}.{suffix}", fmt, subtype, rate, hz, channels)
    return folder


def items(*ids: str, text: str = "The same text for every item.") -> list[dict]:
    return [{"item_id": i, "text": text, "language": "en-US", "category": "questions", "depth": 0} for i in ids]


def test_every_format_decodes_to_mono_at_its_own_rate(clips: Path) -> None:
    provider = TTS.build(f"files:elsewhere:dir={clips}")
    assert provider.keyed_by_item and provider.output_sample_rate_hz is None
    assert provider.supports_language("ps") and provider.supports_language("zh-CN")
    for suffix, _, _, rate, hz, _ in CLIPS:
        audio = provider.synthesize("ignored", "en-US", instruction="ignored", item_id=f"item-{suffix}")
        assert audio.sample_rate_hz == rate, suffix
        assert audio.samples.ndim == 1 and audio.samples.dtype == np.float32
        assert audio.duration_s == pytest.approx(0.5, abs=0.06), suffix  # MP3 / Vorbis may pad a frame
        assert peak_hz(audio.samples, rate) == pytest.approx(hz, abs=3), suffix
        assert 0.3 < float(np.max(np.abs(audio.samples))) < 0.5
    # lossless clips come back sample for sample (16-bit quantization only)
    wav = provider.synthesize("", "en", item_id="item-wav")
    assert np.max(np.abs(wav.samples - tone(16000, 440.0))) < 1 / 32768 + 1e-6
    assert provider.metadata() == {
        "engine": "files",
        "version": "1",
        "label": "elsewhere",
        "source": "dir",
        "path": str(clips),
    }


def test_dir_form_missing_duplicate_and_garbage_clips_are_deferred_naming_item_and_path(clips: Path) -> None:
    write_clip(clips / "twice.wav", "WAV", "PCM_16", 8000, 300.0)
    write_clip(clips / "twice.flac", "FLAC", "PCM_16", 8000, 300.0)
    (clips / "broken.mp3").write_bytes(b"this is not audio at all " * 40)
    (clips / "notes.txt").write_text("not a clip")
    provider = TTS.build(f"files:elsewhere:dir={clips}")
    with pytest.raises(DeferredProviderError) as missing:
        provider.synthesize("t", "en", item_id="absent-1")
    assert "'absent-1'" in str(missing.value) and f"{clips}/absent-1." in str(missing.value)
    assert "missing file" in str(missing.value) and missing.value.key == "absent-1"
    with pytest.raises(DeferredProviderError) as twice:
        provider.synthesize("t", "en", item_id="twice")
    assert f"{clips}/twice.flac and {clips}/twice.wav" in str(twice.value)
    with pytest.raises(DeferredProviderError) as broken:
        provider.synthesize("t", "en", item_id="broken")
    assert "'broken'" in str(broken.value) and f"{clips}/broken.mp3" in str(broken.value)
    assert "cannot be decoded" in str(broken.value)
    with pytest.raises(DeferredProviderError):
        provider.synthesize("t", "en", item_id="notes")  # only audio suffixes are clips


def test_manifest_jsonl_and_csv_relative_and_absolute_paths_read_once(clips: Path, tmp_path: Path) -> None:
    (tmp_path / "garbage.wav").write_bytes(b"\x00\x01garbage" * 100)
    rows = [
        {"item_id": "q-1", "path": "clips/item-flac.flac"},  # relative to the manifest's folder
        {"item_id": "q-2", "path": str(clips / "item-mp3.mp3")},
        {"item_id": "q-3", "path": "clips/not-there.wav"},
        {"item_id": "q-4", "path": "garbage.wav"},
    ]
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    csv = tmp_path / "m.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    for manifest in (jsonl, csv):
        provider = TTS.build(f"files:sys-a:manifest={manifest}")
        assert provider.synthesize("t", "en", item_id="q-1").sample_rate_hz == 44100
        assert provider.synthesize("t", "en", item_id="q-2").sample_rate_hz == 24000
        with pytest.raises(DeferredProviderError) as missing:
            provider.synthesize("t", "en", item_id="q-3")
        assert f"'q-3': {clips}/not-there.wav: missing file" in str(missing.value)
        with pytest.raises(DeferredProviderError) as absent:
            provider.synthesize("t", "en", item_id="q-9")
        assert "'q-9'" in str(absent.value) and str(manifest) in str(absent.value)
        assert "not in the manifest" in str(absent.value)
        with pytest.raises(DeferredProviderError) as garbage:
            provider.synthesize("t", "en", item_id="q-4")
        assert f"{tmp_path}/garbage.wav" in str(garbage.value) and "Format not recognised" in str(garbage.value)
        assert provider.metadata()["source"] == "manifest" and provider.metadata()["path"] == str(manifest)
    # read once per instance: a manifest rewritten after the provider was built is not read again
    provider = TTS.build(f"files:sys-a:manifest={jsonl}")
    jsonl.write_text(json.dumps({"item_id": "q-1", "path": "clips/item-ogg.ogg"}) + "\n")
    assert provider.synthesize("t", "en", item_id="q-1").sample_rate_hz == 44100
    assert TTS.build(f"files:sys-a:manifest={jsonl}").synthesize("t", "en", item_id="q-1").sample_rate_hz == 48000


@pytest.mark.parametrize(
    "spec, message",
    [
        ("files:x", "needs exactly one of dir=PATH"),
        ("files:x:dir={d}:manifest={d}/m.jsonl", "got dir and manifest"),
        ("files:dir={d}", "needs a label that names the system"),
        ("files:x:dir={d}/nope", "is not an existing folder"),
        ("files:x:manifest={d}/nope.jsonl", "is not an existing file"),
        ("files:x:manifest={d}/m.txt", "is neither .jsonl nor .csv"),
        ("files:x:manifest={d}/bad.csv", "has no column(s) path"),
        ("files:x:manifest={d}/twice.jsonl", "item_id 'a' is listed twice"),
        ("files:x:folder={d}", "unknown files option(s) 'folder'; valid options: dir, manifest"),
    ],
)
def test_bad_specs_are_refused_when_built_with_the_fix(spec: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "m.txt").write_text("")
    (tmp_path / "bad.csv").write_text("item_id,file\na,a.wav\n")
    (tmp_path / "twice.jsonl").write_text('{"item_id": "a", "path": "a.wav"}\n{"item_id": "a", "path": "b.wav"}\n')
    with pytest.raises(SpecError) as e:
        TTS.build(spec.format(d=tmp_path))
    assert message in str(e.value)


def test_manifest_on_s3_with_relative_and_absolute_uris(s3_bucket: str, tmp_path: Path) -> None:
    import boto3

    s3 = boto3.client("s3")
    for key, (fmt, subtype, rate) in {
        "run/clips/a.flac": ("FLAC", "PCM_16", 22050),
        "other/b.ogg": ("OGG", "VORBIS", 32000),
    }.items():
        write_clip(tmp_path / "clip", fmt, subtype, rate, 500.0)
        s3.put_object(Bucket=s3_bucket, Key=key, Body=(tmp_path / "clip").read_bytes())
    manifest = [
        {"item_id": "a", "path": "clips/a.flac"},
        {"item_id": "b", "path": f"s3://{s3_bucket}/other/b.ogg"},
        {"item_id": "c", "path": "clips/c.wav"},
    ]
    s3.put_object(Bucket=s3_bucket, Key="run/m.jsonl", Body="".join(json.dumps(r) + "\n" for r in manifest))
    provider = TTS.build(f"files:cloud:manifest=s3://{s3_bucket}/run/m.jsonl")
    assert provider.synthesize("t", "en", item_id="a").sample_rate_hz == 22050
    assert provider.synthesize("t", "en", item_id="b").sample_rate_hz == 32000
    with pytest.raises(DeferredProviderError) as missing:
        provider.synthesize("t", "en", item_id="c")
    assert f"'c': s3://{s3_bucket}/run/clips/c.wav: missing file" in str(missing.value)
    assert provider.metadata()["path"] == f"s3://{s3_bucket}/run/m.jsonl"
    # a manifest that is not there: every item is deferred (the next run reads it again), naming the manifest
    later = TTS.build(f"files:cloud:manifest=s3://{s3_bucket}/run/later.jsonl")
    with pytest.raises(DeferredProviderError) as unread:
        later.synthesize("t", "en", item_id="a")
    assert f"s3://{s3_bucket}/run/later.jsonl" in str(unread.value) and "cannot be read" in str(unread.value)


def test_synthesis_stage_gives_every_item_a_row_and_a_failed_retryable_row_for_a_missing_clip(
    clips: Path, tmp_path: Path
) -> None:
    store = ArtifactStore(str(tmp_path / "store"))
    settings = load_settings(store=store.uri)
    spec = Spec.parse(f"files:elsewhere:dir={clips}")
    provider = TTS.build(spec)
    ids = ["item-wav", "item-missing", "item-ogg", "item-flac"]
    for _attempt in range(2):  # the second time nothing is reused from the first (clips are keyed by item id)
        rows = synthesize_rows(provider, spec, items(*ids), settings, store)
        assert [r["item_id"] for r in rows] == ids
        by_id = {r["item_id"]: r for r in rows}
        failed = by_id["item-missing"]
        assert failed["status"] == "failed" and failed["retryable"] is True
        assert failed["error_type"] == "DeferredProviderError" and failed["attempt"] == 1  # not retried in the run
        assert f"{clips}/item-missing." in failed["error_message"] and "'item-missing'" in failed["error_message"]
        ok = [by_id[i] for i in ("item-wav", "item-ogg", "item-flac")]
        assert all(r["status"] == "ok" and r["cache_hit"] is False and r["cost_usd"] == 0.0 for r in ok)
        assert all(r["latency_s"] is None for r in ok), "looked up, not synthesized: no time, so no RTF"
        assert [r["sample_rate_hz"] for r in ok] == [16000, 48000, 44100]
        assert len({r["audio_sha256"] for r in ok}) == 3, "same text, three different clips"
        assert json.loads(ok[0]["provider_metadata"])["label"] == "elsewhere"
    # the stored WAV blob of a 16-bit mono WAV clip is that very file, byte for byte
    wav = (clips / "item-wav.wav").read_bytes()
    assert by_id["item-wav"]["audio_sha256"] == hashlib.sha256(wav).hexdigest()


# --- staged into the store before the run: workers read only the store -------------------------------------------


def test_staged_clips_are_the_stored_audio_the_folder_would_give_and_need_no_folder(
    clips: Path, tmp_path: Path
) -> None:
    """stage_clips reads each item's clip here and stores it; a provider built from the store alone (what a worker
    builds) gives the rows the folder gave: the same clip bytes and rates, the same failed row for a missing clip,
    and it reads nothing from the folder (deleted before it runs)."""
    import shutil

    from ttseval.providers.tts.files import clip_set_path, stage_clips

    store = ArtifactStore(str(tmp_path / "store"))
    settings = load_settings(store=store.uri)
    folder_spec = Spec.parse(f"files:elsewhere:dir={clips}")
    ids = ["item-wav", "item-missing", "item-ogg", "item-flac"]
    from_folder = synthesize_rows(TTS.build(folder_spec), folder_spec, items(*ids), settings, store)
    sha, record = stage_clips(TTS.build(folder_spec), store, ids)
    assert sha == hashlib.sha256(store.read_bytes(clip_set_path(sha))).hexdigest()  # content-addressed
    assert sorted(record["clips"]) == ["item-flac", "item-ogg", "item-wav"] and list(record["problems"]) == [
        "item-missing"
    ]
    assert record["source"] == f"dir {clips}"
    # the folder moved: another record (it names its source) of the same clips; staged again: the same record
    moved = tmp_path / "moved"
    shutil.copytree(clips, moved)
    assert stage_clips(TTS.build(f"files:elsewhere:dir={moved}"), store, ids)[0] != sha  # its source is recorded
    assert stage_clips(TTS.build(folder_spec), store, ids)[0] == sha
    shutil.rmtree(clips)
    shutil.rmtree(moved)

    label_spec = Spec.parse("files:elsewhere")
    worker = TTS.build(label_spec, store=store.uri, clip_sets={"elsewhere": sha})
    from_store = synthesize_rows(worker, label_spec, items(*ids), settings, store)
    for a, b in zip(from_folder, from_store):
        columns = ("item_id", "status", "audio_sha256", "sample_rate_hz", "duration_s")
        assert [b.get(c) for c in columns] == [a.get(c) for c in columns]
        assert b["system_spec"] == "files:elsewhere" and b["system_id"] == label_spec.id
    missing = from_store[1]
    assert missing["status"] == "failed" and missing["retryable"] and missing["error_type"] == "DeferredProviderError"
    assert missing["error_message"] == from_folder[1]["error_message"]  # the folder's reason, recorded at staging
    assert json.loads(from_store[0]["provider_metadata"])["clip_set"] == sha
    with pytest.raises(SpecError, match="needs exactly one of dir=PATH"):  # no clip set for the label: no store mode
        TTS.build("files:other", store=store.uri, clip_sets={"elsewhere": sha})


def test_a_run_names_a_staged_system_by_its_label_everywhere_and_refuses_other_clips_in_the_same_run(
    clips: Path, tmp_path: Path
) -> None:
    """stage_files_systems renames the folder spec to files:<label> in the systems, the baseline and the settings
    that name systems; two systems with one label are refused; a run id whose rows hold other audio of the label is
    refused before anything of the run is written."""
    from ttseval.core.errors import DatasetError
    from ttseval.core.schemas import table_from_rows
    from ttseval.tasks.staging import stage_files_systems

    store = ArtifactStore(str(tmp_path / "store"))
    folder = f"files:elsewhere:dir={clips}"
    settings = load_settings(store=store.uri).model_copy(
        update={
            "natural": [folder],
            "controls": ["espeak-ng:en-us"],
            "reference_voices": {Spec.parse(folder).id: "v.wav"},
        }
    )
    run_items = pd.DataFrame(items("item-wav", "item-ogg"))
    specs = [Spec.parse(folder), Spec.parse("espeak-ng:en-us")]
    staged = stage_files_systems(store, "r1", run_items, specs, specs[0], settings)
    label = Spec.parse("files:elsewhere")
    assert [s.canonical for s in staged.systems] == ["files:elsewhere", "espeak-ng:en-us"]
    assert staged.baseline == label and staged.renamed == {Spec.parse(folder).canonical: "files:elsewhere"}
    assert staged.settings.natural == ["files:elsewhere"] and staged.settings.controls == ["espeak-ng:en-us"]
    assert staged.settings.reference_voices == {label.id: "v.wav"}
    assert staged.settings.role_of(label.id) == "natural"
    assert list(staged.settings.clip_sets) == ["elsewhere"]
    with pytest.raises(SpecError, match="both labelled 'elsewhere'"):
        stage_files_systems(
            store, "r1", run_items, [*specs, Spec.parse(f"files:elsewhere:dir={tmp_path}")], specs[0], settings
        )
    # the run holds item-wav's clip under the label; the folder's clip changes: that run id refuses it
    rows = synthesize_rows(
        TTS.build(label, store=store.uri, clip_sets=staged.settings.clip_sets),
        label,
        items("item-wav", "item-ogg"),
        staged.settings,
        store,
    )
    store.write_part("r1", "synthesis", table_from_rows("synthesis", rows))
    sf.write(clips / "item-wav.wav", tone(16000, 300.0), 16000, subtype="PCM_16")
    with pytest.raises(DatasetError) as refused:
        stage_files_systems(store, "r1", run_items, specs, specs[0], settings)
    assert "run 'r1' already holds other audio of files:elsewhere (files:elsewhere item 'item-wav')" in str(
        refused.value
    ) and "a new --run-id" in str(refused.value)
    assert stage_files_systems(store, "r2", run_items, specs, specs[0], settings).systems[0] == label  # another run


# --- importers: their refusals (their runs through the CLI: tests/e2e/test_files_provider_runs.py) -----------------


def test_import_errors_exit_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from ttseval.cli import main

    data = tmp_path / "emergent_tts_eval_data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ETTE_ROWS))
    (tmp_path / "empty").mkdir()
    base = ["import-dataset", "--format", "emergenttts", str(data), "--out", str(tmp_path / "items.jsonl")]
    for extra, message in [
        (
            ["--baseline-audios", str(tmp_path / "nope")],
            f"--baseline-audios {str(tmp_path / 'nope')!r} is not an existing folder; pass the baseline_audios folder",
        ),
        (["--baseline-audios", str(tmp_path / "empty")], "holds none of the 3 clips (0.wav ... 2.wav)"),
        (["--system-name", "x"], "--system-name names the clips of an InstructTTSEval file"),
    ]:
        assert main(base + extra) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "items.jsonl").exists()
    instruct = tmp_path / "eval.jsonl"
    instruct.write_text(json.dumps({"id": "en_1", "text": "Hi.", "APS": {"instruction": "Whisper."}}) + "\n")
    out = ["import-dataset", "--format", "instructttseval", str(instruct), "--out", str(tmp_path / "i.jsonl")]
    assert main([*out, "--system-name", "my:sys"]) == 2
    assert "--system-name: system name 'my:sys'" in capsys.readouterr().err
    assert main([*out, "--system-name", "my-sys"]) == 2  # no gen_path in the file: nothing to name
    assert "has no gen_path fields" in capsys.readouterr().err
    assert main(out) == 0 and "system:" not in capsys.readouterr().out
    assert not (tmp_path / "i.generated.jsonl").exists()


def test_a_dry_run_counts_no_call_for_audio_made_elsewhere(clips: Path, tmp_path: Path) -> None:
    """A files: system's clips are looked up, not bought: the dry run counts its keys and no call (docs/systems.md)."""
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(i) + "\n" for i in items("item-wav", "item-ogg", "item-flac")), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "PREFECT_API"))}
    env |= {"PYTHONPATH": str(ROOT), "PREFECT_HOME": str(tmp_path / "ph"), "DO_NOT_TRACK": "1"}
    system = f"files:elsewhere:dir={clips}"
    args = ["evaluate", "--dataset", str(data), "--systems", system, "--judges", "", "--store", str(tmp_path / "s")]
    dry = subprocess.run(
        [sys.executable, "-m", "ttseval.cli", *args, "--dry-run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dry.returncode == 0, dry.stderr
    row = next(line.split() for line in dry.stdout.splitlines() if line.startswith("files:elsewhere"))
    assert row[1:5] == ["tts", "3", "0", "0"], row  # kind, keys, calls, reused
    assert not (tmp_path / "s").exists()
