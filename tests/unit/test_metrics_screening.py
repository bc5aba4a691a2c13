"""INSV-A report card and screening labels (metrics/screening.py) on constructed tables, every figure worked by
hand from PashtoTTS-Bench's rules (sections 3.3, 3.4, 5 and Table 8)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ttseval.metrics.screening import Thresholds, grapheme_class_wer, insv_card, lid_status, per_sentence

LATERAL = "ښه"  # contains ښ, Pashto's lateral fricative class
PLAIN = "سلام"  # none of the Pashto classes


def items() -> pd.DataFrame:
    return pd.DataFrame({"item_id": [f"i{k}" for k in range(6)], "language": "ps-AF", "text": [LATERAL] * 5 + [PLAIN]})


def synthesis(system: str, failed: int = 0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "item_id": [f"i{k}" for k in range(6)],
            "system_id": system,
            "system_spec": system,
            "status": ["failed"] * failed + ["ok"] * (6 - failed),
            "duration_s": 1.0,
            "latency_s": 0.5,
        }
    )


def transcripts(
    system: str,
    hypotheses: list[str],
    word_errors: list[int],
    ref_words: list[int],
    char_errors: list[int],
    detected: str | None = "ps",
    start: int = 0,
) -> pd.DataFrame:
    n = len(hypotheses)
    return pd.DataFrame(
        {
            "item_id": [f"i{k}" for k in range(start, start + n)],
            "system_id": system,
            "asr_id": "asr1",
            "asr_spec": "faster-whisper:base",
            "status": "ok",
            "hypothesis": hypotheses,
            "word_errors": word_errors,
            "ref_words": ref_words,
            "char_errors": char_errors,
            "ref_chars": [4 * w for w in ref_words],
            "detected_language": detected,
        }
    )


def card(lid: pd.DataFrame | None = None) -> pd.DataFrame:
    syn = pd.concat([synthesis("good"), synthesis("latin"), synthesis("refuses", failed=2)])
    tr = pd.concat(
        [
            # 1 error in 5 words on each lateral item, none in 20 words on the plain one; chars 1 of 20 each
            transcripts("good", [LATERAL] * 5 + [PLAIN], [1] * 5 + [0], [5] * 5 + [20], [1] * 5 + [0]),
            # a Latin transcript of every item; item i0: 1 word error of 5, 16 char errors of 20 (CER/WER 4.0)
            transcripts(
                "latin", ["shah"] * 6, [1, 5, 5, 5, 5, 20], [5] * 5 + [20], [16, 20, 20, 20, 20, 80], detected="ur"
            ),
            # four clips; one transcript empty (SFR undefined)
            transcripts(
                "refuses", [LATERAL, LATERAL, LATERAL, ""], [0, 0, 0, 5], [5, 5, 5, 20], [0, 0, 0, 20], start=2
            ),
        ]
    )
    return insv_card(items(), syn, tr, lid, n_resamples=200).set_index("system_id")


def test_the_card_s_gates_and_labels_worked_by_hand() -> None:
    c = card()
    good, latin, refuses = c.loc["good"], c.loc["latin"], c.loc["refuses"]
    # F1: completion 6/6 and 4/6 (gate 0.95); refusals recorded in the rows are confirmed F1
    assert (good["completion_rate"], good["gate_f1"], good["f1"]) == (1.0, "pass", "not observed")
    assert (refuses["completion_rate"], refuses["gate_f1"], refuses["f1"]) == (
        pytest.approx(4 / 6),
        "fail",
        "confirmed",
    )
    # S: every Pashto transcript is all Perso-Arabic (1.0); Latin ones score 0; the empty transcript is undefined
    assert (good["sfr"], good["gate_s"], good["n_sfr_undefined"]) == (1.0, "pass", 0)
    assert (latin["sfr"], latin["gate_s"]) == (0.0, "fail")
    assert (refuses["sfr"], refuses["n_sfr_undefined"]) == (1.0, 1)
    # V without a LID model: not run; the recogniser's detection is a diagnostic (ps: 1.0, ur: 0.0)
    assert (good["gate_v"], good["asr_lid_rate"], latin["asr_lid_rate"]) == ("not run", 1.0, 0.0)
    # latin: SFR 0 and the recogniser detected ur on every clip; no transcript language was given here
    assert latin["f2"] == "candidate (SFR, recogniser's detection; no LID model)"
    assert good["f2"] == "needs native annotation"
    # I: pooled WER 5/45 for good; Perfect% 1/6; Low-error% (WER <= 0.10): the plain item only, 1/6
    assert good["wer"] == pytest.approx(5 / 45) and good["perfect_pct"] == pytest.approx(100 / 6)
    assert good["low_error_pct"] == pytest.approx(100 / 6)
    # F3: the lateral class's WER 5/25 = 0.2 >= 1.5 x 5/45 over 5 utterances -> candidate
    assert (good["f3"], good["f3_classes"]) == ("candidate", "lateral_fricative")
    # latin: lateral class WER 21/25 against 41/45 overall (ratio 0.92) -> not observed
    assert latin["f3"] == "not observed"
    # refuses: only 3 lateral utterances transcribed (< 5) -> cannot screen
    assert refuses["f3"] == "needs native annotation"
    # F5: good's CER/WER per utterance is (1/20)/(1/5) = 0.25; latin's i0 is (16/20)/(1/5) = 4.0; the other
    # latin rows are (20/20)/(5/5) = 1.0 and (80/80)/(20/20) = 1.0: all six at >= 0.75
    assert (good["f5"], good["n_high_cer_wer"]) == ("not observed", 0)
    assert (latin["f5"], latin["n_high_cer_wer"]) == ("candidate", 6)
    assert (good["f4"], good["n_for_mos"], refuses["n_for_mos"]) == ("needs native annotation", 6, 4)


def test_the_lid_gate_follows_section_3_4() -> None:
    t = Thresholds()
    assert lid_status({}, t) == "not run"
    assert lid_status({"mms": 0.95, "sb": 0.91}, t) == "pass"
    assert lid_status({"mms": 0.10, "sb": 0.49}, t) == "fail"
    assert lid_status({"mms": 0.95, "sb": 0.30}, t) == "unresolved"  # disagreement
    assert lid_status({"mms": 0.70}, t) == "unresolved"  # a middle rate
    assert lid_status({"mms": float("nan"), "sb": 0.92}, t) == "pass"


def test_voting_lid_rows_set_v_and_f2() -> None:
    rows = []
    for system, labels in {"good": ["ps"] * 6, "latin": ["ur"] * 6, "refuses": ["ps"] * 4}.items():
        for lid_id, flip in (("mms", 0), ("sb", 1 if system == "good" else 0)):
            for k, label in enumerate(labels):
                rows.append(
                    {
                        "item_id": f"i{k}",
                        "system_id": system,
                        "lid_id": lid_id,
                        "status": "ok",
                        "language": "urd" if k < flip else label,
                    }
                )
    c = card(pd.DataFrame(rows))
    assert c.loc["good", "lid_rates"] == {"mms": 1.0, "sb": pytest.approx(5 / 6)}  # 5/6 < 0.90: unresolved
    assert (c.loc["good", "gate_v"], c.loc["good", "f2"]) == ("unresolved", "needs native annotation")
    assert (c.loc["latin", "gate_v"], c.loc["latin", "f2"]) == ("fail", "candidate")
    assert (c.loc["refuses", "gate_v"], c.loc["refuses", "f2"]) == ("pass", "not observed")


def test_grapheme_class_wer_pools_the_utterances_that_contain_each_class() -> None:
    tr = transcripts("good", [LATERAL] * 5 + [PLAIN], [1] * 5 + [0], [5] * 5 + [20], [1] * 5 + [0])
    rows = per_sentence(items(), tr)
    classes = grapheme_class_wer(rows, "ps").set_index("class")
    assert list(classes.index) == ["retroflex", "lateral_fricative", "affricate", "vowel_marker"]
    assert classes.loc["lateral_fricative", "n_items"] == 5 and classes.loc["lateral_fricative", "wer"] == 0.2
    assert classes.loc["retroflex", "n_items"] == 0 and np.isnan(classes.loc["retroflex", "wer"])
    assert classes["overall_wer"].iloc[0] == pytest.approx(5 / 45)
    assert grapheme_class_wer(rows, "en").empty  # no classes for English


def test_recogniser_rankings_compare_on_shared_clips_and_w_matches_scipy_friedman() -> None:
    from scipy.stats import friedmanchisquare

    from ttseval.metrics.screening import recogniser_rankings

    rows = []
    errors = {"a": {"r1": 1, "r2": 2, "r3": 1}, "b": {"r1": 3, "r2": 4, "r3": 5}, "c": {"r1": 5, "r2": 1, "r3": 9}}
    for system, by_asr in errors.items():
        for asr, e in by_asr.items():
            rows.append({"item_id": "i0", "system_id": system, "asr_id": asr, "word_errors": e, "ref_words": 10})
    rows.append({"item_id": "i1", "system_id": "a", "asr_id": "r1", "word_errors": 10, "ref_words": 10})  # r1 only
    wer, w = recogniser_rankings(pd.DataFrame(rows), ["r1", "r2", "r3"])
    assert list(wer.columns) == ["r1", "r2", "r3"] and wer.loc["a", "r1"] == 0.1  # i1 is not shared: left out
    assert wer.loc["c", "r2"] == 0.1
    # W = chi2 / (m (n - 1)) with Friedman's chi2 (no ties here): m = 3 recognisers, n = 3 systems
    chi2 = friedmanchisquare(*[wer.loc[s].to_numpy() for s in wer.index]).statistic
    assert w == pytest.approx(chi2 / (3 * 2))
    _, one = recogniser_rankings(pd.DataFrame(rows), ["r1"])
    assert np.isnan(one)
    # every recogniser transcribes every system perfectly: no ranking to agree on, W undefined (0/0) is NaN
    perfect = pd.DataFrame(rows).assign(word_errors=0)
    wer, tied = recogniser_rankings(perfect, ["r1", "r2", "r3"])
    assert (wer.to_numpy() == 0).all() and np.isnan(tied)
    # one recogniser that ties them all and one that ranks them: W = 0.5 (tie-corrected, worked by hand:
    # ranks (2,2,2) and (1,2,3): rank sums (3,4,5), S = 2, denominator 2^2 (27 - 3) - 2 (3^3 - 3) = 48, W = 24/48)
    half = pd.DataFrame(rows)
    half.loc[half["asr_id"] == "r1", "word_errors"] = 3
    wer, w = recogniser_rankings(half, ["r1", "r2"])
    assert w == pytest.approx(0.5)


def test_the_transcript_language_is_a_diagnostic_rate_and_an_f2_signal() -> None:
    syn = synthesis("good")
    tr = transcripts("good", [LATERAL] * 5 + [PLAIN], [1] * 5 + [0], [5] * 5 + [20], [1] * 5 + [0], detected=None)
    tr["text_language"] = ["ps", "ps", "ur", "ur", "ur", None]  # 2 of the 5 read as Pashto; one text unread
    row = insv_card(items(), syn, tr, n_resamples=100).iloc[0]
    assert row["text_lid_rate"] == pytest.approx(2 / 5) and np.isnan(row["asr_lid_rate"])
    assert row["f2"] == "candidate (transcript language; no LID model)"  # 0.4 < lid_fail 0.5
