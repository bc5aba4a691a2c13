"""Report figures as PNG bytes (matplotlib, Agg backend): `pyplot` and `figure_png` are shared with the
listening-test figures (ttseval.tasks.listening.figures)."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display), imported when a figure is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_png(fig: Any, dpi: int) -> bytes:
    """The figure laid out tight, as PNG bytes at `dpi`; the figure is closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def depth_figure(winrates: pd.DataFrame, judge_id: str, names: dict[str, str]) -> bytes | None:
    """PNG: win-rate against depth per category, one line per candidate system (EmergentTTS-Eval Fig. 3 style)."""
    rows = winrates[(winrates["level"] == "category_depth") & (winrates["judge_id"] == judge_id)]
    if rows.empty:
        return None
    plt = pyplot()
    categories = sorted(rows["category"].dropna().unique())
    cols = min(3, len(categories))
    nrows = -(-len(categories) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False, sharey=True)
    for ax, category in zip(axes.flat, categories):
        sub = rows[rows["category"] == category]
        for system_id, g in sub.groupby("system_id", sort=False):
            g = g.sort_values("depth")
            ax.plot(g["depth"], 100 * g["win_rate"], marker="o", label=names.get(system_id, system_id))
        ax.axhline(50, color="grey", lw=0.8, ls="--")
        ax.set_title(category)
        ax.set_xlabel("depth")
        ax.set_ylim(0, 100)
        ax.set_xticks(sorted(sub["depth"].dropna().unique()))
    for ax in list(axes.flat)[len(categories):]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("win-rate vs baseline (%)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"win-rate by depth: {rows['judge_spec'].iloc[0]}")
    return figure_png(fig, dpi=110)

