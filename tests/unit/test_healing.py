"""Failures that heal: only a documented PermanentProviderError is final; anything else is recomputed next run.

The stages run as plain functions over a local store (the flows only wire them): plan with `missing = wanted -
present`, run every shard, read the table back. Test providers (tests/support/healing.py) are loaded through the
`plugins` setting, as a user's would be. Backoff is 0, so retries cost no time.
"""

from __future__ import annotations

import logging
from datetime import UTC
from pathlib import Path

import pandas as pd
import pytest

from tests.support.healing import CALLS, SPEC, items_frame, run_synthesis, settings_for, synthesis
from ttseval.core.registry import Spec
from ttseval.tasks.parts import get_store
from ttseval.tasks.plan import plan_synthesis
from ttseval.tasks.synthesize import synthesize_items

ITEMS = [
    ("a", "plain words one"),
    ("b", "a bug here"),
    ("c", "plain words two"),
    ("d", "another bug there"),
    ("e", "never say this"),
]


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


def test_a_bug_is_retryable_and_a_fixed_provider_recomputes_exactly_those_keys(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ttseval"):
        assert run_synthesis(settings_for(tmp_path, "BuggyTTS"), ITEMS) == {"a", "b", "c", "d", "e"}
    first = synthesis(tmp_path)
    assert first["status"].to_dict() == {"a": "ok", "b": "failed", "c": "ok", "d": "failed", "e": "failed"}
    assert first["error_type"].fillna("").to_dict() == {
        "a": "",
        "b": "TypeError",
        "c": "",
        "d": "TypeError",
        "e": "PermanentProviderError",
    }
    assert first["retryable"].to_dict() == {"a": False, "b": True, "c": False, "d": True, "e": False}
    assert first.loc[["b", "d"], "attempt"].tolist() == [1, 1]  # a bug is not retried within the run
    assert sorted(CALLS) == sorted(t for _, t in ITEMS)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("TypeError" in w and "will be retried by the next run" in w for w in warnings)
    assert any(f"b/{SPEC.id}" in w for w in warnings) and any(f"d/{SPEC.id}" in w for w in warnings)

    CALLS.clear()
    assert run_synthesis(settings_for(tmp_path, "FixedTTS"), ITEMS) == {"b", "d"}
    assert sorted(CALLS) == ["a bug here", "another bug there"]
    healed = synthesis(tmp_path)
    assert healed["status"].to_dict() == {"a": "ok", "b": "ok", "c": "ok", "d": "ok", "e": "failed"}
    assert not healed["retryable"].any()
    assert healed.loc[["a", "c", "e"], "created_at"].tolist() == first.loc[["a", "c", "e"], "created_at"].tolist()

    CALLS.clear()
    assert run_synthesis(settings_for(tmp_path, "FixedTTS"), ITEMS) == set() and CALLS == []


def test_transient_errors_are_retried_within_the_run_and_what_still_fails_by_the_next_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    items = [("a", "plain words"), ("f", "flaky vendor"), ("g", "vendor down"), ("h", "also down")]
    with caplog.at_level(logging.WARNING, logger="ttseval"):
        assert run_synthesis(settings_for(tmp_path, "OutageTTS"), items) == {"a", "f", "g", "h"}
    warnings = sorted(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert len(warnings) == 2 and all(
        "TransientProviderError" in w and "after 3 attempt(s)" in w and "will be retried by the next run" in w
        for w in warnings
    )
    assert [f"g/{SPEC.id}" in w or f"h/{SPEC.id}" in w for w in warnings] == [True, True]
    # item_retries=2: 'flaky' healed on its 2nd attempt; 'down' tried 1 + 2 times, then recorded
    assert {t: CALLS.count(t) for t in set(CALLS)} == {
        "plain words": 1,
        "flaky vendor": 2,
        "vendor down": 3,
        "also down": 3,
    }
    first = synthesis(tmp_path)
    assert first["status"].to_dict() == {"a": "ok", "f": "ok", "g": "failed", "h": "failed"}
    assert first["attempt"].to_dict() == {"a": 1, "f": 2, "g": 3, "h": 3}
    assert first.loc[["g", "h"], "error_type"].tolist() == ["TransientProviderError"] * 2
    assert first["retryable"].to_dict() == {"a": False, "f": False, "g": True, "h": True}

    CALLS.clear()  # the outage is over
    assert run_synthesis(settings_for(tmp_path, "FixedTTS"), items) == {"g", "h"}
    assert sorted(CALLS) == ["also down", "vendor down"]
    assert synthesis(tmp_path)["status"].eq("ok").all()


def test_a_permanent_provider_error_is_final(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    items = [("a", "plain words"), ("e", "never say this")]
    with caplog.at_level(logging.INFO, logger="ttseval"):
        assert run_synthesis(settings_for(tmp_path, "BuggyTTS"), items) == {"a", "e"}
    assert CALLS.count("never say this") == 1  # not retried within the run either
    said = [r.getMessage() for r in caplog.records if "PermanentProviderError" in r.getMessage()]
    assert len(said) == 1 and "recorded as final" in said[0] and "retried" not in said[0]
    before = synthesis(tmp_path).loc["e"]
    assert (before["status"], before["error_type"], before["retryable"]) == ("failed", "PermanentProviderError", False)

    CALLS.clear()
    assert run_synthesis(settings_for(tmp_path, "FixedTTS"), items) == set()
    assert CALLS == []
    after = synthesis(tmp_path).loc["e"]
    assert (after["status"], after["created_at"]) == ("failed", before["created_at"])


def test_an_engine_that_cannot_start_fails_every_item_retryably(tmp_path: Path) -> None:
    broken = settings_for(tmp_path, "NoSuchClass")  # as a missing extra would: the provider cannot be built
    assert run_synthesis(broken, ITEMS[:3]) == {"a", "b", "c"}
    first = synthesis(tmp_path)
    assert first["status"].eq("failed").all() and first["retryable"].all() and CALLS == []
    assert run_synthesis(settings_for(tmp_path, "FixedTTS"), ITEMS[:3]) == {"a", "b", "c"}
    assert synthesis(tmp_path)["status"].eq("ok").all()


def test_judging_heals_a_judge_bug_and_pairs_skipped_for_a_clip_that_was_still_coming(tmp_path: Path) -> None:
    from ttseval.core.schemas import table_from_rows
    from ttseval.tasks.judge import PAIRWISE, judge_shard, plan_judge

    base = Spec.parse("flite-like")
    settings = settings_for(tmp_path, "BuggyTTS", plugins={"judge": {"heal-judge": "tests.support.healing:BuggyJudge"}})
    store = get_store(settings.store)
    store.write_part(
        "r",
        "items",
        table_from_rows(
            "items",
            [{"item_id": i, "text": t, "language": "en-US", "category": "questions", "depth": 0} for i, t in ITEMS],
        ),
    )
    run_synthesis(settings, ITEMS)  # b, d: retryable (bug); e: final (permanent)
    baseline_rows = [
        {
            "item_id": i,
            "system_id": base.id,
            "system_spec": base.canonical,
            "status": "ok",
            "created_at": pd.Timestamp.now(tz="UTC"),
            "audio_sha256": synthesis(tmp_path).loc["a", "audio_sha256"],
            "retryable": False,
            "attempt": 1,
        }
        for i, _ in ITEMS
    ]
    store.write_part("r", "synthesis", table_from_rows("synthesis", baseline_rows))

    def judge_all() -> set[str]:
        plan = plan_judge(PAIRWISE, store, "r", [SPEC.id, base.id], "heal-judge", settings, baseline_id=base.id)
        for shard in plan.shards:
            judge_shard(PAIRWISE, settings, "r", shard)
        return {w["item_id"] for shard in plan.shards for w in shard["work"]}

    def judgments() -> pd.DataFrame:
        return store.read("r", "judgments").set_index("item_id").sort_index()

    CALLS.clear()
    assert judge_all() == {"a", "b", "c", "d", "e"}
    j = judgments()
    # shard 1 (a, b): the judge's bug fails a's request; b has no candidate clip yet; shard 2 (c, d): judged
    assert j["status"].to_dict() == {"a": "failed", "b": "skipped", "c": "ok", "d": "skipped", "e": "skipped"}
    assert j["retryable"].to_dict() == {"a": True, "b": True, "c": False, "d": True, "e": False}
    assert j.loc["a", "error_type"] == "TypeError"

    run_synthesis(settings_for(tmp_path, "FixedTTS"), ITEMS)  # b and d get their clips
    CALLS.clear()
    assert judge_all() == {"a", "b", "d"}
    assert sorted(CALLS) == ["judge a", "judge b", "judge d"]
    assert judgments()["status"].to_dict() == {"a": "ok", "b": "ok", "c": "ok", "d": "ok", "e": "skipped"}
    assert judge_all() == set()


def test_transcription_failures_heal_except_a_reference_that_normalizes_to_nothing(tmp_path: Path) -> None:
    from ttseval.tasks.stages import TRANSCRIPTS, run_stage

    settings = settings_for(
        tmp_path,
        "FixedTTS",
        plugins={"asr": {"heal-asr": "tests.support.healing:EchoASR"}},
        asr={"en": "heal-asr", "*": "heal-asr"},
    )
    # 1 word, 2 words, 1 word of punctuation only, 4 words (the ASR's TypeError), 5 words (one result short)
    items = [("p", "plain"), ("q", "plain plain"), ("x", "?!"), ("t", "one two three four"), ("s", "a b c d e")]
    run_synthesis(settings, items)
    clips = synthesis(tmp_path)
    work = [
        {
            "item_id": i,
            "system_id": SPEC.id,
            "audio_sha256": clips.loc[i, "audio_sha256"],
            "language": "en-US",
            "text": t,
        }
        for i, t in items
    ]
    CALLS.clear()
    run_stage(TRANSCRIPTS, settings, "r", work[:3], label="ok-and-empty")
    run_stage(TRANSCRIPTS, settings, "r", work[3:4], label="asr-bug")
    run_stage(TRANSCRIPTS, settings, "r", work[4:], label="short-batch")
    t = get_store(settings.store).read("r", "transcripts").set_index("item_id").sort_index()
    assert t["status"].to_dict() == {"p": "ok", "q": "ok", "s": "failed", "t": "failed", "x": "failed"}
    assert t["error_type"].fillna("").to_dict() == {
        "p": "",
        "q": "",
        "s": "ValueError",
        "t": "TypeError",
        "x": "EmptyReference",
    }
    assert t["retryable"].to_dict() == {"p": False, "q": False, "s": True, "t": True, "x": False}
    assert "returned 0 result(s) for 1 request(s)" in t.loc["s", "error_message"]
    assert (t.loc["p", "wer"], t.loc["q", "wer"]) == (0.0, 0.0) and CALLS == ["asr 3", "asr 1", "asr 1"]

    # Dask runs the three tasks again (the worker holding their results died before the next stage read them):
    # each finds its first attempt's part by a label derived from its keys, writes no settled key again (before:
    # every row twice in the raw parts) and supersedes the retryable ones it computed again.
    CALLS.clear()
    folder = tmp_path / "runs" / "r" / "transcripts"
    parts = set(folder.glob("part-*.parquet"))
    again = [
        run_stage(TRANSCRIPTS, settings, "r", w, label=label)
        for w, label in ((work[:3], "ok-and-empty"), (work[3:4], "asr-bug"), (work[4:], "short-batch"))
    ]
    assert [r.n_rows for r in again] == [0, 1, 1] and CALLS == ["asr 1", "asr 1"]  # p, q, x: from the ASR cache
    assert len(set(folder.glob("part-*.parquet")) - parts) == 2
    assert sorted(pd.read_parquet(folder)["item_id"]) == ["p", "q", "s", "t", "x"]  # raw: one row per key


def test_a_judge_outage_leaves_failed_rows_that_the_next_run_asks_again(tmp_path: Path) -> None:
    # Before: an unreachable Gemini judge returned parse_ok=False verdicts stored as ok/ParseFailure, never healed.
    from ttseval.core.schemas import table_from_rows
    from ttseval.tasks.judge import PAIRWISE, judge_shard, plan_judge

    base = Spec.parse("flite-like")
    settings = settings_for(
        tmp_path, "FixedTTS", plugins={"judge": {"heal-judge": "tests.support.healing:UnreachableJudge"}}
    )
    store = get_store(settings.store)
    store.write_part(
        "r",
        "items",
        table_from_rows(
            "items",
            [{"item_id": i, "text": t, "language": "en-US", "category": "questions", "depth": 0} for i, t in ITEMS[:2]],
        ),
    )
    run_synthesis(settings, ITEMS[:2])
    sha = synthesis(tmp_path).loc["a", "audio_sha256"]
    store.write_part(
        "r",
        "synthesis",
        table_from_rows(
            "synthesis",
            [
                {
                    "item_id": i,
                    "system_id": base.id,
                    "system_spec": base.canonical,
                    "status": "ok",
                    "audio_sha256": sha,
                    "created_at": pd.Timestamp.now(tz="UTC"),
                    "retryable": False,
                    "attempt": 1,
                }
                for i, _ in ITEMS[:2]
            ],
        ),
    )

    def judge_all() -> set[str]:
        plan = plan_judge(PAIRWISE, store, "r", [SPEC.id, base.id], "heal-judge", settings, baseline_id=base.id)
        for shard in plan.shards:
            judge_shard(PAIRWISE, settings, "r", shard)
        return {w["item_id"] for shard in plan.shards for w in shard["work"]}

    assert judge_all() == {"a", "b"}
    j = store.read("r", "judgments").set_index("item_id").sort_index()
    assert j["status"].tolist() == ["failed", "failed"] and j["retryable"].all()
    assert set(j["error_type"]) == {"JudgeUnreachable"} and j["error_message"].str.contains("503").all()
    assert judge_all() == {"a", "b"}  # the next run asks again, and this time the judge answers
    j = store.read("r", "judgments").set_index("item_id").sort_index()
    assert j["status"].tolist() == ["ok", "ok"] and j["winner"].notna().all()
    assert judge_all() == set()


def test_a_shard_run_again_after_its_worker_died_calls_nothing_for_what_it_committed(tmp_path: Path) -> None:
    """Dask runs a finished task again when the worker holding its result dies before the next stage took it
    (16 synthesis calls made twice in a trial). The second attempt finds the first one's part by the shard's
    label and calls the provider only for keys that did not settle (a retryable failure)."""
    settings = settings_for(tmp_path, "BuggyTTS")
    plan = plan_synthesis(get_store(settings.store), "r", items_frame(ITEMS), [SPEC], settings)
    first = [synthesize_items(settings, "r", shard) for shard in plan.shards]
    calls = list(CALLS)
    parts = sorted((tmp_path / "runs" / "r" / "synthesis").iterdir())
    again = [synthesize_items(settings, "r", shard) for shard in plan.shards]  # the same shards, run again
    retried = CALLS[len(calls) :]
    # only the retryable failures (b, d: the TypeError) were asked again, each with its own retries
    assert set(retried) == {t for i, t in ITEMS if i in ("b", "d")}
    assert [r.work for r in again] == [r.work for r in first]  # the next stages get the same clips
    new_parts = sorted(set((tmp_path / "runs" / "r" / "synthesis").iterdir()) - set(parts))
    assert len(new_parts) == 2  # the shards holding b and d; the shard of a and c alone wrote nothing
    assert sum(r.n_rows for r in again) == 2
    table = synthesis(tmp_path)  # no key twice in the raw parts: b and d's old rows were superseded
    assert len(table) == len(ITEMS)


def test_every_clip_passes_quality_gates_or_its_row_names_the_ones_it_failed(tmp_path: Path) -> None:
    items = [
        (k, f"this {k} clip has words enough to predict a duration")
        for k in ("fine", "nan", "loud", "cut", "rambling", "rate")
    ]
    run_synthesis(settings_for(tmp_path, "BrokenAudioTTS"), items)
    table = synthesis(tmp_path)
    assert (table["status"] == "ok").all()  # broken audio is still a clip: scored, and flagged
    flags = table["audio_flags"].fillna("").to_dict()
    # 'rate': 22050 Hz where the provider declares 16000 (its duration, 0.73 of the prediction, passes)
    assert flags == {
        "fine": "",
        "nan": "nan",
        "loud": "clipped",
        "cut": "too_short",
        "rambling": "too_long",
        "rate": "sample_rate",
    }
    from datetime import datetime

    from ttseval.core.schemas import table_from_rows
    from ttseval.tasks.report import RunTables, audio_checks_markdown

    store = get_store(str(tmp_path))
    store.write_part(
        "r",
        "items",
        table_from_rows(
            "items",
            [
                {
                    "item_id": i,
                    "text": t,
                    "language": "en-US",
                    "category": "questions",
                    "depth": 0,
                    "created_at": datetime.now(UTC),
                }
                for i, t in items
            ],
        ),
    )
    section = audio_checks_markdown(RunTables.read(store, "r"), {})
    assert "## Audio checks" in section
    assert "| system | clips | clipped | nan | sample_rate | too_long | too_short |" in section
    assert f"| {SPEC.id} | 6 | 1 | 1 | 1 | 1 | 1 |" in section
