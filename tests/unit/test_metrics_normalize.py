"""Tests for ttseval.metrics.normalize: hand-worked tables per normalizer, idempotence, routing.

Reference for english-v1/whisper-basic-v1: transformers' Whisper normalizers (the
expectations below were worked out from their source rules). Reference for basic-v1: the
same Whisper rules with marks kept, cross-checked against the library on mark-free text.
Reference for perso-arabic-v1: PashtoTTS-Bench §4.2.4, worked by hand code point by code
point.
"""

import dataclasses
import os
import subprocess
import sys
import unicodedata

import pytest

from tests.support.harness import ROOT
from ttseval.metrics.normalize import (
    NORMALIZERS,
    Normalizer,
    basic_v1,
    english_v1,
    get_normalizer,
    normalizer_for,
    perso_arabic_v1,
    whisper_basic_v1,
)

ENGLISH_CASES = [
    # (input, expected, why)
    ("Dr. Smith's 3rd car", "doctor smith is 3rd car", "title expanded; 's -> is; ordinal digits kept"),
    ("$5.20", "$5.20", "currency with digits is kept as is"),
    ("It costs five dollars and twenty cents.", "it costs $5.20", "spelled currency -> $5.20"),
    ("twenty-one", "21", "spelled number -> digits"),
    ("the first day", "the 1st day", "spelled ordinal -> 1st"),
    ("1,000 people", "1000 people", "thousands comma removed"),
    ("Hello, World!", "hello world", "lowercase, punctuation removed"),
    ("I won't go.", "i will not go", "contraction expanded"),
    ("(laughs) hello [noise] um yes", "hello yes", "bracketed spans and fillers removed"),
    ("Café naïve", "cafe naive", "diacritics removed"),
    ("colour", "colour", "no British->American mapping is shipped in transformers"),
    ("   ", "", "whitespace only -> empty"),
]

BASIC_CASES = [
    ("Привет, мир! Ёлка", "привет мир ёлка", "Cyrillic lowercased, ё kept"),
    ("नमस्ते, दुनिया!", "नमस्ते दुनिया", "Devanagari virama and vowel signs kept"),
    ("हिन्दी में बात।", "हिन्दी में बात", "danda U+0964 is punctuation; anusvara kept"),
    ("Cafe\u0301  NAÏVE", "café naïve", "NFC composes e+U+0301; accents kept"),
    ("Ｈｅｌｌｏ", "hello", "NFKC folds full-width letters"),
    ("[music] Bonjour (rires) le monde", "bonjour le monde", "bracketed spans removed"),
    ("a+b=c", "a b c", "symbols become spaces"),
]

# Code points: U+060C ، comma, U+061B ؛ semicolon, U+061F ؟ question mark, U+06D4 ۔ full
# stop, U+0640 ـ kashida, U+064B fathatan, U+064E fatha, U+064F damma, U+0650 kasra,
# U+0651 shadda, U+0652 sukun, U+0670 superscript alef.
PERSO_ARABIC_CASES = [
    ("سلام، ښه یې؟", "سلام ښه یې", "Pashto: Arabic comma and question mark -> space, collapsed"),
    ("الف؛ب", "الف ب", "Arabic semicolon between words splits them"),
    ("سـلام", "سلام", "kashida removed"),
    ("ســـــلام", "سلام", "repeated kashida removed"),
    ("كَتَبَ", "كتب", "fatha U+064E removed"),
    ("مُحَمَّد", "محمد", "damma, fatha, shadda removed"),
    ("شكراً", "شكرا", "fathatan U+064B removed"),
    ("هٰذا", "هذا", "superscript alef U+0670 removed"),
    ("مِنْ", "من", "kasra and sukun removed"),
    ("یہ اچھا ہے۔", "یہ اچھا ہے", "Urdu full stop U+06D4 removed"),
    ("  زه (ښه) یم!  ", "زه ښه یم", "ASCII punctuation removed, spans kept (no Whisper span rule)"),
    ("ښځه ټول ډېر ړوند ږ څ ۍ", "ښځه ټول ډېر ړوند ږ څ ۍ", "Pashto letters untouched"),
    ("می\u200cخواهم", "می\u200cخواهم", "ZWNJ (category Cf) is not punctuation: kept"),
    ("ا\u0654", "\u0623", "NFC runs first: alef + hamza above composes to أ, which is kept"),
    ("WiFi ۱۲۳ $", "WiFi ۱۲۳ $", "no case folding, digits and symbols (Sc) kept"),
    ("\u0640\u064e", "", "kashida plus diacritic only -> empty"),
]


@pytest.mark.parametrize(("text", "expected", "why"), ENGLISH_CASES)
def test_english_v1(text, expected, why):
    assert english_v1(text) == expected, why


@pytest.mark.parametrize(("text", "expected", "why"), BASIC_CASES)
def test_basic_v1(text, expected, why):
    assert basic_v1(text) == expected, why


@pytest.mark.parametrize(("text", "expected", "why"), PERSO_ARABIC_CASES)
def test_perso_arabic_v1(text, expected, why):
    assert perso_arabic_v1(text) == expected, why


def test_whisper_basic_splits_devanagari_but_basic_v1_does_not():
    # The reason basic-v1 exists: Whisper's BasicTextNormalizer turns every mark (M*) into
    # a space, so one Hindi word becomes several "words".
    assert whisper_basic_v1("नमस्ते दुनिया") == "नमस त द न य"
    assert basic_v1("नमस्ते दुनिया") == "नमस्ते दुनिया"


@pytest.mark.parametrize(
    "text",
    ["Hello, World! [noise] (aside) OK", "Привет,   мир!", "Ελληνικά: ά έ", "a+b=c — d", "Straße & Co."],
)
def test_basic_v1_matches_whisper_basic_on_mark_free_text(text):
    # Independent implementation: transformers' BasicTextNormalizer. Without combining
    # marks (in NFC) the two must agree exactly, up to outer whitespace.
    from transformers.models.whisper.english_normalizer import BasicTextNormalizer

    assert not any(unicodedata.category(ch).startswith("M") for ch in unicodedata.normalize("NFC", text))
    assert basic_v1(text) == BasicTextNormalizer()(text).strip()


ALL_INPUTS = [case[0] for case in ENGLISH_CASES + BASIC_CASES + PERSO_ARABIC_CASES] + [
    "Mr. O'Neil paid £10 on the 2nd.",
    "twenty one 21 twenty-first",
    "ءَ أُ إِ آ ۀ",
    "",
]


@pytest.mark.parametrize("name", sorted(n for n in NORMALIZERS if not n.startswith("seedtts-")))
@pytest.mark.parametrize("text", ALL_INPUTS)
def test_idempotent(name, text):
    # Not Seed-TTS-eval's: reproduced exactly, they are not idempotent (zh splits again, one pass of double spaces).
    normalize = NORMALIZERS[name]
    once = normalize(text)
    assert normalize(once) == once
    assert once == once.strip() and "  " not in once


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("en", "english-v1"),
        ("en-US", "english-v1"),
        ("EN_gb", "english-v1"),
        ("ps", "perso-arabic-v1"),
        ("ps-AF", "perso-arabic-v1"),
        ("pbt", "perso-arabic-v1"),
        ("fa-IR", "perso-arabic-v1"),
        ("prs", "perso-arabic-v1"),
        ("ur-PK", "perso-arabic-v1"),
        ("ar", "perso-arabic-v1"),
        ("ar-EG", "perso-arabic-v1"),
        ("sd", "perso-arabic-v1"),
        ("ckb-IQ", "perso-arabic-v1"),
        ("ug", "perso-arabic-v1"),
        ("pa-Arab", "perso-arabic-v1"),  # Shahmukhi: the script subtag wins
        ("sd-Deva", "basic-v1"),  # Sindhi in Devanagari: the script subtag wins
        ("pa", "basic-v1"),
        ("hi-IN", "basic-v1"),
        ("ru", "basic-v1"),
        ("de-DE", "basic-v1"),
    ],
)
def test_normalizer_for(tag, expected):
    normalizer = normalizer_for(tag)
    assert normalizer.name == expected
    assert normalizer is NORMALIZERS[expected]


@pytest.mark.parametrize("tag", ["", "  ", None, "english", "ps AF"])
def test_normalizer_for_rejects_bad_tag(tag):
    with pytest.raises(ValueError, match="BCP-47"):
        normalizer_for(tag)


def test_registry_names_and_lookup():
    assert set(NORMALIZERS) == {
        "english-v1",
        "basic-v1",
        "whisper-basic-v1",
        "perso-arabic-v1",
        "seedtts-en-v1",
        "seedtts-zh-v1",
    }
    for name, normalizer in NORMALIZERS.items():
        assert normalizer.name == name
        assert get_normalizer(name) is normalizer
    with pytest.raises(ValueError, match="available: basic-v1, english-v1"):
        get_normalizer("english")


def test_normalizer_is_frozen_and_rejects_non_strings():
    normalizer = NORMALIZERS["perso-arabic-v1"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        normalizer.name = "x"  # type: ignore[misc]
    with pytest.raises(ValueError, match="perso-arabic-v1.*expects str"):
        normalizer(float("nan"))  # type: ignore[arg-type]
    assert Normalizer("upper", str.upper)("ab") == "AB"


def _run_python(code):
    root = ROOT
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=root, env=env)


def test_import_is_lazy():
    # `import ttseval.metrics.normalize` must not import transformers (about 1 s); only calling an
    # english/whisper normalizer does.
    out = _run_python("import sys, ttseval.metrics.normalize; print('transformers' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_missing_transformers_names_the_extra():
    # transformers is in the optional "models" extra: without it, the module still imports,
    # perso-arabic-v1 and basic-v1 still work, and english-v1 says which extra to install.
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "from ttseval.metrics.normalize import NORMALIZERS\n"
        "assert NORMALIZERS['perso-arabic-v1']('سـلام،') == 'سلام'\n"
        "assert NORMALIZERS['basic-v1']('Hi!') == 'hi'\n"
        "try:\n    NORMALIZERS['english-v1']('x')\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = _run_python(code)
    assert out.returncode == 0, out.stderr
    assert "pip install 'ttseval[models]'" in out.stdout


# Seed-TTS-eval's run_wer.py (process_one), worked by hand from its source: every character of zhon.hanzi.punctuation
# and string.punctuation but the ASCII apostrophe deleted (nothing put in its place), one pass of "  " -> " ", then
# en: lowercase; zh: every character joined by one space. No Unicode or number normalization.
SEEDTTS_EN = [
    ("Hello, World! It's 50 percent.", "hello world it's 50 percent", "punctuation deleted, apostrophe kept, lower"),
    ("fifty", "fifty", "numbers are not normalized: 'fifty' vs '50' stays an error (Seed-TTS-eval issue #12)"),
    ("state-of-the-art", "stateoftheart", "a hyphen is deleted, not turned into a space"),
    ("e.g. U.S.A.", "eg usa", "dots deleted"),
    ("“Quoted” — dash…", "quoted dash", "curly quotes, em dash and ellipsis are in zhon's set"),
    ("It’s ＇fine＇", "its fine", "only the ASCII apostrophe is kept; ’ and the fullwidth ＇ go"),
    ("a   b", "a  b", "one pass of double spaces: three spaces leave two (jiwer collapses them when counting)"),
    ("ÉCOLE Café", "école café", "lowercased, accents kept"),
]
SEEDTTS_ZH = [
    ("你好，世界！", "你 好 世 界", "fullwidth comma and exclamation deleted, characters split"),
    ("他说：“今天是2024年。”", "他 说 今 天 是 2 0 2 4 年", "digits are characters too"),
    ("我用iPhone 15", "我 用 i P h o n e   1 5", "Latin letters split and kept in case; the space is a character"),
    ("《三体》、书", "三 体 书", "book-title marks and the enumeration comma deleted"),
]


@pytest.mark.parametrize(("text", "expected", "why"), SEEDTTS_EN)
def test_seedtts_en_v1_is_seed_tts_evals_english_normalization(text, expected, why):
    assert get_normalizer("seedtts-en-v1")(text) == expected, why


@pytest.mark.parametrize(("text", "expected", "why"), SEEDTTS_ZH)
def test_seedtts_zh_v1_is_seed_tts_evals_chinese_normalization(text, expected, why):
    assert get_normalizer("seedtts-zh-v1")(text) == expected, why


def test_the_seed_tts_eval_protocol_routes_en_and_zh_and_refuses_other_languages():
    assert normalizer_for("en-US", "seed-tts-eval").name == "seedtts-en-v1"
    assert normalizer_for("zh-Hans-CN", "seed-tts-eval").name == "seedtts-zh-v1"
    assert normalizer_for("en-US").name == "english-v1"  # the default protocol is untouched
    with pytest.raises(ValueError, match="defined for en and zh only; set wer_protocol"):
        normalizer_for("fr", "seed-tts-eval")
    with pytest.raises(ValueError, match="unknown WER protocol 'whisper'; valid: ttseval, seed-tts-eval"):
        normalizer_for("en", "whisper")
