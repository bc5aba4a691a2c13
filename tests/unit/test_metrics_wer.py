"""Tests for ttseval.metrics.wer: hand-worked edit counts, invariants, and jiwer's corpus figures."""

import dataclasses

import jiwer
import pytest

from ttseval.metrics.wer import ErrorCounts, corpus_rate, error_counts, mean_utterance_rate, perfect_rate

# (reference, hypothesis, expected counts). Character counts include spaces (jiwer default).
ERROR_CASES = [
    # words: b->x substitution, d deleted: 2 errors / 4 words.
    # chars: "a b c d" (7) vs "a x c" (5): b->x, then " d" deleted: 3 errors / 7 chars.
    ("a b c d", "a x c", ErrorCounts(2, 4, 3, 7, substitutions=1, deletions=1, insertions=0)),
    # empty hypothesis: every word and every character (incl. the space) is a deletion.
    ("a b", "", ErrorCounts(2, 2, 3, 3, substitutions=0, deletions=2, insertions=0)),
    # one inserted word "c"; chars: " c" inserted = 2.
    ("a b", "a b c", ErrorCounts(1, 2, 2, 3, substitutions=0, deletions=0, insertions=1)),
    # identical: 0 errors; "the cat sat" is 11 chars.
    ("the cat sat", "the cat sat", ErrorCounts(0, 3, 0, 11, substitutions=0, deletions=0, insertions=0)),
    # one word substituted, one character differs (c->d).
    ("abc", "abd", ErrorCounts(1, 1, 1, 3, substitutions=1, deletions=0, insertions=0)),
    # Pashto "زه ښه یم" (8 chars: ز ه _ ښ ه _ ی م) vs "زه ښه یې": last word substituted,
    # last character م -> ې.
    ("زه ښه یم", "زه ښه یې", ErrorCounts(1, 3, 1, 8, substitutions=1, deletions=0, insertions=0)),
    # hypothesis longer than reference: WER can exceed 1 (3 errors / 1 word).
    ("a", "x y z", ErrorCounts(3, 1, 5, 1, substitutions=1, deletions=0, insertions=2)),
]


@pytest.mark.parametrize(("reference", "hypothesis", "expected"), ERROR_CASES)
def test_error_counts_hand_worked(reference, hypothesis, expected):
    counts = error_counts(reference, hypothesis, key="k")
    assert counts == expected
    assert counts.word_errors == counts.substitutions + counts.deletions + counts.insertions


@pytest.mark.parametrize(("reference", "hypothesis", "expected"), ERROR_CASES)
def test_error_counts_match_jiwer_single_pair(reference, hypothesis, expected):
    # Independent computation: jiwer.wer / jiwer.cer on the single pair.
    counts = error_counts(reference, hypothesis)
    assert counts.word_errors / counts.ref_words == pytest.approx(jiwer.wer(reference, hypothesis), abs=1e-12)
    assert counts.char_errors / counts.ref_chars == pytest.approx(jiwer.cer(reference, hypothesis), abs=1e-12)


@pytest.mark.parametrize("text", ["a", "a b c d", "زه ښه یم", "नमस्ते दुनिया", "x " * 50])
def test_identity_has_no_errors(text):
    counts = error_counts(text.strip(), text.strip())
    assert (counts.word_errors, counts.char_errors) == (0, 0)
    assert counts.ref_words == len(text.split())


@pytest.mark.parametrize("reference", ["", "   ", "\n"])
def test_empty_reference_raises_naming_key(reference):
    with pytest.raises(ValueError, match=r"'item-7/piper:joe'.*fix the item text"):
        error_counts(reference, "a", key="item-7/piper:joe")


@pytest.mark.parametrize("bad", [None, float("nan")])
def test_non_string_input_raises_naming_key(bad):
    with pytest.raises(ValueError, match="hypothesis for row 'k1'"):
        error_counts("a b", bad, key="k1")
    with pytest.raises(ValueError, match="reference for row 'k1'"):
        error_counts(bad, "a b", key="k1")


def test_error_counts_is_frozen():
    counts = error_counts("a", "a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        counts.word_errors = 1  # type: ignore[misc]


def test_corpus_rate_matches_jiwer_on_a_list():
    # Independent computation: jiwer.wer/jiwer.cer on lists pool errors over all pairs
    # (sum of edits / sum of reference lengths), which is what corpus_rate must give.
    references = ["a b c d", "the cat sat", "زه ښه یم", "one two", "x"]
    hypotheses = ["a x c", "the cat sat on", "زه ښه یې", "", "x y z"]
    counts = [error_counts(r, h) for r, h in zip(references, hypotheses)]
    wer = corpus_rate([c.word_errors for c in counts], [c.ref_words for c in counts])
    cer = corpus_rate([c.char_errors for c in counts], [c.ref_chars for c in counts])
    assert wer == pytest.approx(jiwer.wer(references, hypotheses), abs=1e-12)
    assert cer == pytest.approx(jiwer.cer(references, hypotheses), abs=1e-12)
    # Hand-worked: word errors 2+1+1+2+2 = 8 over 4+3+3+2+1 = 13 words.
    assert wer == pytest.approx(8 / 13, abs=1e-12)


def test_rates_hand_worked():
    errors, totals = [2, 0, 1], [4, 3, 5]
    assert corpus_rate(errors, totals) == pytest.approx(3 / 12, abs=1e-12)  # pooled: 3 / 12
    # mean of 2/4, 0/3, 1/5 = (0.5 + 0 + 0.2) / 3
    assert mean_utterance_rate(errors, totals) == pytest.approx(0.7 / 3, abs=1e-12)
    assert perfect_rate(errors) == pytest.approx(1 / 3, abs=1e-12)  # one of three has 0 errors
    assert perfect_rate([0, 0]) == 1.0
    assert perfect_rate([1]) == 0.0


def test_corpus_rate_and_utterance_mean_differ_when_lengths_differ():
    # A 1-word utterance with 1 error and a 99-word one with 0: pooled 1/100, mean 0.5.
    assert corpus_rate([1, 0], [1, 99]) == pytest.approx(0.01, abs=1e-12)
    assert mean_utterance_rate([1, 0], [1, 99]) == pytest.approx(0.5, abs=1e-12)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: corpus_rate([1, 2], [3]), "differ in length"),
        (lambda: corpus_rate([0, 0], [0, 0]), "sum to 0"),
        (lambda: corpus_rate([], []), "empty"),
        (lambda: corpus_rate([1, float("nan")], [2, 2]), r"errors\[1\]"),
        (lambda: corpus_rate([1, 1], [2, -2]), r"totals\[1\]"),
        (lambda: mean_utterance_rate([1, 0, 1], [2, 0, 3]), r"totals\[1\] = 0"),
        (lambda: mean_utterance_rate([1], [2, 3]), "differ in length"),
        (lambda: perfect_rate([]), "empty"),
        (lambda: perfect_rate([0, None]), r"errors\[1\]"),
    ],
)
def test_rates_reject_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_word_alignment_marks_what_the_wer_counts() -> None:
    from ttseval.metrics.wer import word_alignment

    runs = word_alignment("the cat sat on the mat", "the bat sat on mat today")
    # by hand: cat -> bat (substitution), 'the' before mat deleted, 'today' inserted: 3 errors as the WER counts
    assert runs[0] == ("=", "the", "the") and ("s", "cat", "bat") in runs
    ops = {"s": 0, "d": 0, "i": 0}
    for op, ref, hyp in runs:
        if op == "s":
            ops["s"] += len(ref.split())
        elif op in ops:
            ops[op] += len((ref or hyp).split())
    assert sum(ops.values()) == error_counts("the cat sat on the mat", "the bat sat on mat today").word_errors
    assert word_alignment("a b", "") == [("d", "a b", "")] and word_alignment("", "x") == [("i", "", "x")]
