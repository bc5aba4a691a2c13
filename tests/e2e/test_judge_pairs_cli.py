"""All-pairs judging: setting judge_pairs = baseline / all / sampled.

The dry run's count against the calls a fake Gemini judge receives in real evaluate runs of three instant voices
(tests/support/instant.py, with its recogniser and MOS predictor, on the keyed shared cluster: what is tested is the
pairs, not what a model hears), the sampled pairs against the documented rule (tests/support/pairs.py), and the
Bradley-Terry ranking over every pair judged. The pair design alone is tests/unit/test_judge_pairs.py."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pandas as pd
import pytest

from tests.support import instant
from tests.support.harness import run_cli
from tests.support.pairs import drawn_by_hand

SYSTEMS = ["instant:a", "instant:b:pace=1.2", "instant:c:drop=3"]  # the first is the baseline
ITEMS = ["emo-a-d0", "par-a-d0", "que-a-d0", "que-a-d1"]


def _judge_rows(stdout: str) -> dict[str, tuple[int, int]]:
    """judge label -> (keys, calls) from the dry run's printed table (what kind keys calls reused chars audio_s
    usd)."""
    out = {}
    for line in stdout.splitlines():
        fields = line.rsplit(maxsplit=7)
        if len(fields) == 8 and fields[1] == "judge":
            out[fields[0].strip()] = (int(fields[2]), int(fields[3]))
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ttseval.corpus import DEMO_DATASET

    rows = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines()]
    path = tmp_path_factory.mktemp("pairs-data") / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["item_id"] in ITEMS), encoding="utf-8")
    return path


def _judged(keyed_env: dict[str, str], dataset: Path, store: Path, spec_of, env_extra: dict[str, str]):
    """A dry run, then the run, of the three systems with a fake Gemini judge; (dry-run rows, calls received,
    judgments of that judge, the run's result)."""
    from tests.support.fake_gemini import FakeGemini
    from ttseval.core.registry import Spec

    with FakeGemini() as fake:
        spec = Spec.parse(spec_of(fake.base_url)).canonical
        env = keyed_env | instant.ENV | env_extra
        args = [
            "evaluate",
            "--dataset",
            str(dataset),
            "--systems",
            ",".join(SYSTEMS),
            "--judges",
            spec,
            "--store",
            str(store),
            "--run-id",
            "p",
            "--new-store",
        ]
        dry = run_cli([*args, "--dry-run"], env, cwd=store)
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert fake.calls == 0  # a dry run calls nothing
        result = run_cli(args, env, cwd=store)
        assert result.returncode == 0, result.stderr[-4000:]
        calls = fake.calls
    judgments = pd.read_parquet(store / "runs" / "p" / "judgments")
    return _judge_rows(dry.stdout)[f"{spec} (pairwise)"], calls, judgments[judgments["judge_spec"] == spec], result


def test_all_pairs_and_sampled_pairs_end_to_end(keyed_env: dict[str, str], dataset: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    from ttseval.core.registry import Spec

    ids = [Spec.parse(s).id for s in SYSTEMS]

    # judge_pairs = all: every pair of the three systems on each of the 4 items
    (keys, planned), calls, rows, result = _judged(
        keyed_env,
        dataset,
        store,
        lambda url: f"gemini:gemini-2.5-flash:base_url={url}:temperature=0.3",
        {"TTSEVAL_JUDGE_PAIRS": "all"},
    )
    # by hand: 4 items x C(3, 2) = 12 comparisons, all 12 audited in the other order (under position_audit_min)
    assert (keys, planned) == (24, 24) and calls == 24
    assert rows["status"].eq("ok").all() and len(rows) == 12
    assert {
        item: {frozenset(p) for p in zip(g["system_id"], g["baseline_id"])} for item, g in rows.groupby("item_id")
    } == {item: {frozenset(p) for p in itertools.combinations(ids, 2)} for item in ITEMS}
    assert rows["vs_baseline"].tolist() == (rows["baseline_id"] == ids[0]).tolist()
    assert rows["candidate_first"].nunique() == 2  # the order drawn per verdict, recorded
    winrates = pd.read_parquet(store / "runs" / "p" / "winrates")
    overall = winrates[(winrates["level"] == "overall") & winrates["judge_spec"].str.startswith("gemini")]
    # win-rates from the 8 rows against the baseline only: 4 judged items for each of the two other systems
    assert sorted(overall["system_id"]) == sorted(ids[1:]) and overall["baseline_id"].eq(ids[0]).all()
    assert overall["n_judged"].eq(4).all()
    # the Bradley-Terry ranking fits all 12 verdicts: every system in 2 pairs x 4 items = 8 comparisons
    report = (store / "runs" / "p" / "report.md").read_text()
    section = report[report.index("Bradley-Terry ranking") :]
    table = [line for line in section.split("\n\n")[1].splitlines() if line.startswith("|")][2:]
    ranked = {cells[1]: cells[4:6] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in table)}
    assert ranked == {spec: ["4", "8"] for spec in SYSTEMS}
    data = (store / "runs" / "p" / "html" / "data.js").read_text()
    board = json.loads(data.splitlines()[1].split(" = ", 1)[1].rstrip(";"))["leaderboard"]
    judge_id = rows["judge_id"].iloc[0]
    assert {row["system_id"] for row in board if judge_id in row["bradley_terry"]} == set(ids)
    assert "Bradley-Terry ranking" in result.stdout

    # judge_pairs = sampled, 2 pairs per item, a second judge on the same run: the drawn pairs, their audit
    (keys, planned), calls, rows, _ = _judged(
        keyed_env,
        dataset,
        store,
        lambda url: f"gemini:gemini-2.5-flash:base_url={url}:temperature=0.5",
        {"TTSEVAL_JUDGE_PAIRS": "sampled", "TTSEVAL_PAIRS_PER_ITEM": "2"},
    )
    assert (keys, planned) == (16, 16) and calls == 16  # 4 items x 2 pairs, each audited
    drawn = {item: {frozenset(p) for p in zip(g["system_id"], g["baseline_id"])} for item, g in rows.groupby("item_id")}
    assert drawn == {item: drawn_by_hand(0, item, list(itertools.combinations(ids, 2)), 2) for item in ITEMS}
    audit = pd.read_parquet(store / "runs" / "p" / "position_audit")
    assert len(audit[audit["judge_id"] == rows["judge_id"].iloc[0]]) == 8
