"""Script Fidelity Rate (metrics/script.py) against PashtoTTS-Bench section 3.3: one constructed case per rule,
and the script data checked against an independent implementation, the Unicode Script_Extensions property as the
`regex` package ships it."""

from __future__ import annotations

import math
import unicodedata

import numpy as np
import pytest
import regex

from ttseval.metrics.script import _data, _ranges, allowed_scripts, corpus_sfr, countable, script_fidelity

PASHTO = "نن سهار ما په بازار کې تازه ډوډۍ او خوږې مڼې واخیستې"  # 34 countable letters, all Perso-Arabic


def test_a_transcript_wholly_in_the_target_script_scores_1_and_a_latin_one_0() -> None:
    assert script_fidelity(PASHTO, "ps-AF") == 1.0
    assert script_fidelity("nan sahar ma pa bazar", "ps") == 0.0


def test_mixed_script_is_the_share_of_countable_characters_in_script() -> None:
    # 4 Perso-Arabic letters (نن + ما) and 3 Latin (bus): 4/7
    assert script_fidelity("نن bus ما", "ps") == pytest.approx(4 / 7)


def test_whitespace_is_excluded_from_both_sides() -> None:
    assert script_fidelity("ن\u00a0\tن\u2003x", "ps") == pytest.approx(2 / 3)  # NBSP, tab, em space not counted


def test_ascii_and_unicode_punctuation_are_excluded() -> None:
    # Arabic comma U+060C, Arabic question mark U+061F and Arabic full stop U+06D4 are in the Arabic block but are
    # punctuation; ASCII punctuation and symbols ("$", "!") are excluded too
    assert script_fidelity("ن، ن؟ ن۔ x! $", "ps") == pytest.approx(3 / 4)


def test_combining_diacritics_are_excluded() -> None:
    # fatha U+064E, shadda U+0651, superscript alef U+0670 (all combining class > 0) add nothing; a Latin
    # letter with a combining acute (NFC has no precomposed form for q + U+0301) counts once, as Latin
    assert script_fidelity("نَّٰ q\u0301", "ps") == pytest.approx(1 / 2)
    assert all(unicodedata.combining(chr(cp)) for cp in [*range(0x064B, 0x0660), 0x0670])
    assert not any(countable(chr(cp)) for cp in [*range(0x064B, 0x0660), 0x0670])


def test_the_kashida_is_excluded() -> None:
    assert script_fidelity("نـــن x", "ps") == pytest.approx(2 / 3)  # U+0640 three times: not counted


def test_control_and_format_characters_are_excluded() -> None:
    # ZWNJ U+200C (written inside Persian and Pashto words), RLM U+200F, a NUL and a BEL
    assert script_fidelity("ن\u200cن\u200f\x00\x07x", "ps") == pytest.approx(2 / 3)


def test_digits_follow_the_stated_policy() -> None:
    text = "ن ٣ ۴ 7"  # an Arabic letter, an Arabic-Indic digit, an extended Arabic-Indic digit, an ASCII digit
    assert script_fidelity(text, "ps") == 1.0  # default: digits excluded
    assert script_fidelity(text, "ps", digits="count") == pytest.approx(3 / 4)  # ASCII 7 is no Arabic script
    with pytest.raises(ValueError, match="digits must be"):
        script_fidelity(text, "ps", digits="some")


def test_presentation_forms_count_as_the_script_and_text_is_nfc_normalized_first() -> None:
    # U+FEED (waw isolated form) and U+FB8A (jeh isolated form) are in the paper's presentation-form ranges;
    # Devanagari QA as KA + nukta (U+0915 U+093C) stays one letter and a nukta (combining) after NFC
    assert script_fidelity("\ufeed\ufb8a", "ps") == 1.0
    assert script_fidelity("\u0915\u093c", "hi") == 1.0


def test_nothing_countable_is_undefined_not_zero() -> None:
    for text in ["", "   ", "...؟", "\u064e\u0640", "123"]:
        assert script_fidelity(text, "ps") is None, repr(text)


def test_corpus_sfr_is_the_mean_of_the_defined_values_with_the_undefined_counted() -> None:
    c = corpus_sfr([1.0, 0.5, None, float("nan"), 0.0])
    assert (c.mean, c.n_defined, c.n_undefined) == (0.5, 3, 2)
    none = corpus_sfr([None])
    assert math.isnan(none.mean) and none.n_undefined == 1


def test_allowed_scripts_come_from_the_data_else_from_cldr_and_unknown_scripts_say_what_to_add() -> None:
    assert allowed_scripts("ps-AF") == ("Arab",)
    assert allowed_scripts("ja") == ("Hani", "Hira", "Kana")
    assert allowed_scripts("sr") == ("Cyrl",)  # not in the data: CLDR's likely script
    assert allowed_scripts("yue") == ("Hani",)  # CLDR says Hant, a variety of Hani
    with pytest.raises(ValueError, match=r"add \[scripts.Khmr\] ranges"):
        allowed_scripts("km")
    for language in ["ar", "fa", "ur", "ps", "hi", "bn", "ta", "am", "th", "zh", "ko", "ru", "el", "he", "en"]:
        assert allowed_scripts(language), language


@pytest.mark.parametrize("script", sorted(_data()["scripts"]))
def test_every_letter_in_a_script_s_ranges_has_that_script_by_unicode(script: str) -> None:
    """Independent check of the data: the Unicode Script_Extensions property (regex's tables, not ours)."""
    prop = regex.compile(r"\p{scx=" + {"ArabExt": "Arab"}.get(script, script) + "}")
    letters = [
        chr(cp)
        for low, high in _ranges(script)
        for cp in range(low, high + 1)
        if unicodedata.category(chr(cp)).startswith("L")
    ]
    wrong = [f"U+{ord(c):04X}" for c in letters if not prop.match(c)]
    assert letters and not wrong, wrong[:10]


def test_sfr_agrees_with_an_independent_count_on_random_mixed_strings() -> None:
    """SFR recomputed with regex's Script_Extensions and Unicode categories on 300 random strings of Arabic,
    Latin, Cyrillic, punctuation, digits, diacritics and spaces."""
    rng = np.random.default_rng(7)
    pool = (
        list(PASHTO.replace(" ", ""))
        + list("abcxyzДЖЯ")
        + list("،؟۔.!?,")
        + list("٣۴7")
        + ["\u064e", "\u0640", " ", "\u200c"]
    )
    countable_re = regex.compile(r"[^\s\p{P}\p{Mn}\p{Me}\p{Cc}\p{Cf}\p{Nd}\u0640$+<=>^`|~]")
    for _ in range(300):
        text = "".join(rng.choice(pool, size=int(rng.integers(0, 25))))
        chars = countable_re.findall(text)
        expected = sum(bool(regex.match(r"\p{scx=Arab}", c)) for c in chars) / len(chars) if chars else None
        got = script_fidelity(text, "ps")
        assert (got is None) == (expected is None) and (got is None or got == pytest.approx(expected)), text
