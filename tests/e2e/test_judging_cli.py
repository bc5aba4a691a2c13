"""Judging end to end: the objective judge in the default run, re-runs, a backfilled second judge, agreement.

The runs are on instant voices, recogniser and MOS predictor (tests/support/instant.py) and the keyed shared cluster:
what is tested is judging, not what a model hears. The baseline speaks English only (so the French and Pashto
comparisons are skipped), one candidate leaves out every fourth word (its CER is higher, so the objective judge's
verdicts vary), the other is faster (its clips are shorter, so a judge that prefers the longer clip always
decides)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.support import instant
from tests.support.harness import run_cli

SYSTEMS_TEMPLATE = "instant:base:only=en:log={log},instant:mumble:drop=4,instant:quick:pace=0.85"


def own_cluster(env: dict[str, str]) -> dict[str, str]:
    """`env` for a command that starts a cluster of its own: for settings read on the workers (cascades) and for
    two worker processes."""
    return {k: v for k, v in env.items() if k != "TTSEVAL_DASK_ADDRESS"}


@pytest.fixture(scope="module")
def judged_run(keyed_env: dict[str, str], small_dataset: Path, tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("judged")
    calls = store / "synth-calls.txt"
    calls.touch()  # a path a spec names must exist where the workers are (the cluster preflight checks it)
    env = keyed_env | instant.ENV
    systems = SYSTEMS_TEMPLATE.format(log=calls)
    result = run_cli(
        ["evaluate", "--dataset", str(small_dataset), "--systems", systems, "--store", str(store), "--run-id", "j"],
        env,
        cwd=store,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return store, env, systems, calls, result


def test_default_run_judges_every_candidate_against_the_first_system(judged_run) -> None:
    store, _, _, _, result = judged_run
    j = pd.read_parquet(store / "runs" / "j" / "judgments")
    # 9 items x 2 candidates (mumble, quick) against the baseline (base), one objective judge
    assert len(j) == 18 and not j.duplicated(["item_id", "system_id", "baseline_id", "judge_id"]).any()
    assert j["judge_spec"].eq("objective").all() and j["baseline_id"].nunique() == 1
    # the baseline speaks English only: the French and Pashto comparisons are skipped, not dropped
    skipped = j[j["status"] == "skipped"]
    assert sorted(skipped["item_id"].unique()) == ["mul-fr", "mul-ps"] and len(skipped) == 4
    ok = j[j["status"] == "ok"]
    assert ok["parse_ok"].all() and ok["winner"].isin(["candidate", "baseline", "tie"]).all()
    # order is randomized per comparison and mapped back: both orders occur, and the mapping is consistent
    assert ok["candidate_first"].nunique() == 2
    first_won = ok["winner_raw"] == "first"
    assert (
        ((ok["winner"] == "candidate") == (first_won == ok["candidate_first"]))
        .where(ok["winner_raw"] != "tie", True)
        .all()
    )
    w = pd.read_parquet(store / "runs" / "j" / "winrates")
    overall = w[w["level"] == "overall"].set_index("system_id")
    assert len(overall) == 2 and overall["n_judged"].eq(7).all() and overall["n_skipped"].eq(2).all()
    # win-rate arithmetic from the rows themselves (win 1, tie 0.5, loss 0)
    for system_id, rows in ok.groupby("system_id"):
        expected = ((rows["winner"] == "candidate").sum() + 0.5 * (rows["winner"] == "tie").sum()) / len(rows)
        assert overall.loc[system_id, "win_rate"] == pytest.approx(expected)
    figure = next((store / "runs" / "j" / "figures").glob("winrate-by-depth-*.png"))
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (store / "runs" / "j" / "report.md").read_text()
    assert "judge objective (CER, then MOS; no LLM)" in report and "win-rate %" in report
    assert "Win-rate vs baseline" in result.stdout
    # 7 judged items per candidate: under 10, so every win-rate says "n too small" instead of an interval, and the
    # Bradley-Terry ranking (three systems, from the 14 verdicts) is in the report and the CLI's leaderboard
    assert overall["win_rate_ci_low"].isna().all() and "(n too small)" in report
    assert report.count("Bradley-Terry ranking") == 1 and "Bradley-Terry ranking" in result.stdout


def test_rerun_judges_nothing(judged_run) -> None:
    store, env, systems, calls, _ = judged_run
    n_calls = len(calls.read_text().splitlines())
    logs_before = len(list((store / "runs" / "j" / "log").glob("*.json")))
    result = run_cli(
        [
            "evaluate",
            "--dataset",
            str(_dataset_of(store)),
            "--systems",
            systems,
            "--store",
            str(store),
            "--run-id",
            "j",
        ],
        env,
        cwd=store,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    log = json.loads(sorted((store / "runs" / "j" / "log").glob("*.json"))[-1].read_text())
    assert len(list((store / "runs" / "j" / "log").glob("*.json"))) == logs_before + 1
    assert log["computed"]["judgments"] == 0 and log["reused"]["judgments"] == 18
    assert len(calls.read_text().splitlines()) == n_calls


def _dataset_of(store: Path) -> Path:
    log = json.loads(sorted((store / "runs" / "j" / "log").glob("*.json"))[0].read_text())
    return Path(log["dataset"])


def test_backfill_second_judge_makes_no_synthesis_calls_and_report_compares(judged_run) -> None:
    store, env, _, calls, _ = judged_run
    n_calls = len(calls.read_text().splitlines())
    synth_parts = sorted(p.name for p in (store / "runs" / "j" / "synthesis").iterdir())
    result = run_cli(
        [
            "backfill-judge",
            "--store",
            str(store),
            "--run-id",
            "j",
            "--judge",
            "objective:cer_margin=0.3:mos_margin=0.5",
        ],
        env,
        cwd=store,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(calls.read_text().splitlines()) == n_calls, "a backfill must not synthesize"
    assert sorted(p.name for p in (store / "runs" / "j" / "synthesis").iterdir()) == synth_parts
    j = pd.read_parquet(store / "runs" / "j" / "judgments")
    assert j["judge_spec"].value_counts().to_dict() == {"objective": 18, "objective:cer_margin=0.3:mos_margin=0.5": 18}
    # the new judge's verdicts follow its rule on the stored evidence: CER apart by > 0.3 decides, else MOS by > 0.5
    cer = pd.read_parquet(store / "runs" / "j" / "transcripts").set_index(["item_id", "system_id"])["cer"]
    mos = pd.read_parquet(store / "runs" / "j" / "quality").set_index(["item_id", "system_id"])["mos"]
    wide = j[(j["judge_spec"] != "objective") & (j["status"] == "ok")]
    for r in wide.itertuples():
        c, b = (r.item_id, r.system_id), (r.item_id, r.baseline_id)
        if abs(cer[c] - cer[b]) > 0.3:
            expected = "candidate" if cer[c] < cer[b] else "baseline"
        elif abs(mos[c] - mos[b]) > 0.5:
            expected = "candidate" if mos[c] > mos[b] else "baseline"
        else:
            expected = "tie"
        assert r.winner == expected, (r.item_id, r.system_id)
    report = (store / "runs" / "j" / "report.md").read_text()
    assert report.count("## Win-rate vs baseline") == 2 and "## Judge agreement" in report
    assert "Kendall's W" in report
    again = run_cli(
        [
            "backfill-judge",
            "--store",
            str(store),
            "--run-id",
            "j",
            "--judge",
            "objective:cer_margin=0.3:mos_margin=0.5",
        ],
        env,
        cwd=store,
    )
    assert again.returncode == 0 and "reused 18 comparisons, computed 0" in again.stdout


def test_strong_prompting_sends_the_category_description(
    shared_env: dict[str, str], small_dataset: Path, tmp_path: Path
) -> None:
    env = shared_env | instant.env({"tts": {"instructed-tone": "tests.support.fakes:InstructedToneTTS"}})
    result = run_cli(
        [
            "evaluate",
            "--dataset",
            str(small_dataset),
            "--systems",
            "instructed-tone,instructed-tone:prompt=category",
            "--store",
            str(tmp_path),
            "--run-id",
            "p",
            "--judges",
            "",
        ],
        env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    s = pd.read_parquet(tmp_path / "runs" / "p" / "synthesis")
    assert s["system_id"].nunique() == 2, "prompted and unprompted are different systems"
    plain = s[s["system_spec"] == "instructed-tone"]
    prompted = s[s["system_spec"] == "instructed-tone:prompt=category"]
    # different instructions -> different audio; the unprompted system got none (one tone for all items)
    assert plain["audio_sha256"].nunique() == 1 and prompted["audio_sha256"].nunique() > 1
    refused = run_cli(
        [
            "evaluate",
            "--dataset",
            str(small_dataset),
            "--systems",
            "flite:slt:prompt=category",
            "--store",
            str(tmp_path / "x"),
        ],
        env,
        cwd=tmp_path,
        timeout_s=120,
    )
    assert refused.returncode == 2 and "takes no instruction" in refused.stderr


def test_backfill_gemini_judge_against_fake_server_counts_calls_retries_and_parse_failures(
    judged_run, tmp_path: Path
) -> None:
    """...and the same command once the server answers in the right shape asks again exactly the comparisons that
    did not parse, on a copy of the run: parse failures heal."""
    from tests.support.fake_gemini import FakeGemini, Reply
    from tests.support.judge_requests import answer

    store, env, _, calls, _ = judged_run
    n_calls = len(calls.read_text().splitlines())
    key = "fake-key-never-stored-3141"
    with FakeGemini() as fake:
        ok = Reply.ok(answer("clip_1", 3, 1))
        fake.script("Hmm, I think I left my keys", [Reply.rate_limited("0"), ok, ok])
        fake.script("sobremesa", [Reply.error(500), ok, ok])
        fake.script("When the chef stirred", [Reply.malformed()] * 4)  # both comparisons stay unparseable
        spec = f"gemini:gemini-2.5-pro:base_url={fake.base_url}:backoff_s=0.01:max_attempts=2"
        result = run_cli(
            ["backfill-judge", "--store", str(store), "--run-id", "j", "--judge", spec],
            # a cluster of its own, whose workers have this key only: the key the judge really sent is never stored
            own_cluster(env) | {"GEMINI_API_KEY": key, "TTSEVAL_POSITION_AUDIT_SHARE": "0"},
            cwd=store,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert fake.pending() == {}
        # 9 items x 2 candidates = 18 comparisons; French and Pashto lack the baseline clip: 14 reach the judge.
        # 200 responses = 12 parsed on first answer + 2 unparseable comparisons x 2 attempts each.
        assert fake.ok_responses == 16
        assert fake.status_counts[429] == 1 and fake.status_counts[500] == 1
        # the server fixed: the same command on a copy asks again only the 2 comparisons that did not parse
        healed = _copy_of(store, tmp_path / "healed")
        fake.script("When the chef stirred", [ok, ok])
        again = run_cli(
            ["backfill-judge", "--store", str(healed), "--run-id", "j", "--judge", spec],
            own_cluster(env) | {"GEMINI_API_KEY": key, "TTSEVAL_POSITION_AUDIT_SHARE": "0"},
            cwd=healed,
        )
        assert again.returncode == 0, again.stderr[-3000:]
        assert fake.ok_responses == 18 and fake.pending() == {}
    from ttseval.core.registry import Spec

    spec = Spec.parse(spec).canonical  # options sorted, as stored
    j = pd.read_parquet(store / "runs" / "j" / "judgments")
    g = j[j["judge_spec"] == spec]
    assert len(g) == 18 and (g["status"] == "skipped").sum() == 4
    judged = g[g["status"] == "ok"]
    assert len(judged) == 14 and int(judged["retries"].sum()) == 2
    assert (~judged["parse_ok"]).sum() == 2 and judged.loc[~judged["parse_ok"], "winner"].isna().all()
    assert set(judged.loc[~judged["parse_ok"], "item_id"]) == {"syn-a-d0"}
    assert int(judged["attempts"].sum()) == 16
    # the fake always prefers clip 1: mapped back, the winner follows the randomized order
    parsed = judged[judged["parse_ok"]]
    assert ((parsed["winner"] == "candidate") == parsed["candidate_first"]).all()
    assert (judged["cost_usd"] > 0).all() and len(calls.read_text().splitlines()) == n_calls
    # the leaderboard's judge $ per system: the sum of that system's comparison costs
    report = (store / "runs" / "j" / "report.md").read_text()
    board = report[report.index(f"judge {spec}") :]
    board = board[: board.index("![win-rate by depth]")]
    synthesis = pd.read_parquet(store / "runs" / "j" / "synthesis")
    spec_of = dict(zip(synthesis["system_id"], synthesis["system_spec"]))
    for system_id, cost in judged.groupby("system_id")["cost_usd"].sum().items():
        line = next(r for r in board.splitlines() if r.startswith(f"| {spec_of[system_id]} |"))
        assert line.rstrip(" |").endswith(f"| {cost:.4f}"), line
    w = pd.read_parquet(store / "runs" / "j" / "winrates")
    overall = w[(w["level"] == "overall") & (w["judge_spec"] == spec)]
    assert overall["n_parse_failures"].sum() == 2 and overall["n_judged"].sum() == 12
    for path in store.rglob("*"):
        if path.is_file() and path.suffix in (".parquet", ".json", ".md"):
            assert key.encode() not in path.read_bytes(), path
    assert key not in result.stdout + result.stderr
    after = pd.read_parquet(healed / "runs" / "j" / "judgments")
    after = after[(after["judge_spec"] == spec) & (after["status"] == "ok")]
    assert len(after) == 14 and after["parse_ok"].all() and not after["retryable"].any()
    record = json.loads(sorted((healed / "runs" / "j" / "log").glob("*.json"))[-1].read_text())
    assert record["command"] == "backfill-judge" and record["computed"] == 2, record


def _copy_of(store: Path, into: Path) -> Path:
    """The run's tables and audio, for a test that must not change the shared run."""
    import shutil

    shutil.copytree(store / "runs" / "j", into / "runs" / "j")
    shutil.copytree(store / "blobs", into / "blobs")
    return into


def test_a_judge_vendor_limit_holds_across_both_workers(judged_run, tmp_path: Path) -> None:
    from tests.support.fake_gemini import FakeGemini

    store, env, _, _, _ = judged_run
    copy = _copy_of(store, tmp_path / "store")
    with FakeGemini(delay_s=0.2) as slow:
        # two shards of 8 comparisons, one per worker, each asking 4 at once: 8 in flight without the limit
        spec = f"gemini:gemini-2.5-flash:base_url={slow.base_url}:temperature=0.1"
        limits = json.dumps({"gemini": {"concurrency": 1}})
        result = run_cli(
            ["backfill-judge", "--store", str(copy), "--run-id", "j", "--judge", spec, "--workers", "2"],
            own_cluster(env) | {"TTSEVAL_VENDOR_LIMITS": limits, "TTSEVAL_SHARD_SIZE": "8"},
            cwd=copy,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        # 14 comparisons, and the same 14 in the other order (the position audit): every call gated
        assert slow.ok_responses == 28 and slow.max_in_flight == 1, result.stdout + result.stderr[-3000:]
        assert "ttseval-vendor-gemini" in result.stderr


def test_position_audit_of_a_judge_that_always_picks_clip_one(judged_run, tmp_path: Path) -> None:
    from tests.support.fake_gemini import FakeGemini

    store, env, _, _, _ = judged_run
    copy = _copy_of(store, tmp_path / "store")
    with FakeGemini() as fake:  # its default verdict is always "clip_1": pure position bias
        spec = f"gemini:gemini-2.5-flash:base_url={fake.base_url}:temperature=0.3"
        result = run_cli(
            ["backfill-judge", "--store", str(copy), "--run-id", "j", "--judge", spec],
            env,
            cwd=copy,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        # 18 pairs, fewer than position_audit_min (50): all audited; 4 lack a clip (skipped in both tables)
        assert fake.ok_responses == 28 and "18 asked in the other order" in result.stdout
    judged = pd.read_parquet(copy / "runs" / "j" / "judgments")
    audit = pd.read_parquet(copy / "runs" / "j" / "position_audit")
    assert set(audit["judge_spec"].str.split(":").str[0]) == {"gemini"}  # the objective judge is order-blind
    both = judged.merge(audit, on=["item_id", "system_id", "baseline_id", "judge_id"], suffixes=("", "_swap"))
    answered = both[both["status"] == "ok"]
    assert len(both) == 18 and len(answered) == 14
    assert (answered["candidate_first"] != answered["candidate_first_swap"]).all()
    assert (answered["winner_raw"] == "first").all() and (answered["winner_raw_swap"] == "first").all()
    # worked by hand: clip 1 always wins, so every verdict flips (consistency 0 %), the first clip wins all
    # decided answers (100 %), and with both orders every pair scores (1 + 0) / 2: win-rate 50 % for each system
    report = (copy / "runs" / "j" / "report.md").read_text()
    assert (
        "**Warning: this judge does not rank.** it answered 'first' on all 14 parsed comparisons: a constant "
        "judge is not a ranking."
    ) in report
    sections = report.split("## Win-rate vs baseline")[1:]
    objective = next(x for x in sections if "judge objective" in x.splitlines()[0])
    assert "does not rank" not in objective  # the objective judge's verdicts vary
    mine = next(x for x in sections if "temperature=0.3" in x.splitlines()[0])
    assert "does not rank" in mine
    section = report[report.index("## Position bias") :]
    row = next(line for line in section.splitlines() if line.startswith("| gemini"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["14", "0.0", "100.0"], row
    assert cells[4].count("-> 50.0") == 2, row
    for system_id, g in answered.groupby("system_id"):  # the drawn-order win-rate is the share heard first
        assert f"{g['candidate_first'].mean() * 100:.1f} -> 50.0" in cells[4], (system_id, row)


def test_a_cascade_sends_only_the_pairs_the_cheap_judge_cannot_settle(judged_run, tmp_path: Path) -> None:
    import io
    import re

    import soundfile as sf

    from tests.support.fake_gemini import PAIRWISE_OK, FakeGemini, Reply

    def longer_clip_wins(request):  # consistent under the swap: the verdict follows the clips, not the order
        first, second = (sf.info(io.BytesIO(wav)).frames for _, wav in request.audio_parts())
        return PAIRWISE_OK | {"winner": "clip_1" if first >= second else "clip_2"}

    store, env, _, _, _ = judged_run
    copy = _copy_of(store, tmp_path / "store")
    with FakeGemini(responder=longer_clip_wins) as cheap, FakeGemini() as strong:
        tie = Reply.ok(PAIRWISE_OK | {"winner": "tie", "difference": "none"})
        cheap.script("the chef stirred", [tie] * 4)  # one item, two candidates, both orders: a tie each time
        cascades = {
            "fs": {
                "cheap": f"gemini:gemini-2.5-flash:base_url={cheap.base_url}:input_usd_per_mtok=0.1"
                ":output_usd_per_mtok=0.4",
                "strong": f"gemini:gemini-2.5-pro:base_url={strong.base_url}",
                "audit_share": 0.5,
            }
        }
        result = run_cli(
            ["backfill-judge", "--store", str(copy), "--run-id", "j", "--judge", "cascade:fs"],
            own_cluster(env) | {"TTSEVAL_CASCADES": json.dumps(cascades), "TTSEVAL_POSITION_AUDIT_SHARE": "0"},
            cwd=copy,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        strong_calls = strong.ok_responses
    j = pd.read_parquet(copy / "runs" / "j" / "judgments")
    mine = j[(j["judge_spec"] == "cascade:fs") & (j["status"] == "ok")]
    escalated = mine[mine["comparison"].str.startswith("[strong")]
    audited = mine[mine["comparison"].str.startswith("[cheap, audited")]
    # 14 pairs have both clips: the cheap judge hears each in both orders; the 2 ties go to the strong judge, and
    # so do the settled pairs drawn for the audit (about half of 12), whose strong answer is kept but not used
    assert len(mine) == 14 and len(escalated) == 2 and 1 <= len(audited) <= 11
    assert strong_calls == 2 + len(audited)
    assert (escalated["winner_raw"] == "first").all()  # the strong fake's answer (clip 1), not the cheap tie
    assert audited["comparison"].str.startswith("[cheap, audited: strong said first;").all()
    # cost by hand: cheap calls (1000 x 0.1 + 50 x 0.4) / 1e6 = 0.00012 each; strong (1000 x 1.25 + 50 x 10) / 1e6
    assert mine["cost_usd"].sum() == pytest.approx(28 * 0.00012 + strong_calls * 0.00175)
    report = (copy / "runs" / "j" / "report.md").read_text()
    line = next(s for s in report.splitlines() if s.startswith("Cascade:"))
    # the audit's agreement by hand: the strong fake always says clip 1; the cheap one said it where it was longer
    agree = (audited["winner_raw"] == "first").mean() * 100
    assert line == (
        f"Cascade: 2 of 14 pairs (14.3%) went to the strong judge (subtle 2, tie 2); cheap judge $0.0034, "
        f"strong judge ${strong_calls * 0.00175:.4f}. On {len(audited)} settled pairs the strong judge also "
        f"heard, it gave the cheap judge's answer {agree:.1f}% of the time."
    ), line
    assert re.search(r"\[strong: tie, subtle; cheap \$0\.000240, strong \$0\.001750\]", escalated.iloc[0]["comparison"])


def test_self_consistency_end_to_end(judged_run, tmp_path: Path) -> None:
    from tests.support.fake_gemini import PAIRWISE_OK, FakeGemini, Reply

    store, env, _, _, _ = judged_run
    copy = _copy_of(store, tmp_path / "store")
    with FakeGemini() as fake:
        second = Reply.ok(PAIRWISE_OK | {"winner": "clip_2"})
        fake.script("the chef stirred", [second])  # one sample of one comparison disagrees
        spec = f"gemini:gemini-2.5-flash:base_url={fake.base_url}:temperature=0.7:samples=3"
        result = run_cli(
            ["backfill-judge", "--store", str(copy), "--run-id", "j", "--judge", spec],
            env | {"TTSEVAL_POSITION_AUDIT_SHARE": "0"},
            cwd=copy,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert fake.ok_responses == 14 * 3
    j = pd.read_parquet(copy / "runs" / "j" / "judgments")
    mine = j[j["judge_spec"].str.contains("samples=3") & (j["status"] == "ok")]
    assert len(mine) == 14 and (mine["samples"] == 3).all()
    # by hand: 13 comparisons with 3 of 3 samples agreeing, 1 with 2 of 3: (13 x 1 + 2/3) / 14
    assert sorted(mine["sample_agreement"].round(4)) == [round(2 / 3, 4)] + [1.0] * 13
    assert (mine["winner_raw"] == "first").all()  # the majority holds
    report = (copy / "runs" / "j" / "report.md").read_text()
    expected = f"{100 * (13 + 2 / 3) / 14:.1f}"
    assert (
        f"Self-consistency: 3 samples per comparison at temperature > 0; the samples agree with the majority "
        f"verdict {expected}% of the time on average."
    ) in report


def test_a_budget_keeps_the_judgements_it_can_pay_for(judged_run, monkeypatch: pytest.MonkeyPatch) -> None:
    from ttseval.core.config import load_settings
    from ttseval.core.store import ArtifactStore
    from ttseval.flows.common import stored_systems
    from ttseval.tasks.cost import JUDGE_PROMPT_TOKENS, Budget
    from ttseval.tasks.judge import PAIRWISE, plan_judge, within_judge_budget

    monkeypatch.setenv("GEMINI_API_KEY", "fake-key")
    store_dir, _, _, _, _ = judged_run
    store, settings = ArtifactStore(str(store_dir)), load_settings(store=str(store_dir))
    system_ids, _ = stored_systems(store, "j")
    spec = "gemini:gemini-2.5-pro:temperature=0.9"  # a judge this run never used: every pair is missing
    plan = plan_judge(PAIRWISE, store, "j", system_ids, spec, settings, baseline_id=system_ids[0])
    works = [w for shard in plan.shards for w in shard["work"]]
    durations = store.read("j", "synthesis").set_index(["item_id", "system_id"])["duration_s"]

    def price(w) -> float:  # worked by hand: 32 audio tokens a second at USD 1.25/M, the prompt, 400 x USD 10/M
        audio_s = durations[(w["item_id"], w["system_id"])] + durations[(w["item_id"], w["baseline_id"])]
        return (audio_s * 32 * 1.25 + JUDGE_PROMPT_TOKENS * 1.25 + 400 * 10.0) / 1e6

    payable = [w for w in works if not w["skip"]]
    budget = Budget(sum(price(w) for w in payable[:3]) + 1e-9)
    kept = within_judge_budget(plan, spec, store, "j", settings, budget)
    kept_works = [w for shard in kept.shards for w in shard["work"]]
    # the first three payable pairs, in plan order, and every skipped pair (free: no call)
    assert [w for w in kept_works if not w["skip"]] == payable[:3]
    assert sum(bool(w["skip"]) for w in kept_works) == sum(bool(w["skip"]) for w in works) == 4
    assert budget.deferred == len(payable) - 3 and budget.remaining_usd == pytest.approx(0, abs=1e-8)
    assert kept.wanted == plan.wanted - (len(payable) - 3) and kept.present == plan.present


def test_human_alignment_from_a_csv(judged_run, tmp_path: Path) -> None:
    import krippendorff
    import numpy as np

    store, env, _, _, _ = judged_run
    j = pd.read_parquet(store / "runs" / "j" / "judgments")
    mine = j[(j["judge_spec"] == "objective") & (j["status"] == "ok")][["item_id", "system_id", "winner"]]
    human = mine.rename(columns={"winner": "preference"}).reset_index(drop=True)
    flip = {"candidate": "baseline", "baseline": "candidate", "tie": "candidate"}
    human.loc[:1, "preference"] = human.loc[:1, "preference"].map(flip)  # people disagree on two of 14
    csv = tmp_path / "human.csv"
    human.to_csv(csv, index=False)
    result = run_cli(
        ["human-alignment", "--store", str(store), "--run-id", "j", "--human", str(csv)], env, cwd=store, timeout_s=120
    )
    assert result.returncode == 0, result.stderr
    line = next(s for s in result.stdout.splitlines() if s.startswith("objective "))
    n, agree, alpha = line.split()[1:4]
    assert int(n) == 14 and float(agree) == pytest.approx(12 / 14, abs=1e-3)
    # independent: the krippendorff package on the two raters' labels coded as integers
    codes = {"candidate": 0, "baseline": 1, "tie": 2}
    data = np.array([mine["winner"].map(codes).to_numpy(), human["preference"].map(codes).to_numpy()], dtype=float)
    assert float(alpha) == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-3
    )
    # independent: scipy's Spearman over the per-system win-rates (win 1, tie 0.5, loss 0) of each side
    import scipy.stats

    score = {"candidate": 1.0, "tie": 0.5, "baseline": 0.0}
    rates = (
        pd.DataFrame(
            {
                "system_id": mine["system_id"].to_numpy(),
                "judge": mine["winner"].map(score).to_numpy(),
                "human": human["preference"].map(score).to_numpy(),
            }
        )
        .groupby("system_id")
        .mean()
    )
    rho = line.split()[4]
    expected = scipy.stats.spearmanr(rates["judge"], rates["human"]).statistic
    assert (rho == "nan") if np.isnan(expected) else float(rho) == pytest.approx(expected, abs=1e-3)
    # per category, by hand: the two flipped rows' categories lose one agreement each
    items = pd.read_parquet(store / "runs" / "j" / "items").set_index("item_id")["category"]
    per = next(
        s
        for s in result.stdout.splitlines()[result.stdout.splitlines().index(line) :]
        if s.strip().startswith("agreement per category:")
    )
    cats = human.assign(category=human["item_id"].map(items), same=mine["winner"].to_numpy() == human["preference"])
    for category, g in cats.groupby("category"):
        assert f"{category} {g['same'].mean():.3f} ({len(g)})" in per, per
    bad = tmp_path / "bad.csv"
    bad.write_text("item,who\n")
    refused = run_cli(
        ["human-alignment", "--store", str(store), "--run-id", "j", "--human", str(bad)], env, cwd=store, timeout_s=120
    )
    assert refused.returncode == 2 and "missing column(s) item_id, preference, system_id" in refused.stderr
