"""Dataset generation (EmergentTTS-Eval section 3.1, appendix A) end to end against fake LLM servers on loopback,
through the real openai client, plus the pure parts checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests import gen_fakes
from tests.fake_openai import FakeOpenAI, Reply
from ttseval.core.errors import ConfigError, DatasetError
from ttseval.core.protocols import LLMRequest, LLMResult
from ttseval.core.store import ArtifactStore
from ttseval.corpus import catalog
from ttseval.corpus import generation as g

KEY = "sk-test-generation-key-0123456789"


def responder(request):
    return gen_fakes.answer(request.text(), request.system_text())


@pytest.fixture
def fake():
    with FakeOpenAI(responder) as server:
        yield server


@pytest.fixture
def api(prefect_api: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The session's Prefect server for flows run in this process. Set through Prefect's settings context, not the
    environment: once prefect is imported (by an earlier test in this worker), a changed PREFECT_API_URL variable
    is not read, and the flow would start Prefect's ephemeral server (which timed out once on a loaded machine)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with temporary_settings({PREFECT_API_URL: prefect_api}):
        yield prefect_api


def llm_spec(fake: FakeOpenAI, **extra: str) -> str:
    opts = {"base_url": fake.base_url, "backoff_s": "0.01", "max_retries": "2"} | extra
    return "openai:fake-gen-model:" + ":".join(f"{k}={v}" for k, v in opts.items())


def run(fake: FakeOpenAI, store: Path, **kw):
    from ttseval.flows.generate_dataset import generate_dataset

    return generate_dataset(llm=llm_spec(fake), store=str(store), **{"breadth": 2, "breadth_batch": 2} | kw)


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


# -- the flow against the fake server -----------------------------------------------------------------------------
def test_grows_seeds_into_depths_0_to_3_with_lineage_and_stats_then_reruns_with_zero_calls(
    api: str, fake: FakeOpenAI, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    first = run(fake, store)
    spec = g.load_spec()
    # 6 breadth calls (2 items each) + 1 tongue-twister call; 12 seeds + 12 new + 1 twister = 25 roots, of which
    # 24 are refined 3 times (twisters are not), and 2 foreign-words roots get a repair after each of 3 steps...
    n_roots = 12 + 6 * 2 + 1
    n_foreign = 2 + 2
    assert first["items_by_depth"] == {0: n_roots, 1: n_roots - 1, 2: n_roots - 1, 3: n_roots - 1}
    assert fake.calls == 6 + 1 + 3 * (n_roots - 1) + 3 * n_foreign
    assert first["calls"]["made"] == fake.calls and first["calls"]["cached"] == 0
    assert first["n_failed"] == 0 and first["created"]

    folder = Path(first["uri"])
    items = pd.read_parquet(folder / "items.parquet")
    assert set(items["category"]) == set(spec.categories)
    by_id = items.set_index("item_id")
    for row in items[items["depth"] > 0].itertuples():
        parent = by_id.loc[row.parent_id]
        assert parent["depth"] == row.depth - 1 and parent["root_id"] == row.root_id
        assert row.text.startswith(parent["text"].removesuffix(" (repaired)")[:40])
        assert (
            row.method.startswith("refine: ")
            and row.method.removeprefix("refine: ") in spec.categories[row.category].refinement
        )
        assert row.generator_model == "fake-gen-model" and row.temperature == 1.0
        assert row.prompt_version.startswith(g.REFINE_PROMPT_VERSION) and len(row.prompt_hash.split("+")[0]) == 16
    foreign = items[(items["category"] == "foreign_words") & (items["depth"] > 0)]
    assert foreign["repaired"].all() and foreign["text"].str.endswith("(repaired)").all()
    assert (foreign["text_before_repair"] + " (repaired)").tolist() == foreign["text"].tolist()
    twister = items[items["method"] == "tongue-twister"]
    assert len(twister) == 1 and twister["text"].iloc[0].count("Six amber sheep shear amber sheets.") == 6
    seeds = items[items["method"] == "seed"]
    assert len(seeds) == 12 and (seeds["source"] == "human").all() and seeds["generator_model"].isna().all()

    stats = pd.read_parquet(folder / "stats.parquet").set_index("category")
    assert stats.loc["overall", "n_items"] == len(items)
    assert stats.loc["questions", "chars_max"] == items.loc[items["category"] == "questions", "text"].str.len().max()
    assert "est. audio s" in (folder / "stats.md").read_text()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["ref"] == first["ref"] and manifest["n_items"] == len(items)
    assert KEY not in "".join(p.read_text(errors="ignore") for p in store.rglob("*") if p.is_file())

    calls_before = fake.calls
    again = run(fake, store)
    assert fake.calls == calls_before  # every call answered by the cache
    assert again["calls"] == {
        "made": 0,
        "cached": calls_before,
        "failed": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
    }
    assert again["ref"] == first["ref"] and not again["created"]


def test_malformed_refused_duplicate_and_failed_calls_are_rows_with_reasons(
    api: str, fake: FakeOpenAI, tmp_path: Path
) -> None:
    # breadth of questions is refused; one emotions refinement never parses; a paralinguistics breadth item
    # copies a seed; one syntactic refinement gets a 400.
    fake.script("Category: questions.", [Reply.refusal("I can't write questions about that.")])
    # Seeds also appear as examples in breadth prompts; "<<<" marks the item a refinement prompt rewrites.
    fake.script('<<<\n"Fine, go then," he muttered', [Reply.malformed()] * 3)
    fake.script(
        "Category: paralinguistics.",
        [
            Reply.ok(
                {
                    "items": [
                        {"text": "Psst... over here! No, HERE. Ugh... never mind.", "diversity_aspect": "copy"},
                        {
                            "text": "Tick-tock, tick-tock, the clock in the hall would not stop.",
                            "diversity_aspect": "onomatopoeia",
                        },
                    ]
                }
            )
        ],
    )
    fake.script("<<<\nThe parcel the courier", [Reply.error(400, message="bad request")])
    fake.script("Category: emotions.", [Reply.ok({"items": [{"text": '"Oh. You came back," she said flatly.'}]})])
    result = run(fake, tmp_path / "store")
    generation = pd.read_parquet(Path(result["uri"]) / "generation.parquet").set_index("item_id")
    failed = generation[generation["status"] == "failed"]

    refused = failed.loc["questions-b0-0"]
    assert refused["error_type"] == "refusal" and "I can't write questions" in refused["error_message"]
    broken = failed.loc["emotions-e2-d1"]
    assert broken["error_type"] == "unparseable" and "after 3 attempt(s)" in broken["error_message"]
    assert failed.loc["emotions-e2-d2", "error_type"] == "parent_failed"
    assert failed.loc["emotions-e2-d3", "error_message"].startswith("not refined: its parent emotions-e2-d2")
    dup = failed.loc["paralinguistics-b0-0"]
    assert dup["error_type"] == "duplicate" and "near-duplicate of paralinguistics-p1" in dup["error_message"]
    assert generation.loc["paralinguistics-b0-1", "status"] == "ok"
    http = failed.loc["syntactic_complexity-s1-d1"]
    assert http["error_type"] == "transport" and "400" in http["error_message"]
    assert result["failed_by_reason"] == {
        "parent_failed": 2 + 2 + 3 + 3 + 3,
        "refusal": 1,
        "unparseable": 2,
        "duplicate": 1,
        "transport": 1,
    }
    items = pd.read_parquet(Path(result["uri"]) / "items.parquet")
    assert (items["status"] == "ok").all() and len(items) == len(generation) - len(failed)
    # emotions' breadth answer held 1 of the 2 items asked for: the missing one is a row, not a silent gap
    short = failed.loc["emotions-b0-1"]
    assert short["error_type"] == "unparseable" and "the answer held 1 of 2 items" in short["error_message"]

    # The refusal and the unparseable answer were answers: cached. The 400 was not: the next run asks again.
    before = fake.calls
    rerun = run(fake, tmp_path / "store", version="v2")
    assert fake.calls - before == 1 + 2  # the 400'd refinement now succeeds, and its two descendants are made
    assert rerun["failed_by_reason"].get("transport") is None


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


def test_user_category_from_data(api: str, fake: FakeOpenAI, tmp_path: Path) -> None:
    cats = tmp_path / "mine.toml"
    cats.write_text(
        'version = "mine-v1"\nlanguage = "en-GB"\nwords_per_minute = 150\n'
        '[categories.sports_commentary]\ndescription = "Fast live commentary."\n'
        'diversity = ["football", "cricket"]\nrefinement = ["add a second incident"]\n'
        "min_chars = 10\nmax_chars = 2000\n"
    )
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"category": "sports_commentary", "text": "And he shoots, and it is in the back of the net!"}\n')
    result = run(
        fake, tmp_path / "store", seeds=str(seeds), categories=str(cats), depth_steps=2, name="sports", version="v1"
    )
    assert result["ref"] == "sports@v1" and result["items_by_depth"] == {0: 3, 1: 3, 2: 3}
    items = pd.read_parquet(Path(result["uri"]) / "items.parquet")
    assert set(items["language"]) == {"en-GB"} and set(items["category"]) == {"sports_commentary"}
    assert "Category: sports_commentary. Fast live commentary." in fake.requests[0].text()


def test_a_frozen_version_is_never_changed(api: str, fake: FakeOpenAI, tmp_path: Path) -> None:
    store = tmp_path / "store"
    run(fake, store, version="v1", depth_steps=1)
    with pytest.raises(DatasetError, match="dataset generated@v1 is frozen and holds other items"):
        run(fake, store, version="v1", depth_steps=2)
    st = ArtifactStore(str(store))
    ref, items, _sha = catalog.resolve(st, "generated@latest")
    assert ref == "generated@v1" and set(items["depth"]) == {0, 1}
    with pytest.raises(DatasetError, match=r"generated@v9 is not in store .* \(versions: v1\)"):
        catalog.resolve(st, "generated@v9")


# -- the CLI, and evaluate on a generated dataset by its version ---------------------------------------------------
def test_cli_generates_then_evaluate_runs_on_the_dataset_by_version(
    prefect_api: str, fake: FakeOpenAI, tmp_path: Path
) -> None:
    from tests.conftest import cli_env, run_cli

    cats = tmp_path / "cats.toml"
    cats.write_text(
        'version = "tiny-v1"\n[categories.questions]\ndescription = "Questions."\n'
        'diversity = ["tag questions"]\nrefinement = ["append a question"]\nmax_chars = 400\n'
    )
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"category": "questions", "text": "The ferry leaves at noon, doesn\'t it?"}\n')
    store = tmp_path / "store"
    env = cli_env(prefect_api, OPENAI_API_KEY=KEY)
    args = [
        "generate-dataset",
        "--seeds",
        str(seeds),
        "--categories",
        str(cats),
        "--llm",
        llm_spec(fake),
        "--name",
        "tiny",
        "--version",
        "v1",
        "--breadth",
        "1",
        "--depth-steps",
        "1",
        "--store",
        str(store),
    ]
    result = run_cli(args, env, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dataset tiny@v1: 4 items by depth {0: 2, 1: 2}" in result.stdout
    assert "LLM calls: 3 made, 0 from the cache" in result.stdout
    assert "evaluate it: ttseval evaluate --dataset tiny@v1" in result.stdout
    again = run_cli(args, env, tmp_path)
    assert again.returncode == 0 and "LLM calls: 0 made, 3 from the cache" in again.stdout
    assert "unchanged: this version existed" in again.stdout and fake.calls == 3

    evaluated = run_cli(
        [
            "evaluate",
            "--dataset",
            "tiny@latest",
            "--systems",
            "flite:slt",
            "--judges",
            "",
            "--store",
            str(store),
            "--run-id",
            "on-generated",
            "--workers",
            "1",
        ],
        env,
        tmp_path,
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    st = ArtifactStore(str(store))
    run_items = st.read("on-generated", "items")
    assert sorted(run_items["item_id"]) == ["questions-b0-0", "questions-b0-0-d1", "questions-s1", "questions-s1-d1"]
    assert run_items.set_index("item_id").loc["questions-s1-d1", "parent_id"] == "questions-s1"
    synthesis = st.read("on-generated", "synthesis")
    assert len(synthesis) == 4 and set(synthesis["status"]) == {"ok"}
    [log] = list((store / "runs" / "on-generated" / "log").iterdir())
    record = json.loads(log.read_text())
    assert record["dataset"] == "tiny@v1"  # (given as tiny@latest: the log names the version that ran)
    assert (
        record["dataset_sha256"]
        == __import__("hashlib").sha256((store / "datasets" / "tiny" / "v1" / "items.parquet").read_bytes()).hexdigest()
    )

    missing = run_cli(
        ["evaluate", "--dataset", "tiny@v7", "--systems", "flite:slt", "--store", str(store)], env, tmp_path
    )
    assert missing.returncode == 2 and "dataset tiny@v7 is not in store" in missing.stderr
    assert "(versions: v1)" in missing.stderr


def test_cli_bad_seed_file_exits_2_before_any_call(prefect_api: str, fake: FakeOpenAI, tmp_path: Path) -> None:
    from tests.conftest import cli_env, run_cli

    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"category": "questions", "text": "Why?"}\n{"category": "weather", "text": "Rain."}\n')
    result = run_cli(
        ["generate-dataset", "--seeds", str(seeds), "--llm", llm_spec(fake), "--store", str(tmp_path / "store")],
        cli_env(prefect_api, OPENAI_API_KEY=KEY),
        tmp_path,
    )
    assert result.returncode == 2
    assert "line 2: category 'weather' is not in the category set" in result.stderr
    assert fake.calls == 0 and not (tmp_path / "store").exists()


def test_gemini_wire_format_serves_generation_too(api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fake_gemini import FakeGemini
    from ttseval.flows.generate_dataset import generate_dataset

    monkeypatch.setenv("GEMINI_API_KEY", "AIza-fake-generation-key")
    with FakeGemini(responder=lambda r: gen_fakes.answer(r.text(), r.system_text())) as gem:
        result = generate_dataset(
            llm=f"gemini:gemini-2.5-flash:base_url={gem.base_url}:backoff_s=0.01",
            store=str(tmp_path / "store"),
            breadth=1,
            breadth_batch=1,
            depth_steps=1,
        )
        # 6 breadth + 1 twister calls; 12 seeds + 6 new refined once; 2 + 1 foreign-words items repaired
        assert gem.ok_responses == 6 + 1 + 18 + 3
        repair = next(r for r in gem.requests if r.system_text())
        assert "copy editor" in repair.system_text() and repair.response_schema()["properties"].keys() == {
            "text_to_synthesize"
        }
    assert result["items_by_depth"] == {0: 19, 1: 18} and result["n_failed"] == 0
    items = pd.read_parquet(Path(result["uri"]) / "items.parquet")
    assert set(items.loc[items["source"] == "llm", "generator_model"]) == {"gemini-2.5-flash"}
