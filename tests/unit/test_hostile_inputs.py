"""Hostile input: encodings, scripts, sizes, control characters, ids that look like paths or that
collide once case or Unicode normalization is ignored, formulas in text that reaches a spreadsheet, malformed
settings and provider specs. Each is refused with a message naming the row, the field and the fix, or handled
as it should be. Refusal writes nothing: the datasets are read before any write (the CLI cases in
tests/unit/test_evaluate_refusals.py check that no store appears); a listening test's results with unknown stimuli
are tests/unit/test_listening.py's."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pandas as pd
import pytest

from ttseval.core.errors import ConfigError, DatasetError, SpecError
from ttseval.corpus.items import load_items


def _line(item_id: object = "a", text: object = "Hello there.", **extra: object) -> str:
    return (
        json.dumps(
            {"item_id": item_id, "text": text, "language": "en-US", "category": "questions", "depth": 0} | extra,
            ensure_ascii=False,
        )
        + "\n"
    )


REFUSED: dict[str, tuple[bytes, str, str]] = {  # name -> (file bytes, suffix, message)
    "UTF-16": (_line().encode("utf-16"), ".jsonl", "cannot parse as .jsonl"),
    "invalid UTF-8": (
        b'{"item_id": "a", "text": "caf\xe9", "language": "en", "category": "q", "depth": 0}\n',
        ".jsonl",
        "save it as UTF-8",
    ),
    "200,000 characters": (
        _line(text="a" * 200_000).encode(),
        ".jsonl",
        (
            "rule 'text is at most 5,000 characters' (column text) fails on 1 row(s): row 1 "
            "(item_id='a'). Fix: split the text"
        ),
    ),
    "NUL in text": (
        _line(text="Hello\x00there").encode(),
        ".jsonl",
        "rule 'text has no control characters' (column text) fails on 1 row(s): row 1",
    ),
    "escape sequence in text": (
        _line(text="\x1b[31mred\x1b[0m").encode(),
        ".jsonl",
        "rule 'text has no control characters'",
    ),
    "id with ..": (
        _line(item_id="../../etc/passwd").encode(),
        ".jsonl",
        (
            "rule 'item_id is a plain name' (column item_id) fails on 1 row(s): row 1 "
            "(item_id='../../etc/passwd'). Fix: use letters"
        ),
    ),
    "id with a slash": (_line(item_id="a/b").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "id that is a URL": (_line(item_id="https://example.com/x").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "id with a backslash": (_line(item_id="C:\\x").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "id with spaces around": (_line(item_id=" a ").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "id '.'": (_line(item_id=".").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "id with a newline": (_line(item_id="a\nb").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "ids differing in normalization": (
        (
            _line(item_id=unicodedata.normalize("NFC", "café")) + _line(item_id=unicodedata.normalize("NFD", "café"))
        ).encode(),
        ".jsonl",
        "rule 'item_id is unique ignoring case and Unicode normalization' (column item_id) fails on 2 row(s)",
    ),
    "ids differing in case": (
        (_line(item_id="Item-1") + _line(item_id="item-1")).encode(),
        ".jsonl",
        "rule 'item_id is unique ignoring case and Unicode normalization'",
    ),
    "duplicate ids": ((_line() + _line()).encode(), ".jsonl", "rule 'item_id is unique' (column item_id)"),
    "empty file": (b"", ".jsonl", "missing required column(s)"),
    "only blank lines": (b"\n\n  \n", ".jsonl", "missing required column(s)"),
    "a line that is not JSON": ((_line() + "{oops\n").encode(), ".jsonl", "line 2 is not valid JSON"),
    "a JSON array line": (b'["a", "b"]\n', ".jsonl", "line 1 is not a JSON object"),
    "null id": (_line(item_id=None).encode(), ".jsonl", "rule 'item_id is present'"),
    "blank text": (_line(text=" \t ").encode(), ".jsonl", "rule 'text is non-empty'"),
    "text a number": (_line(text=42).encode(), ".jsonl", "rule 'text is a string' (column text)"),
    "depth a word": (_line(depth="three").encode(), ".jsonl", "rule 'depth is an integer'"),
    "depth out of range": (_line(depth=9).encode(), ".jsonl", "rule 'depth is between 0 and 3'"),
    "depth true": (_line(depth=True).encode(), ".jsonl", "rule 'depth is an integer'"),
    "unknown language": (_line(language="klingon").encode(), ".jsonl", "rule 'language is a known BCP-47"),
    "CSV without a column": (
        b"item_id,text,language,category\na,Hi,en,q\n",
        ".csv",
        "missing required column(s) depth",
    ),
    "CSV with a NUL": (
        b"item_id,text,language,category,depth\na,Hi\x00there,en,q,0\n",
        ".csv",
        "rule 'text has no control characters'",
    ),
    "an unknown file type": (_line().encode(), ".txt", "unknown extension '.txt'"),
    "id with a right-to-left override": (
        _line(item_id="abc\u202edcba").encode(),
        ".jsonl",
        (
            "rule 'item_id has no invisible or direction-changing characters' (column "
            "item_id) fails on 1 row(s): row 1 (item_id='abc\\u202edcba'). Fix: remove "  # escaped: visible
            "Unicode format characters"
        ),
    ),
    "id with a zero-width space": (
        (_line("ok") + _line(item_id="a\u200bb")).encode(),
        ".jsonl",
        "rule 'item_id has no invisible or direction-changing characters' (column item_id) fails on 1 row(s): row 2",
    ),
    "id of 5,000 characters": (
        _line(item_id="x" * 5_000).encode(),
        ".jsonl",
        (
            "rule 'item_id is at most 128 characters (200 bytes as UTF-8)' (column item_id) fails "
            "on 1 row(s): row 1 (item_id='xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... (5,000 "
            "characters)). Fix: shorten the id to at most 128 characters"
        ),
    ),
    "id of 67 four-byte characters": (
        _line(item_id="\U0001f600" * 67).encode(),
        ".jsonl",
        "rule 'item_id is at most 128 characters (200 bytes as UTF-8)'",
    ),
    "text a list (the issue's case)": (
        _line(text=["Hello", "there"]).encode(),
        ".jsonl",
        (
            "rule 'text is a string' (column text) fails on 1 row(s): row 1 "
            "(item_id='a'). Fix: write text as a quoted string (found a list)"
        ),
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_hostile_datasets_are_refused_naming_row_field_and_fix(case: str, tmp_path: Path) -> None:
    content, suffix, message = REFUSED[case]
    path = tmp_path / f"items{suffix}"
    path.write_bytes(content)
    with pytest.raises(DatasetError) as refused:
        load_items(path)
    assert message in str(refused.value), str(refused.value)[:600]
    assert str(path) in str(refused.value)  # the message names the file


# Every column of the items schema, fed each JSON type it must not hold: strings hold no object, list, number or
# boolean; depth (the one integer column) no word, list, object, fraction or boolean. A digit string is a number
# (every CSV cell is text).
WRONG_FOR_STRING = {
    "an object": {"a": 1},
    "a list": ["Hello", "there"],
    "a number": 42,
    "a fraction": 1.5,
    "a boolean": True,
    "an empty list": [],
}
WRONG_FOR_INTEGER = {
    "a word": "two",
    "a list": [1, 2],
    "an object": {"depth": 1},
    "a fraction": 1.5,
    "a boolean": False,
    "an empty list": [],
}


def _wrong_type_cases() -> list[tuple[str, str, object]]:
    import pyarrow as pa

    from ttseval.core.schemas import ITEMS

    cases = []
    for field in ITEMS:
        wrong = WRONG_FOR_INTEGER if pa.types.is_integer(field.type) else WRONG_FOR_STRING
        assert pa.types.is_integer(field.type) or pa.types.is_string(field.type), field  # a new type needs cases
        cases += [(field.name, label, value) for label, value in wrong.items()]
    return cases


@pytest.mark.parametrize("column,label,value", _wrong_type_cases(), ids=lambda v: str(v)[:12])
def test_every_items_column_refuses_every_wrong_json_type_by_name(
    column: str, label: str, value: object, tmp_path: Path
) -> None:
    path = tmp_path / "items.jsonl"
    wrong = json.dumps(json.loads(_line("b")) | {column: value})
    path.write_text(_line("good") + wrong + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as refused:
        load_items(path)
    message = str(refused.value)
    rule = "depth is an integer" if column == "depth" else f"{column} is a string"
    first = message.splitlines()[1]  # the first rule the message lists is the type rule, naming row 2 only
    assert first.startswith(f"- rule '{rule}' (column {column}) fails on 1 row(s): row 2 "), message
    assert "Fix: write" in first
    if column != "depth":
        assert f"(found {label.replace('an empty list', 'a list').replace('a fraction', 'a number')})" in first


def test_the_same_wrong_types_in_parquet_are_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "items.parquet"
    pd.DataFrame(
        {"item_id": [1, 2], "text": [["a"], ["b"]], "language": ["en", "en"], "category": ["q", "q"], "depth": [0, 1]}
    ).to_parquet(path)
    with pytest.raises(DatasetError) as refused:
        load_items(path)
    assert (
        "rule 'item_id is a string' (column item_id) fails on 2 row(s): row 1 (item_id='1'), row 2 "
        "(item_id='2'). Fix: write item_id as a quoted string (found a number)" in str(refused.value)
    )
    assert "rule 'text is a string' (column text) fails on 2 row(s)" in str(refused.value)
    assert "(found a list)" in str(refused.value)


def test_hostile_but_valid_datasets_are_read_exactly(tmp_path: Path) -> None:
    rtl = "مرحبا بالعالم، كيف حالك؟ שלום עולם"
    combining = "Cafe\u0301 nai\u0308ve"  # combining accents, kept as written (not normalized)
    formula = '=HYPERLINK("http://evil.example","click")'
    path = tmp_path / "items.jsonl"
    path.write_bytes(
        "\ufeff".encode()
        + (
            _line("rtl", rtl, language="ar")
            + _line("comb", combining)
            + _line("tabs", "one\ttwo\nthree")
            + _line("formula", formula)
            + _line("long", "x " * 2_400)
        ).encode()
    )  # a BOM, then five items
    items = load_items(path).set_index("item_id")["text"]
    assert items.to_dict() == {
        "rtl": rtl,
        "comb": combining,
        "tabs": "one\ttwo\nthree",
        "formula": formula,
        "long": "x " * 2_400,
    }
    csv = tmp_path / "items.csv"
    csv.write_bytes("\ufeffitem_id,text,language,category,depth\nb,Hi,en,q,0\n".encode())  # Excel's BOM
    assert list(load_items(csv)["item_id"]) == ["b"]
    many = tmp_path / "many.jsonl"  # a large file: 20,000 items read whole and checked
    many.write_text("".join(_line(f"i{k}", f"sentence {k}") for k in range(20_000)), encoding="utf-8")
    assert len(load_items(many)) == 20_000


def test_formulas_in_text_are_inert_in_every_csv_ttseval_writes() -> None:
    from ttseval.tasks.report.format import spreadsheet_safe

    frame = pd.DataFrame({"text": ['=HYPERLINK("x")', "+1", "-cmd", "@SUM(A1)", "plain", "\tx"], "wer": range(6)})
    safe = spreadsheet_safe(frame)
    assert list(safe["text"]) == ['\'=HYPERLINK("x")', "'+1", "'-cmd", "'@SUM(A1)", "plain", "'\tx"]
    assert list(safe["wer"]) == list(range(6))  # numbers are left alone


@pytest.mark.parametrize(
    "toml,message",
    [
        ('store = "./a"\nshard_size = "eight"\n', "shard_size"),
        ('store = "./a"\nnot_a_setting = 1\n', "not_a_setting"),
        ('store = "./a\n', "invalid ttseval settings"),
        ("[listening]\nmax_conditions = 40\n", "max_conditions"),
    ],
)
def test_malformed_settings_files_are_a_config_error_naming_the_field(
    toml: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttseval.core.config import load_settings

    path = tmp_path / "ttseval.toml"
    path.write_text(toml, encoding="utf-8")
    monkeypatch.setenv("TTSEVAL_CONFIG", str(path))
    with pytest.raises(ConfigError, match=message):
        load_settings()


@pytest.mark.parametrize(
    "spec,message",
    [
        ("", "empty"),
        (":", "provider"),
        ("pipr:joe", "did you mean 'piper'"),
        ("espeak-ng:en:rate", "rate"),
        ("espeak-ng:en:rate=fast", "rate"),
        ("files", "dir"),
    ],
)
def test_malformed_provider_specs_are_a_spec_error(spec: str, message: str) -> None:
    from ttseval.core.config import load_settings
    from ttseval.flows.common import check_systems

    with pytest.raises(SpecError, match=message):
        check_systems([spec], load_settings())


# CSV inputs of listening tests and MOS forms: every cell is text, so "a wrong JSON type" is a number column holding
# a word, a JSON list or object, a boolean (or, where a whole number is due, a fraction).
WRONG_IN_A_NUMBER_CELL = {
    "a word": "good",
    "a JSON list": "[4, 5]",
    "a JSON object": '{"score": 4}',
    "a boolean": "true",
}


def _listening_cases() -> list[tuple[str, str, str]]:
    from ttseval.metrics.listening import DG_FIELDS

    columns = ("score", "rating_time_s", *DG_FIELDS)
    return [(c, label, v) for c in columns for label, v in WRONG_IN_A_NUMBER_CELL.items()]


@pytest.mark.parametrize("column,label,value", _listening_cases())
def test_listening_results_refuse_every_wrong_type_in_every_number_column(
    column: str, label: str, value: str, tmp_path: Path
) -> None:
    from ttseval.metrics.listening import DG_FIELDS
    from ttseval.tasks.listening.results import read_results

    header = ["rater_id", "trial_id", "stimulus", "score", "rating_time_s", *DG_FIELDS]
    good = ["r1", "p1", "s1.wav", "70", "3.5", *["10"] * len(DG_FIELDS)]
    bad = [value if h == column else g for h, g in zip(header, good)]
    path = tmp_path / "results.csv"
    pd.DataFrame([good, bad], columns=header).to_csv(path, index=False)
    with pytest.raises(DatasetError) as refused:
        read_results(path, "t1")
    assert str(refused.value).startswith(f"results.csv row 3: {column} {value!r} is not a number. Fix: "), str(
        refused.value
    )
    assert refused.value.source == str(path)


@pytest.mark.parametrize("column", ["rating_score", "rating_time"])
@pytest.mark.parametrize("label", list(WRONG_IN_A_NUMBER_CELL))
def test_webmushra_results_refuse_wrong_types_in_number_columns(column: str, label: str, tmp_path: Path) -> None:
    from ttseval.tasks.listening.results import read_results

    header = [
        "session_test_id",
        "age",
        "session_uuid",
        "trial_id",
        "rating_stimulus",
        "rating_score",
        "rating_time",
        "rating_comment",
    ]
    row = {
        "session_test_id": "t1-r01",
        "age": "30",
        "session_uuid": "u",
        "trial_id": "p1",
        "rating_stimulus": "C1",
        "rating_score": "80",
        "rating_time": "1200",
        "rating_comment": "",
    }
    path = tmp_path / "mushra.csv"
    pd.DataFrame([row, row | {column: WRONG_IN_A_NUMBER_CELL[label]}], columns=header).to_csv(path, index=False)
    with pytest.raises(DatasetError, match=rf"^mushra\.csv row 3: {column} .* is not a number\. Fix: "):
        read_results(path, "t1")


def _mos_folder(tmp_path: Path) -> Path:
    from ttseval.metrics.mos_forms import FORM_COLUMNS, counterbalanced_forms

    folder = tmp_path / "forms"
    folder.mkdir()
    key = counterbalanced_forms(["i0", "i1"], ["a", "b"], repeats=0, seed=0)
    key[list(FORM_COLUMNS)].to_csv(folder / "key.csv", index=False)
    (folder / "manifest.json").write_text(json.dumps({"run_id": "r", "language": "en", "forms": 2, "items": 2}))
    return folder


MOS_WRONG = {
    "form": {**WRONG_IN_A_NUMBER_CELL, "a fraction": "1.5"},
    "position": {**WRONG_IN_A_NUMBER_CELL, "a fraction": "2.5"},
    "score": WRONG_IN_A_NUMBER_CELL,
    "rater_id": {"blank": "  "},
}


@pytest.mark.parametrize("column,label", [(c, label) for c, wrong in MOS_WRONG.items() for label in wrong])
def test_mos_form_ratings_refuse_every_wrong_type_by_row_and_column(column: str, label: str, tmp_path: Path) -> None:
    from ttseval.tasks.mos_forms import analyse_mos_ratings

    folder = _mos_folder(tmp_path)
    good = {"rater_id": "r1", "form": "1", "position": "1", "score": "4"}
    rows = [good, good | {"position": "2", "score": ""}, good | {"position": "2", column: MOS_WRONG[column][label]}]
    path = tmp_path / "ratings.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    with pytest.raises(DatasetError) as refused:
        analyse_mos_ratings(folder, path, n_resamples=10)
    message = str(refused.value)
    assert message.startswith(f"{path}: column {column} must be "), message
    assert f"1 row(s) are not: row 3 ({column}={MOS_WRONG[column][label]!r}). Fix: correct" in message
    assert not (folder / "analysis.md").exists()  # nothing written


def test_mos_form_ratings_with_sound_types_are_analysed(tmp_path: Path) -> None:
    from ttseval.tasks.mos_forms import analyse_mos_ratings

    folder = _mos_folder(tmp_path)
    path = tmp_path / "ratings.csv"
    path.write_text("rater_id,form,position,score\nr1,1,1,4\nr1,1,2,2.0\nr1,1,3,\n", encoding="utf-8")
    markdown = analyse_mos_ratings(folder, path, n_resamples=10)
    assert "1 raters over 2 counterbalanced forms of 2 sentences" in markdown
    assert (folder / "analysis.md").read_text(encoding="utf-8") == markdown


# Paths a dataset may reference: a run started from a deployment or the UI reads only the dataset's
# folder and the setting allowed_paths (confine_paths="deployments", the default). Prefect's runtime says whether
# a run came from a deployment; PREFECT__RUNTIME__DEPLOYMENT__ID is Prefect's own way to mock that in a test.
DEPLOYMENT = {"PREFECT__RUNTIME__DEPLOYMENT__ID": "5f1c3a52-0000-4000-8000-000000000030"}


def _confined_dataset(tmp_path: Path) -> Path:
    data = tmp_path / "shared" / "data"
    (data / "prompts").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    os.symlink("/etc/hostname", data / "prompts" / "link.wav")
    rows = [
        _line("in", prompt_audio_uri="prompts/p.wav"),
        _line("up", prompt_audio_uri="../" * 30 + "etc/passwd"),
        _line("abs", prompt_audio_uri=str(tmp_path / "elsewhere" / "p.wav")),
        _line("link", prompt_audio_uri="prompts/link.wav"),
        _line("ref", reference_audio_uri="file:///etc/shadow"),
    ]
    path = data / "items.jsonl"
    path.write_text("".join(rows), encoding="utf-8")
    return path


def _preflight(dataset: Path, systems: list[str], **settings: object):
    from ttseval.core.config import load_settings
    from ttseval.flows.preflight import preflight_evaluate

    return preflight_evaluate(str(dataset), systems, load_settings(**settings), judges=[])


def test_a_deployment_run_reads_only_the_dataset_folder_and_allowed_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = _confined_dataset(tmp_path)
    for key, value in DEPLOYMENT.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(DatasetError) as refused:
        _preflight(dataset, ["espeak-ng"])
    message = str(refused.value)
    assert message.startswith(
        f"dataset {dataset}: 4 path(s) lie outside what this run may read (the dataset's "
        f"folder and the setting allowed_paths: {dataset.parent})"
    ), message
    assert "- row 2 (item_id='up') prompt_audio_uri '/etc/passwd'" in message  # resolved when the items were read
    assert f"- row 3 (item_id='abs') prompt_audio_uri '{tmp_path / 'elsewhere' / 'p.wav'}'" in message
    assert "- row 4 (item_id='link') prompt_audio_uri '/etc/hostname'" in message  # a link that points out
    assert "- row 5 (item_id='ref') reference_audio_uri 'file:///etc/shadow'" in message
    assert "row 1 " not in message and "Fix: move the files into the dataset's folder" in message
    # whoever runs the worker widens it: the folders named in allowed_paths
    with pytest.raises(DatasetError, match=r" 2 path\(s\) lie outside") as narrower:
        _preflight(dataset, ["espeak-ng"], allowed_paths=[str(tmp_path / "elsewhere"), "/etc/passwd"])
    assert "item_id='link'" in str(narrower.value) and "item_id='ref'" in str(narrower.value)
    assert len(_preflight(dataset, ["espeak-ng"], confine_paths="never").items) == 5


def test_a_run_not_from_a_deployment_reads_what_the_user_points_at_unless_always(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = _confined_dataset(tmp_path)
    monkeypatch.delenv("PREFECT__RUNTIME__DEPLOYMENT__ID", raising=False)
    assert len(_preflight(dataset, ["espeak-ng"]).items) == 5  # the CLI: the person typing runs the worker
    with pytest.raises(DatasetError, match=r" 4 path\(s\) lie outside"):
        _preflight(dataset, ["espeak-ng"], confine_paths="always")


def test_a_files_system_of_a_deployment_run_reads_only_inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    (data / "clips").mkdir(parents=True)
    (data / "items.jsonl").write_text(_line("a") + _line("b"), encoding="utf-8")
    inside = data / "clips" / "inside.jsonl"
    inside.write_text('{"item_id": "a", "path": "a.wav"}\n{"item_id": "b", "path": "b.wav"}\n', encoding="utf-8")
    escaping = data / "clips" / "escaping.jsonl"
    up = "../" * 30 + "etc/passwd"
    escaping.write_text(f'{{"item_id": "a", "path": "a.wav"}}\n{{"item_id": "b", "path": "{up}"}}\n', encoding="utf-8")
    for key, value in DEPLOYMENT.items():
        monkeypatch.setenv(key, value)
    assert len(_preflight(data / "items.jsonl", [f"files:mine:manifest={inside}"]).items) == 2
    with pytest.raises(SpecError) as refused:
        _preflight(data / "items.jsonl", [f"files:mine:manifest={escaping}"])
    assert "reads 1 path(s) outside what this run may read" in str(refused.value)
    assert "'/etc/passwd'" in str(refused.value) and "allowed_paths" in str(refused.value)
    with pytest.raises(SpecError, match="reads 1 path"):  # the folder itself
        _preflight(data / "items.jsonl", [f"files:mine:dir={tmp_path}"])
