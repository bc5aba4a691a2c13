"""The documented rule of judge_pairs = sampled, written out again for the all-pairs tests
(tests/unit/test_judge_pairs.py, tests/e2e/test_judge_pairs_cli.py)."""

from __future__ import annotations

import hashlib


def drawn_by_hand(seed: int, item_id: str, pairs: list[tuple[str, str]], n: int) -> set[frozenset[str]]:
    """The documented rule of judge_pairs = sampled, written out again: the n pairs whose SHA-256 of
    'pairs|<seed>|<item_id>|<id>|<id>' (ids sorted) is smallest."""
    keyed = sorted(
        pairs, key=lambda p: hashlib.sha256("pairs|{}|{}|{}|{}".format(seed, item_id, *sorted(p)).encode()).digest()
    )
    return {frozenset(p) for p in keyed[:n]}
