"""All-pairs judging: setting judge_pairs = baseline / all / sampled.

The pair design (ttseval.tasks.pairs.judged_pairs) against the documented rule recomputed with hashlib
(tests/support/pairs.py), the dry run's count, and the win rates read against the baseline. The real evaluate runs
with a fake Gemini judge are tests/e2e/test_judge_pairs_cli.py."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pandas as pd
import pytest

from tests.support.pairs import drawn_by_hand


def _settings(**kw):
    from ttseval.core.config import load_settings

    return load_settings(**kw)


def test_judged_pairs_per_design() -> None:
    from ttseval.tasks.pairs import judged_pairs

    systems, items = ["a", "base", "c", "d"], [f"i{k}" for k in range(6)]
    every = list(itertools.combinations(["base", "a", "c", "d"], 2))
    baseline = judged_pairs(items, systems, "base", _settings(judge_pairs="baseline"))
    # the default: each of the 3 other systems against the baseline, system after system (the order before)
    assert baseline == [(i, s, "base") for s in ("a", "c", "d") for i in items]
    all_pairs = judged_pairs(items, systems, "base", _settings(judge_pairs="all"))
    assert len(all_pairs) == math.comb(4, 2) * len(items) == 36
    for item_id in items:
        mine = [frozenset((s, o)) for i, s, o in all_pairs if i == item_id]
        assert sorted(mine, key=sorted) == sorted(map(frozenset, every), key=sorted)
    # a pair with the baseline has it as baseline_id; the other pairs follow the order given (a before c before d)
    assert {(s, o) for _, s, o in all_pairs} == {
        ("a", "base"),
        ("c", "base"),
        ("d", "base"),
        ("c", "a"),
        ("d", "a"),
        ("d", "c"),
    }
    assert all_pairs[:18] == baseline[:6] + baseline[6:12] + baseline[12:]  # the baseline's pairs come first
    for seed in (0, 7):
        sampled = judged_pairs(items, systems, "base", _settings(judge_pairs="sampled", pairs_per_item=2, seed=seed))
        assert sampled == judged_pairs(
            items, systems, "base", _settings(judge_pairs="sampled", pairs_per_item=2, seed=seed)
        )  # a re-run
        for item_id in items:
            mine = [frozenset((s, o)) for i, s, o in sampled if i == item_id]
            assert len(mine) == len(set(mine)) == 2
            assert set(mine) == drawn_by_hand(seed, item_id, every, 2)
    # the draw is per item and per seed: not the same two pairs everywhere
    drawn = {(seed, i): drawn_by_hand(seed, i, every, 2) for seed in (0, 7) for i in items}
    assert len({frozenset(v) for v in drawn.values()}) > 1
    more = judged_pairs(items, systems, "base", _settings(judge_pairs="sampled", pairs_per_item=9))
    assert sorted(more) == sorted(all_pairs)  # more pairs per item than there are: every pair


def test_dry_run_counts_pairs_audit_and_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ttseval.core.store import ArtifactStore
    from ttseval.tasks.cost import estimate_judges

    monkeypatch.setenv("GEMINI_API_KEY", "fake-key")
    items = pd.DataFrame([{"item_id": f"i{k}", "text": "a few words here", "instruction": None} for k in range(5)])
    store = ArtifactStore(str(tmp_path))
    spec = "gemini:gemini-2.5-flash:temperature=0.7:samples=3"
    systems = ["base", "a", "b", "c"]
    for design, per_item in (("baseline", 3), ("all", 6), ("sampled", 2)):
        settings = _settings(store=str(tmp_path), judge_pairs=design, pairs_per_item=2)
        gemini, objective = estimate_judges(items, systems, "base", [spec, "objective"], [], store, "r", settings)
        # 5 items x the pairs per item, and (fewer than position_audit_min = 50) every one again in the other
        # order for the order-sensitive judge; 3 calls per comparison (samples=3). The objective judge: no audit
        assert (gemini.keys, gemini.calls) == (2 * 5 * per_item, 3 * 2 * 5 * per_item), design
        assert (objective.keys, objective.calls) == (5 * per_item, 5 * per_item), design
    settings = _settings(store=str(tmp_path), judge_pairs="all", position_audit_share=0)
    (gemini,) = estimate_judges(items, systems, "base", [spec], [], store, "r", settings)
    assert gemini.calls == 3 * 5 * 6


def test_win_rates_read_the_rows_against_the_baseline() -> None:
    from ttseval.metrics.winrate import against_baseline

    rows = pd.DataFrame(
        {
            "system_id": ["a", "b", "b", "c"],
            "baseline_id": ["base", "a", "base", "x"],
            "vs_baseline": [True, False, True, None],
        }
    )  # None: a row stored before the flag
    assert against_baseline(rows)["system_id"].tolist() == ["a", "b", "c"]
    assert against_baseline(rows.drop(columns="vs_baseline")).equals(rows.drop(columns="vs_baseline"))
