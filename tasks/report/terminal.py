"""The per-(system, recogniser) table on a terminal (rich), the same cells as the Markdown report's."""

from __future__ import annotations

import pandas as pd

from ttseval.tasks.report.markdown import rows_for_display


def print_table(summary: pd.DataFrame, title: str) -> None:
    """The per-(system, recogniser) table on the terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    rows = rows_for_display(summary)
    for header in (rows[0] if rows else ["system"]):
        table.add_column(header, overflow="fold")
    for r in rows:
        table.add_row(*r.values())
    Console(width=200).print(table)
