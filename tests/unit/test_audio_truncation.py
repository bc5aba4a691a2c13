"""The run-level truncation check (ttseval.metrics.audio_checks.truncated) and its column in the report's Audio
checks section. Independent computation: each clip's duration is made from its text's length at a speaking rate
chosen here, so which clips are cut, and by how much, is known by construction; the median the check compares with
is worked by hand in the comments."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ttseval.metrics.audio_checks import MIN_PEERS, audio_flags, text_chars, truncated
from ttseval.tasks.report import RunTables, audio_checks_markdown

# 12 English sentences of 50-85 characters; read at 0.07 s a character, +-8% from sentence to sentence
TEXTS = [f"sentence {k} has {'quite a few more ' * (k % 3)}words to speak aloud here and there" for k in range(12)]
JITTER = [1.0, 1.08, 0.92, 1.04, 0.96, 1.02, 0.98, 1.06, 0.94, 1.0, 1.05, 0.95]
RATE_S = 0.07


def _normal(k: int) -> float:
    return RATE_S * text_chars(TEXTS[k]) * JITTER[k]


def test_one_clip_cut_to_40_percent_is_truncated_and_the_fixed_rate_misses_it() -> None:
    durations = [_normal(k) for k in range(12)] * 2
    durations[12 + 3] *= 0.4  # system B's item 3
    chars = [text_chars(t) for t in TEXTS] * 2
    flags = truncated(durations, chars, ["en"] * 24)
    # the median of seconds per character is 0.07 x the median jitter (1.0): 0.07; the cut clip has 0.07 x 1.04 x
    # 0.4 = 0.029, under 0.6 x 0.07 = 0.042; the slowest normal clip (0.92) is at 0.064
    assert np.flatnonzero(flags).tolist() == [15]


def test_the_issue_s_clip_9_words_in_1_1_s_is_truncated_where_a_third_of_14_chars_a_second_let_it_pass() -> None:
    text = "nine words of a sentence that was cut short"  # 9 words, 43 characters
    assert len(text.split()) == 9 and text_chars(text) == 43
    # 43 / 14 = 3.07 s predicted; a third is 1.02 s, so 1.1 s passes the fixed gate
    assert audio_flags(np.full(17_600, 0.1), 16_000, text) == []
    durations = [_normal(k) for k in range(12)] + [1.1]
    flags = truncated(durations, [text_chars(t) for t in TEXTS] + [43], ["en"] * 13)
    assert flags.tolist() == [False] * 12 + [True]  # 1.1 / 43 = 0.026 s a character, under 0.042


def test_a_whole_system_cut_short_beside_others_is_truncated_clip_by_clip() -> None:
    normal = [_normal(k) for k in range(12)]
    durations = normal + normal + [0.4 * d for d in normal]  # systems A and B, then C cut to 40%
    chars = [text_chars(t) for t in TEXTS] * 3
    flags = truncated(durations, chars, ["en"] * 36)
    # 24 of 36 values at 0.064-0.076 and 12 at 0.026-0.030: the median (18th and 19th) is among the normal ones
    assert flags.tolist() == [False] * 24 + [True] * 12


def test_too_few_clips_of_a_language_short_texts_and_missing_durations_are_never_judged() -> None:
    few = MIN_PEERS - 1
    durations = [_normal(k) for k in range(few)]
    durations[0] *= 0.2
    assert not truncated(durations, [text_chars(t) for t in TEXTS[:few]], ["fr"] * few).any()
    # a language with enough clips is judged, one without beside it is not, and a 10-character text never is
    durations = [_normal(k) for k in range(12)] + [0.01, float("nan")]
    chars = [text_chars(t) for t in TEXTS] + [10, 50]
    assert not truncated(durations, chars, ["en"] * 14).any()


def test_the_report_counts_truncated_clips_per_system() -> None:
    items = pd.DataFrame({"item_id": [f"i{k}" for k in range(12)], "text": TEXTS, "language": "en"})
    rows = [
        (f"i{k}", s, "ok", _normal(k) * (0.4 if (s, k) == ("b", 5) else 1.0), None) for s in "ab" for k in range(12)
    ]
    synthesis = pd.DataFrame(rows, columns=["item_id", "system_id", "status", "duration_s", "audio_flags"])
    empty = pd.DataFrame()
    tables = RunTables(items, synthesis, empty, empty, ["a", "b"], empty, empty)
    section = audio_checks_markdown(tables, {"a": "espeak-ng", "b": "files:cut"})
    assert "| system | clips | truncated |" in section
    assert "| files:cut | 12 | 1 |" in section and "espeak-ng" not in section.split("| system |")[1]
    assert audio_checks_markdown(RunTables(items, synthesis.assign(duration_s=[_normal(k) for k in range(12)] * 2),
                                           empty, empty, ["a", "b"], empty, empty), {}) == ""  # fmt: skip
