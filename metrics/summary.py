"""Per-system and per-group summary tables built from the stage tables.

Pure: DataFrames in, a new DataFrame out. Inputs are checked loudly (unknown status,
duplicate key, an ok row with null counts, a transcript without an ok synthesis, several
ASR or quality models mixed) and a ``ValueError`` names the offending row key.

Reading caveat: WER, CER and Perfect% are conditional on synthesis and transcription
having succeeded, so a system that fails on hard items can look better than it is; read
them beside ``completion_rate`` (INSV-A F1 rate = 1 - completion_rate).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np
import pandas as pd

from metrics.bootstrap import CI, bootstrap_mean_ci, bootstrap_ratio_ci
from metrics.wer import MetricInfo, corpus_rate, mean_utterance_rate, perfect_rate

__all__ = [
    "GROUP_COLUMNS",
    "SUMMARY_COLUMNS",
    "SUMMARY_METRICS",
    "summarize_by",
    "summarize_systems",
]

SYNTHESIS_STATUSES = ("ok", "failed", "empty", "unsupported")
TRANSCRIPT_STATUSES = ("ok", "failed")
QUALITY_STATUSES = ("ok", "failed")
GROUP_COLUMNS = ("category", "language", "depth")

SUMMARY_COLUMNS = (
    "system_id", "system_spec",
    "n_items", "n_ok", "n_failed", "n_empty", "n_unsupported", "n_missing", "completion_rate",
    "n_transcribed",
    "wer", "wer_ci_low", "wer_ci_high", "wer_utt_mean",
    "cer", "cer_ci_low", "cer_ci_high", "cer_utt_mean",
    "perfect_pct",
    "mos", "mos_ci_low", "mos_ci_high", "n_mos",
    "mean_duration_s", "rtf",
)  # fmt: skip
_INT_COLUMNS = ("n_items", "n_ok", "n_failed", "n_empty", "n_unsupported", "n_missing", "n_transcribed", "n_mos")

# Direction of each metric column of the summary tables, so reports never guess.
SUMMARY_METRICS: Mapping[str, MetricInfo] = MappingProxyType(
    {
        "completion_rate": MetricInfo(higher_is_better=True, aggregate="n_ok / n_items"),
        "wer": MetricInfo(higher_is_better=False, aggregate="corpus: sum of word errors / sum of reference words"),
        "wer_utt_mean": MetricInfo(higher_is_better=False, aggregate="mean over utterances of word errors / ref words"),
        "cer": MetricInfo(higher_is_better=False, aggregate="corpus: sum of char errors / sum of reference chars"),
        "cer_utt_mean": MetricInfo(higher_is_better=False, aggregate="mean over utterances of char errors / ref chars"),
        "perfect_pct": MetricInfo(higher_is_better=True, aggregate="100 * share of transcripts with 0 word errors"),
        "mos": MetricInfo(higher_is_better=True, aggregate="mean of per-utterance MOS over ok quality rows"),
        "rtf": MetricInfo(higher_is_better=False, aggregate="sum latency_s / sum duration_s, ok rows with a latency"),
    }
)  # fmt: skip

_SYN_KEY = ("item_id", "system_id")
_TR_KEY = ("item_id", "system_id", "asr_id")
_Q_KEY = ("item_id", "system_id", "quality_id")


def _key_text(row: pd.Series, key: Sequence[str]) -> str:
    return ", ".join(f"{k}={row[k]!r}" for k in key)


def _require_columns(frame: pd.DataFrame, name: str, columns: Sequence[str]) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks column(s) {missing}; it has {list(frame.columns)}")


def _check_unique(frame: pd.DataFrame, name: str, key: Sequence[str]) -> None:
    duplicated = frame.duplicated(list(key), keep="first")
    if duplicated.any():
        row = frame[duplicated].iloc[0]
        raise ValueError(f"{name} has a duplicate row for {_key_text(row, key)}; dedupe by key before summarizing")


def _check_status(frame: pd.DataFrame, name: str, allowed: Sequence[str], key: Sequence[str]) -> None:
    bad = ~frame["status"].isin(allowed)
    if bad.any():
        row = frame[bad].iloc[0]
        raise ValueError(
            f"{name} row {_key_text(row, key)} has status {row['status']!r}; expected one of {list(allowed)}"
        )


def _check_single_model(frame: pd.DataFrame, name: str, column: str) -> None:
    # Different clips may come from different models (ASR is routed by language: tiny.en for English, a
    # multilingual model elsewhere), but one clip scored by two models would be counted twice in the pool.
    twice = frame.duplicated(["item_id", "system_id"], keep=False)
    if twice.any():
        first = frame.loc[twice].iloc[0]
        models = list(pd.unique(frame.loc[twice, column]))
        raise ValueError(
            f"{name} has several {column} values {models} for item_id={first['item_id']!r}, "
            f"system_id={first['system_id']!r}; results of different models must not be pooled: "
            f"filter {name} to one {column} per clip and summarize each separately"
        )


def _finite_column(
    frame: pd.DataFrame,
    name: str,
    column: str,
    key: Sequence[str],
    *,
    integral: bool,
    minimum: float,
    strictly: bool = False,
) -> np.ndarray:
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(values) | ((values <= minimum) if strictly else (values < minimum))
    if integral:
        bad |= np.isfinite(values) & (values != np.round(values))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = frame.iloc[i]
        rule = f"{'> ' if strictly else '>= '}{minimum:g}" + (" and integral" if integral else "")
        raise ValueError(f"{name} row {_key_text(row, key)} is ok but {column} = {row[column]!r}; it must be {rule}")
    return values


def _check_has_ok_synthesis(frame: pd.DataFrame, name: str, key: Sequence[str], ok_keys: pd.MultiIndex) -> None:
    present = pd.MultiIndex.from_frame(frame[list(_SYN_KEY)]).isin(ok_keys)
    if not present.all():
        row = frame[~present].iloc[0]
        raise ValueError(
            f"{name} row {_key_text(row, key)} has no synthesis row with status 'ok' for that item and system; "
            "it was computed on audio this summary does not know about"
        )


def _validate(
    items: pd.DataFrame,
    synthesis: pd.DataFrame,
    transcripts: pd.DataFrame,
    quality: pd.DataFrame | None,
    *,
    item_columns: Sequence[str],
) -> None:
    _require_columns(items, "items", ["item_id", *item_columns])
    _require_columns(
        synthesis, "synthesis", ["item_id", "system_id", "system_spec", "status", "duration_s", "latency_s"]
    )
    _require_columns(
        transcripts, "transcripts", [*_TR_KEY, "status", "word_errors", "ref_words", "char_errors", "ref_chars"]
    )
    if len(items) == 0:
        raise ValueError("items is empty: completion and error rates need at least one item")
    _check_unique(items, "items", ["item_id"])
    for column in item_columns:
        if items[column].isna().any():
            row = items[items[column].isna()].iloc[0]
            raise ValueError(f"items row item_id={row['item_id']!r} has a null {column}")

    _check_unique(synthesis, "synthesis", _SYN_KEY)
    _check_status(synthesis, "synthesis", SYNTHESIS_STATUSES, _SYN_KEY)
    unknown = ~synthesis["item_id"].isin(items["item_id"])
    if unknown.any():
        row = synthesis[unknown].iloc[0]
        raise ValueError(f"synthesis row {_key_text(row, _SYN_KEY)} refers to an item_id that is not in items")
    for system_id, specs in synthesis.groupby("system_id", sort=False)["system_spec"]:
        if specs.nunique(dropna=False) > 1:
            raise ValueError(f"system_id={system_id!r} has several system_spec values {list(pd.unique(specs))}")
    ok_syn = synthesis[synthesis["status"] == "ok"]
    _finite_column(ok_syn, "synthesis", "duration_s", _SYN_KEY, integral=False, minimum=0.0, strictly=True)
    with_latency = ok_syn[ok_syn["latency_s"].notna()]
    _finite_column(with_latency, "synthesis", "latency_s", _SYN_KEY, integral=False, minimum=0.0)
    ok_keys = pd.MultiIndex.from_frame(ok_syn[list(_SYN_KEY)])

    _check_unique(transcripts, "transcripts", _TR_KEY)
    _check_status(transcripts, "transcripts", TRANSCRIPT_STATUSES, _TR_KEY)
    _check_single_model(transcripts, "transcripts", "asr_id")
    _check_has_ok_synthesis(transcripts, "transcripts", _TR_KEY, ok_keys)
    ok_tr = transcripts[transcripts["status"] == "ok"]
    for column in ("word_errors", "char_errors"):
        _finite_column(ok_tr, "transcripts", column, _TR_KEY, integral=True, minimum=0.0)
    for column in ("ref_words", "ref_chars"):
        # An empty reference is an item-text bug, never a zero-length utterance to skip.
        _finite_column(ok_tr, "transcripts", column, _TR_KEY, integral=True, minimum=0.0, strictly=True)

    if quality is not None:
        _require_columns(quality, "quality", [*_Q_KEY, "status", "mos"])
        _check_unique(quality, "quality", _Q_KEY)
        _check_status(quality, "quality", QUALITY_STATUSES, _Q_KEY)
        _check_single_model(quality, "quality", "quality_id")
        _check_has_ok_synthesis(quality, "quality", _Q_KEY, ok_keys)
        ok_q = quality[quality["status"] == "ok"]
        _finite_column(ok_q, "quality", "mos", _Q_KEY, integral=False, minimum=-np.inf)


def _system_rng(seed: int, system_id: object, metric: str) -> np.random.Generator:
    # A stable hash (not Python's salted hash()) so a system's CI does not depend on the
    # process, on which other systems are summarized, or on which other metrics ran.
    digest = hashlib.sha256(f"{system_id}\x00{metric}".encode()).digest()
    words = np.frombuffer(digest[:16], dtype="<u4").tolist()
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))


def _counts(frame: pd.DataFrame, column: str) -> np.ndarray:
    return frame[column].to_numpy(dtype=float, na_value=np.nan).astype(np.int64)


def _rates(ok_tr: pd.DataFrame) -> tuple[float, float]:
    if len(ok_tr) == 0:
        return np.nan, np.nan
    return (
        corpus_rate(_counts(ok_tr, "word_errors"), _counts(ok_tr, "ref_words")),
        corpus_rate(_counts(ok_tr, "char_errors"), _counts(ok_tr, "ref_chars")),
    )


def _typed(rows: list[dict], columns: Sequence[str], int_columns: Sequence[str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(columns))
    for column in int_columns:
        frame[column] = frame[column].astype(np.int64)
    return frame


def summarize_systems(
    items: pd.DataFrame,
    synthesis: pd.DataFrame,
    transcripts: pd.DataFrame,
    quality: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """One summary row per system: completion, WER/CER with CIs, Perfect%, MOS, RTF.

    Args:
        items: Columns item_id (unique); n_items = number of rows.
        synthesis: item_id, system_id, system_spec, status (ok/failed/empty/unsupported),
            duration_s (seconds, > 0 when ok), latency_s (seconds, nullable).
        transcripts: item_id, system_id, asr_id (one per clip), status (ok/failed),
            word_errors, ref_words, char_errors, ref_chars (ints when ok).
        quality: item_id, system_id, quality_id (one per clip), status (ok/failed),
            mos (when ok).
        n_resamples: Bootstrap resamples for each CI.
        seed: Non-negative int; each (system_id, metric) gets its own Generator derived
            from it and a SHA-256 of the system_id, so results are reproducible.

    Returns:
        DataFrame with ``SUMMARY_COLUMNS``, one row per system_id in order of first
        appearance in ``synthesis``. n_missing counts items with no synthesis row.
        wer/cer are pooled (sum/sum) over ok transcripts; *_utt_mean are means of
        per-utterance ratios; perfect_pct is in 0-100; rtf = sum(latency_s) /
        sum(duration_s) over ok rows that have a latency. A metric with no data is NaN.

    Raises:
        ValueError: a missing column, duplicate key, unknown status, null/negative count,
            a transcript or quality row without an ok synthesis, several asr_id or
            quality_id values, or a bad seed; the message names the row key.
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    _validate(items, synthesis, transcripts, quality, item_columns=())
    n_items = len(items)
    ok_tr_all = transcripts[transcripts["status"] == "ok"]
    ok_q_all = quality[quality["status"] == "ok"]

    rows = []
    for system_id in pd.unique(synthesis["system_id"]):
        syn = synthesis[synthesis["system_id"] == system_id]
        status_counts = syn["status"].value_counts()
        n_status = {s: int(status_counts.get(s, 0)) for s in SYNTHESIS_STATUSES}
        ok_syn = syn[syn["status"] == "ok"]
        row = {
            "system_id": system_id,
            "system_spec": syn["system_spec"].iloc[0],
            "n_items": n_items,
            **{f"n_{s}": n for s, n in n_status.items()},
            "n_missing": n_items - len(syn),
            "completion_rate": n_status["ok"] / n_items,
        }

        ok_tr = ok_tr_all[ok_tr_all["system_id"] == system_id]
        row["n_transcribed"] = len(ok_tr)
        for unit, errors_col, totals_col in (("wer", "word_errors", "ref_words"), ("cer", "char_errors", "ref_chars")):
            if len(ok_tr):
                errors, totals = _counts(ok_tr, errors_col), _counts(ok_tr, totals_col)
                ci = bootstrap_ratio_ci(
                    errors, totals, n_resamples=n_resamples, seed=_system_rng(seed, system_id, unit)
                )
                utt_mean = mean_utterance_rate(errors, totals)
            else:
                ci, utt_mean = CI(np.nan, np.nan, np.nan), np.nan
            row.update(
                {unit: ci.point, f"{unit}_ci_low": ci.low, f"{unit}_ci_high": ci.high, f"{unit}_utt_mean": utt_mean}
            )
        row["perfect_pct"] = 100.0 * perfect_rate(_counts(ok_tr, "word_errors")) if len(ok_tr) else np.nan

        ok_q = ok_q_all[ok_q_all["system_id"] == system_id]
        if len(ok_q):
            mos = ok_q["mos"].to_numpy(dtype=float, na_value=np.nan)
            ci = bootstrap_mean_ci(mos, n_resamples=n_resamples, seed=_system_rng(seed, system_id, "mos"))
        else:
            ci = CI(np.nan, np.nan, np.nan)
        row.update({"mos": ci.point, "mos_ci_low": ci.low, "mos_ci_high": ci.high, "n_mos": len(ok_q)})

        durations = ok_syn["duration_s"].to_numpy(dtype=float, na_value=np.nan)
        row["mean_duration_s"] = float(durations.mean()) if len(durations) else np.nan
        # RTF uses only rows with a latency, in numerator and denominator alike, so a
        # missing latency (e.g. a cached result) neither counts as 0 s nor skews the ratio.
        timed = ok_syn[ok_syn["latency_s"].notna()]
        row["rtf"] = (
            float(timed["latency_s"].astype(float).sum() / timed["duration_s"].astype(float).sum())
            if len(timed)
            else np.nan
        )
        rows.append(row)
    return _typed(rows, SUMMARY_COLUMNS, _INT_COLUMNS)


def summarize_by(
    items: pd.DataFrame,
    synthesis: pd.DataFrame,
    transcripts: pd.DataFrame,
    *,
    by: str,
) -> pd.DataFrame:
    """Per (system_id, group) completion and pooled WER/CER, without CIs.

    Args:
        items: item_id plus the ``by`` column (non-null).
        synthesis: As for ``summarize_systems``.
        transcripts: As for ``summarize_systems``.
        by: One of ``GROUP_COLUMNS``: "category", "language" or "depth".

    Returns:
        DataFrame with columns system_id, <by>, n_items, n_ok, completion_rate,
        n_transcribed, wer, cer. Systems in order of first appearance in ``synthesis``;
        groups in order of first appearance in ``items``; every (system, group) pair is
        present, with NaN wer/cer when it has no ok transcript.

    Raises:
        ValueError: ``by`` not allowed, or any input problem ``summarize_systems`` reports.
    """
    if by not in GROUP_COLUMNS:
        raise ValueError(f"by must be one of {list(GROUP_COLUMNS)}, got {by!r}")
    _validate(items, synthesis, transcripts, None, item_columns=(by,))
    group_of = items.set_index("item_id")[by]
    groups = pd.unique(items[by])
    n_items_by_group = items[by].value_counts(sort=False)
    ok_tr_all = transcripts[transcripts["status"] == "ok"]

    rows = []
    for system_id in pd.unique(synthesis["system_id"]):
        syn = synthesis[synthesis["system_id"] == system_id]
        syn_group = syn["item_id"].map(group_of)
        ok_tr = ok_tr_all[ok_tr_all["system_id"] == system_id]
        tr_group = ok_tr["item_id"].map(group_of)
        for group in groups:
            n_items = int(n_items_by_group[group])
            n_ok = int(((syn_group == group) & (syn["status"] == "ok")).sum())
            group_tr = ok_tr[tr_group == group]
            wer, cer = _rates(group_tr)
            rows.append(
                {
                    "system_id": system_id,
                    by: group,
                    "n_items": n_items,
                    "n_ok": n_ok,
                    "completion_rate": n_ok / n_items,
                    "n_transcribed": len(group_tr),
                    "wer": wer,
                    "cer": cer,
                }
            )
    columns = ["system_id", by, "n_items", "n_ok", "completion_rate", "n_transcribed", "wer", "cer"]
    return _typed(rows, columns, ("n_items", "n_ok", "n_transcribed"))
