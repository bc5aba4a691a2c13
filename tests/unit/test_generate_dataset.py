"""Dataset generation (EmergentTTS-Eval section 3.1, appendix A): the pure parts checked by hand, a resumed run's
calls and the CLI's refusal of a bad seed file before any call. The flow end to end against fake LLM servers on
loopback, through the real openai client, is tests/e2e/test_generate_dataset_flow.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.support.fake_openai import FakeOpenAI
from tests.support.gen_fakes import KEY, llm_spec, responder
from ttseval.core.errors import ConfigError, DatasetError
from ttseval.core.protocols import LLMRequest, LLMResult
from ttseval.core.store import ArtifactStore
from ttseval.corpus import generation as g


@pytest.fixture
def fake():
    with FakeOpenAI(responder) as server:
        yield server


# -- pure parts -------------------------------------------------------------------------------------------------
def test_bundled_spec_has_the_papers_six_categories() -> None:
    spec = g.load_spec()
    assert list(spec.categories) == [
        "questions",
        "foreign_words",
        "paralinguistics",
        "emotions",
        "syntactic_complexity",
        "complex_pronunciation",
    ]
    assert [n for n, c in spec.categories.items() if c.grammar_repair] == ["foreign_words"]
    assert spec.categories["complex_pronunciation"].tongue_twister_repeats == 6
    assert len(spec.categories["complex_pronunciation"].subcategories) == 6  # appendix A.6's six kinds


def test_plan_breadth_rotates_criteria_and_spreads_subcategories() -> None:
    cat = g.load_spec().categories["complex_pronunciation"]
    calls = g.plan_breadth(cat, total=12, batch=5)
    assert [c.count for c in calls] == [5, 5, 2]
    assert [c.lead for c in calls] == cat.diversity[:3]
    subs = [s for c in calls for s in c.subcategories]
    assert subs == cat.subcategories * 2  # 12 items over 6 subcategories: two each, in order


def test_tongue_twister_rule_repeats_six_times() -> None:
    text = g.repeat_twister("The sixth sick sheikh's sixth sheep's sick", 6)
    assert text.count("The sixth sick sheikh's sixth sheep's sick.") == 6
    assert text == " ".join(["The sixth sick sheikh's sixth sheep's sick."] * 6)


def test_refinement_method_is_seeded_per_item_and_depth() -> None:
    cat = g.load_spec().categories["questions"]
    picks = [g.pick_method(cat, f"questions-b0-{i}", d, seed=0) for i in range(30) for d in (1, 2, 3)]
    assert picks == [g.pick_method(cat, f"questions-b0-{i}", d, seed=0) for i in range(30) for d in (1, 2, 3)]
    assert set(picks) == set(cat.refinement)  # all three of the category's methods get used


def test_near_duplicates_hand_worked_and_lineage_exempt() -> None:
    # Indel ratio by hand: "abcd" vs "abce" -> LCS 3, distance (4-3)+(4-3) = 2 over 8 characters -> 75.0
    found = g.near_duplicates(["abcd", "abce"], ["r1", "r2"], threshold=70)
    assert found[0] is None and found[1] == (0, pytest.approx(75.0))
    assert g.near_duplicates(["abcd", "abce"], ["r1", "r2"], threshold=80) == [None, None]
    # Punctuation and case are ignored; the same lineage is never compared (a refinement contains its parent).
    assert g.near_duplicates(["Hello, World!", "hello world"], ["a", "b"], threshold=99)[1] == (0, 100.0)
    assert g.near_duplicates(["Hello, World!", "hello world"], ["a", "a"], threshold=99) == [None, None]


def test_statistics_match_a_hand_computation() -> None:
    items = pd.DataFrame({"category": ["a", "a", "b"], "text": ["one two three", "four", "five six"]})
    stats = g.dataset_statistics(items, words_per_minute=120).set_index("category")
    # words 3 and 1 -> mean 2; 120 wpm = 2 words/s -> 1.5 s and 0.5 s
    assert stats.loc["a", ["n_items", "words_min", "words_mean", "words_max"]].tolist() == [2, 1, 2.0, 3]
    assert stats.loc["a", ["chars_min", "chars_max"]].tolist() == [4, 13]
    assert stats.loc["a", ["est_audio_s_min", "est_audio_s_mean", "est_audio_s_max"]].tolist() == [0.5, 1.0, 1.5]
    assert stats.loc["overall", "chars_mean"] == pytest.approx(np.mean([13, 4, 8]))


def test_spec_errors_name_the_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "cats.toml"
    bad.write_text('version = "x"\n[categories.mine]\ndescription = "d"\ndiversity = []\nrefinement = ["r"]\n')
    with pytest.raises(ConfigError, match=r"cats.toml.*diversity"):
        g.load_spec(bad)
    with pytest.raises(ConfigError, match="no \\[categories"):
        (tmp_path / "empty.toml").write_text('version = "x"\n')
        g.load_spec(tmp_path / "empty.toml")


def test_seed_errors_name_the_line_and_fix(tmp_path: Path) -> None:
    from ttseval.corpus.generation import read_seeds

    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(
        '{"category": "questions", "text": "Why?"}\n{"category": "jokes", "text": "x"}\n'
        '{"category": "questions", "text": "  "}\n'
    )
    with pytest.raises(DatasetError) as e:
        read_seeds(seeds, g.load_spec())
    assert "line 2: category 'jokes' is not in the category set" in str(e.value)
    assert "line 3: text is missing or empty" in str(e.value)
    # Blank lines are skipped but counted, so the line named is the line an editor shows.
    seeds.write_text(
        '{"category": "questions", "text": "Why?"}\n\n\n{"category": 7, "text": "x"}\n'
        '{"category": "questions", "text": "Who?", "seed_id": "b0-1"}\n'
    )
    with pytest.raises(DatasetError) as e:
        read_seeds(seeds, g.load_spec())
    assert "line 4: category 7 is not in the category set" in str(e.value)
    assert "line 5: seed_id 'b0-1' looks like a generated item's id" in str(e.value)


def test_interrupted_run_resumes_without_repeating_finished_calls(
    fake: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttseval.providers.llm.openai_compat import OpenAICompatLLM
    from ttseval.tasks.llm import CallStats, cached_generate

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    llm = OpenAICompatLLM("fake-gen-model", base_url=fake.base_url, concurrency="1")
    store = ArtifactStore(str(tmp_path / "store"))
    requests = [LLMRequest(parts=(f"Write 1 short tongue twisters {i}",), schema=g.TwisterAnswer) for i in range(6)]
    real = llm.generate

    def crash_on_fourth(batch: list[LLMRequest]) -> list[LLMResult]:
        if "twisters 3" in batch[0].text:
            raise KeyboardInterrupt("killed mid-way")
        return real(batch)

    monkeypatch.setattr(llm, "generate", crash_on_fourth)
    with pytest.raises(KeyboardInterrupt):
        cached_generate(store, llm, requests)
    first = fake.calls
    assert 3 <= first <= 4  # calls 0-2 finished; the pool may have started one more before it was cancelled
    monkeypatch.setattr(llm, "generate", real)
    stats = CallStats()
    results = cached_generate(store, llm, requests, stats)
    assert fake.calls == 6  # across both runs each request was sent exactly once
    assert (stats.made, stats.cached) == (6 - first, first)
    assert [r.cached for r in results][:3] == [True, True, True] and not results[3].cached
    assert all(r.ok and len(r.data.tongue_twisters) == 1 for r in results)


def test_cli_bad_seed_file_exits_2_before_any_call(fake: FakeOpenAI, tmp_path: Path) -> None:
    from tests.support.harness import DEAD_API, cli_env, run_cli

    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"category": "questions", "text": "Why?"}\n{"category": "weather", "text": "Rain."}\n')
    result = run_cli(
        ["generate-dataset", "--seeds", str(seeds), "--llm", llm_spec(fake), "--store", str(tmp_path / "store")],
        cli_env(DEAD_API, OPENAI_API_KEY=KEY),
        tmp_path,
    )
    assert result.returncode == 2
    assert "line 2: category 'weather' is not in the category set" in result.stderr
    assert fake.calls == 0 and not (tmp_path / "store").exists()
