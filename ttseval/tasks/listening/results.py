"""Results files as raw rating rows: webMUSHRA's mushra.csv and lss.csv, or the plain CSV (README)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pandas as pd

from ttseval.core.errors import DatasetError
from ttseval.metrics.listening import DG_FIELDS

PLAIN_REQUIRED = ("rater_id", "trial_id", "stimulus")
PLAIN_OPTIONAL = ("score", "session", "rating_time_s", "comment", *DG_FIELDS)


def _rows_of_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: cannot read it as UTF-8 CSV ({e})", source=str(path)) from e
    rows = [r for r in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in r)]
    if not rows:
        raise DatasetError(
            f"{path}: empty; expected webMUSHRA's mushra.csv or lss.csv, or the plain CSV "
            f"({', '.join(PLAIN_REQUIRED)}, score)",
            source=str(path),
        )
    return [h.strip() for h in rows[0]], rows[1:]


def _number(value: str | None, *, what: str, where: str, source: Path | None = None) -> float:
    """A numeric cell: empty or NA is missing (NaN); anything else that is not a number (a word, a JSON list or
    object, true/false) is refused naming the file, row and column."""
    if value is None or str(value).strip() in ("", "NA"):
        return float("nan")
    try:
        return float(value)
    except ValueError:
        raise DatasetError(
            f"{where}: {what} {value!r} is not a number. Fix: write a number there, or leave the "
            "cell empty if it was not rated",
            source=str(source) if source else None,
        ) from None


def read_results(path: Path, test_id: str) -> pd.DataFrame:
    """The ratings of one results file, as raw rows (rater_id, session, trial_id, stimulus, score, the DG fields,
    rating_time_s, comment, questionnaire, source_file, line). Recognised by their header: webMUSHRA's mushra.csv
    (session_test_id, questionnaire fields, session_uuid, trial_id, rating_stimulus, rating_score, rating_time,
    rating_comment), its lss.csv (session_test_id, questionnaire fields, trial_id, one or more rating columns,
    stimuli, rating_time), or the plain CSV (README: rater_id, trial_id, stimulus, score, optional session,
    rating_time_s, comment and the nine scoresheet fields).

    Raises:
        DatasetError: an unknown header, a rater config of another test, a value that is not a number (row named).
    """
    header, rows = _rows_of_csv(path)
    out = []
    if header and header[0] == "session_test_id":
        is_mushra = "rating_stimulus" in header
        prefix = header.index("session_uuid" if is_mushra else "trial_id")
        for n, row in enumerate(rows, start=2):
            where = f"{path.name} row {n}"
            config = row[0]
            if not config.startswith(f"{test_id}-"):
                raise DatasetError(
                    f"{where}: session_test_id {config!r} is not a rater config of test {test_id!r} "
                    f"(expected {test_id}-rNN): wrong results file or --test-id",
                    source=str(path),
                )
            base = {
                "rater_id": config[len(test_id) + 1 :],
                "source_file": path.name,
                "line": n,
                "questionnaire": json.dumps(dict(zip(header[1:prefix], row[1:prefix])), ensure_ascii=False),
            }
            if is_mushra:
                uuid_, trial, stimulus, score, time_ms, comment = (row + [""] * 6)[prefix : prefix + 6]
                out.append(
                    {
                        **base,
                        "session": uuid_,
                        "trial_id": trial,
                        "stimulus": stimulus,
                        "score": _number(score, what="rating_score", where=where, source=path),
                        "rating_time_s": _number(time_ms, what="rating_time", where=where, source=path) / 1000,
                        "comment": comment or None,
                    }
                )
            else:  # lss.csv: write.php labels the rating columns from the session's first trial, so count them
                trial, values, stimulus, time_ms = row[prefix], row[prefix + 1 : -2], row[-2], row[-1]
                numbers = [_number(v, what="rating", where=where, source=path) for v in values]
                fields = dict(zip(DG_FIELDS, numbers)) if len(numbers) == len(DG_FIELDS) else {}
                out.append(
                    {
                        **base,
                        "session": "",
                        "trial_id": trial,
                        "stimulus": stimulus,
                        "score": numbers[0] if len(numbers) == 1 else float("nan"),
                        **fields,
                        "rating_time_s": _number(time_ms, what="rating_time", where=where, source=path) / 1000,
                    }
                )
    elif set(PLAIN_REQUIRED) <= set(header):
        unknown = sorted(set(header) - set(PLAIN_REQUIRED) - set(PLAIN_OPTIONAL))
        if unknown:
            raise DatasetError(
                f"{path}: unknown column(s) {unknown}; the plain CSV has {', '.join(PLAIN_REQUIRED)}"
                f" and optionally {', '.join(PLAIN_OPTIONAL)}",
                source=str(path),
            )
        for n, row in enumerate(rows, start=2):
            where = f"{path.name} row {n}"
            rec = dict(zip(header, (c.strip() for c in row)))
            if not rec.get("rater_id"):
                raise DatasetError(f"{where}: rater_id is empty; give each rater an id", source=str(path))
            out.append(
                {
                    "rater_id": rec["rater_id"],
                    "session": rec.get("session", ""),
                    "trial_id": rec["trial_id"],
                    "stimulus": rec["stimulus"],
                    "source_file": path.name,
                    "line": n,
                    "questionnaire": None,
                    "score": _number(rec.get("score"), what="score", where=where, source=path),
                    **{f: _number(rec.get(f), what=f, where=where, source=path) for f in DG_FIELDS if f in rec},
                    "rating_time_s": _number(rec.get("rating_time_s"), what="rating_time_s", where=where, source=path),
                    "comment": rec.get("comment") or None,
                }
            )
    else:
        raise DatasetError(
            f"{path}: not a results file this test reads: its header {header[:6]} is neither "
            "webMUSHRA's (session_test_id, ...) nor the plain CSV's (rater_id, trial_id, stimulus, "
            "score)",
            source=str(path),
        )
    return pd.DataFrame(out)
