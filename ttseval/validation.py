"""Great Expectations at the pipeline's boundaries: the input dataset and each stage's output.

One ephemeral context per process; `import great_expectations` costs seconds, so it is imported on first use.
A rule is an expectation plus the words a person needs when it fails (what, where, how to fix).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ttseval.schemas import STATUSES


@dataclass(frozen=True)
class Rule:
    name: str
    column: str
    expectation: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    fix: str = ""


@functools.lru_cache(maxsize=1)
def _context() -> Any:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    return ctx


_counter = iter(range(1, 1 << 30))


def _validate(frame: pd.DataFrame, rules: list[Rule], *, suite_name: str, row_columns: tuple[str, ...]) -> list[Any]:
    import great_expectations as gx
    import great_expectations.expectations as gxe

    ctx = _context()
    n = next(_counter)
    batch_def = (
        ctx.data_sources.add_pandas(f"{suite_name}-{n}")
        .add_dataframe_asset(suite_name)
        .add_batch_definition_whole_dataframe("all")
    )
    suite = gx.ExpectationSuite(name=f"{suite_name}-{n}")
    for index, rule in enumerate(rules):
        suite.add_expectation(getattr(gxe, rule.expectation)(column=rule.column, meta={"rule": index}, **rule.kwargs))
    result = batch_def.get_batch(batch_parameters={"dataframe": frame}).validate(
        suite, result_format={"result_format": "COMPLETE", "unexpected_index_column_names": list(row_columns)}
    )
    # GE does not keep the suite's order in its results; the meta index maps each back to its rule.
    return sorted(result.results, key=lambda outcome: outcome.expectation_config.meta["rule"])


def check(frame: pd.DataFrame, rules: list[Rule], *, suite_name: str, row_columns: tuple[str, ...] = ("row", "item_id")) -> list[str]:
    """Validate `frame` against `rules`; returns one message per failed rule naming up to 8 offending rows."""
    results = _validate(frame, rules, suite_name=suite_name, row_columns=row_columns)
    problems = []
    for rule, outcome in zip(rules, results):
        if outcome.success:
            continue
        where = outcome.result.get("unexpected_index_list") or []
        count = outcome.result.get("unexpected_count", len(where))
        shown = ", ".join(_where(w, row_columns) for w in where[:8])
        more = f" and {count - 8} more" if count > 8 else ""
        value = outcome.result.get("unexpected_list", [])[:3]
        problems.append(f"rule '{rule.name}' (column {rule.column}) fails on {count} row(s): {shown}{more}"
                        f" (values {value!r}). Fix: {rule.fix}")
    return problems


def row_failures(frame: pd.DataFrame, rules: list[Rule], *, suite_name: str) -> dict[int, list[Rule]]:
    """The rules each row breaks, by the frame's `row` column (rows that pass are absent)."""
    failed: dict[int, list[Rule]] = {}
    for rule, outcome in zip(rules, _validate(frame, rules, suite_name=suite_name, row_columns=("row",))):
        if not outcome.success:
            for found in outcome.result.get("unexpected_index_list") or []:
                failed.setdefault(int(found["row"]), []).append(rule)
    return failed


def _where(found: dict, columns: tuple[str, ...]) -> str:
    named = ", ".join(f"{c}={found[c]!r}" for c in columns if c != "row" and c in found)
    return f"row {found['row']} ({named})" if "row" in found else named


STAGE_RULES: dict[str, list[Rule]] = {
    "synthesis": [
        Rule("status is known", "status", "ExpectColumnValuesToBeInSet", {"value_set": list(STATUSES)}),
        Rule("duration is positive", "duration_s", "ExpectColumnValuesToBeBetween", {"min_value": 0, "strict_min": True,
             "row_condition": 'status=="ok"', "condition_parser": "pandas"}),
        Rule("ok rows have audio", "audio_sha256", "ExpectColumnValuesToNotBeNull",
             {"row_condition": 'status=="ok"', "condition_parser": "pandas"}),
    ],
    "transcripts": [
        Rule("status is known", "status", "ExpectColumnValuesToBeInSet", {"value_set": ["ok", "failed"]}),
        Rule("wer is non-negative", "wer", "ExpectColumnValuesToBeBetween", {"min_value": 0}),
        Rule("cer is non-negative", "cer", "ExpectColumnValuesToBeBetween", {"min_value": 0}),
    ],
    "quality": [
        Rule("status is known", "status", "ExpectColumnValuesToBeInSet", {"value_set": ["ok", "failed"]}),
        Rule("mos is on the 1-5 scale", "mos", "ExpectColumnValuesToBeBetween", {"min_value": 0.5, "max_value": 5.5}),
    ],
}


def check_stage_output(table: str, frame: pd.DataFrame) -> list[str]:
    """Problems in a stage's output table (empty list when it is sound)."""
    if frame.empty:
        return []
    frame = frame.assign(row=range(1, len(frame) + 1))
    return check(frame, STAGE_RULES[table], suite_name=table, row_columns=("item_id", "system_id"))
