"""INSV-A screening (PashtoTTS-Bench sections 3-5 and Table 8): per system, language and recogniser, the gates of
the report card and the F1-F5 screening labels, from the stage tables. Thresholds are the `insv` settings
(ttseval.core.config.Insv).

Pure: DataFrames in, DataFrames out. Gates:
- F1 (synthesis): completion >= `completion` -> pass, else fail.
- S (script fidelity): mean transcript SFR (ttseval.metrics.script) >= `sfr` -> pass, else fail; undefined when no
  transcript has a countable character.
- V (language verification) from the voting LID models' target-language rates (section 3.4): every model >=
  `lid_pass` -> pass; every model < `lid_fail` -> fail (likely substitution); otherwise (models disagree, or a rate
  in between) unresolved; "not run" without a LID model. The recogniser's own language detection (Whisper's) is a
  diagnostic column and never votes.
- I (WER): descriptive, with its recogniser and CI.
- N (MOS): native listeners only; the card gives the number of clips with audio left for them.

Labels (never more than the automatic evidence supports; "confirmed" only from rows that record it):
- F1: confirmed when items have no audio (failed, empty, unsupported or missing rows: the provider's own record);
  candidate when all have audio but some transcripts have undefined SFR (nothing countable heard); else not observed.
- F2: for a negative control (a neighbouring language's voice, role 'control'): "confirmed (negative control
  caught)" when V or S fails or the recogniser's detection is below `lid_fail`, else "not observed (negative
  control NOT caught)", which says the screening is too weak for that pair of languages. Otherwise: candidate
  when V fails; not observed when V passes; needs native annotation when unresolved. Without a LID model:
  candidate when S fails, or the recogniser's detection or the transcript's text language gives the target
  language to fewer than `lid_fail` of the clips (said to be from those signals), else needs native annotation.
- F3: candidate when the WER of the utterances containing a letter class (classes per language as data,
  metrics/data/languages.toml) is at least `f3_ratio` times the overall WER, over classes with at least
  `f3_min_items` utterances; not observed when such classes exist and none is; needs native annotation otherwise.
- F4: needs native annotation (only human ratings show it).
- F5: candidate when an utterance with word errors has CER / WER >= `f5_cer_wer` (the paper's worked example is
  0.75); not observed when none does; needs native annotation without transcripts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ttseval.core.config import Insv as Thresholds
from ttseval.metrics.script import DigitPolicy, corpus_sfr, language_data, script_fidelity
from ttseval.metrics.summary import SYNTHESIS_COLUMNS, TRANSCRIPT_COLUMNS, summarize_systems

__all__ = [
    "CARD_COLUMNS",
    "Thresholds",
    "grapheme_class_wer",
    "insv_card",
    "lid_status",
    "per_sentence",
    "recogniser_rankings",
]

# what per_sentence keeps of a transcript: its keys, status, counts, what the recogniser heard and detected, and the
# text language the report adds
SENTENCE_COLUMNS = frozenset(
    {
        "item_id", "system_id", "asr_id", "asr_spec", "status", "hypothesis", "detected_language",
        "word_errors", "ref_words", "char_errors", "ref_chars", "text_language",
    }
)  # fmt: skip
CONFIRMED, CANDIDATE, NOT_OBSERVED, NATIVE = "confirmed", "candidate", "not observed", "needs native annotation"
CARD_COLUMNS = (
    "system_id", "system_spec", "role", "language", "asr_id", "asr_spec",
    "n_items", "n_audio", "completion_rate", "gate_f1",
    "sfr", "n_sfr_undefined", "gate_s",
    "lid_rates", "asr_lid_rate", "text_lid_rate", "gate_v",
    "wer", "wer_ci_low", "wer_ci_high",
    "natural_wer", "cer", "perfect_pct", "low_error_pct", "n_high_cer_wer", "f3_classes",
    "f1", "f2", "f3", "f4", "f5", "n_for_mos",
)  # fmt: skip


def _base(language: object) -> str | None:
    from ttseval.core.languages import base_language

    return (
        None
        if language is None or (isinstance(language, float) and np.isnan(language))
        else base_language(str(language))
    )


def per_sentence(items: pd.DataFrame, transcripts: pd.DataFrame, *, digits: DigitPolicy = "exclude") -> pd.DataFrame:
    """The ok transcripts with their item's language and text, each one's SFR (NaN when undefined or when the
    language has no script data) and whether the recogniser detected the target language (None: no detection)."""
    # the columns read of per_sentence rows, selected before the filter copies them (a transcript's normalised
    # texts and error message are most of a 100,000-row table)
    kept = transcripts[[c for c in transcripts.columns if c in SENTENCE_COLUMNS]]
    ok = kept[kept["status"] == "ok"].merge(items[["item_id", "language", "text"]], on="item_id", how="left")

    def sfr(hypothesis: object, language: str) -> float:
        try:
            heard = hypothesis if isinstance(hypothesis, str) else ""  # None/NaN: nothing heard
            v = script_fidelity(heard, language, digits=digits)
        except ValueError:  # no script ranges for this language: SFR is not defined for it
            return np.nan
        return np.nan if v is None else v

    # two columns zipped, not a row Series per transcript (100,000 of them in a large run)
    ok["sfr"] = pd.Series(
        [sfr(h, lang) for h, lang in zip(ok["hypothesis"], ok["language"])], index=ok.index, dtype=float
    )
    detected = ok["detected_language"] if "detected_language" in ok else pd.Series(None, index=ok.index)
    ok["asr_lid_target"] = [
        None if d is None or d != d else _base(d) == _base(lang) for d, lang in zip(detected, ok["language"])
    ]
    return ok


def lid_status(rates: dict[str, float], t: Thresholds) -> str:
    """Section 3.4's rule over the voting LID models' target-language rates (NaN rates are ignored)."""
    values = [v for v in rates.values() if v == v]
    if not values:
        return "not run"
    if all(v >= t.lid_pass for v in values):
        return "pass"
    if all(v < t.lid_fail for v in values):
        return "fail"
    return "unresolved"


def grapheme_class_wer(rows: pd.DataFrame, language: str) -> pd.DataFrame:
    """WER (pooled) of the utterances whose reference contains each of the language's letter classes, beside the
    WER of all of them: columns class, letters, n_items, wer, overall_wer. `rows` are per_sentence rows of one
    language (and one system and recogniser)."""
    classes = language_data(language).get("grapheme_classes", {})
    overall = rows["word_errors"].sum() / rows["ref_words"].sum() if len(rows) else np.nan
    out = []
    for name, letters in classes.items():
        has = rows["text"].map(lambda s, letters=letters: any(c in s for c in letters)) if len(rows) else rows["text"]
        sub = rows[has.astype(bool)] if len(rows) else rows
        wer = sub["word_errors"].sum() / sub["ref_words"].sum() if len(sub) else np.nan
        out.append(
            {"class": name, "letters": "".join(letters), "n_items": len(sub), "wer": wer, "overall_wer": overall}
        )
    return pd.DataFrame(out, columns=["class", "letters", "n_items", "wer", "overall_wer"])


def _low(rate: float, t: Thresholds) -> bool:
    return rate == rate and rate < t.lid_fail  # NaN: no evidence


def _f2(gate_v: str, gate_s: str, asr_lid: float, text_lid: float, t: Thresholds, role: str = "tts") -> str:
    if role == "control":  # it speaks another language by design: the screening either caught it or did not
        caught = gate_v == "fail" or gate_s == "fail" or _low(asr_lid, t) or _low(text_lid, t)
        return "confirmed (negative control caught)" if caught else "not observed (negative control NOT caught)"
    if gate_v == "fail":
        return CANDIDATE
    if gate_v == "pass":
        return NOT_OBSERVED
    if gate_v == "unresolved":
        return NATIVE
    signals = [
        name
        for name, fired in (
            ("SFR", gate_s == "fail"),
            ("recogniser's detection", _low(asr_lid, t)),
            ("transcript language", _low(text_lid, t)),
        )
        if fired
    ]
    if signals:
        return f"{CANDIDATE} ({', '.join(signals)}; no LID model)"
    return NATIVE


def _rows_of(frame: pd.DataFrame, ids: set[str]) -> pd.DataFrame:
    """The rows of `frame` whose item is in `ids`; the frame itself, not a copy, when that is every row (a run of
    one language: 100,000 transcripts are tens of megabytes)."""
    mask = frame["item_id"].isin(ids)
    return frame if mask.all() else frame[mask]


def insv_card(
    items: pd.DataFrame,
    synthesis: pd.DataFrame,
    transcripts: pd.DataFrame,
    lid: pd.DataFrame | None = None,
    *,
    roles: dict[str, str] | None = None,
    thresholds: Thresholds | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """One report-card row per (system, language, recogniser), CARD_COLUMNS.

    Args:
        items: item_id, language, text.
        synthesis, transcripts: as for ttseval.metrics.summary.summarize_systems; transcripts also hypothesis and
            detected_language.
        lid: item_id, system_id, lid_id, status, language (the model's label's code) from the voting LID models
            (the `lid` table), or None.
        transcripts may carry `text_language`, the language of each transcript's text (a text LID model): its
            target-language rate is `text_lid_rate`, shown beside the V gate, never voting.
        roles: system_id -> 'tts' (the default), 'natural' (natural speech: its WER is every row's `natural_wer`
            for the same language and recogniser) or 'control' (a negative control: F2 says whether the
            screening caught it). Rows come TTS first, then natural speech, then controls.
        thresholds: the `insv` settings; None: their defaults.
    """
    roles = roles or {}
    t = thresholds if thresholds is not None else Thresholds()
    sentences = per_sentence(items, transcripts, digits=t.digits)
    no_quality = pd.DataFrame(columns=["item_id", "system_id", "quality_id", "status", "mos"])
    # what the summary reads, selected before a language's rows are (a filter copies every column it is given)
    synthesis = synthesis[[c for c in synthesis.columns if c in SYNTHESIS_COLUMNS]]
    transcripts = transcripts[[c for c in transcripts.columns if c in TRANSCRIPT_COLUMNS]]
    rows = []
    for language in pd.unique(items["language"]):
        lang_items = items[items["language"] == language]
        every = len(lang_items) == len(items)  # a run of one language: every row is this language's
        ids = set(lang_items["item_id"])
        syn = synthesis if every else _rows_of(synthesis, ids)
        if syn.empty:
            continue
        summary = summarize_systems(
            lang_items,
            syn,
            transcripts if every else _rows_of(transcripts, ids),
            no_quality,
            n_resamples=n_resamples,
            seed=seed,
        )
        for s in summary.to_dict("records"):
            mine = (
                sentences[
                    (sentences["system_id"] == s["system_id"])
                    & (sentences["asr_id"] == s["asr_id"])
                    & (every or sentences["item_id"].isin(ids))
                ]
                if s["asr_id"] is not None
                else sentences.iloc[0:0]
            )
            n_audio = s["n_ok"]
            sfr = corpus_sfr(mine["sfr"])
            gate_s = "undefined" if np.isnan(sfr.mean) else ("pass" if sfr.mean >= t.sfr else "fail")
            detections = mine["asr_lid_target"].dropna()
            asr_lid = float(detections.astype(bool).mean()) if len(detections) else np.nan
            rates = {}
            if lid is not None and len(lid):
                ok_lid = lid[
                    (lid["system_id"] == s["system_id"]) & (every or lid["item_id"].isin(ids)) & (lid["status"] == "ok")
                ]
                for lid_id, g in ok_lid.groupby("lid_id", sort=True):
                    rates[str(lid_id)] = float((g["language"].map(_base) == _base(language)).mean())
            gate_v = lid_status(rates, t)
            texts = mine["text_language"].dropna() if "text_language" in mine else pd.Series(dtype=object)
            text_lid = float((texts.map(_base) == _base(language)).mean()) if len(texts) else np.nan
            wer_rows = mine[mine["ref_words"] > 0]
            wer_u = wer_rows["word_errors"] / wer_rows["ref_words"]
            cer_u = wer_rows["char_errors"] / wer_rows["ref_chars"]
            high = int(((wer_u > 0) & (cer_u / wer_u.where(wer_u > 0) >= t.f5_cer_wer)).sum())
            classes = grapheme_class_wer(mine, language)
            tested = classes[classes["n_items"] >= t.f3_min_items]
            flagged = tested[tested["wer"] >= t.f3_ratio * tested["overall_wer"]] if len(tested) else tested
            f1 = CONFIRMED if n_audio < s["n_items"] else CANDIDATE if sfr.n_undefined else NOT_OBSERVED
            role = roles.get(s["system_id"], "tts")
            rows.append(
                {
                    "system_id": s["system_id"],
                    "system_spec": s["system_spec"],
                    "role": role,
                    "language": language,
                    "asr_id": s["asr_id"],
                    "asr_spec": s["asr_spec"],
                    "n_items": s["n_items"],
                    "n_audio": n_audio,
                    "completion_rate": s["completion_rate"],
                    "gate_f1": "pass" if s["completion_rate"] >= t.completion else "fail",
                    "sfr": sfr.mean,
                    "n_sfr_undefined": sfr.n_undefined,
                    "gate_s": gate_s,
                    "lid_rates": rates,
                    "asr_lid_rate": asr_lid,
                    "text_lid_rate": text_lid,
                    "gate_v": gate_v,
                    "wer": s["wer"],
                    "wer_ci_low": s["wer_ci_low"],
                    "wer_ci_high": s["wer_ci_high"],
                    "cer": s["cer"],
                    "perfect_pct": s["perfect_pct"],
                    "low_error_pct": 100.0 * float((wer_u <= t.low_error_wer).mean()) if len(wer_u) else np.nan,
                    "n_high_cer_wer": high,
                    "f3_classes": ", ".join(flagged["class"]),
                    "f1": f1,
                    "f2": _f2(gate_v, gate_s, asr_lid, text_lid, t, role),
                    "f3": CANDIDATE if len(flagged) else (NOT_OBSERVED if len(tested) else NATIVE),
                    "f4": NATIVE,
                    "f5": (CANDIDATE if high else NOT_OBSERVED) if len(wer_rows) else NATIVE,
                    "n_for_mos": n_audio,
                }
            )
    card = pd.DataFrame(rows, columns=list(CARD_COLUMNS))
    natural = card[card["role"] == "natural"].groupby(["language", "asr_id"])["wer"].mean()
    card["natural_wer"] = [natural.get((lang, asr), np.nan) for lang, asr in zip(card["language"], card["asr_id"])]
    order = card["role"].map({"tts": 0, "natural": 1, "control": 2})
    return card.assign(_o=order).sort_values("_o", kind="stable").drop(columns="_o").reset_index(drop=True)


def recogniser_rankings(sentences: pd.DataFrame, asr_ids: list[str]) -> tuple[pd.DataFrame, float]:
    """Pooled WER per system (rows) and recogniser (columns, in `asr_ids` order: the first ranks, section 4.4) over
    the clips every one of those recognisers transcribed, and Kendall's W of the systems' rankings across the
    recognisers (NaN with fewer than two systems or recognisers, or when every recogniser ties every system).
    `sentences` are per_sentence rows."""
    from ttseval.metrics.agreement import kendalls_w

    mine = sentences[sentences["asr_id"].isin(asr_ids)]
    clips = mine.groupby(["item_id", "system_id"])["asr_id"].nunique()
    shared = clips[clips == len(asr_ids)].index
    mine = mine.set_index(["item_id", "system_id"]).loc[lambda f: f.index.isin(shared)].reset_index()
    sums = mine.groupby(["system_id", "asr_id"])[["word_errors", "ref_words"]].sum()
    wer = (sums["word_errors"] / sums["ref_words"]).unstack("asr_id").reindex(columns=asr_ids)
    w = float("nan")
    # every recogniser giving every system the same WER (all 0 on easy items) leaves no ranking: W is 0/0, NaN here
    tied = bool((wer.nunique(axis=0) <= 1).all())
    if len(asr_ids) >= 2 and len(wer) >= 2 and not wer.isna().any().any() and not tied:
        w = kendalls_w(wer.T.to_numpy(dtype=float))
    return wer, w
