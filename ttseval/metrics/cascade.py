"""What a judge cascade did (providers/judges/cascade.py): the share of pairs sent to the strong judge and what
each judge cost, read from the cascade's rows of the judgments table (`comparison` starts with its label)."""

from __future__ import annotations

import re
from typing import TypedDict

import pandas as pd

LABEL = re.compile(
    r"^\[(cheap(?:, audited: strong said (?P<audit>first|second|tie|unparsed)|, not drawn: (?P<kept>[^;]*))?"
    r"|strong: (?P<why>[^;]*)); "
    r"cheap \$(?P<cheap>[0-9.]+), strong \$(?P<strong>[0-9.]+)\]"
)


class CascadeSummary(TypedDict):
    """cascade_summary's figures."""

    n: int
    escalated: int
    escalated_share: float
    not_drawn: int
    cheap_usd: float
    strong_usd: float
    why: dict[str, int]  # reason -> count
    audited: int
    agreement: float


def cascade_summary(rows: pd.DataFrame) -> CascadeSummary | None:
    """{n, escalated, escalated_share, not_drawn, cheap_usd, strong_usd, why: {reason: count}, audited, agreement}
    over a cascade's answered rows (not_drawn: unsettled pairs left to the cheap judge by `escalate_sample`;
    agreement: share of audited pairs where the strong judge gave the cheap judge's answer; NaN without audits);
    None when no row carries a cascade label."""
    ok = rows[rows["status"] == "ok"]
    labels = ok["comparison"].str.extract(LABEL).assign(answer=ok["winner_raw"])
    labels = labels.dropna(subset=["cheap"])
    if labels.empty:
        return None
    escalated = labels["why"].notna()
    reasons = labels.loc[escalated, "why"].str.split(", ").explode().value_counts().to_dict()
    return {
        "n": len(labels),
        "escalated": int(escalated.sum()),
        "escalated_share": float(escalated.mean()),
        "not_drawn": int(labels["kept"].notna().sum()),
        "cheap_usd": float(labels["cheap"].astype(float).sum()),
        "strong_usd": float(labels["strong"].astype(float).sum()),
        "why": reasons,
        "audited": int(labels["audit"].notna().sum()),
        "agreement": float((audits["audit"] == audits["answer"]).mean())
        if len(audits := labels.dropna(subset=["audit"]))
        else float("nan"),
    }
