"""Rendering a run's per-system summary for people: Markdown for files and Prefect, a rich table for terminals."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def _pct(v: float) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"


def _num(v: float, digits: int = 2) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def rows_for_display(summary: pd.DataFrame) -> list[dict[str, str]]:
    """One dict of display strings per system, in summary order."""
    out = []
    for r in summary.to_dict("records"):
        out.append({
            "system": r["system_spec"],
            "completion %": f"{_pct(r['completion_rate'])} ({r['n_ok']}/{r['n_items']})",
            "failed/empty/unsup.": f"{r['n_failed']}/{r['n_empty']}/{r['n_unsupported']}",
            "WER % [95% CI]": f"{_pct(r['wer'])} [{_pct(r['wer_ci_low'])}, {_pct(r['wer_ci_high'])}]",
            "CER % [95% CI]": f"{_pct(r['cer'])} [{_pct(r['cer_ci_low'])}, {_pct(r['cer_ci_high'])}]",
            "Perfect %": _num(r["perfect_pct"], 1),
            "MOS [95% CI]": f"{_num(r['mos'])} [{_num(r['mos_ci_low'])}, {_num(r['mos_ci_high'])}]",
            "mean dur. s": _num(r["mean_duration_s"]),
            "RTF": _num(r["rtf"], 3),
        })
    return out


def render_markdown(summary: pd.DataFrame, meta: dict[str, Any]) -> str:
    rows = rows_for_display(summary)
    lines = [f"# ttseval report: run `{meta['run_id']}`", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items() if k != "run_id"]
    lines += ["", "WER/CER are corpus figures (errors pooled over utterances) with a percentile bootstrap 95% CI "
              "over utterances; MOS is predicted, not human; RTF is synthesis time over audio time.", ""]
    if rows:
        headers = list(rows[0])
        lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(r[h] for h in headers) + " |" for r in rows]
    else:
        lines.append("No systems in this run yet.")
    return "\n".join(lines) + "\n"


def print_table(summary: pd.DataFrame, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    rows = rows_for_display(summary)
    for header in (rows[0] if rows else ["system"]):
        table.add_column(header, overflow="fold")
    for r in rows:
        table.add_row(*r.values())
    Console(width=200).print(table)
