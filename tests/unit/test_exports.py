"""`ttseval export`'s files for other tools: battles.jsonl in the arena convention, refit by an independent
Bradley-Terry implementation (choix), and clips.jsonl with every metric of every clip (as VERSA writes
per-utterance scores). The run is tests/unit/test_report.py's hand-built judged run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tests.unit.test_report import TINY, _judged_run
from ttseval.core.schemas import TABLES

S1 = ["candidate"] * 12 + ["tie"] * 3 + ["baseline"] * 5
S2 = ["candidate"] * 5 + ["tie"] * 4 + ["baseline"] * 11


def _exported(tmp_path: Path) -> tuple:
    from ttseval.tasks.export import export_run

    store, settings = _judged_run(tmp_path, {"s1": S1, "s2": S2}, ["questions"] * 20, [0] * 20)
    judgments = store.read("r", "judgments")
    judgments["candidate_first"] = judgments["item_id"].str[-1].astype(int) % 2 == 0  # the baseline first on odd items
    store.replace_table("r", "judgments", pa.Table.from_pandas(judgments, schema=TABLES["judgments"].schema))
    export_run(settings, "r", tmp_path / "out")
    return store, [json.loads(line) for line in (tmp_path / "out" / "battles.jsonl").read_text().splitlines()]


def test_battles_are_in_the_arena_convention_with_the_order_the_judge_heard(tmp_path: Path) -> None:
    _, battles = _exported(tmp_path)
    assert len(battles) == 40 and all(
        set(b) == {"model_a", "model_b", "winner", "judge", "item", "tstamp"} for b in battles
    )
    first = {(b["item"], b["model_a"], b["model_b"]): b["winner"] for b in battles}
    # i00: s1 heard first, its verdict 'candidate' -> model_a; i01: the baseline heard first -> model_b wins
    assert first[("i00", "espeak-ng:s1", "espeak-ng:s0")] == "model_a"
    assert first[("i01", "espeak-ng:s0", "espeak-ng:s1")] == "model_b"
    assert first[("i12", "espeak-ng:s1", "espeak-ng:s0")] == "tie" and battles[0]["judge"] == "objective"


def test_the_battles_refit_by_choix_give_the_report_s_bradley_terry_strengths(tmp_path: Path) -> None:
    """choix's opt_pairwise reads the battles as an arena refit does (a win twice, a tie once each way; its penalty
    on the doubled data is 2 x PRIOR, the report's weak prior): the same strengths within 1e-5."""
    import choix

    from ttseval.metrics.bradley_terry import PRIOR, bradley_terry, judgment_outcomes

    store, battles = _exported(tmp_path)
    models = sorted({m for b in battles for m in (b["model_a"], b["model_b"])})
    data: list[tuple[int, int]] = []
    for b in battles:
        a, z = models.index(b["model_a"]), models.index(b["model_b"])
        data += {"model_a": [(a, z)] * 2, "model_b": [(z, a)] * 2, "tie": [(a, z), (z, a)]}[b["winner"]]
    refit = choix.opt_pairwise(len(models), data, alpha=2 * PRIOR, tol=1e-12)
    refit -= refit.mean()
    ours = bradley_terry(judgment_outcomes(store.read("r", "judgments")), n_resamples=20, seed=0)
    ours = ours.set_index("system_id")["strength"]
    expected = [refit[models.index(f"espeak-ng:{s}")] for s in ("s0", "s1", "s2")]
    assert ours.loc[["s0", "s1", "s2"]].to_numpy() == pytest.approx(expected, abs=1e-5)
    assert ours["s1"] > ours["s0"] > ours["s2"]  # 13.5 of 20 won against s0; 7 of 20


def test_clips_carry_every_metric_with_its_direction(tmp_path: Path) -> None:
    _exported(tmp_path)
    clips = [json.loads(line) for line in (tmp_path / "out" / "clips.jsonl").read_text().splitlines()]
    assert len(clips) == 60 and len({c["key"] for c in clips}) == 60  # 20 items x 3 systems, one line each
    c = next(c for c in clips if c["key"] == "i03/espeak-ng:s2")
    # the run's rows for that clip: transcribed exactly (0 errors), MOS 3 from dnsmos, 2.0 s
    assert c[f"wer:{TINY}"] == 0.0 and c[f"cer:{TINY}"] == 0.0 and c["mos:dnsmos"] == 3.0 and c["duration_s"] == 2.0
    assert c["directions"] == {f"wer:{TINY}": "lower", f"cer:{TINY}": "lower", "mos:dnsmos": "higher"}
    assert np.isclose(sum(c["mos:dnsmos"] for c in clips) / 60, 3.0)


def test_the_emergenttts_table_puts_each_category_s_win_rate_beside_its_wer_in_a_file_named_after_the_judge(
    tmp_path: Path,
) -> None:
    _exported(tmp_path)
    [path] = (tmp_path / "out").glob("emergenttts_*.json")
    assert path.name.startswith("emergenttts_objective_20")  # the judge's spec, then the run's date
    table = json.loads(path.read_text())
    rows = {(r["system"], r["category"]): r for r in table["rows"]}
    s1 = rows[("espeak-ng:s1", "questions")]
    # 12 wins and 3 ties of 20, a tie half a win: 13.5 / 20; every clip transcribed exactly: WER 0
    assert s1["win_rate"] == pytest.approx(13.5 / 20) and s1["n_judged"] == 20 and s1["wer"] == {TINY: 0.0}
    assert s1["win_rate_ci"][0] < s1["win_rate"] < s1["win_rate_ci"][1]
    assert rows[("espeak-ng:s1", "overall")]["win_rate"] == s1["win_rate"] and table["baseline"] == "espeak-ng:s0"
    assert rows[("espeak-ng:s2", "questions")]["win_rate"] == pytest.approx(7 / 20)
