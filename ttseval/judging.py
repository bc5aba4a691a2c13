"""The judge stage's presentation order: which clip a judge hears first, and mapping its answer back.

A pairwise judge hears the candidate and the baseline in an order it is not told about. The order is drawn per
(item, system, baseline) reproducibly, so a re-run asks the same question, and the first/second answer is mapped
back to candidate/baseline. The judge contracts themselves (PairwiseRequest, PairwiseVerdict, PairwiseJudge, ...)
are in ttseval.protocols with every other provider contract; this module is pipeline logic, not a contract.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from ttseval.protocols import Winner


def candidate_first(item_id: str, system_id: str, baseline_id: str, seed: int = 0) -> bool:
    """The presentation order of one comparison: reproducible from its key, independent of everything else."""
    digest = hashlib.sha256(f"{seed}|{item_id}|{system_id}|{baseline_id}".encode()).digest()
    return digest[0] % 2 == 0


def to_candidate_view(winner: Winner | None, cand_first: bool) -> Literal["candidate", "baseline", "tie"] | None:
    """Map a first/second answer back to candidate/baseline."""
    if winner is None or winner == "tie":
        return winner
    return "candidate" if (winner == "first") == cand_first else "baseline"
