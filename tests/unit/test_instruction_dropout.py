"""InstructTTSEval instruction generation, the parts without a flow: the validation of generated rows and of a
references manifest, Table 8's dropout sets and draws, and the prompts and their rendering. The flow itself is
tests/e2e/test_generate_instructions.py."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from tests.support.captions import caption_of, wav_bytes
from ttseval.core.errors import DatasetError
from ttseval.corpus import instructions as ins


def test_validation_fails_empty_instructions() -> None:
    from ttseval.tasks.generate_instructions import screen

    rows = [
        {"item_id": "a-DSD", "task": "DSD", "instruction": "  ", "text": "Hi.", "status": "ok"},
        {"item_id": "a-XX", "task": "XX", "instruction": "Be calm.", "text": "Hi.", "status": "ok"},
        {"item_id": "a-RP", "task": "RP", "instruction": "A pirate.", "text": "Hi.", "status": "ok"},
        {
            "item_id": "b-RP",
            "task": "RP",
            "instruction": None,
            "text": None,
            "status": "failed",
            "error_type": "refusal",
        },
    ]
    out = {r["item_id"]: r for r in screen(rows)}
    assert out["a-DSD"]["error_type"] == "validation" and "instruction is non-empty" in out["a-DSD"]["error_message"]
    assert out["a-XX"]["error_type"] == "validation" and "task is APS, DSD or RP" in out["a-XX"]["error_message"]
    assert out["a-RP"]["status"] == "ok" and out["b-RP"]["error_type"] == "refusal"


def test_bad_manifest_rows_are_named_with_line_field_and_fix(tmp_path: Path) -> None:
    from ttseval.corpus.instructions import read_references

    (tmp_path / "ok.wav").write_bytes(wav_bytes(440))
    (tmp_path / "not.wav").write_text("hello")
    rows = [
        {"ref_id": "a", "audio": "ok.wav", "text": "Hello there.", "language": "en"},
        {"ref_id": "a", "audio": "missing.wav", "text": "", "language": "xx-nonsense-1"},
        {"ref_id": "c d", "audio": "not.wav", "text": "Fine.", "language": "en"},
    ]
    manifest = tmp_path / "refs.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError) as e:
        read_references(manifest)
    msg = str(e.value)
    assert "line 2: ref_id 'a' is used twice" in msg and "line 2: audio 'missing.wav': no such file" in msg
    assert "line 2: text is missing" in msg and "line 2: language" in msg
    assert "line 3: ref_id 'c d'" in msg and "line 3: audio 'not.wav': cannot be read as audio" in msg
    assert "line 1" not in msg


# -- dropout (InstructTTSEval appendix B, Table 8) ------------------------------------------------------------------
def test_dropout_sets_are_table_8() -> None:
    # InstructTTSEval Table 8 ("Weights"): set probabilities and per-feature keep probabilities.
    table8 = {
        "probs": (0.5, 0.25, 0.25),
        "gender": (1.0, 0.5, 0.5),
        "pitch": (1.0, 0.5, 0.5),
        "speed": (1.0, 0.5, 0.5),
        "volume": (1.0, 0.5, 0.5),
        "age": (1.0, 0.8, 0.5),
        "clarity": (1.0, 0.5, 0.5),
        "fluency": (1.0, 0.5, 0.5),
        "accent": (1.0, 0.8, 0.5),
        "texture": (1.0, 0.8, 0.5),
        "emotion": (1.0, 1.0, 0.8),
        "tone": (1.0, 1.0, 0.8),
        "personality": (1.0, 1.0, 0.8),
    }
    assert tuple(s.prob for s in ins.DROPOUT_SETS) == table8["probs"]
    assert [s.number for s in ins.DROPOUT_SETS] == [1, 2, 3]
    for f in ins.FEATURES:
        assert tuple(s.keep[f] for s in ins.DROPOUT_SETS) == table8[f]
    assert list(ins.FEATURES) == list(table8)[1:]


def test_dropout_draws_are_reproducible() -> None:
    draws = [ins.dropout(ins.FEATURES, ins.dropout_rng(3, f"ref{i}")) for i in range(50)]
    assert draws == [ins.dropout(ins.FEATURES, ins.dropout_rng(3, f"ref{i}")) for i in range(50)]
    assert len(set(draws)) > 10  # and they differ between references
    assert draws != [ins.dropout(ins.FEATURES, ins.dropout_rng(4, f"ref{i}")) for i in range(50)]
    # a feature the caption did not describe is never kept; the others' fates do not depend on it
    no_accent = [f for f in ins.FEATURES if f != "accent"]
    partial = [ins.dropout(no_accent, ins.dropout_rng(3, f"ref{i}")) for i in range(50)]
    assert all("accent" not in kept for _, kept in partial)
    assert all(
        p == (n, tuple(f for f in k if f != "accent")) for p, (n, k) in zip(partial, draws) if set(k) != {"accent"}
    )


def test_dropout_frequencies_match_table_8() -> None:
    """Over 20,000 references the drawn sets follow probs 0.5 / 0.25 / 0.25 and, within each set, every feature is
    kept at its Table 8 weight; tolerance 4 binomial standard deviations."""
    n = 20000
    draws = [ins.dropout(ins.FEATURES, ins.dropout_rng(2024, f"ref-{i}")) for i in range(n)]
    sets = Counter(number for number, _ in draws)
    for s in ins.DROPOUT_SETS:
        sd = math.sqrt(s.prob * (1 - s.prob) / n)
        assert abs(sets[s.number] / n - s.prob) <= 4 * sd, (s.number, sets[s.number] / n)
        in_set = [kept for number, kept in draws if number == s.number]
        for f in ins.FEATURES:
            p, m = s.keep[f], len(in_set)
            rate = sum(f in kept for kept in in_set) / m
            if p == 1.0:
                assert rate == 1.0, (s.number, f)
            else:
                assert abs(rate - p) <= 4 * math.sqrt(p * (1 - p) / m), (s.number, f, rate)
    # marginal keep rate of a feature: sum over sets of prob x weight (e.g. gender 0.5 + 0.125 + 0.125 = 0.75)
    for f in ins.FEATURES:
        p = sum(s.prob * s.keep[f] for s in ins.DROPOUT_SETS)
        rate = sum(f in kept for _, kept in draws) / n
        assert abs(rate - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12, (f, rate)
    assert all(kept for _, kept in draws)


def test_prompts_and_rendering() -> None:
    cap = ins.Caption(**caption_of("r9") | {"accent": "  "})
    assert "accent" not in cap.described()
    aps = ins.render_aps(cap)
    assert aps.startswith("Gender: gender-val-r9 with a slight shift. Pitch:") and "Accent:" not in aps
    dsd = ins.dsd_prompt({"pitch": "very high", "emotion": "gleeful"}, "English")
    assert "- Pitch: very high" in dsd and "- Emotion: gleeful" in dsd and "Gender" not in dsd
    assert "all the characteristics above" in dsd and '{"instructions"' in dsd
    rp = ins.rp_prompt(cap.described(), "Chinese")
    assert '"reasoning"' in rp and "write in Chinese" in rp
    assert ins.pick_index(0, "a", "DSD") == ins.pick_index(0, "a", "DSD") in range(3)
    loose = ins.Caption.model_validate(caption_of("r1") | {"tone": None, "age": ["young", "adult"]})
    assert loose.age == "young; adult" and loose.tone == ""
