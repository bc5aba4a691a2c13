"""One validation path: Great Expectations suites built from the declared schemas and rules, for every stage table.

Frames are built with the declared schemas (ttseval.core.schemas.table_from_rows), as the stages write them.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pandas as pd
import pytest

from ttseval.core.errors import DatasetError
from ttseval.core.schemas import TABLES, table_from_rows
from ttseval.core.validation import TABLE_RULES, check_table, require_valid, rule_columns

NOW = datetime(2026, 11, 22, tzinfo=UTC)
STAMP = {"created_at": NOW}


def frame(table: str, rows: list[dict]) -> pd.DataFrame:
    return table_from_rows(table, [STAMP | r for r in rows]).to_pandas()


def synthesis(*rows: dict) -> pd.DataFrame:
    base = {"system_spec": "piper:joe", "status": "ok", "duration_s": 1.5, "latency_s": 0.2, "audio_sha256": "ab" * 32}
    return frame("synthesis", [base | r for r in rows])


def transcripts(*rows: dict) -> pd.DataFrame:
    base = {
        "system_id": "s1",
        "asr_id": "a1",
        "asr_spec": "faster-whisper:tiny.en",
        "status": "ok",
        "word_errors": 1,
        "ref_words": 4,
        "char_errors": 2,
        "ref_chars": 10,
        "wer": 0.25,
        "cer": 0.2,
    }
    return frame("transcripts", [base | r for r in rows])


def judgments(*rows: dict) -> pd.DataFrame:
    base = {
        "system_id": "s1",
        "baseline_id": "s0",
        "judge_id": "j1",
        "judge_spec": "objective",
        "status": "ok",
        "parse_ok": True,
        "winner": "tie",
        "winner_raw": "tie",
        "cost_usd": 0.0,
    }
    return frame("judgments", [base | r for r in rows])


SOUND = {
    "items": frame(
        "items", [{"item_id": "i1", "category": "questions", "depth": 0, "language": "en-US", "text": "Is it?"}]
    ),
    "synthesis": synthesis(
        {"item_id": "i1", "system_id": "s1"},
        {"item_id": "i2", "system_id": "s1", "status": "unsupported", "duration_s": None, "audio_sha256": None},
    ),
    "transcripts": transcripts(
        {"item_id": "i1"},
        {
            "item_id": "i2",
            "status": "failed",
            "word_errors": None,
            "ref_words": None,
            "char_errors": None,
            "ref_chars": None,
            "wer": None,
            "cer": None,
        },
    ),
    "quality": frame(
        "quality",
        [{"item_id": "i1", "system_id": "s1", "quality_id": "q", "quality_spec": "dnsmos", "status": "ok", "mos": 3.2}],
    ),
    "judgments": judgments(
        {"item_id": "i1"}, {"item_id": "i2", "status": "ok", "parse_ok": False, "winner": None, "winner_raw": None}
    ),
    "instruction_judgments": frame(
        "instruction_judgments",
        [
            {
                "item_id": "i1",
                "system_id": "s1",
                "judge_id": "j",
                "judge_spec": "gemini",
                "task": "APS",
                "follows": True,
                "status": "ok",
                "parse_ok": True,
                "cost_usd": 0.001,
            }
        ],
    ),
}


@pytest.mark.parametrize("table", sorted(SOUND))
def test_sound_stage_tables_pass(table: str) -> None:
    assert check_table(table, SOUND[table]) == []
    require_valid(table, SOUND[table])  # does not raise


def test_every_stored_table_has_rules_from_its_schema() -> None:
    # each table's key uniqueness and non-null columns come from ttseval.core.schemas, not a hand-kept list
    for name, definition in TABLES.items():
        names = {r.name for r in TABLE_RULES[name]}
        assert f"({', '.join(definition.key)}) is unique" in names or f"{definition.key[0]} is unique" in names
        assert {f"{f.name} is present" for f in definition.schema if not f.nullable} <= names


def test_a_bad_judgment_names_table_rule_rows_and_fix() -> None:
    bad = judgments({"item_id": "i1"}, {"item_id": "i2", "winner": "candidat"}, {"item_id": "i3", "status": "done"})
    with pytest.raises(DatasetError) as caught:
        require_valid("judgments", bad)
    error = caught.value
    assert error.source == "judgments" and len(error.problems) == 2
    message = str(error)
    assert message.startswith("table judgments breaks 2 rule(s):")
    assert (
        "rule 'winner is one of candidate, baseline, tie' (column winner) fails on 1 row(s): row 2 "
        "(item_id='i2', system_id='s1', baseline_id='s0', judge_id='j1') (values ['candidat']). Fix: "
    ) in message
    assert (
        "rule 'status is one of ok, failed, skipped' (column status) fails on 1 row(s): row 3 (item_id='i3'" in message
    )
    assert "Fix: a bug in the stage that wrote it" in message


def test_transcripts_with_negative_wer_missing_asr_id_or_empty_reference() -> None:
    bad = transcripts(
        {"item_id": "i1", "wer": -0.5},
        {"item_id": "i2", "asr_id": None},
        {"item_id": "i3", "ref_words": 0},
        {"item_id": "i4", "word_errors": None},
    )
    problems = check_table("transcripts", bad)
    assert len(problems) == 4
    by_rule = {p.split("'")[1]: p for p in problems}
    assert "row 1 (item_id='i1', system_id='s1', asr_id='a1') (values [-0.5])" in by_rule["wer is >= 0"]
    assert "row 2 (item_id='i2'" in by_rule["asr_id is present"]
    assert (
        "Fix: every transcripts row needs asr_id (stable id of the recogniser configuration)"
        in by_rule["asr_id is present"]
    )
    assert "row 3 (item_id='i3'" in by_rule["ref_words is > 0"] and "at least one word" in by_rule["ref_words is > 0"]
    assert "row 4 (item_id='i4'" in by_rule["ok rows have counts"]


def test_rules_the_summary_used_to_recheck() -> None:
    # Formerly hand-written in metrics/summary.py: duplicate keys, unknown status, an ok clip without a duration,
    # a MOS off its scale, an instruction task that does not exist.
    dup = synthesis(
        {"item_id": "i1", "system_id": "s1"},
        {"item_id": "i1", "system_id": "s1"},
        {"item_id": "i2", "system_id": "s1", "status": "done"},
        {"item_id": "i3", "system_id": "s1", "duration_s": None},
    )
    problems = check_table("synthesis", dup)
    assert [p.split("'")[1] for p in problems] == [
        "(item_id, system_id) is unique",
        "status is one of ok, failed, empty, unsupported",
        "ok rows have a duration",
    ]
    assert "row 1 (item_id='i1', system_id='s1'), row 2 (item_id='i1', system_id='s1')" in problems[0]
    quality = SOUND["quality"].assign(mos=9.0)
    assert check_table("quality", quality)[0].startswith(
        "rule 'mos is on the 1-5 scale' (column mos) fails on 1 row(s)"
    )
    task = SOUND["instruction_judgments"].assign(task="XX")
    assert check_table("instruction_judgments", task)[0].startswith("rule 'task is one of APS, DSD, RP'")


def test_every_clip_stage_table_has_the_same_status_rule_lid_and_prosody_included() -> None:
    # The rule comes from the table's declaration (ttseval.core.schemas), not a list kept in validation.py; lid and
    # prosody had none before.
    from ttseval.core.schemas import CLIP_STAGE_TABLES

    assert CLIP_STAGE_TABLES == ("transcripts", "quality", "lid", "prosody", "similarity")
    for table in CLIP_STAGE_TABLES:
        assert [r.kwargs["value_set"] for r in TABLE_RULES[table] if r.name.startswith("status is one of")] == [
            ["ok", "failed"]
        ], table
    lid = frame(
        "lid",
        [
            {
                "item_id": f"i{n}",
                "system_id": "s1",
                "lid_id": "l",
                "lid_spec": "always-en",
                "status": s,
                "language": "eng",
                "prob": 1.0,
            }
            for n, s in enumerate(("ok", "failed", "done"))
        ],
    )
    prosody = frame(
        "prosody",
        [
            {"item_id": "i1", "system_id": "s1", "prosody_id": "prosody-v1", "status": "empty"},
            {"item_id": "i2", "system_id": "s1", "prosody_id": "prosody-v1", "status": "ok"},
        ],
    )
    for table, rows, bad in (
        ("lid", lid, "row 3 (item_id='i2', system_id='s1', lid_id='l') (values ['done'])"),
        ("prosody", prosody, "row 1 (item_id='i1', system_id='s1', prosody_id='prosody-v1') (values ['empty'])"),
    ):
        [problem] = check_table(table, rows)
        assert problem.startswith("rule 'status is one of ok, failed' (column status) fails on 1 row(s): " + bad), (
            problem
        )


def test_a_missing_column_is_a_problem_not_a_traceback() -> None:
    problems = check_table("quality", SOUND["quality"].drop(columns=["mos"]))
    assert problems == [
        (
            "rule 'declared columns are present' fails: quality lacks column(s) ['mos']. "
            "Fix: build the frame with ttseval.core.schemas.QUALITY (table_from_rows)"
        )
    ]


def test_validation_prints_nothing_even_with_info_logging_on() -> None:
    # A fresh process, so Great Expectations is imported and its context created inside the call, with the root
    # logger at INFO as a CLI or Prefect worker may configure it. Before the fix this printed
    # "Created temporary directory '...' for ephemeral docs site" (and GE's import-time INFO lines).
    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "import pandas as pd\n"
        "from ttseval.core.validation import check_table\n"
        "assert check_table('quality', pd.DataFrame({'item_id': ['i'], 'system_id': ['s'], 'quality_id': ['q'],"
        " 'quality_spec': ['d'], 'status': ['ok'], 'mos': [3.0], 'created_at': [pd.Timestamp.now(tz='UTC')]})) == []\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (result.stdout, result.stderr) == ("", "")


def test_no_copy_of_a_checked_frame_is_kept_after_its_check() -> None:
    """Great Expectations' execution engine keeps the last frame of each suite (here the checked columns' copy); a
    whole table checked at the end of a run (100,000 rows) must not stay in memory through the report."""
    import gc

    rows = 97  # no other frame in the process has this many rows
    made = {
        "judgments": lambda: pd.concat([SOUND["judgments"].head(1)] * rows, ignore_index=True).assign(
            item_id=[f"i{k}" for k in range(rows)]
        ),
        "transcripts": lambda: transcripts(*({"item_id": f"i{k}", "wer": -1.0} for k in range(rows))),
    }
    for table, make in made.items():  # a sound frame and a broken one
        assert bool(check_table(table, make())) == (table == "transcripts")
        gc.collect()
        # type(), not isinstance: isinstance on a weak proxy whose object is gone raises
        kept = [o for o in gc.get_objects() if type(o) is pd.DataFrame and len(o) == rows]
        assert kept == [], f"{len(kept)} frame(s) of the checked {table} are still referenced"


def test_a_validation_call_writes_nothing_to_stdout_or_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    check_table("judgments", SOUND["judgments"])
    assert check_table("transcripts", transcripts({"item_id": "i1", "wer": -1.0}))
    assert capfd.readouterr() == ("", "")


def test_a_frame_that_passed_passes_again_without_great_expectations_and_a_failure_is_never_remembered(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttseval.core import validation

    monkeypatch.setattr(validation, "VALIDATED", tmp_path)
    calls = []
    real = validation._validate

    def counted(*args, **kwargs):
        calls.append(kwargs["suite_name"])
        return real(*args, **kwargs)

    def markers() -> list:
        return [p for p in tmp_path.rglob("*") if p.is_file()]

    monkeypatch.setattr(validation, "_validate", counted)
    sound = SOUND["transcripts"]
    assert check_table("transcripts", sound) == []
    assert calls == ["transcripts"] and len(markers()) == 1  # the pass is remembered, one marker
    assert markers()[0].parent.name == validation._code()  # in the folder of this code
    assert check_table("transcripts", sound.copy()) == []  # the same rows again: no validation run
    assert calls == ["transcripts"]
    # One cell changed is another frame: validated, and here it fails (WER below 0), every time, never remembered.
    broken = sound.assign(wer=sound["wer"].where(sound.index != 0, -1.0))
    first, second = check_table("transcripts", broken), check_table("transcripts", broken)
    assert first == second and len(first) == 1 and "wer" in first[0]
    assert calls == ["transcripts"] * 3 and len(markers()) == 1
    # The marker is named by rows and rules together: the same rows under a rule fewer are another name.
    numbered = sound.reset_index(drop=True).assign(row=range(1, len(sound) + 1))  # as check_table numbers them
    row_columns = ("row", *TABLES["transcripts"].key)
    rules = TABLE_RULES["transcripts"]
    assert markers() == [validation.passed_marker(numbered, rules, suite_name="transcripts", row_columns=row_columns)]
    assert (
        validation.passed_marker(numbered, rules[:-1], suite_name="transcripts", row_columns=row_columns)
        != markers()[0]
    )
    # A cell pandas cannot hash (a list) has no marker: such a frame is validated each time.
    listed = pd.DataFrame({"item_id": ["a"], "tags": [["x", "y"]]})
    assert validation.passed_marker(listed, [], suite_name="t", row_columns=("row",)) is None


def test_a_marker_never_stands_for_another_frame_whose_cells_pandas_hashes_alike(tmp_path, monkeypatch) -> None:
    """pandas hashes an object column's cells by their text, so ids 1 and "1" hash alike: a column mixing types
    gets no marker (validated each time), and one type's column is named by that type (bytes apart from text)."""
    from ttseval.core import validation
    from ttseval.core.validation import Rule, check

    monkeypatch.setattr(validation, "VALIDATED", tmp_path)
    unique = [Rule("item_id is unique", "item_id", "ExpectColumnValuesToBeUnique", {}, "give each item its own id")]
    assert (
        pd.util.hash_pandas_object(pd.Series([1, "1"], dtype=object)).tolist()
        == pd.util.hash_pandas_object(pd.Series(["1", "1"], dtype=object)).tolist()
    )  # why: the collision itself
    mixed = pd.DataFrame({"item_id": pd.Series([1, "1"], dtype=object), "row": [1, 2]})
    assert validation.passed_marker(mixed, unique, suite_name="items", row_columns=("row",)) is None
    assert check(mixed, unique, suite_name="items", row_columns=("row",)) == []  # 1 and "1" differ: unique
    same = pd.DataFrame({"item_id": pd.Series(["1", "1"], dtype=object), "row": [1, 2]})
    assert len(check(same, unique, suite_name="items", row_columns=("row",))) == 1  # not taken for the mixed one
    text = pd.DataFrame({"item_id": ["ab"], "row": [1]})
    raw = pd.DataFrame({"item_id": [b"ab"], "row": [1]})
    assert validation.passed_marker(text, unique, suite_name="items", row_columns=("row",)) != validation.passed_marker(
        raw, unique, suite_name="items", row_columns=("row",)
    )


def test_marker_folders_of_other_code_are_removed_once_a_week_old(tmp_path, monkeypatch) -> None:
    import os
    import time

    from ttseval.core import validation

    monkeypatch.setattr(validation, "VALIDATED", tmp_path)
    for folder, age_days in ((tmp_path / "old-code", 8), (tmp_path / "recent-code", 6)):
        folder.mkdir()
        (folder / "marker").touch()
        stamp = time.time() - age_days * 86400
        os.utime(folder, (stamp, stamp))
    assert check_table("transcripts", SOUND["transcripts"]) == []  # this code's first marker: its folder is made
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["recent-code", validation._code()])


@pytest.mark.parametrize(
    "table, bad",
    [
        (
            "judgments",
            judgments(
                {"item_id": "i1", "winner": None, "winner_raw": None},  # parsed and ok, yet no winner
                {"item_id": "i2", "winner": "candidat"},
                {"item_id": "i2", "winner": "tie"},  # the key twice
            ),
        ),
        ("transcripts", transcripts({"item_id": "i1", "wer": -0.5}, {"item_id": "i2", "ref_words": 0})),
        ("synthesis", synthesis({"item_id": "i1", "system_id": "s1", "audio_sha256": None, "status": "ok"})),
    ],
)
def test_the_columns_the_rules_read_find_every_problem_the_whole_table_does(table: str, bad: pd.DataFrame) -> None:
    """A run's stage tables are checked reading only rule_columns (not the judges' raw answers or the texts): the
    same problems as the whole table, a row condition's columns (parse_ok) included."""
    columns = rule_columns(table)
    assert check_table(table, bad[columns]) == check_table(table, bad) != []
    assert set(TABLES[table].key) <= set(columns) < set(bad.columns)


def test_the_checked_columns_leave_out_the_long_texts() -> None:
    assert "parse_ok" in rule_columns("judgments") and "status" in rule_columns("judgments")
    assert not {"raw_response", "reasoning_candidate", "comparison"} & set(rule_columns("judgments"))
    assert not {"ref_norm", "hyp_norm", "hypothesis"} & set(rule_columns("transcripts"))


def test_a_runs_broken_stage_table_fails_the_run_naming_the_rule_and_a_sound_one_passes(tmp_path) -> None:
    """The flow's check after its stages reads each stage table's checked columns from the store: a judgment
    parsed and ok without a winner is named; the sound tables pass."""
    import pyarrow as pa

    from ttseval.core.errors import TTSEvalError
    from ttseval.core.store import ArtifactStore
    from ttseval.flows.common import check_stage_tables

    store = ArtifactStore(str(tmp_path / "store"))
    for table in ("synthesis", "transcripts", "judgments"):
        store.write_part("r", table, pa.Table.from_pandas(SOUND[table], schema=TABLES[table].schema))
    check_stage_tables(store, "r", ("synthesis", "transcripts", "judgments"))  # does not raise
    bad = judgments({"item_id": "i3", "winner": None, "winner_raw": None})
    store.write_part("r", "judgments", pa.Table.from_pandas(bad, schema=TABLES["judgments"].schema))
    with pytest.raises(TTSEvalError) as caught:
        check_stage_tables(store, "r", ("synthesis", "transcripts", "judgments"))
    assert "rule 'parsed ok rows have a winner' (column winner) fails on 1 row(s)" in str(caught.value)
    assert "item_id='i3'" in str(caught.value)
