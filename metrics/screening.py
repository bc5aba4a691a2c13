"""INSV-A screening (PashtoTTS-Bench sections 3-5 and Table 8): per system, language and recogniser, the gates of
the report card and the F1-F5 screening labels, from the stage tables. Thresholds are the `insv` settings
(ttseval.config.Insv).

Pure: DataFrames in, DataFrames out. Gates:
- F1 (synthesis): completion >= `completion` -> pass, else fail.
- S (script fidelity): mean transcript SFR (metrics.script) >= `sfr` -> pass, else fail; undefined when no
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
- F2: candidate when V fails; not observed when V passes; needs native annotation when unresolved. Without a LID
  model: candidate when S fails or the recogniser's detection gives the target language to fewer than `lid_fail`
  of the clips (said to be from those signals), else needs native annotation.
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

from metrics.script import DigitPolicy, corpus_sfr, language_data, script_fidelity
from metrics.summary import summarize_systems
from ttseval.config import Insv as Thresholds

__all__ = ["CARD_COLUMNS", "Thresholds", "grapheme_class_wer", "insv_card", "lid_status", "per_sentence"]

CONFIRMED, CANDIDATE, NOT_OBSERVED, NATIVE = "confirmed", "candidate", "not observed", "needs native annotation"
CARD_COLUMNS = (
    "system_id", "system_spec", "language", "asr_id", "asr_spec", "n_items", "n_audio", "completion_rate", "gate_f1",
    "sfr", "n_sfr_undefined", "gate_s", "lid_rates", "asr_lid_rate", "gate_v", "wer", "wer_ci_low", "wer_ci_high",
    "cer", "perfect_pct", "low_error_pct", "n_high_cer_wer", "f3_classes",
    "f1", "f2", "f3", "f4", "f5", "n_for_mos",
)  # fmt: skip


def _base(language: object) -> str | None:
    from ttseval.languages import base_language

    return None if language is None or (isinstance(language, float) and np.isnan(language)) else base_language(
        str(language))


def per_sentence(items: pd.DataFrame, transcripts: pd.DataFrame, *, digits: DigitPolicy = "exclude") -> pd.DataFrame:
    """The ok transcripts with their item's language and text, each one's SFR (NaN when undefined or when the
    language has no script data) and whether the recogniser detected the target language (None: no detection)."""
    ok = transcripts[transcripts["status"] == "ok"].merge(items[["item_id", "language", "text"]], on="item_id",
                                                          how="left")

    def sfr(r: pd.Series) -> float:
        try:
            v = script_fidelity(r["hypothesis"] or "", r["language"], digits=digits)
        except ValueError:  # no script ranges for this language: SFR is not defined for it
            return np.nan
        return np.nan if v is None else v

    ok["sfr"] = ok.apply(sfr, axis=1) if len(ok) else pd.Series(dtype=float)
    detected = ok["detected_language"] if "detected_language" in ok else pd.Series(None, index=ok.index)
    ok["asr_lid_target"] = [None if d is None or d != d else _base(d) == _base(lang)
                            for d, lang in zip(detected, ok["language"])]
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
        out.append({"class": name, "letters": "".join(letters), "n_items": len(sub), "wer": wer,
                    "overall_wer": overall})
    return pd.DataFrame(out, columns=["class", "letters", "n_items", "wer", "overall_wer"])


def _f2(gate_v: str, gate_s: str, asr_lid: float, t: Thresholds) -> str:
    if gate_v == "fail":
        return CANDIDATE
    if gate_v == "pass":
        return NOT_OBSERVED
    if gate_v == "unresolved":
        return NATIVE
    if gate_s == "fail" or (asr_lid == asr_lid and asr_lid < t.lid_fail):
        return f"{CANDIDATE} (SFR / recogniser's detection, no LID model)"
    return NATIVE


def insv_card(items: pd.DataFrame, synthesis: pd.DataFrame, transcripts: pd.DataFrame,
              lid: pd.DataFrame | None = None, *, thresholds: Thresholds = Thresholds(), n_resamples: int = 1000,
              seed: int = 0) -> pd.DataFrame:
    """One report-card row per (system, language, recogniser), CARD_COLUMNS.

    Args:
        items: item_id, language, text.
        synthesis, transcripts: as for metrics.summary.summarize_systems; transcripts also hypothesis and
            detected_language.
        lid: item_id, system_id, lid_id, status, label (a language tag) from the voting LID models, or None.
    """
    t = thresholds
    sentences = per_sentence(items, transcripts, digits=t.digits)
    no_quality = pd.DataFrame(columns=["item_id", "system_id", "quality_id", "status", "mos"])
    rows = []
    for language in pd.unique(items["language"]):
        lang_items = items[items["language"] == language]
        ids = set(lang_items["item_id"])
        syn = synthesis[synthesis["item_id"].isin(ids)]
        if syn.empty:
            continue
        summary = summarize_systems(lang_items, syn, transcripts[transcripts["item_id"].isin(ids)], no_quality,
                                    n_resamples=n_resamples, seed=seed)
        for s in summary.to_dict("records"):
            mine = sentences[(sentences["system_id"] == s["system_id"]) & (sentences["asr_id"] == s["asr_id"])
                             & sentences["item_id"].isin(ids)] if s["asr_id"] is not None else sentences.iloc[0:0]
            n_audio = s["n_ok"]
            sfr = corpus_sfr(mine["sfr"])
            gate_s = "undefined" if np.isnan(sfr.mean) else ("pass" if sfr.mean >= t.sfr else "fail")
            detections = mine["asr_lid_target"].dropna()
            asr_lid = float(detections.astype(bool).mean()) if len(detections) else np.nan
            rates = {}
            if lid is not None and len(lid):
                ok_lid = lid[(lid["system_id"] == s["system_id"]) & lid["item_id"].isin(ids) & (lid["status"] == "ok")]
                for lid_id, g in ok_lid.groupby("lid_id", sort=True):
                    rates[str(lid_id)] = float((g["label"].map(_base) == _base(language)).mean())
            gate_v = lid_status(rates, t)
            wer_rows = mine[mine["ref_words"] > 0]
            wer_u = wer_rows["word_errors"] / wer_rows["ref_words"]
            cer_u = wer_rows["char_errors"] / wer_rows["ref_chars"]
            high = int(((wer_u > 0) & (cer_u / wer_u.where(wer_u > 0) >= t.f5_cer_wer)).sum())
            classes = grapheme_class_wer(mine, language)
            tested = classes[classes["n_items"] >= t.f3_min_items]
            flagged = tested[tested["wer"] >= t.f3_ratio * tested["overall_wer"]] if len(tested) else tested
            f1 = (CONFIRMED if n_audio < s["n_items"] else CANDIDATE if sfr.n_undefined else NOT_OBSERVED)
            rows.append({
                "system_id": s["system_id"], "system_spec": s["system_spec"], "language": language,
                "asr_id": s["asr_id"], "asr_spec": s["asr_spec"], "n_items": s["n_items"], "n_audio": n_audio,
                "completion_rate": s["completion_rate"],
                "gate_f1": "pass" if s["completion_rate"] >= t.completion else "fail",
                "sfr": sfr.mean, "n_sfr_undefined": sfr.n_undefined, "gate_s": gate_s, "lid_rates": rates,
                "asr_lid_rate": asr_lid, "gate_v": gate_v, "wer": s["wer"], "wer_ci_low": s["wer_ci_low"],
                "wer_ci_high": s["wer_ci_high"], "cer": s["cer"], "perfect_pct": s["perfect_pct"],
                "low_error_pct": 100.0 * float((wer_u <= t.low_error_wer).mean()) if len(wer_u) else np.nan,
                "n_high_cer_wer": high, "f3_classes": ", ".join(flagged["class"]),
                "f1": f1, "f2": _f2(gate_v, gate_s, asr_lid, t),
                "f3": CANDIDATE if len(flagged) else (NOT_OBSERVED if len(tested) else NATIVE),
                "f4": NATIVE, "f5": (CANDIDATE if high else NOT_OBSERVED) if len(wer_rows) else NATIVE,
                "n_for_mos": n_audio,
            })
    return pd.DataFrame(rows, columns=list(CARD_COLUMNS))
