"""Position bias of a pairwise judge: the same pairs asked in both presentation orders (EmergentTTS-Eval 3.2
draws the order at random so that a judge's preference for the first or second clip averages out; this measures
how much there is to average).

Inputs are rows of the `judgments` table (the order drawn per pair) and of `position_audit` (the same pairs of an
audit sample, asked in the other order), with `winner` (candidate / baseline / tie, mapped back from the order),
`candidate_first`, `parse_ok` and `status`. Only answered, parsed rows count.

Per judge:
  n_audited               audit pairs parsed in both orders
  consistency             share of them whose verdict (candidate / baseline / tie) survives the swap
  first_position_wins     of the decided (non-tie) answers on those pairs, in both orders, the share won by the
                          clip heard first: 0.5 is no bias, 1.0 a judge that always picks clip 1
  win_rate / win_rate_swapped, per system: the win-rate (win 1, tie 0.5, loss 0, averaged over pairs) from the
                          drawn order alone, and with the swapped answers included (an audited pair scores the mean
                          of its two answers)
"""

from __future__ import annotations

import pandas as pd

KEY = ["judge_id", "item_id", "system_id", "baseline_id"]
SCORE = {"candidate": 1.0, "tie": 0.5, "baseline": 0.0}


def _answered(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[(rows["status"] == "ok") & rows["parse_ok"].fillna(False).astype(bool) & rows["winner"].notna()]
    return ok[[*KEY, "winner", "candidate_first"]]


def _first_won(rows: pd.DataFrame) -> pd.Series:
    decided = rows[rows["winner"] != "tie"]
    return (decided["winner"] == "candidate") == decided["candidate_first"].astype(bool)


def position_bias(judgments: pd.DataFrame, audit: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per judge: judge_id, n_audited, consistency, first_position_wins; per judge and system: judge_id,
    system_id, win_rate, win_rate_swapped). Judges without audit rows are left out of both."""
    drawn, swapped = _answered(judgments), _answered(audit)
    both = drawn.merge(swapped, on=KEY, suffixes=("", "_swapped"))
    judges, systems = [], []
    for judge_id, pairs in both.groupby("judge_id", sort=False):
        heard = pd.concat(
            [
                pairs[["winner", "candidate_first"]],
                pairs[["winner_swapped", "candidate_first_swapped"]].set_axis(["winner", "candidate_first"], axis=1),
            ]
        )
        first = _first_won(heard)
        judges.append(
            {
                "judge_id": judge_id,
                "n_audited": len(pairs),
                "consistency": float((pairs["winner"] == pairs["winner_swapped"]).mean()),
                "first_position_wins": float(first.mean()) if len(first) else float("nan"),
            }
        )
        mine = drawn[drawn["judge_id"] == judge_id].merge(pairs[[*KEY, "winner_swapped"]], on=KEY, how="left")
        score = mine["winner"].map(SCORE)
        with_swap = score.where(mine["winner_swapped"].isna(), (score + mine["winner_swapped"].map(SCORE)) / 2)
        per_system = pd.DataFrame({"system_id": mine["system_id"], "drawn": score, "swapped": with_swap})
        for system_id, g in per_system.groupby("system_id", sort=True):
            systems.append(
                {
                    "judge_id": judge_id,
                    "system_id": system_id,
                    "win_rate": float(g["drawn"].mean()),
                    "win_rate_swapped": float(g["swapped"].mean()),
                }
            )
    return (
        pd.DataFrame(judges, columns=["judge_id", "n_audited", "consistency", "first_position_wins"]),
        pd.DataFrame(systems, columns=["judge_id", "system_id", "win_rate", "win_rate_swapped"]),
    )
