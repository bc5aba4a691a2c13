"""Which comparisons a run judges: the pairs the setting judge_pairs asks for, the position audit's sample of
them, and whether a judge's verdict may depend on the order it hears two clips. Judging (judge.py) runs them, and
the dry run's estimate (cost.py) prices them, from this one rule."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

from ttseval.core.config import Settings
from ttseval.core.registry import Spec
from ttseval.providers.judges import JUDGES

Comparison = tuple[str, str, str]
"""(item_id, system_id, baseline_id): one comparison of the judgments table, `baseline_id` the other system."""


def judged_pairs(
    item_ids: Iterable[str], system_ids: list[str], baseline_id: str, settings: Settings
) -> list[Comparison]:
    """Every comparison the setting `judge_pairs` asks for, in plan order (the pairs with the baseline first).

    The roster is the baseline, then the other systems in the order given; the pair of roster[i] and roster[j]
    (i < j) is stored as system_id roster[j] against baseline_id roster[i], so a pair with the run's baseline always
    has it as baseline_id. `baseline`: roster[0] against each other system on every item (k - 1 per item);
    `all`: every pair on every item (k(k - 1)/2); `sampled`: on each item the `pairs_per_item` pairs (every pair
    when there are no more) whose SHA-256 of 'pairs|<seed>|<item_id>|<id>|<id>' (the pair's ids sorted) is
    smallest: the same pairs on a re-run with the same seed, drawn afresh per item.
    """
    roster = [baseline_id, *(s for s in dict.fromkeys(system_ids) if s != baseline_id)]
    items = list(item_ids)
    if settings.judge_pairs == "baseline":
        return [(item_id, system_id, baseline_id) for system_id in roster[1:] for item_id in items]
    pairs = [(roster[i], roster[j]) for i in range(len(roster)) for j in range(i + 1, len(roster))]
    if settings.judge_pairs == "all":
        return [(item_id, b, a) for a, b in pairs for item_id in items]
    n = settings.pairs_per_item
    chosen = {
        item_id: set(sorted(pairs, key=lambda p: _pair_draw(settings.seed, item_id, *p))[:n]) for item_id in items
    }
    return [(item_id, b, a) for a, b in pairs for item_id in items if (a, b) in chosen[item_id]]


def _pair_draw(seed: int, item_id: str, a: str, b: str) -> bytes:
    """The sort key of a pair on an item under judge_pairs = sampled (judged_pairs)."""
    lo, hi = sorted((a, b))
    return hashlib.sha256(f"pairs|{seed}|{item_id}|{lo}|{hi}".encode()).digest()


# -- pairwise: each candidate against the baseline (or another system: judge_pairs) ------------------------------


def audit_sample(keys: list[tuple[str, str, str]], settings: Settings) -> set[tuple[str, str, str]]:
    """The (item, system, baseline) pairs audited: `position_audit_share` of them, at least `position_audit_min`
    when there are that many; drawn by a seeded hash of the key, so a pair stays in the sample as the run grows."""
    if settings.position_audit_share <= 0 or not keys:
        return set()
    n = min(len(keys), max(math.ceil(settings.position_audit_share * len(keys)), settings.position_audit_min))
    order = sorted(keys, key=lambda k: hashlib.sha256(f"audit|{settings.seed}|{'|'.join(k)}".encode()).digest())
    return set(order[:n])


def order_sensitive(judge: str, settings: Settings) -> bool:
    """Whether a judge's verdict may depend on which clip it hears first (every LLM judge); the objective judge
    declares `order_sensitive = False`: its rule reads the two clips' metrics, not an order."""
    cls = JUDGES.resolve(Spec.parse(judge).provider, settings.plugins.get("judge"))
    return bool(getattr(cls, "order_sensitive", True))
