"""The run's tidy per-item table, `runs/<id>/per_sentence.csv`: one row per (item, system, recogniser) with the
item's text, the system by its readable spec and role, the synthesis status and audio flags, the recogniser's
transcript, WER and CER (and SFR and detected language: ttseval.metrics.screening.per_sentence), every MOS
predictor, speaker similarity and every judge's verdict, each as its own column. Written with every report and
copied into the export; plain CSV, so pandas and DuckDB read it as is."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.store import ArtifactStore
from ttseval.tasks.report.compute import RunTables

FILE = "per_sentence.csv"
CSV_ROWS = 10_000
"""Rows of per_sentence.csv formatted at once."""
LEADING = [
    "item_id",
    "category",
    "depth",
    "language",
    "text",
    "system",
    "role",
    "system_id",
    "synthesis_status",
    "audio_flags",
    "duration_s",
    "recogniser",
    "asr_id",
    "transcript_status",
    "transcript",
    "normalizer",
    "wer",
    "cer",
    "word_errors",
    "ref_words",
    "sfr",
    "detected_language",
    "asr_lid_target",
]


def column_name(prefix: str, spec: str) -> str:
    """A score column named after the tool's readable spec, in letters, digits and underscores only (so SQL can
    name it unquoted): ('mos', 'utmos') -> 'mos_utmos', ('verdict', 'objective:cer_margin=0.05') ->
    'verdict_objective_cer_margin_0_05'."""
    return f"{prefix}_" + re.sub(r"[^0-9A-Za-z]+", "_", str(spec)).strip("_").lower()


def _wide(frame: pd.DataFrame, spec: str, value: str, prefix: str) -> pd.DataFrame:
    """One column per tool (`spec`) of `value`, keyed by (item_id, system_id); the tool's last row per key."""
    if frame.empty:
        return pd.DataFrame(columns=["item_id", "system_id"])
    rows = frame.drop_duplicates(["item_id", "system_id", spec], keep="last")
    wide = rows.pivot(index=["item_id", "system_id"], columns=spec, values=value)
    names = {s: column_name(prefix, s) for s in wide.columns}
    if len(set(names.values())) < len(names):  # two specs that differ only in punctuation: keep them apart
        names = {s: f"{name}_{i}" for i, (s, name) in enumerate(names.items())}
    return wide.rename(columns=names).reset_index().rename_axis(columns=None)


def per_item_table(
    tables: RunTables,
    settings: Settings,
    judgments: pd.DataFrame,
    instruction_judgments: pd.DataFrame,
    *,
    text_language: bool = False,
) -> pd.DataFrame:
    """The tidy per-item table of a run (see the module's docstring). Every clip of the run's systems has a row,
    failed and unsupported ones included (no recogniser then); a clip transcribed by two recognisers has two.
    `text_language`: add the transcript's text language (fastText lid.176), as the INSV-A card uses it."""
    from ttseval.metrics.screening import per_sentence

    items = tables.items[["item_id", "category", "depth", "language", "text"]]
    clips = tables.synthesis.rename(columns={"system_spec": "system", "status": "synthesis_status"})
    clips = clips[["item_id", "system_id", "system", "synthesis_status", "audio_flags", "duration_s"]]
    clips["role"] = clips["system_id"].map(settings.role_of)
    transcripts = (
        tables.own_transcripts
        if text_language
        else tables.transcripts[tables.transcripts["system_id"].isin(tables.system_ids)]
    )
    # SFR and the recogniser's language detection of the ok transcripts, as the INSV-A screening computes them
    screened = per_sentence(tables.items, transcripts, digits=settings.insv.digits)
    heard = transcripts.rename(
        columns={"asr_spec": "recogniser", "status": "transcript_status", "hypothesis": "transcript"}
    )
    heard = heard.merge(
        screened[["item_id", "system_id", "asr_id", "sfr", "asr_lid_target"]],
        on=["item_id", "system_id", "asr_id"],
        how="left",
    )
    keep = [c for c in [*LEADING, "text_language"] if c in heard.columns and c not in {"text", "language"}]
    out = items.merge(clips, on="item_id").merge(heard[keep], on=["item_id", "system_id"], how="left")
    for wide in (
        _wide(tables.all_quality[tables.all_quality["status"] == "ok"], "quality_spec", "mos", "mos"),
        _wide(_similarity(tables.similarity), "encoder_ref", "similarity", "sim"),
        _wide(judgments[judgments["status"] == "ok"], "judge_spec", "winner", "verdict"),
        _wide(instruction_judgments[instruction_judgments["status"] == "ok"], "judge_spec", "follows", "follows"),
    ):
        out = out.merge(wide, on=["item_id", "system_id"], how="left")
    lead = [c for c in LEADING + (["text_language"] if text_language else []) if c in out.columns]
    return out[lead + [c for c in out.columns if c not in lead]].reset_index(drop=True)


def _similarity(similarity: pd.DataFrame) -> pd.DataFrame:
    ok = similarity[similarity["status"] == "ok"].copy() if not similarity.empty else similarity
    if ok.empty:
        return ok
    ok["encoder_ref"] = ok["encoder_spec"] + "_" + ok["reference"].fillna("")
    return ok


def write_per_item(store: ArtifactStore, run_id: str, settings: Settings, tables: RunTables) -> pd.DataFrame:
    """Compute the run's per-item table and store it as runs/<id>/per_sentence.csv (text cells a spreadsheet
    would run as formulas quoted); returns the table."""
    from ttseval.core.languages import base_language
    from ttseval.metrics.winrate import against_baseline
    from ttseval.tasks.report.format import spreadsheet_safe

    verdicts = ["item_id", "system_id", "judge_spec", "vs_baseline", "status", "winner"]  # not the raw answers
    judgments = against_baseline(store.read(run_id, "judgments", columns=verdicts))  # a clip's: the one vs the baseline
    instruction = store.read(run_id, "instruction_judgments")
    english = all(base_language(lang) == "en" for lang in tables.items["language"].unique())
    table = per_item_table(tables, settings, judgments, instruction, text_language=not english)

    def chunks() -> Iterator[bytes]:  # at 100,000 clips the CSV is tens of megabytes: never whole in memory
        for start in range(0, max(len(table), 1), CSV_ROWS):
            part = spreadsheet_safe(table.iloc[start : start + CSV_ROWS])
            yield part.to_csv(index=False, header=start == 0).encode("utf-8")

    store.write_chunks(f"runs/{run_id}/{FILE}", chunks)
    return table
