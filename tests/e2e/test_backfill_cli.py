"""`ttseval backfill-judge` with --depths and --baseline, through the real command.

One stored run (three instant voices, two items at depth 0 and two at depth 1, no judge at evaluate time) is
backfilled with the objective judge (a real judge: it decides from the run's stored CER and MOS, no vendor) twice:
at depth 1 against the third voice (not the run's first system), then a second judge at depth 0 with no --baseline,
which takes the baseline the run was judged against since. The judged item ids, baselines and win-rates are read
from the stored judgments and winrates tables.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from tests.support import instant
from tests.support.harness import cli_env, demo_items, run_cli
from ttseval.core.registry import Spec
from ttseval.metrics.agreement import judge_agreement

ITEMS = {"emo-b-d0": 0, "emo-b-d1": 1, "par-a-d0": 0, "par-a-d1": 1}
# instant voices (tests/support/instant.py): what is tested is which pairs are judged and sent, not what a model
# hears; the first drops every 4th word (a CER above the others'), the third speaks slower (longer clips)
ESPEAK, SLT, AWB = "instant:a:drop=4", "instant:b", "instant:c:pace=1.2"
SYSTEMS = (ESPEAK, SLT, AWB)
SECOND_JUDGE = "objective:cer_margin=0.3:mos_margin=0.5"


@pytest.fixture(scope="module")
def backfilled(prefect_api: str, shared_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("backfill")
    dataset = root / "items.jsonl"
    demo_items(dataset, ITEMS)
    store = root / "store"
    env = shared_env | instant.ENV | {"TTSEVAL_SIMILARITY": "[]"}  # instant voices, objective judge: shared cluster
    run = run_cli(
        [
            "evaluate",
            "--dataset",
            str(dataset),
            "--systems",
            ",".join(SYSTEMS),
            "--store",
            str(store),
            "--run-id",
            "b",
            "--judges",
            "",
        ],
        env,
        cwd=root,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    table = store / "runs" / "b" / "judgments"
    judged_before = len(pd.read_parquet(table)) if table.exists() else 0
    common = ["backfill-judge", "--store", str(store), "--run-id", "b"]
    # a judge with an API key (the fake Gemini's) reads it on the worker: that run gets a cluster of its own
    out = {
        "store": store,
        "env": cli_env(prefect_api, TTSEVAL_SIMILARITY="[]", **instant.ENV),
        "root": root,
        "common": common,
        "judged_before": judged_before,
    }
    out["depth1"] = run_cli([*common, "--judge", "objective", "--depths", "1", "--baseline", AWB], env, cwd=root)
    out["depth0"] = run_cli([*common, "--judge", SECOND_JUDGE, "--depths", "0"], env, cwd=root)
    return out


def judgments(store: Path) -> pd.DataFrame:
    return pd.read_parquet(store / "runs" / "b" / "judgments")


def test_evaluate_judged_nothing(backfilled: dict) -> None:
    # --judges "": the stored run had no verdict before the backfills, so every row below is theirs
    assert backfilled["judged_before"] == 0
    j = judgments(backfilled["store"])
    assert set(j["judge_spec"]) == {"objective", Spec.parse(SECOND_JUDGE).canonical}


def test_depths_and_baseline_restrict_the_judged_items_and_the_baseline(backfilled: dict) -> None:
    result = backfilled["depth1"]
    assert result.returncode == 0, result.stderr[-3000:]
    j = judgments(backfilled["store"])
    first = j[j["judge_spec"] == "objective"]
    awb, others = Spec.parse(AWB).id, {Spec.parse(s).id for s in SYSTEMS[:2]}
    # exactly the depth-1 items, each candidate against AWB once
    assert sorted(first["item_id"]) == sorted(2 * [i for i, d in ITEMS.items() if d == 1])
    assert set(first["baseline_id"]) == {awb} and set(first["system_id"]) == others
    assert (first["status"] == "ok").all()
    assert "computed 4" in result.stdout
    # the win-rate table: against AWB, and its counts are the stored verdicts'
    w = pd.read_parquet(backfilled["store"] / "runs" / "b" / "winrates")
    w = w[w["judge_spec"] == "objective"]
    assert set(w["baseline_id"]) == {awb}
    assert set(w.loc[w["level"] == "depth", "depth"]) == {1}
    for system_id, verdicts in first.groupby("system_id"):
        overall = w[(w["level"] == "overall") & (w["system_id"] == system_id)].iloc[0]
        assert overall["n_judged"] == 2
        assert overall["wins"] == (verdicts["winner"] == "candidate").sum()
        assert overall["losses"] == (verdicts["winner"] == "baseline").sum()


def test_second_judge_keeps_the_runs_baseline_and_judges_depth_0(backfilled: dict) -> None:
    result = backfilled["depth0"]
    assert result.returncode == 0, result.stderr[-3000:]
    j = judgments(backfilled["store"])
    second = j[j["judge_spec"] == Spec.parse(SECOND_JUDGE).canonical]
    assert sorted(second["item_id"]) == sorted(2 * [i for i, d in ITEMS.items() if d == 0])
    # no --baseline: the baseline the run was judged against (AWB), not its first system (ESPEAK)
    assert set(second["baseline_id"]) == {Spec.parse(AWB).id}
    # the first judge's rows are untouched
    assert len(j[j["judge_spec"] == "objective"]) == 4
    # two judges now: the report's agreement line is the stored win-rates' (it crashed the backfill, exit 1, when
    # every judge gave both systems the same win-rate: Kendall's W is 0/0 there)
    w = pd.read_parquet(backfilled["store"] / "runs" / "b" / "winrates")
    agreement = judge_agreement(w)
    line = next(
        x
        for x in (backfilled["store"] / "runs" / "b" / "report.md").read_text().splitlines()
        if x.startswith("Kendall's W over 2 systems")
    )
    if agreement["kendalls_w"] == agreement["kendalls_w"]:
        assert line.endswith(f"(tie-corrected): {agreement['kendalls_w']:.3f}"), line
    else:
        assert line.endswith(
            "undefined: every judge gives all of them the same win-rate, so there is no ranking to agree on"
        ), line


def test_depth_the_run_lacks_and_unknown_baseline_are_refused(backfilled: dict) -> None:
    env, root, common = backfilled["env"], backfilled["root"], backfilled["common"]
    before = judgments(backfilled["store"])
    depth = run_cli([*common, "--judge", "objective", "--depths", "3"], env, cwd=root)
    assert depth.returncode == 2, depth.stderr[-3000:]
    assert "no item of run 'b' matches" in depth.stderr and "depths [0, 1]" in depth.stderr
    baseline = run_cli([*common, "--judge", "objective", "--baseline", "instant:absent"], env, cwd=root)
    assert baseline.returncode == 2, baseline.stderr[-3000:]
    assert "baseline 'instant:absent' has no audio in run 'b'" in baseline.stderr
    assert AWB in baseline.stderr  # names what the run has
    pd.testing.assert_frame_equal(judgments(backfilled["store"]), before)  # nothing written


def test_gemini_backfill_sends_only_the_chosen_depth_and_the_chosen_baselines_clips(backfilled: dict) -> None:
    """What the judge was sent, seen from the (fake) Gemini server: the depth-1 items' texts, and each time the
    candidate's and the --baseline's stored clips, though the run was judged against AWB before."""
    from tests.support.fake_gemini import FakeGemini

    store, root = backfilled["store"], backfilled["root"]
    env = backfilled["env"] | {"GEMINI_API_KEY": "fake-key-never-stored-2718", "TTSEVAL_POSITION_AUDIT_SHARE": "0"}
    with FakeGemini() as fake:
        spec = f"gemini:gemini-2.5-pro:base_url={fake.base_url}:backoff_s=0.01:max_attempts=2"
        result = run_cli(backfilled["common"] + ["--judge", spec, "--depths", "1", "--baseline", SLT], env, cwd=root)
        assert result.returncode == 0, result.stderr[-3000:]
        requests = list(fake.requests)
    items = pd.read_parquet(store / "runs" / "b" / "items").set_index("item_id")["text"]
    synthesis = pd.read_parquet(store / "runs" / "b" / "synthesis")
    clip = {(r.item_id, r.system_id): r.audio_sha256 for r in synthesis.itertuples()}
    slt, awb, espeak = (Spec.parse(s).id for s in (SLT, AWB, ESPEAK))
    # 2 depth-1 items x 2 candidates (ESPEAK, AWB) against SLT, one request each
    assert len(requests) == 4
    sent = []
    for request in requests:
        item = next(i for i, d in ITEMS.items() if d == 1 and items[i] in request.text())
        hashes = {hashlib.sha256(audio).hexdigest() for _, audio in request.audio_parts()}
        candidate = next(s for s in (espeak, awb) if clip[(item, s)] in hashes)
        assert hashes == {clip[(item, slt)], clip[(item, candidate)]}
        sent.append((item, candidate))
    assert sorted(sent) == sorted((i, s) for i, d in ITEMS.items() if d == 1 for s in (espeak, awb))
    g = judgments(store)
    g = g[g["judge_spec"] == Spec.parse(spec).canonical]
    assert sorted(zip(g["item_id"], g["system_id"])) == sorted(sent) and set(g["baseline_id"]) == {slt}


def test_a_backfill_keeps_the_reports_provenance_and_sections_and_logs_each_invocation(backfilled: dict) -> None:
    """After two backfills, report.md still carries what the evaluate wrote in it (dataset and its hash, systems,
    recognisers, code version, baseline, and every section), names both backfilled judges, and log/ holds one
    record per invocation: the evaluate's and each backfill's."""
    assert backfilled["depth0"].returncode == 0, backfilled["depth0"].stderr[-3000:]
    run = backfilled["store"] / "runs" / "b"
    report = (run / "report.md").read_text()
    evaluated = [json.loads(p.read_text()) for p in sorted((run / "log").glob("*.json"))]
    # the module's later tests backfill the same run again: the first three records are this fixture's
    assert [r.get("command") for r in evaluated[:3]] == ["evaluate", "backfill-judge", "backfill-judge"]
    assert {r.get("command") for r in evaluated[3:]} <= {"backfill-judge"}
    first = evaluated[0]
    for field in ("dataset", "dataset_sha256", "systems", "asr", "baseline", "ttseval", "code"):
        assert f"- {field}: {first[field]}" in report, field
    assert f"- backfilled judges: objective, {Spec.parse(SECOND_JUDGE).canonical}" in report  # and any later ones
    for section in ("Paired comparisons with the baseline", "How many items"):
        assert section in report, section
    assert [r["judge"] for r in evaluated[1:3]] == ["objective", Spec.parse(SECOND_JUDGE).canonical]
    assert evaluated[1]["computed"] == 4 and evaluated[1]["kind"] == "pairwise"
