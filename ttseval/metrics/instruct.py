"""InstructTTSEval instruction-following scores from a true/false judge.

InstructTTSEval asks a judge whether each synthesized clip follows its style instruction
(true: the primary style attributes align without conflict; false: at least one key
attribute clearly conflicts). Its three tasks are APS (acoustic-parameter
specification), DSD (descriptive-style directive) and RP (role-play), each in English
and Chinese. The paper's text says "for each subset, the final score is computed as the
macro-average of the instruction-following scores across all 1,000 items", i.e. the share
of items judged true per task, and its tables add an "Avg." column that, for most rows,
equals the unweighted mean of the APS, DSD and RP scores (e.g. gpt-4o-mini-tts EN:
(76.4 + 74.3 + 54.8) / 3 = 68.5); the text does not define Avg. nor say how
undecidable or missing items enter the denominator.

Here, per (judge, system, language, task):
- ``score`` = n_true / (n_true + n_false): decided items only, NaN if none;
- ``score_all_items`` = n_true / n: every row in the denominator, so undecidable
  verdicts and parse failures count as not followed (the reading closest to the paper's
  "across all items"); compare both before comparing with published numbers.
A ``task='macro'`` row per (judge, system, language) holds the unweighted mean of the
three task scores (each task weighs the same whatever its item count). It is NaN if any
of APS, DSD, RP is absent or has a NaN score, rather than an average over the tasks that
happen to be present, which would not be comparable across systems.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ttseval.core.instructtts import TASKS

__all__ = ["INSTRUCT_COLUMNS", "TASKS", "instruction_scores"]

MACRO = "macro"
_KEY = ("item_id", "system_id", "judge_id")
_CELL = ("judge_id", "system_id", "language")
_REQUIRED = (*_KEY, "task", "language", "follows", "parse_ok")

INSTRUCT_COLUMNS = (
    "judge_id", "system_id", "language", "task",
    "n", "n_true", "n_false", "n_undecidable", "n_parse_failures",
    "score", "score_all_items",
)  # fmt: skip
_INT_COLUMNS = ("n", "n_true", "n_false", "n_undecidable", "n_parse_failures")


def _key_text(row: pd.Series) -> str:
    return ", ".join(f"{k}={row[k]!r}" for k in _KEY)


def _is_bool(value: object) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_null(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _validate(frame: pd.DataFrame) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks column(s) {missing}; it has {list(frame.columns)}")
    duplicated = frame.duplicated(list(_KEY), keep="first")
    if duplicated.any():
        raise ValueError(f"frame has a duplicate row for {_key_text(frame[duplicated].iloc[0])}; dedupe by key first")
    for column in (*_KEY, "language"):
        null = frame[column].isna()
        if null.any():
            raise ValueError(f"frame row {_key_text(frame[null].iloc[0])} has a null {column}")
    bad_task = ~frame["task"].isin(TASKS)
    if bad_task.any():
        row = frame[bad_task].iloc[0]
        raise ValueError(f"frame row {_key_text(row)} has task {row['task']!r}; expected one of {list(TASKS)}")
    for _, row in frame.iterrows():
        if not _is_bool(row["parse_ok"]):
            raise ValueError(f"frame row {_key_text(row)} has parse_ok = {row['parse_ok']!r}; it must be a bool")
        follows = row["follows"]
        if not (_is_bool(follows) or _is_null(follows)):
            raise ValueError(f"frame row {_key_text(row)} has follows = {follows!r}; expected True, False or null")
        if not row["parse_ok"] and not _is_null(follows):
            raise ValueError(
                f"frame row {_key_text(row)} has parse_ok False but follows = {follows!r}; "
                "an unparsed verdict must be null"
            )


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else np.nan


def instruction_scores(frame: pd.DataFrame) -> pd.DataFrame:
    """Instruction-following scores per task and their macro-average.

    Args:
        frame: One row per (item_id, system_id, judge_id) with columns task ('APS',
            'DSD', 'RP'), language (non-null), follows (True, False, or null =
            undecidable) and parse_ok (bool; when False, follows must be null).

    Returns:
        DataFrame with ``INSTRUCT_COLUMNS``. For each (judge_id, system_id, language), in
        order of first appearance: one row per task present, in the order APS, DSD, RP,
        then one ``task='macro'`` row. Task rows: n = all rows, n_true / n_false =
        parsed verdicts, n_undecidable = parsed but null, n_parse_failures = parse_ok
        False (n = sum of the four); score = n_true / (n_true + n_false) (NaN if 0
        decided); score_all_items = n_true / n. Macro row: counts summed over tasks,
        score and score_all_items the unweighted mean over APS, DSD and RP, NaN if any
        task is missing or NaN. Scores are fractions in [0, 1] (the paper prints
        percentages).

    Raises:
        ValueError: a missing column, duplicate key, null key or language, unknown task,
            non-bool parse_ok, a follows value other than True/False/null, or a verdict
            on an unparsed row; the message names the row key.
    """
    _validate(frame)
    parsed = frame["parse_ok"].astype(bool)
    follows = frame["follows"].map(lambda v: None if _is_null(v) else bool(v))
    work = frame.assign(
        _true=(parsed & follows.eq(True)).to_numpy(),
        _false=(parsed & follows.eq(False)).to_numpy(),
        _undecidable=(parsed & follows.isna()).to_numpy(),
        _unparsed=(~parsed).to_numpy(),
    )

    rows: list[dict[str, Any]] = []
    for cell, group in work.groupby(list(_CELL), sort=False):
        base = dict(zip(_CELL, cell))
        task_rows: dict[str, dict[str, Any]] = {}
        for task in TASKS:
            sub = group[group["task"] == task]
            if len(sub) == 0:
                continue
            counts = {
                "n": len(sub),
                "n_true": int(sub["_true"].sum()),
                "n_false": int(sub["_false"].sum()),
                "n_undecidable": int(sub["_undecidable"].sum()),
                "n_parse_failures": int(sub["_unparsed"].sum()),
            }
            task_rows[task] = {
                **base,
                "task": task,
                **counts,
                "score": _ratio(counts["n_true"], counts["n_true"] + counts["n_false"]),
                "score_all_items": _ratio(counts["n_true"], counts["n"]),
            }
        rows.extend(task_rows.values())
        complete = len(task_rows) == len(TASKS)
        macro = {**base, "task": MACRO}
        for column in _INT_COLUMNS:
            macro[column] = sum(r[column] for r in task_rows.values())
        for column in ("score", "score_all_items"):
            # Unweighted mean over the three tasks; any missing/NaN task makes it NaN.
            macro[column] = float(np.mean([task_rows[t][column] for t in TASKS])) if complete else np.nan
        rows.append(macro)
    table = pd.DataFrame(rows, columns=list(INSTRUCT_COLUMNS))
    for column in _INT_COLUMNS:
        table[column] = table[column].astype(np.int64)
    return table
