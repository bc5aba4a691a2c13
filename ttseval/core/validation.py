"""Great Expectations at the pipeline's boundaries: the input dataset and every stage table.

One validation path: each table's rules are built from its declaration (``ttseval.core.schemas.TABLES``: columns
that may not be null, the key that must be unique, the statuses its rows may take; every clip stage's table
declares the same ones) plus the value rules declared here (ranges of ok rows). ``check_table`` returns the
problems; ``require_valid`` raises ``DatasetError`` naming the table, the rule, the rows (by their key) and the
fix. The dataset's own rules (languages, categories) live with the
dataset (``ttseval.corpus.items``) and run through the same ``check``.

One ephemeral context per process; `import great_expectations` costs seconds, so it is imported on first use,
with its loggers quietened: creating a context logs "Created temporary directory ... for ephemeral docs site"
at INFO, which a user never asked for.

A frame that passed is remembered (``check``): an empty marker file under ``LOCAL_CACHE/validated/<code>/``
named by the sha256 of its rows (pandas' row hashes), columns, dtypes and each object column's inferred type, and
the rules; ``<code>`` is this module on disk and the Great Expectations version. The same frame against the same
rules then passes without importing Great Expectations: a re-run that computes nothing re-checks its dataset and
every stage table, and would pay 2.8 s for the import alone. Only passes are remembered, so a broken rule is
always found and reported afresh. A frame pandas cannot hash (lists in a cell), or whose object column mixes types
(pandas hashes such cells by their text, so 1 and "1" would look alike), is validated every time. Folders of other
code are removed once a week old.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import itertools
import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ttseval.core.errors import DatasetError
from ttseval.core.paths import LOCAL_CACHE, source_fingerprint
from ttseval.core.protocols import MOS_BOUNDS
from ttseval.core.schemas import TABLES
from ttseval.core.telemetry import telemetry_off

__all__ = ["TABLE_RULES", "Rule", "check", "check_table", "require_valid", "row_failures", "table_rules"]


@dataclass(frozen=True)
class Rule:
    """An expectation plus the words a person needs when it fails (what, where, how to fix).

    `column` names the column the rule reads; for a rule over several columns (``column_list`` in `kwargs`) it
    is their names joined for messages, and not passed to the expectation.
    """

    name: str
    column: str
    expectation: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    fix: str = ""


# Loggers that print on their own at INFO: the docs-site logger sets its level to INFO explicitly, so a parent's
# level does not quieten it.
_GE_LOGGERS = ("great_expectations", "great_expectations.data_context.types.base")
_lock = threading.RLock()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Great Expectations' loggers at WARNING for the duration (levels restored after), one caller at a time: the
    shared context is not thread-safe, and neither is swapping logger levels."""
    with _lock:
        loggers = [logging.getLogger(name) for name in _GE_LOGGERS]
        levels = [lg.level for lg in loggers]
        for lg in loggers:
            lg.setLevel(logging.WARNING)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


@functools.lru_cache(maxsize=1)
def _context() -> Any:
    telemetry_off()  # Great Expectations reads GX_ANALYTICS_ENABLED when it is imported
    with _quiet():
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        # The import set the docs-site logger's level to INFO; quieten it again before the context logs.
        logging.getLogger(_GE_LOGGERS[1]).setLevel(logging.WARNING)
        ctx = gx.get_context(mode="ephemeral")
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    return ctx


_counter = itertools.count(1)


def _suite(rules: tuple[Rule, ...], suite_name: str) -> tuple[Any, Any]:
    """(batch definition, suite) for `rules`, built once per process and rule set (a shard-sized validation then
    pays only for the validation itself)."""
    key = (suite_name, repr(rules))  # Rule holds a dict, so it is not hashable; its repr names every field
    if key not in _suites:
        import great_expectations as gx
        import great_expectations.expectations as gxe

        ctx = _context()
        name = f"{suite_name}-{next(_counter)}"
        batch_def = (
            ctx.data_sources.add_pandas(name)
            .add_dataframe_asset(suite_name)
            .add_batch_definition_whole_dataframe("all")
        )
        suite = gx.ExpectationSuite(name=name)
        for index, rule in enumerate(rules):
            columns = {} if "column_list" in rule.kwargs else {"column": rule.column}
            suite.add_expectation(getattr(gxe, rule.expectation)(**columns, meta={"rule": index}, **rule.kwargs))
        if len(_suites) >= _MAX_SUITES:  # rule sets built per call (a dataset's own languages) must not pile up
            oldest = next(iter(_suites))
            ctx.data_sources.delete(_suites.pop(oldest)[1].name)
        _suites[key] = (batch_def, suite)
    return _suites[key]


_MAX_SUITES = 32
_suites: dict[tuple[str, str], tuple[Any, Any]] = {}


def _validate(frame: pd.DataFrame, rules: list[Rule], *, suite_name: str, row_columns: tuple[str, ...]) -> list[Any]:
    _context()
    with _quiet():
        batch_def, suite = _suite(tuple(rules), suite_name)
        batch = batch_def.get_batch(batch_parameters={"dataframe": frame})
        try:
            result = batch.validate(
                suite, result_format={"result_format": "COMPLETE", "unexpected_index_column_names": list(row_columns)}
            )
        finally:
            # The suite's execution engine keeps the last frame it validated (and the batch) until the next
            # validation of that suite: a table checked whole would stay in memory for the rest of the process.
            batches = batch.data.execution_engine.batch_manager
            batches.batch_data_cache.clear()
            batches.reset_batch_cache()
    # GE does not keep the suite's order in its results; the meta index maps each back to its rule.
    return sorted(result.results, key=lambda outcome: outcome.expectation_config.meta["rule"])


def check(
    frame: pd.DataFrame, rules: list[Rule], *, suite_name: str, row_columns: tuple[str, ...] = ("row", "item_id")
) -> list[str]:
    """Validate `frame` against `rules`; returns one message per failed rule naming up to 8 offending rows.

    A frame that passed these rules before, on this machine, passes again without running them (module doc)."""
    marker = passed_marker(frame, rules, suite_name=suite_name, row_columns=row_columns)
    if marker is not None and marker.exists():
        return []
    problems = _check(frame, rules, suite_name=suite_name, row_columns=row_columns)
    if not problems and marker is not None:
        with contextlib.suppress(OSError):  # a read-only home only loses the shortcut
            if not marker.parent.exists():
                _remove_stale(marker.parent.parent)
                marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
    return problems


VALIDATED = LOCAL_CACHE / "validated"
STALE_S = 7 * 86400


def passed_marker(
    frame: pd.DataFrame, rules: list[Rule], *, suite_name: str, row_columns: tuple[str, ...]
) -> Path | None:
    """Where a pass of `frame` against `rules` is remembered; None when pandas cannot hash the frame's cells
    faithfully (module doc)."""
    kinds = [pd.api.types.infer_dtype(frame[c], skipna=True) for c in frame.columns if frame[c].dtype == object]
    if any(kind.startswith(("mixed", "unknown")) for kind in kinds):
        return None
    try:
        rows = pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes()
    except (TypeError, ValueError):
        return None
    digest = hashlib.sha256()
    for part in (
        suite_name,
        repr(row_columns),
        repr(rules),
        repr(list(map(str, frame.columns))),
        repr(list(map(str, frame.dtypes))),
        repr(kinds),
    ):
        digest.update(part.encode("utf-8") + b"\0")
    digest.update(rows)
    return remembered_passes() / digest.hexdigest()


def remembered_passes() -> Path:
    """The folder of this code's markers (`passed_marker`): removing it makes every frame be checked again."""
    return VALIDATED.expanduser() / _code()


@functools.cache
def _code() -> str:
    """The code whose verdict a marker records (this module on disk, the Great Expectations version): other code
    checks every frame again."""
    ge = importlib.metadata.version("great_expectations")
    return hashlib.sha256(f"{source_fingerprint(__file__)} {ge}".encode()).hexdigest()[:16]


def _remove_stale(folder: Path) -> None:
    """Remove the marker folders of other code not used for a week (a marker is never read by other code)."""
    import shutil
    import time

    for old in folder.glob("*") if folder.is_dir() else []:
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > STALE_S:
                shutil.rmtree(old)


def _check(frame: pd.DataFrame, rules: list[Rule], *, suite_name: str, row_columns: tuple[str, ...]) -> list[str]:
    results = _validate(frame, rules, suite_name=suite_name, row_columns=row_columns)
    problems = []
    for rule, outcome in zip(rules, results):
        if outcome.success:
            continue
        if outcome.exception_info and outcome.exception_info.get("raised_exception"):
            problems.append(
                f"rule '{rule.name}' (column {rule.column}) could not run: "
                f"{outcome.exception_info.get('exception_message')}. Fix: {rule.fix}"
            )
            continue
        where = outcome.result.get("unexpected_index_list") or []
        count = outcome.result.get("unexpected_count", len(where))
        shown = ", ".join(_where(w, row_columns) for w in where[:8])
        more = f" and {count - 8} more" if count > 8 else ""
        value = outcome.result.get("unexpected_list", [])[:3]
        problems.append(
            f"rule '{rule.name}' (column {rule.column}) fails on {count} row(s): {shown}{more}"
            f" (values {value!r}). Fix: {rule.fix}"
        )
    return problems


def row_failures(frame: pd.DataFrame, rules: list[Rule], *, suite_name: str) -> dict[int, list[Rule]]:
    """The rules each row breaks, by the frame's `row` column (rows that pass are absent)."""
    failed: dict[int, list[Rule]] = {}
    for rule, outcome in zip(rules, _validate(frame, rules, suite_name=suite_name, row_columns=("row",))):
        if not outcome.success:
            for found in outcome.result.get("unexpected_index_list") or []:
                failed.setdefault(int(found["row"]), []).append(rule)
    return failed


def _where(found: dict[str, Any], columns: tuple[str, ...]) -> str:
    named = ", ".join(f"{c}={found[c]!r}" for c in columns if c != "row" and c in found)
    return f"row {found['row']} ({named})" if "row" in found else named


# -- the stage tables' rules ----------------------------------------------------------------------------------

_OK = {"row_condition": 'status=="ok"', "condition_parser": "pandas"}
_BUG = "a bug in the stage that wrote it: report it; deleting the run's table makes the next run recompute it"


def _ok_present(column: str, what: str) -> Rule:
    return Rule(f"ok rows have {what}", column, "ExpectColumnValuesToNotBeNull", dict(_OK), _BUG)


def _at_least(column: str, minimum: float, *, strict: bool = False, ok_only: bool = True) -> Rule:
    name = f"{column} is {'> ' if strict else '>= '}{minimum:g}"
    kwargs = {"min_value": minimum, "strict_min": strict} | (dict(_OK) if ok_only else {})
    return Rule(name, column, "ExpectColumnValuesToBeBetween", kwargs, _BUG)


def _in_set(column: str, values: tuple[str, ...]) -> Rule:
    return Rule(
        f"{column} is one of {', '.join(values)}",
        column,
        "ExpectColumnValuesToBeInSet",
        {"value_set": list(values)},
        _BUG,
    )


_JUDGE_COST = [_at_least(c, 0, ok_only=False) for c in ("input_tokens", "output_tokens", "cost_usd")]

# Rules beyond what the table declares (non-null columns, a unique key, statuses), per table.
_VALUE_RULES: dict[str, list[Rule]] = {
    "items": [
        Rule(
            "depth is 0-3",
            "depth",
            "ExpectColumnValuesToBeBetween",
            {"min_value": 0, "max_value": 3},
            "depth counts refinements of a seed item: 0 to 3",
        )
    ],
    "synthesis": [
        _at_least("duration_s", 0, strict=True),
        _ok_present("audio_sha256", "audio"),
        _ok_present("duration_s", "a duration"),
        _at_least("latency_s", 0),
    ],
    "transcripts": [
        *[_ok_present(c, "counts") for c in ("word_errors", "ref_words", "char_errors", "ref_chars")],
        _at_least("word_errors", 0),
        _at_least("char_errors", 0),
        # An empty reference is an item-text bug, never a zero-length utterance to skip.
        Rule(
            "ref_words is > 0",
            "ref_words",
            "ExpectColumnValuesToBeBetween",
            {"min_value": 0, "strict_min": True} | _OK,
            "the item's text normalizes to nothing: give it at least one word",
        ),
        Rule(
            "ref_chars is > 0",
            "ref_chars",
            "ExpectColumnValuesToBeBetween",
            {"min_value": 0, "strict_min": True} | _OK,
            "the item's text normalizes to nothing: give it at least one word",
        ),
        _at_least("wer", 0),
        _at_least("cer", 0),
    ],
    "quality": [
        _ok_present("mos", "a MOS"),
        Rule(
            "mos is on the 1-5 scale",
            "mos",
            "ExpectColumnValuesToBeBetween",
            {"min_value": MOS_BOUNDS[0], "max_value": MOS_BOUNDS[1]},
            "the predictor's output is not a MOS: check its version and scaling",
        ),
    ],
    "similarity": [
        _ok_present("similarity", "a similarity"),
        _in_set("reference", ("prompt", "voice")),
        Rule(
            "similarity is a cosine, -1..1",
            "similarity",
            "ExpectColumnValuesToBeBetween",
            {"min_value": -1.000001, "max_value": 1.000001} | _OK,
            _BUG,
        ),
    ],
    "judgments": [
        _in_set("winner", ("candidate", "baseline", "tie")),
        _in_set("winner_raw", ("first", "second", "tie")),
        Rule(
            "parsed ok rows have a winner",
            "winner",
            "ExpectColumnValuesToNotBeNull",
            {"row_condition": 'status=="ok" and parse_ok==True', "condition_parser": "pandas"},
            _BUG,
        ),
        *_JUDGE_COST,
    ],
    "instruction_judgments": [_in_set("task", ("APS", "DSD", "RP")), *_JUDGE_COST],
}
_VALUE_RULES["position_audit"] = _VALUE_RULES["judgments"]


def table_rules(table: str) -> list[Rule]:
    """The rules of a stored table: from its declaration (ttseval.core.schemas.TABLES), every non-nullable column
    present, the key unique and the status one of its declared statuses; then its value rules.

    Raises:
        KeyError: `table` is not a declared table.
    """
    definition = TABLES[table]
    rules = [
        Rule(
            f"{f.name} is present",
            f.name,
            "ExpectColumnValuesToNotBeNull",
            {},
            f"every {table} row needs {f.name} ({f.metadata[b'description'].decode()})",
        )
        for f in definition.schema
        if not f.nullable
    ]
    key = list(definition.key)
    if len(key) == 1:
        rules.append(
            Rule(
                f"{key[0]} is unique",
                key[0],
                "ExpectColumnValuesToBeUnique",
                {},
                f"one row per {key[0]}: dedupe by key (ArtifactStore.read keeps the newest)",
            )
        )
    else:
        rules.append(
            Rule(
                f"({', '.join(key)}) is unique",
                ", ".join(key),
                "ExpectCompoundColumnsToBeUnique",
                {"column_list": key, "ignore_row_if": "never"},
                "one row per key: dedupe by key (ArtifactStore.read keeps the newest)",
            )
        )
    if definition.statuses is not None:  # declared with the table (every clip stage's: CLIP_STATUSES)
        rules.append(_in_set("status", definition.statuses))
    return rules + _VALUE_RULES.get(table, [])


TABLE_RULES: dict[str, list[Rule]] = {name: table_rules(name) for name in TABLES}


def rule_columns(table: str) -> list[str]:
    """The columns of `table` its rules read (each rule's column or column list, the columns its row condition
    names) and its key, in the table's order: a check reads only these, not the judges' raw answers or the
    transcripts' texts (at 100,000 clips, most of a stage table's bytes)."""
    definition = TABLES[table]
    read = set(definition.key)
    for rule in TABLE_RULES[table]:
        read.update(rule.kwargs.get("column_list", [rule.column]))
        read.update(re.findall(r"[A-Za-z_]\w*", rule.kwargs.get("row_condition", "")))
    return [name for name in definition.schema.names if name in read]


def check_table(table: str, frame: pd.DataFrame) -> list[str]:
    """Problems in a stored table (empty list when it is sound), one per broken rule, naming its rows by key.

    A column the rules read that the frame lacks is one problem (named), not an exception.
    """
    rules = TABLE_RULES[table]
    key = TABLES[table].key
    missing = sorted({c for r in rules for c in r.kwargs.get("column_list", [r.column])} - set(frame.columns))
    if missing:
        return [
            (
                f"rule 'declared columns are present' fails: {table} lacks column(s) {missing}. "
                f"Fix: build the frame with ttseval.core.schemas.{table.upper()} (table_from_rows)"
            )
        ]
    if frame.empty:
        return []
    frame = frame.reset_index(drop=True).assign(row=range(1, len(frame) + 1))
    return check(frame, rules, suite_name=table, row_columns=("row", *key))


def require_valid(table: str, frame: pd.DataFrame) -> None:
    """Raise ``DatasetError`` when `frame` breaks a rule of `table`; its message lists every problem.

    Raises:
        DatasetError: with `source` the table name and `problems` the messages of ``check_table``.
    """
    problems = check_table(table, frame)
    if problems:
        raise DatasetError(
            f"table {table} breaks {len(problems)} rule(s):\n- " + "\n- ".join(problems),
            source=table,
            problems=problems,
        )
