"""The listening-test analysis' figures as PNG bytes (Rethinking MUSHRA's Figures 1, 2 and 5)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ttseval.core.schemas import DG_SHEET
from ttseval.metrics.listening import COUNT_FIELDS, DG_FIELDS, system_stats
from ttseval.tasks.report.figures import figure_png, pyplot


def rater_boxplot(used: pd.DataFrame, low: float, high: float) -> bytes:
    """Figure 1: per rater (sorted by their mean hidden-reference score, else mean score), one box per system."""
    plt = pyplot()
    systems = list(system_stats(used)["system_id"])
    ref = used[used["role"] == "reference"].groupby("rater_id")["score"].mean()
    raters = sorted(
        used["rater_id"].unique(),
        key=lambda r: (ref.get(r, np.nan) if len(ref) else used.loc[used["rater_id"] == r, "score"].mean(), r),
    )
    fig, axes = plt.subplots(
        len(systems), 1, figsize=(max(6, 0.35 * len(raters) + 2), 1.9 * len(systems)), sharex=True, squeeze=False
    )
    for ax, system in zip(axes[:, 0], systems):
        data = [
            used.loc[(used["rater_id"] == r) & (used["system_id"] == system), "score"].dropna().to_numpy()
            for r in raters
        ]
        ax.boxplot(data, showfliers=False)
        ax.set_ylabel(system, fontsize=8)
        ax.set_ylim(low, high)
    axes[-1, 0].set_xticks(range(1, len(raters) + 1), raters, rotation=90, fontsize=7)
    axes[0, 0].set_title("scores per rater (Rethinking MUSHRA, Figure 1)")
    return figure_png(fig, dpi=100)


def subsampling_figure(curve: pd.DataFrame) -> bytes:
    """Figure 2: mean Spearman correlation against listeners, one line per number of utterances."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for n_utt, g in curve.groupby("utterances"):
        ax.plot(g["listeners"], g["mean_rho"], marker="o", label=f"{n_utt} utterances")
    ax.set_xlabel("listeners")
    ax.set_ylabel("mean Spearman rho with all ratings")
    ax.legend(fontsize=7)
    ax.set_title("listener x utterance subsampling (section 4.3)")
    return figure_png(fig, dpi=100)


def fault_figure(faults: pd.DataFrame) -> bytes:
    """Figure 5: stacked shares of clips with each fault, and the perceptual means, per system."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    bottom = np.zeros(len(faults))
    for field in COUNT_FIELDS:
        left.bar(faults["system_id"], 100 * faults[field], bottom=bottom, label=DG_SHEET[field])
        bottom += 100 * faults[field].to_numpy()
    left.set_ylabel("% of clips with the fault (stacked)")
    left.legend(fontsize=7)
    for field in DG_FIELDS[6:]:
        right.scatter(faults["system_id"], faults[field], label=DG_SHEET[field])
    right.set_ylim(0, 100)
    right.legend(fontsize=7)
    right.set_ylabel("mean score")
    fig.suptitle("MUSHRA-DG fault isolation (Figure 5)")
    return figure_png(fig, dpi=100)
