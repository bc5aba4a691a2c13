"""Hostile input (issue 17): encodings, scripts, sizes, control characters, ids that look like paths or that
collide once case or Unicode normalization is ignored, formulas in text that reaches a spreadsheet, malformed
settings and provider specs. Each is refused with a message naming the row, the field and the fix, or handled
as it should be. Refusal writes nothing: the datasets are read before any write (the CLI cases in
tests/test_evaluate_cli.py check that no store appears); a listening test's results with unknown stimuli are
tests/test_listening.py's."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pandas as pd
import pytest

from ttseval.corpus.items import load_items
from ttseval.core.errors import ConfigError, DatasetError, SpecError


def _line(item_id: object = "a", text: object = "Hello there.", **extra: object) -> str:
    return json.dumps({"item_id": item_id, "text": text, "language": "en-US", "category": "questions", "depth": 0}
                      | extra, ensure_ascii=False) + "\n"


REFUSED: dict[str, tuple[bytes, str, str]] = {  # name -> (file bytes, suffix, message)
    "UTF-16": (_line().encode("utf-16"), ".jsonl", "cannot parse as .jsonl"),
    "invalid UTF-8": (b'{"item_id": "a", "text": "caf\xe9", "language": "en", "category": "q", "depth": 0}\n',
                      ".jsonl", "save it as UTF-8"),
    "200,000 characters": (_line(text="a" * 200_000).encode(), ".jsonl",
                           "rule 'text is at most 5,000 characters' (column text) fails on 1 row(s): row 1 "
                           "(item_id='a'). Fix: split the text"),
    "NUL in text": (_line(text="Hello\x00there").encode(), ".jsonl",
                    "rule 'text has no control characters' (column text) fails on 1 row(s): row 1"),
    "escape sequence in text": (_line(text="\x1b[31mred\x1b[0m").encode(), ".jsonl",
                                "rule 'text has no control characters'"),
    "id with ..": (_line(item_id="../../etc/passwd").encode(), ".jsonl",
                   "rule 'item_id is a plain name' (column item_id) fails on 1 row(s): row 1 "
                   "(item_id='../../etc/passwd'). Fix: use letters"),
    "id with a slash": (_line(item_id="a/b").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "id that is a URL": (_line(item_id="https://example.com/x").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "id with a backslash": (_line(item_id="C:\\x").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "id with spaces around": (_line(item_id=" a ").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "id '.'": (_line(item_id=".").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "id with a newline": (_line(item_id="a\nb").encode(), ".jsonl", "rule 'item_id is a plain name'"),
    "ids differing in normalization": ((_line(item_id=unicodedata.normalize("NFC", "café"))
                                        + _line(item_id=unicodedata.normalize("NFD", "café"))).encode(), ".jsonl",
                                       "rule 'item_id is unique ignoring case and Unicode normalization' (column "
                                       "item_id) fails on 2 row(s)"),
    "ids differing in case": ((_line(item_id="Item-1") + _line(item_id="item-1")).encode(), ".jsonl",
                              "rule 'item_id is unique ignoring case and Unicode normalization'"),
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
    "CSV without a column": (b"item_id,text,language,category\na,Hi,en,q\n", ".csv",
                             "missing required column(s) depth"),
    "CSV with a NUL": (b"item_id,text,language,category,depth\na,Hi\x00there,en,q,0\n", ".csv",
                       "rule 'text has no control characters'"),
    "an unknown file type": (_line().encode(), ".txt", "unknown extension '.txt'"),
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


def test_hostile_but_valid_datasets_are_read_exactly(tmp_path: Path) -> None:
    rtl = "مرحبا بالعالم، كيف حالك؟ שלום עולם"
    combining = "Cafe\u0301 nai\u0308ve"  # combining accents, kept as written (not normalized)
    formula = '=HYPERLINK("http://evil.example","click")'
    path = tmp_path / "items.jsonl"
    path.write_bytes("\ufeff".encode() + (_line("rtl", rtl, language="ar") + _line("comb", combining)
                                          + _line("tabs", "one\ttwo\nthree") + _line("formula", formula)
                                          + _line("long", "x " * 2_400)).encode())  # a BOM, then five items
    items = load_items(path).set_index("item_id")["text"]
    assert items.to_dict() == {"rtl": rtl, "comb": combining, "tabs": "one\ttwo\nthree", "formula": formula,
                               "long": "x " * 2_400}
    csv = tmp_path / "items.csv"
    csv.write_bytes("\ufeffitem_id,text,language,category,depth\nb,Hi,en,q,0\n".encode())  # Excel's BOM
    assert list(load_items(csv)["item_id"]) == ["b"]
    many = tmp_path / "many.jsonl"  # a large file: 20,000 items read whole and checked
    many.write_text("".join(_line(f"i{k}", f"sentence {k}") for k in range(20_000)), encoding="utf-8")
    assert len(load_items(many)) == 20_000


def test_formulas_in_text_are_inert_in_every_csv_ttseval_writes() -> None:
    from ttseval.tasks.export import spreadsheet_safe

    frame = pd.DataFrame({"text": ['=HYPERLINK("x")', "+1", "-cmd", "@SUM(A1)", "plain", "\tx"], "wer": range(6)})
    safe = spreadsheet_safe(frame)
    assert list(safe["text"]) == ["'=HYPERLINK(\"x\")", "'+1", "'-cmd", "'@SUM(A1)", "plain", "'\tx"]
    assert list(safe["wer"]) == list(range(6))  # numbers are left alone


@pytest.mark.parametrize("toml,message", [
    ('store = "./a"\nshard_size = "eight"\n', "shard_size"),
    ('store = "./a"\nnot_a_setting = 1\n', "not_a_setting"),
    ('store = "./a\n', "invalid ttseval settings"),
    ('[listening]\nmax_conditions = 40\n', "max_conditions"),
])
def test_malformed_settings_files_are_a_config_error_naming_the_field(toml: str, message: str, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from ttseval.core.config import load_settings

    path = tmp_path / "ttseval.toml"
    path.write_text(toml, encoding="utf-8")
    monkeypatch.setenv("TTSEVAL_CONFIG", str(path))
    with pytest.raises(ConfigError, match=message):
        load_settings()


@pytest.mark.parametrize("spec,message", [
    ("", "empty"), (":", "provider"), ("pipr:joe", "did you mean 'piper'"), ("espeak-ng:en:rate", "rate"),
    ("espeak-ng:en:rate=fast", "rate"), ("files", "dir"),
])
def test_malformed_provider_specs_are_a_spec_error(spec: str, message: str) -> None:
    from ttseval.flows.common import check_systems
    from ttseval.core.config import load_settings

    with pytest.raises(SpecError, match=message):
        check_systems([spec], load_settings())
