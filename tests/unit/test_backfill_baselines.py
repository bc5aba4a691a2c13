"""What `ttseval backfill-judge` computes without a run: the judges' agreement when every judge scores every
system alike, and the baseline a run judged by nobody yet takes (the one its evaluate recorded). The backfills
through the real command are tests/e2e/test_backfill_cli.py."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ttseval.core.registry import Spec
from ttseval.metrics.agreement import judge_agreement


def test_judge_agreement_when_every_judge_scores_every_system_alike() -> None:
    def rows(judge: str, rates: dict[str, float]) -> list[dict]:
        return [{"judge_spec": judge, "system_id": s, "level": "overall", "win_rate": r} for s, r in rates.items()]

    tied = judge_agreement(pd.DataFrame(rows("A", {"s1": 0.5, "s2": 0.5}) + rows("B", {"s1": 0.0, "s2": 0.0})))
    assert tied["n_systems"] == 2 and tied["kendalls_w"] != tied["kendalls_w"]  # NaN, not an exception
    assert tied["spearman"].isna().all().all()
    # one judge tied, one not: W by hand (m = 2, n = 2): rank sums 3.5 and 2.5 around 3, S = 0.5; the tied
    # judge's tie term 2^3 - 2 = 6; W = 12 S / (m^2 (n^3 - n) - m * 6) = 6 / 12
    half = judge_agreement(pd.DataFrame(rows("A", {"s1": 0.5, "s2": 0.5}) + rows("B", {"s1": 1.0, "s2": 0.0})))
    assert half["kendalls_w"] == pytest.approx(0.5, abs=1e-12)


def test_without_verdicts_the_default_baseline_is_the_one_the_evaluate_recorded(tmp_path: Path) -> None:
    """A run judged by nobody yet: the backfill's baseline is the one its evaluate recorded (runs/<id>/log), not
    the system whose clip was stored first. On a cluster that is a race: the five-host test
    (tests/system/test_multi_host.py) got espeak-ng there and files:mine on one host for the same command."""
    import json

    from ttseval.core.store import ArtifactStore
    from ttseval.flows.backfill_judge import stored_baseline

    store = ArtifactStore(str(tmp_path / "store"))
    landed_first = [Spec.parse("flite:slt").id, Spec.parse("espeak-ng:en-us").id]  # flite's clip was stored first
    assert store.run_log("r") is None
    assert stored_baseline(store, "r", landed_first) == landed_first[0]  # no record (a run stored before it)
    for started, baseline in (("20261126T010000000000", "flite:slt"), ("20261126T020000000000", "espeak-ng:en-us")):
        store.write_bytes(f"runs/r/log/{started}.json", json.dumps({"run_id": "r", "baseline": baseline}).encode())
    assert store.run_log("r") == {"run_id": "r", "baseline": "espeak-ng:en-us"}  # the latest record
    assert stored_baseline(store, "r", landed_first) == Spec.parse("espeak-ng:en-us").id
    assert stored_baseline(store, "r", landed_first[:1]) == landed_first[0]  # recorded, but not among its clips
