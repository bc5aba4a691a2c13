"""Voice prompts, Seed-TTS-eval's meta.lst, and speaker similarity (SIM): the metric, the summary, the prompt as part
of a cloning system's request, the importer, and the refusal of unreadable prompts before anything is stored. The
Seed-TTS-eval run end to end, and a missing prompt refused by `ttseval evaluate`, are
tests/e2e/test_voice_cloning_cli.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.support.voices import PROMPT_TEXTS, TEXTS, speak
from ttseval.core.audio import Audio
from ttseval.core.errors import DatasetError
from ttseval.core.protocols import VoicePrompt
from ttseval.core.store import ArtifactStore
from ttseval.corpus.importers import import_seedtts, seedtts_ground_truth_manifest
from ttseval.metrics.similarity import cosine_similarity, similarity_summary

# -- the metric ------------------------------------------------------------------------------------------------


def test_cosine_similarity_matches_scipy_and_a_hand_worked_case() -> None:
    from scipy.spatial.distance import cosine

    assert cosine_similarity([1, 0], [1, 1]) == pytest.approx(1 / math.sqrt(2), abs=1e-12)  # by hand: 1 / (1 * 2^0.5)
    assert cosine_similarity([1, 2, 3], [-1, -2, -3]) == pytest.approx(-1.0)
    rng = np.random.default_rng(3)
    for _ in range(50):
        a, b = rng.normal(size=256), rng.normal(size=256)
        assert cosine_similarity(a, b) == pytest.approx(1 - cosine(a, b), abs=1e-12)
        assert cosine_similarity(3 * a, b) == pytest.approx(cosine_similarity(a, b), abs=1e-12)  # scale-free
    with pytest.raises(ValueError, match="all zeros"):
        cosine_similarity([0, 0], [1, 1])
    with pytest.raises(ValueError, match="one length"):
        cosine_similarity([1, 0, 0], [1, 1])
    with pytest.raises(ValueError, match="non-finite"):
        cosine_similarity([np.nan, 1], [1, 1])


def test_similarity_summary_is_per_encoder_and_system_and_skips_failed_rows() -> None:
    from ttseval.metrics.bootstrap import MIN_INTERVAL_ITEMS, bootstrap_mean_ci

    frame = pd.DataFrame(
        [
            {
                "encoder_id": "e1",
                "encoder_spec": "resemblyzer",
                "system_id": "a",
                "similarity": 0.9,
                "status": "ok",
                "reference": "prompt",
            },
            {
                "encoder_id": "e1",
                "encoder_spec": "resemblyzer",
                "system_id": "a",
                "similarity": 0.7,
                "status": "ok",
                "reference": "prompt",
            },
            {
                "encoder_id": "e1",
                "encoder_spec": "resemblyzer",
                "system_id": "a",
                "similarity": None,
                "status": "failed",
                "reference": "prompt",
            },
            {
                "encoder_id": "e2",
                "encoder_spec": "transformers-sv:x",
                "system_id": "a",
                "similarity": 0.2,
                "status": "ok",
                "reference": "voice",
            },
        ]
    )
    out = similarity_summary(frame, n_resamples=200, seed=1).set_index("encoder_id")
    assert out.loc["e1", "n"] == 2 and out.loc["e1", "sim"] == pytest.approx(0.8)  # (0.9 + 0.7) / 2
    ci = bootstrap_mean_ci([0.9, 0.7], n_resamples=200, seed=1, min_items=MIN_INTERVAL_ITEMS)
    assert np.isnan(ci.low) and out.loc[["e1"], ["sim_ci_low", "sim_ci_high"]].isna().all(axis=None)  # 2 < 10 clips
    assert out.loc["e2", "sim"] == pytest.approx(0.2) and out.loc["e2", "reference"] == "voice"  # never pooled


# -- prompts reach the systems that clone, and only those -----------------------------------------------------


class EchoCloner:
    """A 'perfect cloner' for the test: speaks by returning its voice prompt (or a tone without one)."""

    name = "echo-cloner"
    accepts_instruction = False
    clones_voice = True
    version = "1"

    def __init__(self) -> None:
        self.prompts: list[VoicePrompt | None] = []

    def supports_language(self, language: str) -> bool:
        return True

    def synthesize(self, text, language, voice=None, instruction=None, *, prompt: VoicePrompt | None = None) -> Audio:
        self.prompts.append(prompt)
        if prompt is not None:
            return prompt.audio
        return Audio((0.3 * np.sin(np.arange(8000) / 5)).astype(np.float32), 16000)

    def metadata(self) -> dict:
        return {"engine": "echo-cloner"}


class NoCloner(EchoCloner):
    clones_voice = False

    def synthesize(self, text, language, voice=None, instruction=None) -> Audio:  # takes no prompt
        return super().synthesize(text, language)


def test_a_cloning_system_gets_each_items_prompt_and_the_prompt_is_part_of_the_request_key(tmp_path: Path) -> None:
    from ttseval.core.audio import sha256_hex
    from ttseval.core.config import load_settings
    from ttseval.core.registry import Spec
    from ttseval.tasks.synthesize import synthesize_rows

    store = ArtifactStore(str(tmp_path / "store"))
    settings = load_settings(store=store.uri)
    voices = [Audio((0.2 * np.sin(np.arange(16000) * f)).astype(np.float32), 16000) for f in (0.05, 0.09)]
    shas = []
    for voice in voices:
        wav = voice.to_wav_bytes()
        shas.append(sha256_hex(wav))
        store.put_audio(wav, shas[-1])
    items = [
        {
            "item_id": "a",
            "text": "Same text.",
            "language": "en",
            "instruction": None,
            "prompt_audio_sha256": shas[0],
            "prompt_text": "first voice",
        },
        {
            "item_id": "b",
            "text": "Same text.",
            "language": "en",
            "instruction": None,
            "prompt_audio_sha256": shas[1],
            "prompt_text": "second voice",
        },
        {
            "item_id": "c",
            "text": "Same text.",
            "language": "en",
            "instruction": None,
            "prompt_audio_sha256": None,
            "prompt_text": None,
        },
    ]
    cloner = EchoCloner()
    rows = synthesize_rows(cloner, Spec.parse("echo"), items, settings, store)
    assert [p.text if p else None for p in cloner.prompts] == ["first voice", "second voice", None]
    # same text, three prompts: three requests (without the prompt in the key, b and c would reuse a's clip)
    assert [r["cache_hit"] for r in rows] == [False, False, False]
    assert [r["audio_sha256"] for r in rows[:2]] == shas  # the echo of each prompt, stored
    again = synthesize_rows(EchoCloner(), Spec.parse("echo"), items, settings, store)
    assert [r["cache_hit"] for r in again] == [True, True, True]
    plain = NoCloner()
    rows = synthesize_rows(plain, Spec.parse("plain"), items, settings, store)
    assert plain.prompts == [None, None, None]  # a system that does not clone never sees a prompt
    assert len({r["audio_sha256"] for r in rows}) == 1  # ... and speaks its own voice for all three
    assert "prompt" not in json.dumps(rows[0], default=str)


# -- the importer ----------------------------------------------------------------------------------------------


def test_seedtts_meta_lst_imports_with_prompts_resolved_and_bad_lines_named(tmp_path: Path) -> None:
    en = tmp_path / "seedtts_testset" / "en"
    (en / "prompt-wavs").mkdir(parents=True)
    (en / "meta.lst").write_text(
        "u1|Hello there.|prompt-wavs/p1.wav|Good morning to you.\n\n"
        "u2|Second prompt.|prompt-wavs/p2.wav|Target two.|wavs/u2.wav\n",
        encoding="utf-8",
    )
    items = import_seedtts(en / "meta.lst").set_index("item_id")
    assert list(items.index) == ["u1", "u2"]
    assert items.loc["u1", "text"] == "Good morning to you." and items.loc["u1", "prompt_text"] == "Hello there."
    assert items.loc["u1", "prompt_audio_uri"] == str((en / "prompt-wavs" / "p1.wav").resolve())
    assert items.loc["u1", "language"] == "en-US" and items.loc["u2", "benchmark"] == "seed-tts-eval/en"
    assert seedtts_ground_truth_manifest(en / "meta.lst") == [
        {"item_id": "u2", "path": str((en / "wavs/u2.wav").resolve())}
    ]

    bad = tmp_path / "other" / "meta.lst"
    bad.parent.mkdir()
    bad.write_text("u1|p|a.wav|t\nu2|only three|fields\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"line 2: 3 field\(s\)"):
        import_seedtts(bad)
    bad.write_text("u1|p|a.wav|t\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="--language"):  # the folder is neither en nor zh
        import_seedtts(bad)
    assert import_seedtts(bad, language="fr-FR")["language"].tolist() == ["fr-FR"]
    bad.write_text("u1|p|a.wav|t\nu1|p|b.wav|t2\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="u1 appear more than once"):
        import_seedtts(bad, language="en-US")


# -- reference voices and bad input, at the stage ------------------------------------------------------------------


def test_a_systems_reference_voice_is_the_reference_where_items_have_no_prompt(tmp_path: Path) -> None:
    from ttseval.core.audio import sha256_hex
    from ttseval.core.config import load_settings
    from ttseval.core.errors import ConfigError
    from ttseval.core.registry import Spec
    from ttseval.flows.common import register_items
    from ttseval.tasks.stages import SIMILARITY, run_stage
    from ttseval.tasks.voices import References, store_prompts, store_reference_voices

    for name, engine in (("voice", "espeak"), ("same", "espeak"), ("other", "flite"), ("prompt", "flite")):
        speak(engine, TEXTS["u1"] if name != "voice" else PROMPT_TEXTS["u2"], tmp_path / f"{name}.wav")
    store = ArtifactStore(str(tmp_path / "store"))
    system = Spec.parse("espeak-ng")
    settings = load_settings(store=store.uri, reference_voices={"espeak-ng": str(tmp_path / "voice.wav")})
    with pytest.raises(ConfigError, match="'flite' is not a system of this run"):
        store_reference_voices(
            store, "r", load_settings(store=store.uri, reference_voices={"flite": "x.wav"}), [system]
        )
    assert set(store_reference_voices(store, "r", settings, [system])) == {system.id}
    items = pd.DataFrame(
        [
            {
                "item_id": i,
                "text": TEXTS["u1"],
                "language": "en",
                "category": "c",
                "depth": 0,
                "prompt_audio_uri": str(tmp_path / "prompt.wav") if i == "with-prompt" else None,
            }
            for i in ("plain", "plain-2", "with-prompt")
        ]
    )
    items = store_prompts(store, items, source="test")
    register_items(store, "r", items)
    shas = {}
    for name in ("same", "other"):
        wav = Audio.from_wav_bytes((tmp_path / f"{name}.wav").read_bytes()).to_wav_bytes()
        shas[name] = sha256_hex(wav)
        store.put_audio(wav, shas[name])
    work = [
        {"item_id": "plain", "system_id": system.id, "audio_sha256": shas["same"]},
        {"item_id": "plain-2", "system_id": system.id, "audio_sha256": shas["other"]},
        {"item_id": "with-prompt", "system_id": system.id, "audio_sha256": shas["other"]},
        {"item_id": "plain", "system_id": "no-voice", "audio_sha256": shas["same"]},
    ]  # nothing to compare with
    result = run_stage(SIMILARITY, settings, "r", work)
    rows = store.read("r", "similarity").set_index("item_id")
    assert result.n_rows == 3 and set(rows["system_id"]) == {system.id}
    assert rows.loc["plain", "reference"] == rows.loc["plain-2", "reference"] == "voice"
    assert rows.loc["with-prompt", "reference"] == "prompt"  # the item's prompt comes first
    assert rows.loc["plain", "similarity"] > rows.loc["plain-2", "similarity"] + 0.15  # espeak voice vs flite
    assert rows.loc["with-prompt", "similarity"] > rows.loc["plain-2", "similarity"] + 0.15  # flite vs flite prompt
    assert References.read(store, "r").of("plain", "no-voice") is None


def test_an_unreadable_prompt_is_refused_naming_row_item_and_path_and_nothing_is_written(tmp_path: Path) -> None:
    from ttseval.tasks.voices import store_prompts

    (tmp_path / "not-audio.wav").write_text("hello")
    items = pd.DataFrame(
        [
            {"item_id": "a", "prompt_audio_uri": None},
            {"item_id": "b", "prompt_audio_uri": str(tmp_path / "missing.wav")},
            {"item_id": "c", "prompt_audio_uri": str(tmp_path / "not-audio.wav")},
        ]
    )
    store = ArtifactStore(str(tmp_path / "store"))
    with pytest.raises(DatasetError) as refused:
        store_prompts(store, items, source="items.jsonl")
    message = str(refused.value)
    assert "row 2 (item_id='b') prompt_audio_uri" in message and "missing.wav" in message
    assert "row 3 (item_id='c')" in message and "not-audio.wav" in message and "Fix:" in message
    assert not (tmp_path / "store" / "runs").exists()
