"""Core: spec parsing and the registry, settings, ids, and dataset checks (plain functions, no Prefect)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from ttseval.core.categories import CATEGORIES
from ttseval.core.config import Settings, load_settings
from ttseval.core.errors import ConfigError, DatasetError, SpecError
from ttseval.core.ids import digest
from ttseval.core.registry import Spec
from ttseval.corpus import DEMO_DATASET
from ttseval.corpus.items import load_items, unknown_categories


@pytest.mark.parametrize(
    ("text", "provider", "voice", "options", "canonical"),
    [
        ("piper:joe", "piper", "joe", (), "piper:joe"),
        ("espeak-ng", "espeak-ng", None, (), "espeak-ng"),
        (
            "espeak-ng:en-us:speed=140:pitch=40",
            "espeak-ng",
            "en-us",
            (("pitch", "40"), ("speed", "140")),
            "espeak-ng:en-us:pitch=40:speed=140",
        ),
        ("  flite:slt ", "flite", "slt", (), "flite:slt"),
        ("transformers:/models/w2v", "transformers", "/models/w2v", (), "transformers:/models/w2v"),
        (
            "gemini:gemini-2.5-pro:base_url=http://127.0.0.1:8080:temperature=0",
            "gemini",
            "gemini-2.5-pro",
            (("base_url", "http://127.0.0.1:8080"), ("temperature", "0")),
            "gemini:gemini-2.5-pro:base_url=http://127.0.0.1:8080:temperature=0",
        ),
        ("objective:cer_margin=0.3", "objective", None, (("cer_margin", "0.3"),), "objective:cer_margin=0.3"),
    ],
)
def test_spec_parse_and_canonical_form(text, provider, voice, options, canonical) -> None:
    spec = Spec.parse(text)
    assert (spec.provider, spec.voice, spec.options, spec.canonical) == (provider, voice, options, canonical)
    assert Spec.parse(spec.canonical) == spec


def test_system_id_is_readable_and_ignores_option_order() -> None:
    a = Spec.parse("espeak-ng:en-us:speed=140:pitch=40")
    b = Spec.parse("espeak-ng:en-us:pitch=40:speed=140")
    assert a.id == b.id and a.id.startswith("espeak-ng-en-us-") and len(a.id.split("-")[-1]) == 8
    assert Spec.parse("espeak-ng:en-us:speed=141").id != a.id
    # the hash is sha256 of the canonical JSON of the parameters (sorted keys, no spaces), worked out independently
    # here: the JSON written out by hand, hashed with hashlib
    canonical = '{"options":{"pitch":"40","speed":"140"},"provider":"espeak-ng","voice":"en-us"}'
    assert a.id == "espeak-ng-en-us-" + hashlib.sha256(canonical.encode()).hexdigest()[:8]
    assert digest({"b": 1, "a": 2}) == digest({"a": 2, "b": 1})


@pytest.mark.parametrize("bad", ["", ":joe", "piper:joe:amy", "piper:speed=1:speed=2"])
def test_spec_parse_refuses_malformed(bad: str) -> None:
    with pytest.raises(SpecError):
        Spec.parse(bad)


def test_settings_precedence_env_over_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "ttseval.toml"
    toml.write_text('shard_size = 5\nstore = "s3://bucket/x"\n[asr]\n"*" = "transformers:/models/mms"\n')
    monkeypatch.setenv("TTSEVAL_CONFIG", str(toml))
    monkeypatch.setenv("TTSEVAL_SHARD_SIZE", "11")
    settings = Settings()
    assert settings.shard_size == 11 and settings.store == "s3://bucket/x"
    assert settings.asr_for("de-DE") == "transformers:/models/mms"
    assert settings.asr_for("en-US") == "faster-whisper:tiny.en"  # the TOML table named only '*'
    assert load_settings(shard_size=3).shard_size == 3


def test_a_relative_store_is_the_clients_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolved where the settings are made, so a worker with another working folder writes to the client's."""
    monkeypatch.delenv("TTSEVAL_STORE", raising=False)
    monkeypatch.delenv("TTSEVAL_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert Settings().store == str(tmp_path / "artifacts")  # the default, ./artifacts
    assert load_settings(store="runs/../mine").store == str(tmp_path / "mine")
    assert load_settings(store="s3://bucket/a/../b").store == "s3://bucket/a/../b"  # a key prefix is left as given


def test_settings_defaults_route_asr_by_language(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TTSEVAL_CONFIG", raising=False)
    settings = Settings()
    assert settings.asr_for("en-GB") == "faster-whisper:tiny.en"
    assert settings.asr_for("fr-FR") == "faster-whisper:base"


def test_bad_settings_are_config_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TTSEVAL_SHARD_SIZE", "0")
    with pytest.raises(ConfigError, match="shard_size"):
        load_settings()
    monkeypatch.delenv("TTSEVAL_SHARD_SIZE")
    monkeypatch.setenv("TTSEVAL_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="not a file"):
        load_settings()


def test_demo_dataset_is_valid_and_shaped_as_promised() -> None:
    items = load_items(DEMO_DATASET, categories=set(CATEGORIES))
    counts = items["category"].value_counts()
    for category in (
        "emotions",
        "paralinguistics",
        "foreign_words",
        "syntactic_complexity",
        "complex_pronunciation",
        "questions",
    ):
        assert counts[category] >= 8
        assert sorted(items.loc[items["category"] == category, "depth"].unique()) == [0, 1, 2, 3]
    assert (items["language"] != "en-US").sum() >= 5
    children = items[items["parent_id"].notna()]
    parents = items.set_index("item_id")
    assert (parents.loc[children["parent_id"], "depth"].to_numpy() == children["depth"].to_numpy() - 1).all()


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_dataset_formats_load_alike(tmp_path: Path, suffix: str) -> None:
    frame = pd.DataFrame(
        [
            {"item_id": "q1", "text": "Is it?", "language": "en", "category": "questions", "depth": 1},
            {"item_id": "7", "text": "Oui.", "language": "fr-FR", "category": "multilingual", "depth": 0},
        ]
    )
    path = tmp_path / f"d{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in frame.to_dict("records")))
    elif suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path)
    items = load_items(path, categories=set(CATEGORIES))
    assert items["item_id"].tolist() == ["q1", "7"] and items["depth"].tolist() == [1, 0]
    assert items["instruction"].isna().all()


def test_dataset_problems_are_all_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("item_id,text,language,category,depth\na,Hi,en,questions,0\na,,zz-QQ,poetry,9\n")
    with pytest.raises(DatasetError) as info:
        load_items(path, categories=set(CATEGORIES))
    assert len(info.value.problems) == 4  # duplicate id, empty text, unknown language, depth 9 ('poetry' is a group)
    message = str(info.value)
    assert "rule 'item_id is unique' (column item_id) fails on 2 row(s)" in message
    assert "rule 'depth is between 0 and 3' (column depth)" in message
    assert "category" not in message


def test_known_categories_in_any_spelling_are_stored_canonically(tmp_path: Path) -> None:
    # Spelled as the EmergentTTS-Eval release spells them, which `evaluate` must accept.
    path = tmp_path / "release.csv"
    path.write_text(
        "item_id,text,language,category,depth\n"
        "a,Is it?,en,Questions,0\nb,We ate croissants.,en,Foreign Words,1\n"
        "c,Call 555-0100.,en,Complex Pronunciation,2\nd,Hi there.,en,  syntactic-complexity ,0\n"
        "e,A line.,en,My Own Group,0\nf,Another.,en,complex pronunciation,3\n"
    )
    items = load_items(path)
    assert items["category"].tolist() == [
        "questions",
        "foreign_words",
        "complex_pronunciation",
        "syntactic_complexity",
        "My Own Group",
        "complex_pronunciation",
    ]
    assert unknown_categories(items, set(CATEGORIES)) == ["My Own Group"]


def test_an_empty_category_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "blank.csv"
    path.write_text("item_id,text,language,category,depth\na,Hi,en,questions,0\nb,Yo,en, ,0\n")
    with pytest.raises(
        DatasetError,
        match=r"rule 'category is non-empty' \(column category\) fails on 1 row\(s\): "
        r"row 2 \(item_id='b'\)",
    ):
        load_items(path)


def test_dataset_bad_json_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"item_id": "a"}\n{oops\n')
    with pytest.raises(DatasetError, match="line 2 is not valid JSON"):
        load_items(path, categories=set(CATEGORIES))


def test_a_nested_setting_changes_only_the_key_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    # The README's TTSEVAL_ASR__EN=... replaced the whole asr table, and the run was refused for lack of '*'.
    from ttseval.core.config import load_settings

    monkeypatch.setenv("TTSEVAL_ASR__EN", "faster-whisper:base")
    monkeypatch.setenv("TTSEVAL_ASR__FR", "transformers:/models/fr")
    settings = load_settings()
    assert settings.asr == {"en": "faster-whisper:base", "fr": "transformers:/models/fr", "*": "faster-whisper:base"}
    assert settings.asr_for("en-GB") == "faster-whisper:base"
    assert settings.asr_for("fr-CA") == "transformers:/models/fr"
    assert settings.asr_for("ps-AF") == "faster-whisper:base"


def test_a_toml_asr_table_keeps_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ttseval.core.config import load_settings

    config = tmp_path / "ttseval.toml"
    config.write_text('[asr]\nhi = "transformers:/models/hi"\n')
    monkeypatch.setenv("TTSEVAL_CONFIG", str(config))
    settings = load_settings()
    assert settings.asr == {"en": "faster-whisper:tiny.en", "hi": "transformers:/models/hi", "*": "faster-whisper:base"}
    assert settings.asr_for("eng") == "faster-whisper:tiny.en"  # ISO 639-2 'eng' is English


@pytest.mark.parametrize(
    ("from_hz", "to_hz", "n"), [(22050, 48000, 22050), (48000, 16000, 4801), (16000, 22050, 1), (24000, 16000, 0)]
)
def test_resample_is_librosas_default_without_librosa(from_hz: int, to_hz: int, n: int) -> None:
    """Audio.resampled calls soxr directly; librosa.resample's default (soxr_hq, fixed length) is the independent
    computation it must equal, sample for sample."""
    import librosa
    import numpy as np

    from ttseval.core.audio import Audio

    rng = np.random.default_rng(7)
    samples = (0.3 * np.sin(np.arange(n) * 0.05) + 0.05 * rng.standard_normal(n)).astype(np.float32)
    ours = Audio(samples, from_hz).resampled(to_hz)
    theirs = librosa.resample(samples, orig_sr=from_hz, target_sr=to_hz)
    assert ours.sample_rate_hz == to_hz and ours.samples.dtype == np.float32
    assert len(ours.samples) == len(theirs)
    np.testing.assert_array_equal(ours.samples, theirs)


def test_resample_refuses_what_librosa_refused() -> None:
    import numpy as np

    from ttseval.core.audio import resample

    with pytest.raises(ValueError, match="NaN or infinite"):
        resample(np.array([0.1, np.nan, 0.2], dtype=np.float32), 16000, 22050)
    with pytest.raises(ValueError, match=r"mono samples \(one dimension\), got shape \(2, 3\)"):
        resample(np.zeros((2, 3), dtype=np.float32), 16000, 22050)
