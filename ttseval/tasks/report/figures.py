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
    """PNG: win-rate against depth, all categories first then per category, one line per candidate system
    (EmergentTTS-Eval Fig. 3 style), each point with its 95% CI as an error bar (none where the cell had too few
    items for one)."""
    mine = winrates[winrates["judge_id"] == judge_id]
    rows = mine[mine["level"] == "category_depth"]
    if rows.empty:
        return None
    plt = pyplot()
    rows = pd.concat([mine[mine["level"] == "depth"].assign(category="all categories"), rows])
    categories = ["all categories", *sorted(set(rows["category"].dropna()) - {"all categories"})]
    cols = min(3, len(categories))
    nrows = -(-len(categories) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False, sharey=True)
    for ax, category in zip(axes.flat, categories):
        sub = rows[rows["category"] == category]
        for system_id, g in sub.groupby("system_id", sort=False):
            g = g.sort_values("depth")
            rate = 100 * g["win_rate"].astype(float)
            below = (rate - 100 * g["win_rate_ci_low"].astype(float)).fillna(0).clip(lower=0)
            above = (100 * g["win_rate_ci_high"].astype(float) - rate).fillna(0).clip(lower=0)
            ax.errorbar(
                g["depth"], rate, yerr=[below, above], marker="o", capsize=3, label=names.get(system_id, system_id)
            )
        ax.axhline(50, color="grey", lw=0.8, ls="--")
        ax.set_title(category)
        ax.set_xlabel("depth")
        ax.set_ylim(0, 100)
        ax.set_xticks(sorted(sub["depth"].dropna().unique()))
    for ax in list(axes.flat)[len(categories) :]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("win-rate vs baseline (%)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"win-rate by depth with 95% CIs: {rows['judge_spec'].iloc[0]}")
    return figure_png(fig, dpi=110)


def trend_svg(group: pd.DataFrame, ylabel: str, better: str | None) -> str:
    """SVG text: one series of a nightly trend (rows of TREND_COLUMNS in night order, each with its `date`): the
    value a night as a line with its 95% interval as a band, the nights on the x axis by date, the metric (the
    first word of `ylabel`) on the y axis, `ylabel` and the `better` side ('higher', 'lower', None) as the title; a
    step the paired test flagged as a red ring, a slow-drift alarm as a red dot, each in the legend. Text stays
    text (svg.fonttype none): small, and readable by a search or a screen reader."""
    plt = pyplot()
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "font.size": 8}):
        fig, ax = plt.subplots(figsize=(5.2, 2.3))
        x = list(range(len(group)))
        values = group["value"].astype(float)
        ax.fill_between(
            x, group["ci_low"].astype(float), group["ci_high"].astype(float), color="#cfe0f5", label="95% interval"
        )
        ax.plot(x, values, color="#1f5fa8", marker="o", markersize=3, lw=1.5, label="value")
        steps, drifts = group["step"].astype(bool).to_numpy(), group["drift"].astype(bool).to_numpy()
        if steps.any():
            ax.plot(
                [i for i in x if steps[i]],
                values[steps],
                ls="none",
                marker="o",
                markersize=9,
                markerfacecolor="none",
                markeredgecolor="#c00",
                markeredgewidth=1.5,
                label="step (paired test)",
            )
        if drifts.any():
            ax.plot(
                [i for i in x if drifts[i]], values[drifts], ls="none", marker="o", color="#c00", label="slow drift"
            )
        ax.set_xticks(x, list(group["date"]), rotation=30, ha="right")
        ax.set_xlabel("night (UTC)")
        ax.set_ylabel(ylabel.split(" ", 1)[0])
        ax.set_title(ylabel + (f": {better} is better" if better else ""), loc="left", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=7, frameon=False)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
        plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]  # inline: without the XML declaration and doctype
