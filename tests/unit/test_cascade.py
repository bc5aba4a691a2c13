"""The judge cascade's routing (providers/judges/cascade.py) with scripted judges: which pairs reach the strong
judge, what the unsettled pairs not drawn keep, and what the report's summary (ttseval.metrics.cascade) counts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ttseval.core.audio import Audio
from ttseval.core.protocols import PairwiseRequest

SILENCE = Audio(np.zeros(160, dtype=np.float32), 16000)


def requests(kinds: dict[str, int]) -> list[PairwiseRequest]:
    """`n` pairs of each kind, named as tests.support.fakes.ScriptedJudge reads them."""
    return [
        PairwiseRequest(
            item_id=f"{kind}-{i}",
            text="t",
            language="en",
            category="questions",
            rubric="r",
            first=SILENCE,
            second=SILENCE,
            first_signals={"order": "drawn"},
            second_signals={"order": "swapped"},
        )
        for kind, n in kinds.items()
        for i in range(n)
    ]


def cascade(monkeypatch, **config):
    monkeypatch.setenv("TTSEVAL_PLUGINS", json.dumps({"judge": {"scripted": "tests.support.fakes:ScriptedJudge"}}))
    monkeypatch.setenv(
        "TTSEVAL_CASCADES",
        json.dumps({"c": {"cheap": "scripted:cheap:usd=0.001", "strong": "scripted:strong:usd=0.02", **config}}),
    )
    from ttseval.providers.judges.cascade import CascadeJudge

    return CascadeJudge("c")


SETTLED, SUBTLE, FLIP = "second-significant-first", "second-subtle-first", "second-significant-second"


def test_every_unsettled_pair_goes_to_the_strong_judge_by_default(monkeypatch) -> None:
    judge = cascade(monkeypatch, audit_share=0.0)
    verdicts = judge.judge_pairs(requests({SETTLED: 6, SUBTLE: 3, FLIP: 2}))
    assert judge.cheap.calls == 22 and judge.strong.calls == 5  # both orders of 11 pairs; 3 subtle + 2 flips
    assert [v.winner for v in verdicts] == ["second"] * 6 + ["first"] * 5
    assert [v.comparison.split(";")[0] for v in verdicts[6:]] == ["[strong: subtle"] * 3 + ["[strong: flip"] * 2
    assert sum(v.cost_usd for v in verdicts) == pytest.approx(22 * 0.001 + 5 * 0.02)


def test_escalate_sample_sends_that_share_of_the_unsettled_pairs_and_the_rest_keep_the_cheap_verdict(
    monkeypatch,
) -> None:
    judge = cascade(monkeypatch, escalate_sample=0.25, audit_share=0.0)
    batch = requests({SETTLED: 50, FLIP: 400})
    drawn = [judge.draw(r) < 0.25 for r in batch[50:]]
    verdicts = judge.judge_pairs(batch)
    assert judge.strong.calls == sum(drawn) and 0.20 < sum(drawn) / 400 < 0.30  # a hash draw: about a quarter
    for d, v in zip(drawn, verdicts[50:]):
        assert (v.winner, v.comparison.split(";")[0]) == (
            ("first", "[strong: flip") if d else ("second", "[cheap, not drawn: flip")
        )
    assert judge.judge_pairs(batch[50:60]) == verdicts[50:60]  # the same pairs drawn again
    assert judge.judge_id != cascade(monkeypatch).judge_id  # it changes verdicts, so it is in the id

    from ttseval.metrics.cascade import cascade_summary

    rows = pd.DataFrame(
        {"status": "ok", "comparison": [v.comparison for v in verdicts], "winner_raw": [v.winner for v in verdicts]}
    )
    summary = cascade_summary(rows)
    assert (summary["escalated"], summary["not_drawn"]) == (sum(drawn), 400 - sum(drawn))
    assert summary["strong_usd"] == pytest.approx(0.02 * sum(drawn))  # each row's label carries its own cost
    assert summary["cheap_usd"] == pytest.approx(0.002 * 450)


def test_the_audit_draws_from_the_settled_pairs_and_changes_no_verdict(monkeypatch) -> None:
    judge = cascade(monkeypatch, audit_share=0.5)
    batch = requests({SETTLED: 200})
    verdicts = judge.judge_pairs(batch)
    audited = [v for v in verdicts if v.comparison.startswith("[cheap, audited: strong said first;")]
    assert len(audited) == judge.strong.calls == sum(judge.draw(r) < 0.5 for r in batch)
    assert 70 < len(audited) < 130 and all(v.winner == "second" for v in verdicts)


def test_a_judge_that_judges_no_pairs_cannot_be_a_cascades(monkeypatch) -> None:
    from ttseval.core.errors import SpecError
    from ttseval.providers.judges import JUDGES

    plugins = {
        "judge": {
            "scripted": "tests.support.fakes:ScriptedJudge",
            "says-yes": "tests.support.fakes:InstructionOnlyJudge",
        }
    }
    monkeypatch.setenv("TTSEVAL_PLUGINS", json.dumps(plugins))
    monkeypatch.setenv("TTSEVAL_CASCADES", json.dumps({"c": {"cheap": "says-yes", "strong": "scripted:strong"}}))
    with pytest.raises(SpecError, match=r"cascade:c: its cheap judge 'says-yes' does not judge pairs"):
        JUDGES.build("cascade:c")


def test_a_cheap_verdict_without_a_winner_goes_to_the_strong_judge(monkeypatch) -> None:
    from ttseval.core.protocols import PairwiseVerdict

    judge = cascade(monkeypatch, audit_share=0.0)
    settled = PairwiseVerdict(winner="first", parse_ok=True, difference="significant")
    no_winner = PairwiseVerdict(winner=None, parse_ok=True, difference="significant")
    assert judge.reasons(settled, PairwiseVerdict(winner="second", parse_ok=True, difference="significant")) == []
    assert judge.reasons(settled, no_winner) == ["unparsed"] == judge.reasons(no_winner, settled)
