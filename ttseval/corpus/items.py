"""Reading an items dataset (JSONL, CSV or Parquet) and checking it before any work is done.

Required columns: item_id, text, language, category, depth. Optional: benchmark, parent_id, instruction,
reference_audio_uri, prompt_audio_uri and prompt_text (a voice prompt: relative paths are relative to the dataset
file), source, generator. Problems are collected, not raised one at a time, so a user fixes a
file in one pass; every message names the rule, the column, the rows (1-based, header excluded) and the fix.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ttseval.core.categories import canonical_category
from ttseval.core.config import Settings
from ttseval.core.errors import DatasetError
from ttseval.core.paths import resolve_against
from ttseval.core.schemas import ITEMS
from ttseval.core.store import open_store

REQUIRED = ("item_id", "text", "language", "category", "depth")
MAX_TEXT_CHARS = 5_000  # EmergentTTS-Eval's longest items are under 1,000; cloud TTS APIs cap one request at 4-5k
# ids name files (a `files` system's <item_id>.wav; generated refinements append -d1..-d3): within a 255-byte name
MAX_ID_CHARS = 128
MAX_ID_BYTES = 200
UNSAFE_ID = re.compile(r"[/\\\x00-\x1f\x7f]")
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def read_jsonl_rows(path: Path, text: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSON Lines text, blank lines skipped; a bad line is named by its number."""
    return [row for _, row in read_jsonl_numbered(path, text)]


def read_jsonl_numbered(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line, so messages can name the line a person sees."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(
                f"dataset {path}: line {number} is not valid JSON ({e.msg}); fix that line", source=str(path)
            ) from e
        if not isinstance(row, dict):
            raise DatasetError(f"dataset {path}: line {number} is not a JSON object", source=str(path))
        rows.append((number, row))
    return rows


def read_dataset(path: str | Path) -> pd.DataFrame:
    """Read the file as it is (no checks beyond parsing); JSONL errors name the line."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(
            f"dataset {str(p)!r} does not exist; pass --dataset PATH to a .jsonl, .csv or .parquet file", source=str(p)
        )
    suffix = p.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson", ".json"):
            return pd.DataFrame(read_jsonl_rows(p, p.read_text(encoding="utf-8-sig")))  # a BOM is no error
        if suffix == ".csv":
            # Everything as text first: type checks below then name the row that is wrong.
            return pd.read_csv(p, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        if suffix == ".parquet":
            return pd.read_parquet(p)
    except (UnicodeDecodeError, pa.ArrowInvalid, pd.errors.ParserError, OSError) as e:
        hint = "; save it as UTF-8" if isinstance(e, UnicodeDecodeError) else ""
        raise DatasetError(f"dataset {p}: cannot parse as {suffix} ({e}){hint}", source=str(p)) from e
    raise DatasetError(f"dataset {p}: unknown extension {suffix!r}; use .jsonl, .csv or .parquet", source=str(p))


def _rows(frame: pd.DataFrame, mask: pd.Series, limit: int = 8) -> str:
    picked = frame.loc[mask]
    pairs = list(zip(picked["row"], picked["item_id"]))[:limit]
    more = len(picked) - limit
    return ", ".join(f"row {int(r)} (item_id={_shown(i)})" for r, i in pairs) + (
        f" and {more} more" if more > 0 else ""
    )


def _shown(item_id: object, limit: int = 60) -> str:
    """An id as a message shows it: its repr (escapes make invisible characters visible), cut when long."""
    if isinstance(item_id, str) and len(item_id) > limit:
        return f"{item_id[:40]!r}... ({len(item_id):,} characters)"
    return repr(item_id)


def _is_null(value: object) -> bool:
    """None, NaN or pd.NA: a missing cell, never a list or an object (pd.isna of a list is an array)."""
    return value is None or value is pd.NA or (isinstance(value, (float, np.floating)) and bool(np.isnan(value)))


def _json_type(value: object) -> str:
    """The JSON (or Parquet) type a person wrote, for messages: list, object, number, boolean, string."""
    if isinstance(value, (bool, np.bool_)):
        return "a boolean"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "a list"
    return f"a {type(value).__name__}"


def _format_characters(value: str) -> bool:
    """Whether `value` holds a Unicode format character (category Cf: bidirectional controls such as U+202E,
    zero-width spaces and joiners, the BOM): invisible, they make a displayed id differ from the stored one."""
    return any(unicodedata.category(c) == "Cf" for c in value)


def _coerce(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Check types that the expectations cannot see once pandas has coerced them; returns (frame, problems).

    Every string column of the items schema (ITEMS) holds a string or nothing: a list, an object, a number or a
    boolean is refused by name, as is anything but a whole number in depth (CSV cells are all text, so a
    digit string is a number there)."""
    problems: list[str] = []
    frame = frame.copy()
    frame.insert(0, "row", range(1, len(frame) + 1))
    raw_ids = frame["item_id"]
    frame["item_id"] = raw_ids.map(lambda v: None if _is_null(v) else v if isinstance(v, str) else repr(v))

    def bad(mask: pd.Series, rule: str, column: str, fix: str) -> None:
        if mask.any():
            problems.append(
                f"rule '{rule}' (column {column}) fails on {int(mask.sum())} row(s): {_rows(frame, mask)}. Fix: {fix}"
            )

    strings = [f.name for f in ITEMS if pa.types.is_string(f.type) and f.name in frame.columns]
    for column in strings:
        values = raw_ids if column == "item_id" else frame[column]
        not_text = values.map(lambda v: not _is_null(v) and not isinstance(v, str))
        if not_text.any():
            found = sorted({_json_type(v) for v in values[not_text]})
            bad(
                not_text,
                f"{column} is a string",
                column,
                f"write {column} as a quoted string (found {' and '.join(found)})",
            )
            if column != "item_id":  # the id keeps its repr, so the messages can name the row by it
                frame[column] = frame[column].where(~not_text, None)  # later rules see it missing, no crash
        frame[column] = frame[column].map(lambda v: None if _is_null(v) else v)
    depth = frame["depth"]

    def as_depth(v: object) -> int | None:
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str) and v.strip().lstrip("-").isdigit():
            return int(v)
        return None

    parsed = depth.map(as_depth)
    bad(parsed.isna(), "depth is an integer", "depth", "write depth as a whole number 0-3")
    frame["depth"] = parsed

    ids = frame["item_id"].fillna("")
    # ids name files (a `files` system's <item_id>.wav, exported stimuli) and appear in URLs and reports
    bad(
        ids.map(lambda v: bool(UNSAFE_ID.search(v)) or v.strip() in (".", "..") or v != v.strip()),
        "item_id is a plain name",
        "item_id",
        "use letters, digits and - _ . : (no '/', '\\', control "
        "characters, leading or trailing spaces, and not '.' or '..')",
    )
    bad(
        ids.map(_format_characters),
        "item_id has no invisible or direction-changing characters",
        "item_id",
        "remove Unicode format characters (category Cf: right-to-left and other bidirectional controls such as "
        "U+202E, zero-width spaces and joiners, a BOM); a report would show a different id than the one stored",
    )
    bad(
        ids.map(lambda v: len(v) > MAX_ID_CHARS or len(v.encode("utf-8")) > MAX_ID_BYTES),
        f"item_id is at most {MAX_ID_CHARS} characters ({MAX_ID_BYTES} bytes as UTF-8)",
        "item_id",
        f"shorten the id to at most {MAX_ID_CHARS} characters: it names files (<item_id>.wav, exported stimuli), "
        "which a disk caps at 255 bytes; keep long descriptions in another column",
    )
    folded = ids.map(lambda v: unicodedata.normalize("NFC", v).casefold())
    bad(
        folded.duplicated(keep=False) & ~ids.duplicated(keep=False) & (ids != ""),
        "item_id is unique ignoring case and Unicode normalization",
        "item_id",
        "two ids differ only in case or in how an accent is encoded: on a case-insensitive disk or in a "
        "spreadsheet they are one item; rename one",
    )
    texts = frame["text"].map(lambda v: v if isinstance(v, str) else "")
    bad(
        texts.map(lambda v: bool(CONTROL.search(v))),
        "text has no control characters",
        "text",
        "remove control characters (tab and line breaks are fine)",
    )
    bad(
        texts.str.len() > MAX_TEXT_CHARS,
        f"text is at most {MAX_TEXT_CHARS:,} characters",
        "text",
        "split the text into several items (a provider bills, and a judge must hear, every character)",
    )
    return frame, problems


def validate_items(frame: pd.DataFrame, *, source: str) -> None:
    """Raise DatasetError listing every broken rule; return None when the dataset is usable.

    Any non-empty category is accepted: a known one in any spelling, or the user's own group (see
    ttseval.core.categories)."""
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise DatasetError(
            f"dataset {source}: missing required column(s) {', '.join(missing)}; "
            f"columns found: {', '.join(map(str, frame.columns)) or 'none'}. "
            f"Fix: add them (required: {', '.join(REQUIRED)})",
            source=source,
            problems=[f"missing column {c}" for c in missing],
        )
    if frame.empty:
        raise DatasetError(f"dataset {source} has no rows", source=source)
    frame, problems = _coerce(frame)
    problems += _expectation_problems(frame)
    if problems:
        raise DatasetError(
            f"dataset {source} breaks {len(problems)} rule(s):\n- " + "\n- ".join(problems),
            source=source,
            problems=problems,
        )


def _expectation_problems(frame: pd.DataFrame) -> list[str]:
    from ttseval.core.categories import MAX_DEPTH
    from ttseval.core.languages import is_known_language
    from ttseval.core.validation import Rule, check

    frame = frame.assign(
        text=frame["text"].map(lambda v: v if isinstance(v, str) else ""),
        language=frame["language"].map(lambda v: v if isinstance(v, str) else ""),
        category=frame["category"].map(lambda v: v if isinstance(v, str) else ""),
        depth=frame["depth"].fillna(0),
    )
    known = sorted({t for t in frame["language"].unique() if is_known_language(t)})
    rules = [
        Rule("item_id is present", "item_id", "ExpectColumnValuesToNotBeNull", {}, "give every item an id"),
        Rule("item_id is unique", "item_id", "ExpectColumnValuesToBeUnique", {}, "give each item its own id"),
        Rule(
            "text is non-empty", "text", "ExpectColumnValuesToMatchRegex", {"regex": r"\S"}, "write the text to speak"
        ),
        Rule(
            "language is a known BCP-47 / ISO 639 code",
            "language",
            "ExpectColumnValuesToBeInSet",
            {"value_set": known},
            "use a tag such as en-US, fr, hi-IN, ps-AF",
        ),
        Rule(
            "category is non-empty",
            "category",
            "ExpectColumnValuesToMatchRegex",
            {"regex": r"\S"},
            "name the item's category: a known one (emotions, questions, ...) or a group label of your own",
        ),
        Rule(
            f"depth is between 0 and {MAX_DEPTH}",
            "depth",
            "ExpectColumnValuesToBeBetween",
            {"min_value": 0, "max_value": MAX_DEPTH},
            f"use a depth from 0 (seed) to {MAX_DEPTH}",
        ),
    ]
    return check(frame, rules, suite_name="items")


def load_items(path: str | Path, *, categories: set[str] | None = None) -> pd.DataFrame:
    """Read and check a dataset; returns it with the items schema's columns and types, and each known category
    (`categories`, default the built-in set) in its canonical form (`Foreign Words` -> `foreign_words`)."""
    frame = read_dataset(path)
    validate_items(frame, source=str(path))
    frame = canonical_categories(frame, categories)
    frame["item_id"] = frame["item_id"].astype(str)
    frame["depth"] = frame["depth"].astype(int)
    for name in ITEMS.names:
        if name not in frame.columns:
            frame[name] = None
    frame = frame[ITEMS.names].astype(object).where(frame[ITEMS.names].notna(), None)
    frame["depth"] = frame["depth"].astype(int)
    frame["prompt_audio_uri"] = frame["prompt_audio_uri"].map(lambda p: _resolved(path, p))
    frame["prompt_audio_sha256"] = None  # set when a run stores the clip (ttseval.tasks.voices), never read from a file
    return frame.reset_index(drop=True)


def _resolved(dataset: str | Path, path: object) -> str | None:
    """A path as written in the dataset: empty -> None, a URI or an absolute path as is, a relative path joined to
    the dataset file's folder."""
    if not isinstance(path, str) or not path.strip():
        return None
    return resolve_against(dataset, path)


def read_items(dataset: str, settings: Settings) -> tuple[pd.DataFrame, str, str]:
    """The items of a file, or of a frozen dataset NAME@VERSION in the store; the sha256 of what was read; and
    what was read (NAME@latest resolved to its version)."""
    from ttseval.corpus import catalog

    if catalog.is_ref(dataset) and not Path(dataset).exists():
        ref, items, sha = catalog.resolve(open_store(settings), dataset)
        validate_items(items, source=ref)
        return canonical_categories(items, settings.categories), sha, ref
    items = load_items(dataset, categories=settings.categories)
    return items, hashlib.sha256(Path(dataset).read_bytes()).hexdigest(), str(dataset)


def canonical_categories(frame: pd.DataFrame, categories: set[str] | None = None) -> pd.DataFrame:
    """A copy of a checked items frame with each known category in its canonical form."""
    return frame.assign(category=frame["category"].map(lambda c: canonical_category(c, categories)))


def unknown_categories(items: pd.DataFrame, categories: set[str]) -> list[str]:
    """The items' categories that are not known (`categories`): the user's own groups, sorted."""
    return sorted(set(items["category"]) - categories)
