"""Dataset generation (EmergentTTS-Eval section 3.1, appendix A) end to end against fake LLM servers on loopback,
through the real openai client, on the session's Prefect server (the pure parts are
tests/unit/test_generate_dataset.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.support import gen_fakes
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.gen_fakes import KEY, llm_spec, responder
from ttseval.core.errors import DatasetError
from ttseval.core.store import ArtifactStore
from ttseval.corpus import catalog
from ttseval.corpus import generation as g


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


def run(fake: FakeOpenAI, store: Path, **kw):
    from ttseval.flows.generate_dataset import generate_dataset

    return generate_dataset(llm=llm_spec(fake), store=str(store), **{"breadth": 2, "breadth_batch": 2} | kw)


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
    keyed_env: dict[str, str], fake: FakeOpenAI, tmp_path: Path
) -> None:
    from tests.support import instant
    from tests.support.harness import run_cli

    cats = tmp_path / "cats.toml"
    cats.write_text(
        'version = "tiny-v1"\n[categories.questions]\ndescription = "Questions."\n'
        'diversity = ["tag questions"]\nrefinement = ["append a question"]\nmax_chars = 400\n'
    )
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"category": "questions", "text": "The ferry leaves at noon, doesn\'t it?"}\n')
    store = tmp_path / "store"
    # the evaluate's clips heard by the instant recogniser and MOS predictor: what is tested is the dataset by version
    # (on the keyed cluster: its worker has the fake server's key, KEY)
    env = keyed_env | instant.ENV
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


def test_gemini_wire_format_serves_generation_too(api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.fake_gemini import FakeGemini
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
