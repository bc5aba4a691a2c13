"""Word and character error counts (via jiwer) and their aggregations.

Counts, not rates, are returned per utterance so that corpus WER is a ratio of sums
(``corpus_rate``); the mean of per-utterance ratios (``mean_utterance_rate``) is reported
beside it under its own name. Inputs must already be normalized (``ttseval.metrics.normalize``).
Direction and aggregation of ``wer``, ``cer`` and their per-utterance means: ``ttseval.metrics.registry``.
"""

from __future__ import annotations

from dataclasses import dataclass

import jiwer
import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "ErrorCounts",
    "corpus_rate",
    "error_counts",
    "mean_utterance_rate",
    "perfect_rate",
]


@dataclass(frozen=True)
class ErrorCounts:
    """Edit-distance counts for one utterance.

    Attributes:
        word_errors: substitutions + deletions + insertions at word level.
        ref_words: Words in the reference.
        char_errors: Character-level edits; spaces are characters (jiwer's default).
        ref_chars: Characters in the reference, spaces included, outer whitespace excluded.
        substitutions: Word substitutions.
        deletions: Word deletions.
        insertions: Word insertions.
    """

    word_errors: int
    ref_words: int
    char_errors: int
    ref_chars: int
    substitutions: int
    deletions: int
    insertions: int


def error_counts(reference: str, hypothesis: str, *, key: str = "") -> ErrorCounts:
    """Count word and character edits between normalized reference and hypothesis.

    Words are whitespace-separated tokens. For CER, jiwer's default character
    transform is used: outer whitespace stripped, inner spaces kept as characters.

    Args:
        reference: Normalized reference text; must contain at least one word.
        hypothesis: Normalized hypothesis text; may be empty (all reference words and
            characters are then deletions).
        key: Row key quoted in error messages.

    Returns:
        The ``ErrorCounts``.

    Raises:
        ValueError: the reference is empty or whitespace only, or either text is not a
            string (e.g. None or NaN from a null cell).
    """
    for label, value in (("reference", reference), ("hypothesis", hypothesis)):
        if not isinstance(value, str):
            # ValueError, not TypeError: this is usually a null cell (None/NaN) in a row.
            message = f"{label} for row {key!r} must be str, got {type(value).__name__}: {value!r}"
            raise ValueError(message)
    if not reference.strip():
        raise ValueError(
            f"empty reference for row {key!r} (after normalization): WER/CER is undefined; "
            "fix the item text so it has at least one word after normalization"
        )
    words = jiwer.process_words(reference, hypothesis)
    chars = jiwer.process_characters(reference, hypothesis)
    return ErrorCounts(
        word_errors=words.substitutions + words.deletions + words.insertions,
        ref_words=len(words.references[0]),
        char_errors=chars.substitutions + chars.deletions + chars.insertions,
        ref_chars=len(chars.references[0]),
        substitutions=words.substitutions,
        deletions=words.deletions,
        insertions=words.insertions,
    )


def word_alignment(reference: str, hypothesis: str) -> list[tuple[str, str, str]]:
    """The word alignment behind the WER, for showing errors: (op, reference words, hypothesis words) runs, op
    one of '=' (equal), 's' (substituted), 'd' (deleted: reference words the hypothesis lacks) and 'i'
    (inserted). Either text may be empty (all deletions or all insertions)."""
    ref, hyp = reference.split(), hypothesis.split()
    if not ref or not hyp:
        return [("d", " ".join(ref), "")] if ref else ([("i", "", " ".join(hyp))] if hyp else [])
    result = jiwer.process_words(reference, hypothesis)
    words_r, words_h = result.references[0], result.hypotheses[0]
    ops = {"equal": "=", "substitute": "s", "delete": "d", "insert": "i"}
    return [
        (
            ops[c.type],
            " ".join(words_r[c.ref_start_idx : c.ref_end_idx]),
            " ".join(words_h[c.hyp_start_idx : c.hyp_end_idx]),
        )
        for c in result.alignments[0]
    ]


def _as_counts(values: ArrayLike, name: str) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    bad = np.flatnonzero(~np.isfinite(array) | (array < 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name}[{i}] = {array[i]!r}: counts must be finite and >= 0")
    return array


def _paired(errors: ArrayLike, totals: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    e = _as_counts(errors, "errors")
    t = _as_counts(totals, "totals")
    if e.shape != t.shape:
        raise ValueError(f"errors and totals differ in length: {e.size} != {t.size}")
    if e.size == 0:
        raise ValueError("no utterances: errors and totals are empty")
    return e, t


def corpus_rate(errors: ArrayLike, totals: ArrayLike) -> float:
    """Pooled rate ``sum(errors) / sum(totals)`` (corpus WER or CER).

    Args:
        errors: Per-utterance error counts.
        totals: Per-utterance reference lengths, same order.

    Returns:
        The pooled rate (may exceed 1 when insertions dominate).

    Raises:
        ValueError: lengths differ, empty input, negative/NaN count, or totals sum to 0.
    """
    e, t = _paired(errors, totals)
    total = t.sum()
    if total == 0:
        raise ValueError("totals sum to 0: the rate is undefined (every reference is empty)")
    return float(e.sum() / total)


def mean_utterance_rate(errors: ArrayLike, totals: ArrayLike) -> float:
    """Mean over utterances of ``errors[i] / totals[i]``.

    Short utterances weigh as much as long ones, so this differs from ``corpus_rate``.

    Args:
        errors: Per-utterance error counts.
        totals: Per-utterance reference lengths, same order.

    Returns:
        The mean per-utterance rate.

    Raises:
        ValueError: lengths differ, empty input, negative/NaN count, or a zero total
            (the message names its index).
    """
    e, t = _paired(errors, totals)
    zero = np.flatnonzero(t == 0)
    if zero.size:
        raise ValueError(f"totals[{int(zero[0])}] = 0: the per-utterance rate is undefined (empty reference)")
    return float(np.mean(e / t))


def perfect_rate(errors: ArrayLike) -> float:
    """Fraction of utterances with zero errors (Perfect% / 100).

    Args:
        errors: Per-utterance error counts.

    Returns:
        A fraction in [0, 1].

    Raises:
        ValueError: empty input or a negative/NaN count.
    """
    e = _as_counts(errors, "errors")
    if e.size == 0:
        raise ValueError("no utterances: errors is empty")
    return float(np.mean(e == 0))
