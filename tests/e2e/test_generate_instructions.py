"""InstructTTSEval instruction generation: captions (audio in), APS / DSD / RP rows, Table 8 dropout, the call cache,
failures as rows, and the frozen dataset read back by the evaluate flow. The LLMs are the real openai client against
tests/support/fake_openai.py on loopback; the flow runs in this process against the session's Prefect server. The
parts without a flow are tests/unit/test_instruction_dropout.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.support.captions import caption_of, value, wav_bytes
from tests.support.fake_openai import FakeOpenAI, OpenAIRequest, Reply
from tests.support.harness import cli_env, run_cli
from ttseval.corpus import instructions as ins

REFS = ("r1", "r2", "r3")
TEXTS = {
    "r1": "The tide comes in twice a day.",
    "r2": "Nobody told me the meeting moved.",
    "r3": "Put the kettle on, would you?",
}


def write_refs(folder: Path) -> tuple[Path, dict[bytes, str]]:
    (folder / "clips").mkdir(parents=True)
    lines, by_bytes = [], {}
    for k, ref in enumerate(REFS):
        data = wav_bytes(300.0 + 150 * k)
        (folder / "clips" / f"{ref}.wav").write_bytes(data)
        by_bytes[data] = ref
        lines.append({"ref_id": ref, "audio": f"clips/{ref}.wav", "text": TEXTS[ref], "language": "en-US"})
    manifest = folder / "references.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return manifest, by_bytes


def kind(request: OpenAIRequest) -> str:
    if request.audio_parts():
        return "caption"
    if "role-play directions" in request.text():
        return "rp"
    if "style directions" in request.text():
        return "dsd"
    return "other"


def ref_in(text: str) -> str:
    return re.search(r"-val-(r\d)", text).group(1)


class Model:
    """A cooperative model, except for the failures it is told to produce."""

    def __init__(
        self, by_bytes: dict[bytes, str], refuse_caption: str | None = None, malformed_rp: str | None = None
    ) -> None:
        self.by_bytes, self.refuse_caption, self.malformed_rp = by_bytes, refuse_caption, malformed_rp

    def __call__(self, request: OpenAIRequest):
        k = kind(request)
        if k == "caption":
            ref = self.by_bytes[request.audio_parts()[0]]
            return Reply.refusal() if ref == self.refuse_caption else caption_of(ref)
        ref = ref_in(request.text())
        if k == "dsd":
            return {
                "instructions": [f"Directive {j} for {ref}: warm, unhurried and close to the ear." for j in range(3)]
            }
        if k == "rp":
            if ref == self.malformed_rp:
                return Reply.malformed()
            return {
                "reasoning": f"The voice of {ref} suggests a patient teacher.",
                "instructions": [f"Role {j} for {ref}: a lighthouse keeper greeting visitors." for j in range(3)],
            }
        return None


def seed_with_dropout() -> int:
    """A seed under which at least one test reference loses some features (so the DSD check means something)."""
    for seed in range(100):
        if any(len(ins.dropout(ins.FEATURES, ins.dropout_rng(seed, r))[1]) < 12 for r in REFS):
            return seed
    raise AssertionError("no seed drops anything")


SEED = seed_with_dropout()


@pytest.fixture(scope="module")
def prefect_env(prefect_api: str):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: prefect_api}):
        yield prefect_api
        from prefect.logging.handlers import APILogHandler

        APILogHandler().flush()  # send the last log lines while the server is still up


def specs(fake: FakeOpenAI) -> tuple[str, str]:
    return (
        f"openai:fake-audio-llm:base_url={fake.base_url}:backoff_s=0.01",
        f"openai:fake-text-llm:base_url={fake.base_url}:backoff_s=0.01",
    )


@pytest.fixture(scope="module")
def first_run(prefect_env: str, tmp_path_factory: pytest.TempPathFactory):
    from ttseval.flows.generate_instructions import generate_instructions

    folder = tmp_path_factory.mktemp("instructions")
    manifest, by_bytes = write_refs(folder)
    store = folder / "store"
    with FakeOpenAI(Model(by_bytes)) as fake:
        caption_llm, instruct_llm = specs(fake)
        result = generate_instructions(
            references=str(manifest), caption_llm=caption_llm, instruct_llm=instruct_llm, seed=SEED, store=str(store)
        )
        calls = fake.calls
        yield {
            "result": result,
            "fake": fake,
            "store": store,
            "manifest": manifest,
            "by_bytes": by_bytes,
            "calls": calls,
            "specs": (caption_llm, instruct_llm),
            "folder": folder,
            "api": prefect_env,
        }


def generation(store: Path, ref: str) -> pd.DataFrame:
    name, version = ref.split("@")
    return pd.read_parquet(store / "datasets" / name / version / "generation.parquet")


# -- the main run ----------------------------------------------------------------------------------------------
def test_three_references_give_nine_items_with_lineage(first_run) -> None:
    result, store = first_run["result"], first_run["store"]
    assert result["n_items"] == 9 and result["n_failed"] == 0
    assert result["items_by_task"] == {"APS": 3, "DSD": 3, "RP": 3}
    assert first_run["calls"] == 9 and result["calls"]["made"] == 9 and result["calls"]["cached"] == 0
    rows = generation(store, result["ref"])
    assert list(rows["item_id"]) == [f"{r}-{t}" for r in REFS for t in ins.TASKS]
    assert (rows["category"] == "instruction_following").all() and (rows["depth"] == 0).all()
    assert (rows["parent_id"] == rows["root_id"]).all()
    assert list(rows["root_id"]) == [r for r in REFS for _ in ins.TASKS]
    assert list(rows["method"]) == ["caption", "dsd", "rp"] * 3
    assert list(rows["text"]) == [TEXTS[r] for r in REFS for _ in ins.TASKS]
    assert (rows["language"] == "en-US").all()
    assert list(rows["generator_model"]) == ["fake-audio-llm", "fake-text-llm", "fake-text-llm"] * 3
    assert list(rows["prompt_version"]) == ["caption-v1+aps-v1", "dsd-v1", "rp-v1"] * 3
    assert rows["prompt_hash"].str.fullmatch(r"[0-9a-f]{16}").all() and rows["llm_id"].notna().all()
    assert list(rows["temperature"]) == [0.0, 1.0, 1.0] * 3
    # the fake counts 1000 prompt tokens of text; a caption also hears its 0.25 s reference clip: ceil(2.5) = 3
    # audio tokens at OpenAI's 10 per second (tests/support/fake_openai.py)
    assert list(rows["input_tokens"]) == [1003, 1000, 1000] * 3 and (rows["output_tokens"] == 50).all()
    for r in rows.itertuples():
        assert json.loads(r.caption) == caption_of(r.root_id)
    # the reference clip is in the store, byte for byte
    for r in rows.itertuples():
        assert (
            r.reference_audio_uri
            and (first_run["folder"] / "clips" / f"{r.root_id}.wav").read_bytes()
            == Path(r.reference_audio_uri.removeprefix("file://")).read_bytes()
        )
    version = result["ref"].split("@")[1]
    manifest = json.loads((store / "datasets" / "instructions" / version / "manifest.json").read_text())
    assert manifest["seed"] == SEED and manifest["calls"]["made"] == 9
    assert [s["prob"] for s in manifest["dropout_sets"]] == [0.5, 0.25, 0.25]
    assert "| APS | 3 |" in result["stats_markdown"] and "| overall | 9 |" in result["stats_markdown"]


def test_captions_are_asked_with_the_exact_reference_audio(first_run) -> None:
    fake = first_run["fake"]
    captions = [r for r in fake.requests if kind(r) == "caption"]
    assert len(captions) == 3
    assert {r.audio_parts()[0] for r in captions} == set(first_run["by_bytes"])
    for r in captions:
        assert len(r.audio_parts()) == 1 and r.audio_formats() == ["wav"]
        assert r.model == "fake-audio-llm" and r.body["temperature"] == 0.0
        assert r.response_format()["json_schema"]["name"] == "Caption"
        assert set(r.response_format()["json_schema"]["schema"]["required"]) == set(ins.FEATURES)
        assert all(f in r.text() for f in ins.FEATURES)
    for r in fake.requests:
        if kind(r) != "caption":
            assert r.model == "fake-text-llm" and not r.audio_parts()


def test_aps_instruction_is_the_caption(first_run) -> None:
    rows = generation(first_run["store"], first_run["result"]["ref"])
    for r in rows[rows["task"] == "APS"].itertuples():
        for f in ins.FEATURES:
            assert f"{ins.LABELS[f]}: {value(f, r.root_id)}." in r.instruction
        assert r.features == ",".join(ins.FEATURES)


def test_dsd_prompt_holds_only_the_kept_features(first_run) -> None:
    rows = generation(first_run["store"], first_run["result"]["ref"])
    prompts = {ref_in(r.text()): r.text() for r in first_run["fake"].requests if kind(r) == "dsd"}
    dropped_somewhere = False
    for r in rows[rows["task"] == "DSD"].itertuples():
        number, kept = ins.dropout(ins.FEATURES, ins.dropout_rng(SEED, r.root_id))
        assert r.dropout_set == number and r.features == ",".join(kept)
        prompt = prompts[r.root_id]
        for f in ins.FEATURES:
            if f in kept:
                assert f"{ins.LABELS[f]}: {value(f, r.root_id)}" in prompt
            else:
                dropped_somewhere = True
                assert f"{f}-val-" not in prompt and f"{ins.LABELS[f]}:" not in prompt
        options = json.loads(r.diversity_aspect)
        assert r.instruction == options["instructions"][options["chosen"]] and len(options["instructions"]) == 3
        assert options["chosen"] == ins.pick_index(SEED, r.root_id, "DSD")
        assert pd.isna(r.reasoning)
    assert dropped_somewhere


def test_rp_keeps_the_reasoning_and_the_alternatives(first_run) -> None:
    rows = generation(first_run["store"], first_run["result"]["ref"])
    rp_requests = [r for r in first_run["fake"].requests if kind(r) == "rp"]
    assert all(value(f, ref_in(r.text())) in r.text() for r in rp_requests for f in ins.FEATURES)
    assert all(
        set(r.response_format()["json_schema"]["schema"]["required"]) == {"reasoning", "instructions"}
        for r in rp_requests
    )
    for r in rows[rows["task"] == "RP"].itertuples():
        assert r.reasoning == f"The voice of {r.root_id} suggests a patient teacher."
        options = json.loads(r.diversity_aspect)
        assert r.instruction == options["instructions"][options["chosen"]]
        assert r.instruction.startswith(f"Role {ins.pick_index(SEED, r.root_id, 'RP')} for {r.root_id}")


def test_rerun_through_the_cli_makes_no_calls_and_gives_the_same_ref(first_run) -> None:
    fake, result = first_run["fake"], first_run["result"]
    caption_llm, instruct_llm = first_run["specs"]
    before = fake.calls
    done = run_cli(
        [
            "generate-instructions",
            "--references",
            str(first_run["manifest"]),
            "--caption-llm",
            caption_llm,
            "--instruct-llm",
            instruct_llm,
            "--seed",
            str(SEED),
            "--store",
            str(first_run["store"]),
        ],
        cli_env(first_run["api"]),
        cwd=first_run["folder"],
        timeout_s=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert fake.calls == before
    assert f"dataset {result['ref']}: 9 items" in done.stdout
    assert "LLM calls: 0 made, 9 from the cache" in done.stdout
    assert "(unchanged: this version existed)" in done.stdout
    assert f"evaluate it: ttseval evaluate --dataset {result['ref']} --instruction-judges" in done.stdout


def test_the_evaluate_flow_reads_the_frozen_dataset(first_run) -> None:
    from ttseval.core.config import load_settings
    from ttseval.core.store import ArtifactStore
    from ttseval.corpus import catalog
    from ttseval.corpus.items import read_items

    ref = first_run["result"]["ref"]
    items, _sha, read = read_items(ref, load_settings(store=str(first_run["store"])))
    assert read == ref
    assert len(items) == 9 and set(items["task"]) == {"APS", "DSD", "RP"} and items["instruction"].str.strip().all()
    assert (items["category"] == "instruction_following").all() and items["reference_audio_uri"].notna().all()
    resolved, frame, _ = catalog.resolve(ArtifactStore(str(first_run["store"])), "instructions@latest")
    assert resolved == ref and list(frame["item_id"]) == list(items["item_id"])


# -- failures are rows -----------------------------------------------------------------------------------------
def test_a_refused_caption_and_a_malformed_rp_fail_their_rows_only(prefect_env: str, tmp_path: Path) -> None:
    from ttseval.flows.generate_instructions import generate_instructions

    manifest, by_bytes = write_refs(tmp_path)
    with FakeOpenAI(Model(by_bytes, refuse_caption="r2", malformed_rp="r3")) as fake:
        caption_llm, instruct_llm = specs(fake)
        result = generate_instructions(
            references=str(manifest),
            caption_llm=caption_llm,
            instruct_llm=instruct_llm,
            seed=SEED,
            store=str(tmp_path / "store"),
        )
        # 3 captions, DSD and RP for r1 and r3 (r3's RP asked 3 times), nothing for r2 after its refusal
        assert fake.calls == 3 + 2 + 1 + 3
    assert result["n_items"] == 5 and result["n_failed"] == 4
    assert result["failed_by_reason"] == {"refusal": 3, "unparseable": 1}
    rows = generation(tmp_path / "store", result["ref"]).set_index("item_id")
    for task in ins.TASKS:
        r = rows.loc[f"r2-{task}"]
        assert r["status"] == "failed" and r["error_type"] == "refusal"
        assert "caption of reference r2" in r["error_message"] and "refusal" in r["error_message"]
    r = rows.loc["r3-RP"]
    assert r["status"] == "failed" and r["error_type"] == "unparseable" and r["error_message"].startswith("RP call:")
    assert "3 attempt" in r["error_message"] and r["prompt_hash"]
    assert (rows.drop(index=["r2-APS", "r2-DSD", "r2-RP", "r3-RP"])["status"] == "ok").all()
