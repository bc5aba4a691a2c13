"""The run on a terminal (rich): the per-(system, recogniser) table, the same cells as the Markdown report's, and
the leaderboard (the view ttseval.tasks.report.full stores with the report)."""

from __future__ import annotations

import re

from ttseval.core.store import ArtifactStore


def print_view(store: ArtifactStore, run_id: str, rows: list[dict[str, str]], leaderboard: str) -> None:
    """The per-(system, recogniser) table, then the leaderboard (a figure named by its file: a terminal shows no
    image, rich prints a placeholder emoji)."""
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.table import Table

    table = Table(title=f"ttseval run {run_id!r} ({store.display()})")
    for header in rows[0] if rows else ["system"]:
        table.add_column(header, overflow="fold")
    for r in rows:
        table.add_row(*r.values())
    # cells are data, not rich markup: a spec such as 'kokoro:heart:speed=1.1' or a voice named '[bold]' prints as
    # it is, not as an emoji or a style
    console = Console(width=200, emoji=False, markup=False)
    console.print(table)
    board = re.sub(
        r"!\[([^\]]*)\]\(([^)]+)\)",
        lambda m: f"{m.group(1)}: `{store.display('runs', run_id, m.group(2))}`",
        leaderboard,
    )
    if board:
        console.print(Markdown(board))
