"""Importers for the published EmergentTTS-Eval and InstructTTSEval files, on small files written here.

Field names are those of the published formats (see ttseval/importers.py for where each was read).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ttseval.core.errors import DatasetError
from ttseval.corpus.importers import COLUMNS, import_dataset, import_emergenttts, import_instructttseval
from ttseval.corpus.items import validate_items

AUDIO = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def check(frame: pd.DataFrame) -> None:
    assert list(frame.columns) == COLUMNS
    validate_items(frame, source="import")


# --- EmergentTTS-Eval ---------------------------------------------------------------------------------------

# As boson-ai/EmergentTTS-Eval-public download_data.py writes data/emergent_tts_eval_data.jsonl.
ETTE_ROWS = [
    {
        "category": "Emotions",
        "text_to_synthesize": 'She gasped, "You came back!"',
        "evolution_depth": 0,
        "language": "en",
    },
    {
        "category": "Pronunciation",
        "text_to_synthesize": "Email j.doe@example.com by 5:30 p.m.",
        "evolution_depth": 2,
        "language": "en",
    },
    {
        "category": "Syntactic Complexity",
        "text_to_synthesize": "The horse raced past the barn fell.",
        "evolution_depth": 1,
        "language": "en",
    },
    {
        "category": "Foreign Words",
        "text_to_synthesize": "We ate croissants at the boulangerie.",
        "evolution_depth": 3,
        "language": "en",
    },
    {
        "category": "Questions",
        "text_to_synthesize": "Did you see it? I did. Did you?",
        "evolution_depth": 0,
        "language": "en",
    },
    {
        "category": "Paralinguistics",
        "text_to_synthesize": "Ugh! I-I told you... DO NOT touch that!",
        "evolution_depth": 1,
        "language": "en",
    },
]


def test_emergenttts_jsonl_as_the_public_repo_writes_it(tmp_path):
    frame = import_emergenttts(write_jsonl(tmp_path / "emergent_tts_eval_data.jsonl", ETTE_ROWS))
    check(frame)
    assert frame["item_id"].tolist() == [f"ette-{i}" for i in range(6)]
    assert frame["category"].tolist() == [
        "emotions",
        "complex_pronunciation",
        "syntactic_complexity",
        "foreign_words",
        "questions",
        "paralinguistics",
    ]
    assert frame["depth"].tolist() == [0, 2, 1, 3, 0, 1]
    assert frame["text"].tolist() == [r["text_to_synthesize"] for r in ETTE_ROWS]
    assert set(frame["language"]) == {"en"}
    assert set(frame["benchmark"]) == {"emergenttts-eval"}
    assert set(frame["source"]) == {"bosonai/EmergentTTS-Eval"}
    assert frame["parent_id"].isna().all() and frame["task"].isna().all()
    assert frame["instruction"].isna().all() and frame["reference_audio_uri"].isna().all()


def test_emergenttts_hf_parquet_with_baseline_audio_and_unique_ids(tmp_path):
    rows = ETTE_ROWS[:3]
    table = pa.table(
        {
            "category": [r["category"] for r in rows],
            "text_to_synthesize": [r["text_to_synthesize"] for r in rows],
            "evolution_depth": pa.array([r["evolution_depth"] for r in rows], pa.int64()),
            "audio": pa.array([{"bytes": b"RIFF....", "path": f"{i}.wav"} for i in range(3)], AUDIO),
            "unique_id_eval": [10, 11, 12],
        }
    )
    pq.write_table(table, tmp_path / "train.parquet")
    frame = import_emergenttts(tmp_path / "train.parquet")
    check(frame)
    assert frame["item_id"].tolist() == ["ette-10", "ette-11", "ette-12"]
    assert frame["category"].tolist() == ["emotions", "complex_pronunciation", "syntactic_complexity"]
    assert frame["depth"].tolist() == [0, 2, 1]
    assert frame["language"].tolist() == ["en-US"] * 3  # no language column: the default
    assert frame["reference_audio_uri"].isna().all()  # the audio is a baseline system's clip, not a reference


def test_emergenttts_pipe_separated_csv_export(tmp_path):
    path = tmp_path / "metadata.csv"
    pd.DataFrame(ETTE_ROWS[3:]).assign(audio_path=["audio/a.wav", "audio/b.wav", "audio/c.wav"]).to_csv(
        path, sep="|", index=False
    )
    frame = import_dataset("emergenttts", path)
    check(frame)
    assert frame["item_id"].tolist() == ["ette-0", "ette-1", "ette-2"]
    assert frame["category"].tolist() == ["foreign_words", "questions", "paralinguistics"]
    assert frame["depth"].tolist() == [3, 0, 1]


def test_emergenttts_unknown_category_names_the_row_and_value(tmp_path):
    rows = [ETTE_ROWS[0], {**ETTE_ROWS[1], "category": "Sarcasm"}, ETTE_ROWS[2]]
    with pytest.raises(DatasetError) as caught:
        import_emergenttts(write_jsonl(tmp_path / "bad.jsonl", rows))
    message = str(caught.value)
    assert "row 2 (item_id='ette-1')" in message and "'Sarcasm'" in message
    assert len(caught.value.problems) == 1


def test_emergenttts_bad_depth_and_missing_fields(tmp_path):
    with pytest.raises(DatasetError, match=r"row 1 .*evolution_depth 7"):
        import_emergenttts(write_jsonl(tmp_path / "d.jsonl", [{**ETTE_ROWS[0], "evolution_depth": 7}]))
    with pytest.raises(DatasetError, match="missing field.*text_to_synthesize"):
        import_emergenttts(
            write_jsonl(tmp_path / "m.jsonl", [{"category": "Emotions", "text": "x", "evolution_depth": 0}])
        )


# --- InstructTTSEval ----------------------------------------------------------------------------------------

EN = [
    {
        "id": "en_1",
        "text": "No matter what, this will become public.",
        "APS": "gender: Female.\npitch: High female pitch, rising sharply.",
        "DSD": "A high-pitched, panicked voice.",
        "RP": "On the phone to emergency responders, urgent and anxious.",
    },
    {
        "id": "en_2",
        "text": "Get out of my office.",
        "APS": "gender: Male.\npitch: Low male pitch.",
        "DSD": "A cold, low, commanding voice.",
        "RP": "A boss firing an employee.",
    },
]


def test_instructttseval_hf_parquet_embedded_reference_audio(tmp_path):
    table = pa.table(
        {
            "id": [r["id"] for r in EN],
            "text": [r["text"] for r in EN],
            "APS": [r["APS"] for r in EN],
            "DSD": [r["DSD"] for r in EN],
            "RP": [r["RP"] for r in EN],
            "reference_audio": pa.array(
                [{"bytes": b"RIFF....", "path": "en_1.wav"}, {"bytes": b"RIFF....", "path": "en_2.wav"}], AUDIO
            ),
        }
    )
    pq.write_table(table, tmp_path / "en.parquet")
    frame = import_instructttseval(tmp_path / "en.parquet")
    check(frame)
    assert frame["item_id"].tolist() == ["en_1-aps", "en_1-dsd", "en_1-rp", "en_2-aps", "en_2-dsd", "en_2-rp"]
    assert frame["task"].tolist() == ["APS", "DSD", "RP"] * 2
    assert frame["instruction"].tolist() == [
        EN[0]["APS"],
        EN[0]["DSD"],
        EN[0]["RP"],
        EN[1]["APS"],
        EN[1]["DSD"],
        EN[1]["RP"],
    ]
    assert frame["text"].tolist() == [EN[0]["text"]] * 3 + [EN[1]["text"]] * 3
    assert set(frame["category"]) == {"instruction_following"}
    assert frame["depth"].tolist() == [0] * 6
    assert set(frame["language"]) == {"en-US"}
    assert set(frame["benchmark"]) == {"instructttseval"}
    assert set(frame["source"]) == {"CaasiHUANG/InstructTTSEval"}
    assert frame["reference_audio_uri"].isna().all()  # embedded bytes: nothing written, left null


def test_instructttseval_eval_jsonl_objects_language_argument_and_reference_path(tmp_path):
    # The evaluation format of KexinHUANG19/InstructTTSEval eval/README.md: task fields are objects.
    rows = [
        {
            "id": "7",
            "text": "你好，今天天气真好。",
            "APS": {"instruction": "gender: Female.", "gen_path": "out/7_aps.wav"},
            "DSD": {"instruction": "温柔的女声。", "gen_path": "out/7_dsd.wav"},
            "RP": {"instruction": "幼儿园老师对孩子说话。", "gen_path": "out/7_rp.wav"},
            "reference_audio": "refs/7.wav",
        },
    ]
    frame = import_dataset("instructttseval", write_jsonl(tmp_path / "results.jsonl", rows), language="zh")
    check(frame)
    assert frame["item_id"].tolist() == ["7-aps", "7-dsd", "7-rp"]
    assert frame["instruction"].tolist() == ["gender: Female.", "温柔的女声。", "幼儿园老师对孩子说话。"]
    assert frame["language"].tolist() == ["zh-CN"] * 3
    assert frame["reference_audio_uri"].tolist() == [str((tmp_path / "refs/7.wav").resolve())] * 3


def test_instructttseval_language_from_id_prefix_or_language_column(tmp_path):
    rows = [
        {"id": "zh_3", "text": "快走！", "APS": "a", "DSD": "b", "RP": "c"},
        {"id": "x9", "text": "Hello.", "APS": "a", "DSD": "b", "RP": "c", "language": "en"},
    ]
    frame = import_instructttseval(write_jsonl(tmp_path / "mixed.jsonl", rows))
    check(frame)
    assert frame["language"].tolist() == ["zh-CN"] * 3 + ["en-US"] * 3
    assert frame["item_id"].tolist() == ["zh_3-aps", "zh_3-dsd", "zh_3-rp", "x9-aps", "x9-dsd", "x9-rp"]


def test_instructttseval_unknown_language_names_the_row(tmp_path):
    rows = [{"id": "1", "text": "Hello.", "APS": "a", "DSD": "b", "RP": "c"}]
    with pytest.raises(DatasetError, match=r"row 1 \(id='1'\): cannot tell the language"):
        import_instructttseval(write_jsonl(tmp_path / "data.jsonl", rows))


# --- dispatch -----------------------------------------------------------------------------------------------


def test_import_dataset_unknown_format_lists_formats(tmp_path):
    with pytest.raises(ValueError, match="emergenttts, instructttseval, seedtts"):
        import_dataset("libritts-test", tmp_path / "x.jsonl")


def test_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        import_dataset("emergenttts", tmp_path / "nope.jsonl")
    (tmp_path / "x.tsv").write_text("a\tb\n")
    with pytest.raises(DatasetError, match="unknown extension"):
        import_dataset("emergenttts", tmp_path / "x.tsv")


def test_json_array_file(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(ETTE_ROWS[:2]), encoding="utf-8")
    frame = import_emergenttts(path)
    check(frame)
    assert frame["item_id"].tolist() == ["ette-0", "ette-1"]


# --- manifests of clips made elsewhere (the `files` TTS provider) --------------------------------------------


def test_instructttseval_gen_paths_become_a_manifest_under_the_imported_item_ids(tmp_path):
    from ttseval.corpus.importers import files_spec, instructttseval_generated_manifest

    rows = [
        {
            "id": "en_4",
            "text": "Hi.",
            "APS": {"instruction": "Whisper.", "gen_path": "out/4_aps.wav"},
            "DSD": {"instruction": "A calm voice.", "gen_path": "s3://bucket/gen/4_dsd.wav"},
            "RP": {"instruction": "A teacher.", "gen_path": ""},
        },
        {
            "id": 5,
            "text": "Bye.",
            "language": "en",
            "APS": {"instruction": "Shout.", "gen_path": str(tmp_path / "abs.flac")},
        },
    ]
    path = write_jsonl(tmp_path / "eval.jsonl", rows)
    frame = import_instructttseval(path)
    manifest = instructttseval_generated_manifest(path)
    assert manifest == [
        {"item_id": "en_4-aps", "path": str((tmp_path / "out/4_aps.wav").resolve())},
        {"item_id": "en_4-dsd", "path": "s3://bucket/gen/4_dsd.wav"},
        {"item_id": "5-aps", "path": str(tmp_path / "abs.flac")},
    ]
    assert {m["item_id"] for m in manifest} <= set(frame["item_id"])
    # the HF parquet's plain instruction strings name no clips
    assert (
        instructttseval_generated_manifest(
            write_jsonl(tmp_path / "en.jsonl", [{"id": "en_1", "text": "Hi.", "APS": "a", "DSD": "b", "RP": "c"}])
        )
        == []
    )
    assert files_spec("my-model", tmp_path / "m.jsonl") == f"files:my-model:manifest={tmp_path.resolve()}/m.jsonl"
    with pytest.raises(ValueError, match="no ':', ',' or spaces"):
        files_spec("a,b", tmp_path / "m.jsonl")


def test_emergenttts_baseline_manifest_lists_every_item_by_row_position(tmp_path):
    from ttseval.corpus.importers import EMERGENTTTS_BASELINE_LABEL, emergenttts_baseline_manifest

    assert EMERGENTTTS_BASELINE_LABEL == "gpt-4o-mini-tts-alloy"
    rows = [dict(r, unique_id_eval=i) for i, r in enumerate(ETTE_ROWS[:3])]
    path = write_jsonl(tmp_path / "emergent_tts_eval_data.jsonl", rows)
    frame = import_emergenttts(path)
    folder = tmp_path / "baseline_audios"
    folder.mkdir()
    (folder / "0.wav").write_bytes(b"RIFF")
    (folder / "2.wav").write_bytes(b"RIFF")
    manifest = emergenttts_baseline_manifest(path, frame, folder)
    assert manifest == [{"item_id": f"ette-{i}", "path": str(folder.resolve() / f"{i}.wav")} for i in range(3)]
    with pytest.raises(DatasetError, match="--baseline-audios .* is not an existing folder"):
        emergenttts_baseline_manifest(path, frame, tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"holds none of the 3 clips \(0.wav ... 2.wav\)"):
        emergenttts_baseline_manifest(path, frame, tmp_path / "empty")


def test_emergenttts_every_problem_of_a_row_is_named_and_whole_float_depths_are_accepted(tmp_path):
    good = {"category": "Emotions", "text_to_synthesize": "Hi there.", "evolution_depth": 1.0, "unique_id_eval": "a"}
    bad = {**good, "text_to_synthesize": "   ", "evolution_depth": True, "language": 5, "unique_id_eval": "b"}
    with pytest.raises(DatasetError) as caught:
        import_emergenttts(write_jsonl(tmp_path / "bad.jsonl", [good, bad]))
    assert caught.value.problems == [
        "row 2 (item_id='ette-b'): evolution_depth True is not a whole number 0-3",
        "row 2 (item_id='ette-b'): text_to_synthesize is empty or not text ('   ')",
        "row 2 (item_id='ette-b'): language 5 is not text",
    ]
    frame = import_emergenttts(write_jsonl(tmp_path / "good.jsonl", [good]))
    assert frame[["item_id", "depth", "language"]].values.tolist() == [["ette-a", 1, "en-US"]]
    with pytest.raises(DatasetError, match="row 2: item_id 'ette-a' repeats row 1"):
        import_emergenttts(write_jsonl(tmp_path / "twice.jsonl", [good, good]))


def test_a_json_file_may_hold_one_object_or_json_lines_and_nothing_else(tmp_path):
    row = {"category": "Questions", "text_to_synthesize": "Is it late?", "evolution_depth": 0, "unique_id_eval": "q"}
    one = tmp_path / "one.json"
    one.write_text(json.dumps(row), encoding="utf-8")
    assert import_emergenttts(one)["item_id"].tolist() == ["ette-q"]
    lines = tmp_path / "lines.json"  # what HF's Dataset.to_json writes, whatever the name
    lines.write_text(json.dumps(row) + "\n" + json.dumps({**row, "unique_id_eval": "r"}) + "\n", encoding="utf-8")
    assert import_emergenttts(lines)["item_id"].tolist() == ["ette-q", "ette-r"]
    number = tmp_path / "number.json"
    number.write_text("3", encoding="utf-8")
    with pytest.raises(DatasetError, match="expected a JSON array of objects or JSON Lines"):
        import_emergenttts(number)
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DatasetError, match="empty.jsonl has no rows"):
        import_emergenttts(tmp_path / "empty.jsonl")


def test_instructttseval_every_bad_row_is_named(tmp_path):
    rows = [
        {"id": "", "text": "Hello.", "APS": "a", "DSD": "b", "RP": "c", "language": "en"},
        {"id": "en_2", "text": "", "APS": "a", "DSD": "b", "RP": "c"},
        {"id": "en_3", "text": "Hi.", "APS": "a", "DSD": "b", "RP": "c", "language": "klingon-xx"},
        {"id": "en_4", "text": "Hi.", "APS": "", "DSD": None, "RP": " "},
    ]
    with pytest.raises(DatasetError) as caught:
        import_instructttseval(write_jsonl(tmp_path / "bad.jsonl", rows))
    assert caught.value.problems == [
        "row 1: id is empty",
        "row 2 (id='en_2'): text is empty or not text ('')",
        "row 3 (id='en_3'): language 'klingon-xx' is not en, zh or a known BCP-47 tag",
        "row 4 (id='en_4'): no APS, DSD or RP instruction",
    ]
    with pytest.raises(DatasetError, match="none of the task fields APS, DSD, RP is present"):
        import_instructttseval(write_jsonl(tmp_path / "plain.jsonl", [{"id": "en_1", "text": "x"}]))
    with pytest.raises(ValueError, match="language 'qq-zz-bad' is not a split name"):
        import_instructttseval(write_jsonl(tmp_path / "ok.jsonl", EN), language="qq-zz-bad")
