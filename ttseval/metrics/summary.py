"""Per-(system, recogniser) and per-group summary tables built from the stage tables.

Pure: DataFrames in, a new DataFrame out. A row is one (system_id, asr_id) pair: results of two
recognisers are never pooled, so a run whose `asr` setting changed (or that routes languages to
different recognisers) has one row per recogniser for each system. Synthesis figures (completion,
duration, RTF) and MOS are per system and repeat on each of its rows.

The inputs are the stored stage tables, checked against their declared rules by
``ttseval.core.validation`` (``require_valid``) where they are written and read; this module does not
re-check them. The metric functions it calls still refuse what they cannot compute (a negative or
missing count, an empty reference) with a ``ValueError``.

Reading caveat: WER, CER and Perfect% are conditional on synthesis and transcription
having succeeded, so a system that fails on hard items can look better than it is; read
them beside ``completion_rate`` (INSV-A F1 rate = 1 - completion_rate).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ttseval.metrics.bootstrap import CI, MIN_INTERVAL_ITEMS, bootstrap_mean_ci, bootstrap_ratio_ci
from ttseval.metrics.registry import ci_columns
from ttseval.metrics.wer import corpus_rate, mean_utterance_rate, perfect_rate

__all__ = [
    "GROUP_COLUMNS",
    "SUMMARY_COLUMNS",
    "SYNTHESIS_COLUMNS",
    "TRANSCRIPT_COLUMNS",
    "summarize_by",
    "summarize_systems",
]

SYNTHESIS_STATUSES = ("ok", "failed", "empty", "unsupported")
GROUP_COLUMNS = ("category", "language", "depth")

SUMMARY_COLUMNS = (
    "system_id", "system_spec", "asr_id", "asr_spec",
    "n_items", "n_ok", "n_failed", "n_empty", "n_unsupported", "n_missing", "completion_rate",
    "n_transcribed",
    "wer", "wer_ci_low", "wer_ci_high", "wer_utt_mean",
    "cer", "cer_ci_low", "cer_ci_high", "cer_utt_mean",
    "perfect_pct",
    "mos", "mos_ci_low", "mos_ci_high", "n_mos",
    "mean_duration_s", "rtf",
)  # fmt: skip
_INT_COLUMNS = ("n_items", "n_ok", "n_failed", "n_empty", "n_unsupported", "n_missing", "n_transcribed", "n_mos")
_SYN_KEY = ["item_id", "system_id"]
# what the summaries read of each table
SYNTHESIS_COLUMNS = ("item_id", "system_id", "system_spec", "status", "duration_s", "latency_s")
TRANSCRIPT_COLUMNS = (
    "item_id", "system_id", "asr_id", "asr_spec", "status", "word_errors", "ref_words", "char_errors", "ref_chars",
)  # fmt: skip


def _require_columns(frame: pd.DataFrame, name: str, columns: Sequence[str]) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks column(s) {missing}; it has {list(frame.columns)}")


def _inputs(
    items: pd.DataFrame, synthesis: pd.DataFrame, transcripts: pd.DataFrame, *, item_columns: Sequence[str] = ()
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ok synthesis rows, and the ok transcripts of those clips (a transcript of a clip this summary has no
    ok synthesis for, e.g. of a system left out, is not counted)."""
    _require_columns(items, "items", ["item_id", *item_columns])
    _require_columns(synthesis, "synthesis", SYNTHESIS_COLUMNS)
    _require_columns(transcripts, "transcripts", TRANSCRIPT_COLUMNS)
    if len(items) == 0:
        raise ValueError("items is empty: completion and error rates need at least one item")
    # only the columns read here, before any filter: a filter copies every column it is given (a transcripts table
    # of 100,000 rows with its texts is about 60 MiB), a selection of columns copies nothing
    synthesis, transcripts = synthesis[list(SYNTHESIS_COLUMNS)], transcripts[list(TRANSCRIPT_COLUMNS)]
    ok_syn = synthesis[synthesis["status"] == "ok"]
    ok_keys = pd.MultiIndex.from_frame(ok_syn[_SYN_KEY])
    of_ok_clips = pd.MultiIndex.from_frame(transcripts[_SYN_KEY]).isin(ok_keys)
    return ok_syn, _where(transcripts, of_ok_clips)


def _where(frame: pd.DataFrame, mask: Any) -> pd.DataFrame:
    """The rows of `frame` where `mask` holds: the frame itself, not a copy, when that is every row."""
    return frame if mask.all() else frame[mask]


def _recognisers(transcripts: pd.DataFrame, system_id: object) -> list[tuple[object, object]]:
    """(asr_id, asr_spec) of every recogniser with a transcript of the system's clips, in order of first
    appearance; [(None, None)] when there is none, so the system still has its row."""
    mine = transcripts[transcripts["system_id"] == system_id].drop_duplicates("asr_id")
    return list(zip(mine["asr_id"], mine["asr_spec"])) or [(None, None)]


def _counts(frame: pd.DataFrame, column: str) -> NDArray[np.float64]:
    # float, not int: a null count stays NaN, which the metric functions refuse, instead of a wrapped integer.
    counts: NDArray[np.float64] = frame[column].to_numpy(dtype=float, na_value=np.nan)
    return counts


def _rates(ok_tr: pd.DataFrame) -> tuple[float, float]:
    if len(ok_tr) == 0:
        return np.nan, np.nan
    return (
        corpus_rate(_counts(ok_tr, "word_errors"), _counts(ok_tr, "ref_words")),
        corpus_rate(_counts(ok_tr, "char_errors"), _counts(ok_tr, "ref_chars")),
    )


def _typed(rows: list[dict[str, Any]], columns: Sequence[str], int_columns: Sequence[str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(columns))
    for column in int_columns:
        frame[column] = frame[column].astype(np.int64)
    return frame


def _mos(quality: pd.DataFrame, system_id: object, n_resamples: int, seed: int) -> dict[str, Any]:
    ok_q = quality[(quality["system_id"] == system_id) & (quality["status"] == "ok")]
    if len(ok_q):
        mos = ok_q["mos"].to_numpy(dtype=float, na_value=np.nan)
        ci = bootstrap_mean_ci(mos, n_resamples=n_resamples, seed=seed, min_items=MIN_INTERVAL_ITEMS)
    else:
        ci = CI(np.nan, np.nan, np.nan)
    low, high = ci_columns("mos")
    return {"mos": ci.point, low: ci.low, high: ci.high, "n_mos": len(ok_q)}


def _error_rates(ok_tr: pd.DataFrame, system_id: object, n_resamples: int, seed: int) -> dict[str, Any]:
    row: dict[str, Any] = {"n_transcribed": len(ok_tr)}
    for unit, errors_col, totals_col in (("wer", "word_errors", "ref_words"), ("cer", "char_errors", "ref_chars")):
        if len(ok_tr):
            errors, totals = _counts(ok_tr, errors_col), _counts(ok_tr, totals_col)
            ci = bootstrap_ratio_ci(errors, totals, n_resamples=n_resamples, seed=seed, min_items=MIN_INTERVAL_ITEMS)
            utt_mean = mean_utterance_rate(errors, totals)
        else:
            ci, utt_mean = CI(np.nan, np.nan, np.nan), np.nan
        low, high = ci_columns(unit)
        row.update({unit: ci.point, low: ci.low, high: ci.high, f"{unit}_utt_mean": utt_mean})
    row["perfect_pct"] = 100.0 * perfect_rate(_counts(ok_tr, "word_errors")) if len(ok_tr) else np.nan
    return row


def summarize_systems(
    items: pd.DataFrame,
    synthesis: pd.DataFrame,
    transcripts: pd.DataFrame,
    quality: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """One summary row per (system, recogniser): completion, WER/CER with CIs, Perfect%, MOS, RTF.

    Args:
        items: Columns item_id (unique); n_items = number of rows.
        synthesis: item_id, system_id, system_spec, status (ok/failed/empty/unsupported),
            duration_s (seconds, > 0 when ok), latency_s (seconds, nullable).
        transcripts: item_id, system_id, asr_id, asr_spec, status (ok/failed),
            word_errors, ref_words, char_errors, ref_chars (counts when ok). A clip may have
            transcripts from several recognisers; each recogniser gets its own row.
        quality: item_id, system_id, quality_id (one per clip), status (ok/failed),
            mos (when ok).
        n_resamples: Bootstrap resamples for each CI.
        seed: Non-negative int; each (system_id, metric) gets its own Generator derived
            from it and a SHA-256 of the system_id, so results are reproducible.

    Returns:
        DataFrame with ``SUMMARY_COLUMNS``. Systems in order of first appearance in
        ``synthesis``; within a system, one row per asr_id in order of first appearance in
        ``transcripts`` (asr_id null when the system has no transcript). The WER/CER columns
        and n_transcribed are that recogniser's alone; completion, MOS, duration and RTF are
        the system's and repeat on each of its rows. n_missing counts items with no
        synthesis row. wer/cer are pooled (sum/sum) over ok transcripts; *_utt_mean are means
        of per-utterance ratios; perfect_pct is in 0-100; rtf = sum(latency_s) /
        sum(duration_s) over ok rows that have a latency. A metric with no data is NaN.

    Raises:
        ValueError: a missing column, empty items, several quality_id values for one clip,
            a bad seed, or a count the metric functions refuse (negative, null, an empty
            reference).
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    ok_syn_all, transcripts = _inputs(items, synthesis, transcripts)
    synthesis = synthesis[list(SYNTHESIS_COLUMNS)]
    _require_columns(quality, "quality", ["item_id", "system_id", "quality_id", "status", "mos"])
    twice = quality.duplicated(_SYN_KEY, keep=False)
    if twice.any():
        # MOS has one row per system: one clip scored by two predictors would be counted twice.
        first = quality.loc[twice].iloc[0]
        raise ValueError(
            f"quality has several quality_id values {list(pd.unique(quality.loc[twice, 'quality_id']))} for "
            f"item_id={first['item_id']!r}, system_id={first['system_id']!r}; filter quality to one quality_id"
        )
    n_items = len(items)
    ok_tr_all = _where(transcripts, transcripts["status"] == "ok")

    rows = []
    for system_id in pd.unique(synthesis["system_id"]):
        syn = synthesis[synthesis["system_id"] == system_id]
        status_counts = syn["status"].value_counts()
        n_status = {s: int(status_counts.get(s, 0)) for s in SYNTHESIS_STATUSES}
        ok_syn = ok_syn_all[ok_syn_all["system_id"] == system_id]
        system = {
            "system_id": system_id,
            "system_spec": syn["system_spec"].iloc[0],
            "n_items": n_items,
            **{f"n_{s}": n for s, n in n_status.items()},
            "n_missing": n_items - len(syn),
            "completion_rate": n_status["ok"] / n_items,
            **_mos(quality, system_id, n_resamples, seed),
        }
        durations = ok_syn["duration_s"].to_numpy(dtype=float, na_value=np.nan)
        system["mean_duration_s"] = float(durations.mean()) if len(durations) else np.nan
        # RTF uses only rows with a latency, in numerator and denominator alike, so a
        # missing latency (e.g. a cached result) neither counts as 0 s nor skews the ratio.
        timed = ok_syn[ok_syn["latency_s"].notna()]
        system["rtf"] = (
            float(timed["latency_s"].astype(float).sum() / timed["duration_s"].astype(float).sum())
            if len(timed)
            else np.nan
        )
        for asr_id, asr_spec in _recognisers(transcripts, system_id):
            ok_tr = ok_tr_all[(ok_tr_all["system_id"] == system_id) & (ok_tr_all["asr_id"] == asr_id)]
            rows.append(
                system | {"asr_id": asr_id, "asr_spec": asr_spec} | _error_rates(ok_tr, system_id, n_resamples, seed)
            )
    return _typed(rows, SUMMARY_COLUMNS, _INT_COLUMNS)


def summarize_by(
    items: pd.DataFrame,
    synthesis: pd.DataFrame,
    transcripts: pd.DataFrame,
    *,
    by: str,
) -> pd.DataFrame:
    """Per (system_id, asr_id, group) completion and pooled WER/CER, without CIs.

    Args:
        items: item_id plus the ``by`` column (non-null).
        synthesis: As for ``summarize_systems``.
        transcripts: As for ``summarize_systems``.
        by: One of ``GROUP_COLUMNS``: "category", "language" or "depth".

    Returns:
        DataFrame with columns system_id, asr_id, <by>, n_items, n_ok, completion_rate,
        n_transcribed, wer, cer. Systems in order of first appearance in ``synthesis``,
        recognisers as in ``summarize_systems``, groups in order of first appearance in
        ``items``; every (system, recogniser, group) is present, with NaN wer/cer when it has
        no ok transcript.

    Raises:
        ValueError: ``by`` not allowed, or a missing column or empty items.
    """
    if by not in GROUP_COLUMNS:
        raise ValueError(f"by must be one of {list(GROUP_COLUMNS)}, got {by!r}")
    _, transcripts = _inputs(items, synthesis, transcripts, item_columns=(by,))
    synthesis = synthesis[list(SYNTHESIS_COLUMNS)]
    group_of = items.set_index("item_id")[by]
    groups = pd.unique(items[by])
    n_items_by_group = items[by].value_counts(sort=False)
    ok_tr_all = _where(transcripts, transcripts["status"] == "ok")

    rows = []
    for system_id in pd.unique(synthesis["system_id"]):
        syn = synthesis[synthesis["system_id"] == system_id]
        syn_group = syn["item_id"].map(group_of)
        for asr_id, _ in _recognisers(transcripts, system_id):
            ok_tr = ok_tr_all[(ok_tr_all["system_id"] == system_id) & (ok_tr_all["asr_id"] == asr_id)]
            tr_group = ok_tr["item_id"].map(group_of)
            for group in groups:
                n_items = int(n_items_by_group[group])
                n_ok = int(((syn_group == group) & (syn["status"] == "ok")).sum())
                group_tr = ok_tr[tr_group == group]
                wer, cer = _rates(group_tr)
                rows.append(
                    {
                        "system_id": system_id,
                        "asr_id": asr_id,
                        by: group,
                        "n_items": n_items,
                        "n_ok": n_ok,
                        "completion_rate": n_ok / n_items,
                        "n_transcribed": len(group_tr),
                        "wer": wer,
                        "cer": cer,
                    }
                )
    columns = ["system_id", "asr_id", by, "n_items", "n_ok", "completion_rate", "n_transcribed", "wer", "cer"]
    return _typed(rows, columns, ("n_items", "n_ok", "n_transcribed"))
