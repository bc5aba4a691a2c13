"""InstructTTSEval end to end: import the published format, synthesize with instructions, judge with Gemini
(fake server on loopback), score per task and language with the macro-average and the undecidable count."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tests.support import instant
from tests.support.harness import cli_env, run_cli


def test_instructttseval_import_evaluate_and_score(prefect_api: str, tmp_path: Path) -> None:
    from tests.support.fake_gemini import INSTRUCTION_OK, FakeGemini, Reply

    published = tmp_path / "en.parquet"  # the HF dataset's split file: id, text, APS, DSD, RP
    pq.write_table(
        pa.table(
            {
                "id": ["en_1", "en_2"],
                "text": ["No matter what, this will become public.", "Get out of my office, now."],
                "APS": ["Pitch: high. Speed: fast. Emotion: panic.", "Pitch: low. Speed: slow. Emotion: cold anger."],
                "DSD": ["A frightened young woman speaking quickly.", "A quiet, icy voice, barely above a whisper."],
                "RP": ["On the phone to emergency services after an accident.", "A boss firing someone he despises."],
            }
        ),
        published,
    )
    items = tmp_path / "items.jsonl"
    # a cluster of its own (the judge's key is this test's), the clips heard by the instant recogniser and MOS
    # predictor: what is tested is instruction following, not what a model hears
    env = cli_env(prefect_api, **instant.env({"tts": {"instructed-tone": "tests.support.fakes:InstructedToneTTS"}}))
    imported = run_cli(
        ["import-dataset", "--format", "instructttseval", str(published), "--out", str(items)],
        env,
        cwd=tmp_path,
        timeout_s=120,
    )
    assert imported.returncode == 0, imported.stderr
    assert "6 items" in imported.stdout

    key = "instr-key-2718"
    with FakeGemini() as fake:
        no = Reply.ok(INSTRUCTION_OK | {"follows": False})
        # en_2's APS item: both systems get 'false'; en_1's RP item: refusals (2 attempts x 2 systems): undecidable
        fake.script("Pitch: low. Speed: slow", [no, no])
        fake.script("emergency services", [Reply.refusal()] * 4)
        judge = f"gemini:gemini-2.5-pro:base_url={fake.base_url}:backoff_s=0.01:max_attempts=2"
        result = run_cli(
            [
                "evaluate",
                "--dataset",
                str(items),
                "--systems",
                "instructed-tone,flite:slt",
                "--store",
                str(tmp_path / "store"),
                "--run-id",
                "i",
                "--judges",
                "",
                "--instruction-judges",
                judge,
                "--new-store",
            ],  # a paid judge: the store is new on purpose
            env | {"GEMINI_API_KEY": key},
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "store" / "runs" / "i"
    s = pd.read_parquet(run / "synthesis").set_index(["system_spec", "item_id"])
    tone = s.loc["instructed-tone"]
    assert tone["audio_sha256"].nunique() == 6, "each instruction reached the provider"
    j = pd.read_parquet(run / "instruction_judgments")
    assert len(j) == 12 and set(j["task"]) == {"APS", "DSD", "RP"}
    assert j["follows"].isna().sum() == 2 and (~j["parse_ok"]).sum() == 2
    assert fake.pending() == {}
    # Worked by hand, per system: APS 1 true / 1 false -> 0.5; DSD 2/2 -> 1.0; RP 1 true, 1 undecidable -> 1.0;
    # macro = (0.5 + 1.0 + 1.0) / 3 = 0.833.
    report = (run / "report.md").read_text()
    assert "## Instruction following (InstructTTSEval)" in report
    assert "| instructed-tone | en-US | 50.0 | 100.0 | 100.0 | 83.3 | 1 |" in report
    assert "| flite:slt | en-US | 50.0 | 100.0 | 100.0 | 83.3 | 1 |" in report
    assert key not in report

    # A second instruction judge over a subset of the stored clips: one system, the APS items; nothing synthesized
    synth_parts = sorted(p.name for p in (run / "synthesis").iterdir())
    aps = sorted(pd.read_parquet(run / "items").query("task == 'APS'")["item_id"])
    with FakeGemini() as fake:
        judge = f"gemini:gemini-2.5-flash:base_url={fake.base_url}:backoff_s=0.01"
        result = run_cli(
            [
                "backfill-judge",
                "--store",
                str(tmp_path / "store"),
                "--run-id",
                "i",
                "--judge",
                judge,
                "--kind",
                "instruction",
                "--systems",
                "flite:slt",
                "--items",
                ",".join(aps),
            ],
            env | {"GEMINI_API_KEY": key},
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert fake.ok_responses == 2 and "computed 2" in result.stdout
        refused = run_cli(
            [
                "backfill-judge",
                "--store",
                str(tmp_path / "store"),
                "--run-id",
                "i",
                "--judge",
                judge,
                "--kind",
                "instruction",
                "--categories",
                "no-such-category",
            ],
            env | {"GEMINI_API_KEY": key},
            cwd=tmp_path,
        )
        assert refused.returncode == 2 and "no item of run 'i' matches" in refused.stderr
    assert sorted(p.name for p in (run / "synthesis").iterdir()) == synth_parts, "a backfill must not synthesize"
    j = pd.read_parquet(run / "instruction_judgments")
    new = j[j["judge_spec"].str.startswith("gemini:gemini-2.5-flash")]
    from ttseval.core.registry import Spec

    assert sorted(new["item_id"]) == aps and set(new["system_id"]) == {Spec.parse("flite:slt").id}
    assert set(new["task"]) == {"APS"} and new["follows"].all()
