"""How report figures are written, shared by every renderer (Markdown sections, the terminal table, the
cross-run leaderboard, listening-test analyses), and text cells made safe for a spreadsheet in every CSV written.

Every Markdown table goes through `markdown_table`. A metric's header carries its declared direction from
`ttseval.metrics.registry` (↓ lower is better, ↑ higher is better): `header`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import pandas as pd

from ttseval.metrics.registry import arrow

# PashtoTTS-Bench's roles, as a system's name shows them: TTS systems plain, the others named
ROLE_LABEL = {"tts": "", "natural": " (natural speech)", "control": " (negative control)"}


def missing(v: object) -> bool:
    """None, pd.NA or a float NaN."""
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def pct(v: float) -> str:
    """A rate as a percentage with one decimal ('12.5'); '–' when missing."""
    return "–" if missing(v) else f"{100 * v:.1f}"


def num(v: float, digits: int = 2) -> str:
    """A number with `digits` decimals; '–' when missing."""
    return "–" if missing(v) else f"{v:.{digits}f}"


def with_ci(point: float, low: float, high: float, digits: int = 2, *, percent: bool = False) -> str:
    """A value with its 95% CI ('4.12 [3.90, 4.31]'; a rate in percent with `percent`: '62.5 [50.0, 75.0]');
    '(n too small)' in place of an interval the cell had too few items for (ttseval.metrics.bootstrap
    .MIN_INTERVAL_ITEMS, the one rule of every interval in the report); '–' when the value is missing."""
    if missing(point):
        return "–"
    show: Callable[[float], str] = pct if percent else (lambda v: num(v, digits))
    interval = "(n too small)" if missing(low) or missing(high) else f"[{show(low)}, {show(high)}]"
    return f"{show(point)} {interval}"


def header(label: str, metric: str, suffix: str = "") -> str:
    """`label`, the metric's direction arrow, then `suffix`: 'WER % ↓ [95% CI]'."""
    return " ".join(part for part in (label, arrow(metric), suffix) if part)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub Markdown table, one line per row, cells as given (str() of each), unpadded.

    Hand-written rather than `DataFrame.to_markdown`: that needs `tabulate`, which is not a dependency, and pads
    cells to align columns, which changes every line when one value widens. A `|` in a cell is escaped and a
    line break becomes a space, so a cell can never split the row.
    """

    def cell(value: object) -> str:
        return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        row = list(row)
        if len(row) != len(headers):
            raise ValueError(f"a row has {len(row)} cells for {len(headers)} headers: {row!r}")
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


def section(title: str, intro: str, headers: list[str], rows: list[list[str]]) -> str:
    """A report section: a heading, a paragraph saying what the table is, the table; empty without rows."""
    return "\n".join(["", f"## {title}", "", intro, "", markdown_table(headers, rows)]) + "\n" if rows else ""


def judge_label(spec: str) -> str:
    """How a report names a judge: its spec, or the objective judge's label."""
    from ttseval.providers.judges.objective import LABEL

    return LABEL if spec.split(":")[0] == "objective" else spec


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells a spreadsheet would run as a formula (CSV injection: '=HYPERLINK(...)' in an item's text)
    prefixed with a single quote, as OWASP advises; numbers and other cells as they are."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            out[column] = out[column].map(
                lambda v: "'" + v if isinstance(v, str) and v.startswith(FORMULA_START) else v
            )
    return out
