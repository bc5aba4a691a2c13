"""ttseval.metrics.position_bias against a case worked by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from ttseval.metrics.position_bias import position_bias


def rows(spec: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "judge_id": "j",
                "item_id": item,
                "system_id": system,
                "baseline_id": "base",
                "candidate_first": first,
                "winner": winner,
                "parse_ok": parsed,
                "status": "ok",
            }
            for item, system, first, winner, parsed in spec
        ]
    )


def test_consistency_first_position_share_and_win_rates_worked_by_hand() -> None:
    drawn = rows(
        [
            ("p1", "A", True, "candidate", True),  # first clip won
            ("p2", "A", False, "candidate", True),  # second clip won
            ("p3", "B", True, "tie", True),
            ("p4", "B", False, "baseline", True),  # first clip won; not audited
            ("p5", "B", True, None, False),  # unparsed: neither scored nor audited
        ]
    )
    swapped = rows(
        [
            ("p1", "A", False, "baseline", True),  # first clip won again: the verdict flipped with the order
            ("p2", "A", True, "candidate", True),  # first clip won; the verdict held
            ("p3", "B", False, "tie", True),
            ("p5", "B", False, "candidate", True),
        ]
    )
    judges, systems = position_bias(drawn, swapped)
    [j] = judges.to_dict("records")
    # audited and parsed both ways: p1, p2, p3; verdict held on p2 and p3
    assert j["n_audited"] == 3 and j["consistency"] == pytest.approx(2 / 3)
    # decided answers on those pairs: p1 x2 (first won both), p2 drawn (second won), p2 swapped (first won): 3 of 4
    assert j["first_position_wins"] == pytest.approx(0.75)
    by_system = systems.set_index("system_id")
    # A: drawn p1 = 1, p2 = 1; with swaps p1 = (1 + 0) / 2, p2 = (1 + 1) / 2
    assert by_system.loc["A", "win_rate"] == pytest.approx(1.0)
    assert by_system.loc["A", "win_rate_swapped"] == pytest.approx(0.75)
    # B: drawn p3 = 0.5, p4 = 0; with swaps p3 = (0.5 + 0.5) / 2, p4 unchanged
    assert by_system.loc["B", "win_rate"] == pytest.approx(0.25)
    assert by_system.loc["B", "win_rate_swapped"] == pytest.approx(0.25)


def test_a_judge_that_always_picks_clip_one_is_fully_biased_and_never_consistent() -> None:
    drawn = rows([(f"i{k}", "A", k % 2 == 0, "candidate" if k % 2 == 0 else "baseline", True) for k in range(6)])
    swapped = rows([(f"i{k}", "A", k % 2 == 1, "candidate" if k % 2 == 1 else "baseline", True) for k in range(6)])
    judges, systems = position_bias(drawn, swapped)
    assert judges.loc[0, "consistency"] == 0.0 and judges.loc[0, "first_position_wins"] == 1.0
    assert systems.loc[0, "win_rate"] == 0.5 and systems.loc[0, "win_rate_swapped"] == 0.5


def test_no_audit_rows_no_figures() -> None:
    judges, systems = position_bias(
        rows([("p1", "A", True, "candidate", True)]),
        rows([]).reindex(
            columns=[
                "judge_id",
                "item_id",
                "system_id",
                "baseline_id",
                "candidate_first",
                "winner",
                "parse_ok",
                "status",
            ]
        ),
    )
    assert judges.empty and systems.empty
