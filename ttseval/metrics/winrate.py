"""Pairwise win-rate of a candidate system against a baseline, as judged per item.

EmergentTTS-Eval scores each (item, candidate, baseline) comparison by a judge as a win
(1), tie (0.5) or loss (0) for the candidate and reports the mean over comparisons: 0.5
is parity with the baseline, above 0.5 better. ``win_rate_table`` does that per (judge,
candidate, baseline) and optionally per item group (category, depth), with a seeded
BCa bootstrap 95% CI over items; a cell with fewer than ``MIN_INTERVAL_ITEMS`` judged items gets no
interval (NaN bounds: reports say "n too small").

Judgments that were not scored are counted, never dropped silently: ``n_failed``
(status 'failed'), ``n_skipped`` (status 'skipped') and ``n_parse_failures`` (status
'ok' but the judge's answer could not be parsed, parse_ok False). win_rate is
conditional on a parsed judgment; read it beside those counts.

Statistical caveats: the CI resamples items within one (judge, candidate, baseline,
group) cell and treats them as independent; judge randomness (temperature) is not part
of it. Cells where every score is alike (all wins, all ties) get a zero-width interval: every resample is
the sample, and no bootstrap can say more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np
import pandas as pd

from ttseval.core.registry import Spec
from ttseval.metrics.bootstrap import CI, MIN_INTERVAL_ITEMS, bootstrap_mean_ci

__all__ = [
    "JUDGMENT_STATUSES",
    "WINNER_SCORES",
    "WINRATE_COLUMNS",
    "against_baseline",
    "model_of_voices",
    "scored_verdicts",
    "voice_variance",
    "win_rate_table",
]

# Score of each parsed verdict for the candidate (EmergentTTS-Eval: tie counts half).
WINNER_SCORES: Mapping[str, float] = MappingProxyType({"candidate": 1.0, "tie": 0.5, "baseline": 0.0})
JUDGMENT_STATUSES = ("ok", "failed", "skipped")

_KEY = ("item_id", "system_id", "baseline_id", "judge_id")
_CELL = ("judge_id", "system_id", "baseline_id")
_REQUIRED = (*_KEY, "winner", "parse_ok", "status")

# Output columns after the cell and group columns.
WINRATE_COLUMNS = (
    "n_judged", "wins", "ties", "losses",
    "win_rate", "win_rate_ci_low", "win_rate_ci_high", "tie_rate",
    "n_parse_failures", "n_failed", "n_skipped",
)  # fmt: skip
_INT_COLUMNS = ("n_judged", "wins", "ties", "losses", "n_parse_failures", "n_failed", "n_skipped")
# win_rate's direction and aggregation: ttseval.metrics.registry.METRICS["win_rate"]; tie_rate is descriptive.


def scored_verdicts(judgments: pd.DataFrame) -> pd.DataFrame:
    """The verdicts that are scored: status ok, parsed, and a winner WINNER_SCORES knows (what win-rates, the
    Bradley-Terry fit, the arena battles and the agreement with listeners count)."""
    return judgments[
        (judgments["status"] == "ok")
        & judgments["parse_ok"].fillna(False).astype(bool)
        & judgments["winner"].isin(list(WINNER_SCORES))
    ]


def against_baseline(judgments: pd.DataFrame) -> pd.DataFrame:
    """The verdicts against the run's baseline: every row but those of other pairs under judge_pairs all / sampled
    (`vs_baseline` False). A row without the flag (a run stored before it, or a frame without the column) is one."""
    if "vs_baseline" not in judgments.columns:
        return judgments
    return judgments[judgments["vs_baseline"].astype("boolean").fillna(True).astype(bool)]


def _key_text(row: pd.Series, key: Sequence[str]) -> str:
    return ", ".join(f"{k}={row[k]!r}" for k in key)


def _is_bool(value: object) -> bool:
    return isinstance(value, (bool, np.bool_))


def _validate(judgments: pd.DataFrame, by: tuple[str, ...]) -> pd.Series:
    """Check the frame and return the boolean mask of scored rows."""
    if not isinstance(judgments, pd.DataFrame):
        raise TypeError(f"judgments must be a pandas DataFrame, got {type(judgments).__name__}")
    missing = [c for c in (*_REQUIRED, *by) if c not in judgments.columns]
    if missing:
        raise ValueError(f"judgments lacks column(s) {missing}; it has {list(judgments.columns)}")
    clash = [c for c in by if c in _REQUIRED]
    if clash or len(set(by)) != len(by):
        raise ValueError(f"by must name distinct item columns other than {list(_REQUIRED)}, got {list(by)}")

    duplicated = judgments.duplicated(list(_KEY), keep="first")
    if duplicated.any():
        row = judgments[duplicated].iloc[0]
        raise ValueError(f"judgments has a duplicate row for {_key_text(row, _KEY)}; dedupe by key first")
    for column in (*_KEY, *by):
        null = judgments[column].isna()
        if null.any():
            row = judgments[null].iloc[0]
            raise ValueError(f"judgments row {_key_text(row, _KEY)} has a null {column}")

    bad_status = ~judgments["status"].isin(JUDGMENT_STATUSES)
    if bad_status.any():
        row = judgments[bad_status].iloc[0]
        raise ValueError(
            f"judgments row {_key_text(row, _KEY)} has status {row['status']!r}; "
            f"expected one of {list(JUDGMENT_STATUSES)}"
        )
    ok = judgments["status"] == "ok"
    bad_parse = ok & ~judgments["parse_ok"].map(_is_bool).astype(bool)
    if bad_parse.any():
        row = judgments[bad_parse].iloc[0]
        raise ValueError(
            f"judgments row {_key_text(row, _KEY)} is ok but parse_ok = {row['parse_ok']!r}; it must be a bool"
        )

    scored = ok & judgments["parse_ok"].map(lambda v: v is True or v is np.True_).astype(bool)
    has_winner = judgments["winner"].notna()
    invalid = scored & ~judgments["winner"].isin(list(WINNER_SCORES))
    if invalid.any():
        row = judgments[invalid].iloc[0]
        raise ValueError(
            f"judgments row {_key_text(row, _KEY)} is ok and parsed but winner = {row['winner']!r}; "
            f"expected one of {list(WINNER_SCORES)}"
        )
    # A verdict on a row that is not scored contradicts its status; refusing it keeps a
    # failed or unparsed judgment from being mistaken for data.
    contradictory = ~scored & has_winner
    if contradictory.any():
        row = judgments[contradictory].iloc[0]
        raise ValueError(
            f"judgments row {_key_text(row, _KEY)} has winner = {row['winner']!r} but status = "
            f"{row['status']!r}, parse_ok = {row['parse_ok']!r}; only ok, parsed rows may carry a winner"
        )
    return scored


def win_rate_table(
    judgments: pd.DataFrame,
    *,
    by: Sequence[str] = (),
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Win-rate of each candidate against its baseline, per judge and optional item group.

    Args:
        judgments: One row per (item_id, system_id, baseline_id, judge_id) with columns
            winner ('candidate', 'baseline', 'tie'; null unless status is 'ok' and
            parse_ok is True), parse_ok (bool when status is 'ok'), status ('ok',
            'failed', 'skipped'), plus the ``by`` columns (non-null item attributes).
        by: Extra grouping columns: () overall, ("category",) per category,
            ("category", "depth") per category x depth.
        n_resamples: Bootstrap resamples for each CI.
        confidence: Two-sided confidence level of the CI.
        seed: Non-negative int; each cell gets its own Generator derived from it and a
            SHA-256 of (judge_id, system_id, baseline_id, *group values); items are
            resampled in item_id order, so row order does not change the CI.

    Returns:
        DataFrame with columns judge_id, system_id, baseline_id, *by, then
        ``WINRATE_COLUMNS``; one row per combination present in ``judgments`` (also
        those with only unscored rows), in order of first appearance. win_rate and
        tie_rate are fractions in [0, 1]; win_rate, its CI and tie_rate are NaN when
        n_judged is 0; the CI alone is NaN when n_judged < MIN_INTERVAL_ITEMS. n_judged = wins + ties + losses
        counts status-ok, parsed rows;
        n_parse_failures counts status-ok rows with parse_ok False; n_failed and
        n_skipped count rows with that status.

    Raises:
        ValueError: a missing column, duplicate key, null key or group value, unknown
            status, non-bool parse_ok on an ok row, a winner outside
            {'candidate','baseline','tie'} on a scored row, a winner on an unscored row,
            or a bad seed/option; the message names the row key.
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    by = tuple(by) if not isinstance(by, str) else (by,)
    scored = _validate(judgments, by)
    cell_columns = [*_CELL, *by]
    frame = judgments.assign(
        _scored=scored.to_numpy(),
        _score=judgments["winner"].map(lambda w: WINNER_SCORES.get(w, np.nan) if isinstance(w, str) else np.nan),
    )

    rows = []
    for cell, group in frame.groupby(cell_columns, sort=False, dropna=False):
        cell = cell if isinstance(cell, tuple) else (cell,)
        judged = group[group["_scored"]]
        scores = judged["_score"].to_numpy(dtype=float)
        winners = judged["winner"]
        status = group["status"]
        n_judged = int(scores.size)
        if n_judged >= MIN_INTERVAL_ITEMS:
            ci = bootstrap_mean_ci(
                scores,
                n_resamples=n_resamples,
                confidence=confidence,
                seed=int(seed),
                method="BCa",
            )
        elif n_judged:
            ci = CI(np.nan, np.nan, float(scores.mean()))
        else:
            ci = CI(np.nan, np.nan, np.nan)
        ties = int((winners == "tie").sum())
        rows.append(
            {
                **dict(zip(cell_columns, cell)),
                "n_judged": n_judged,
                "wins": int((winners == "candidate").sum()),
                "ties": ties,
                "losses": int((winners == "baseline").sum()),
                "win_rate": ci.point,
                "win_rate_ci_low": ci.low,
                "win_rate_ci_high": ci.high,
                "tie_rate": ties / n_judged if n_judged else np.nan,
                "n_parse_failures": int(((status == "ok") & ~group["_scored"]).sum()),
                "n_failed": int((status == "failed").sum()),
                "n_skipped": int((status == "skipped").sum()),
            }
        )
    table = pd.DataFrame(rows, columns=[*cell_columns, *WINRATE_COLUMNS])
    for column in _INT_COLUMNS:
        table[column] = table[column].astype(np.int64)
    return table


def model_of_voices(names: Mapping[str, str]) -> dict[str, str]:
    """system_id -> the model it is a voice of: its spec without the voice slot (`openai:alloy:model=tts-1`
    and `openai:nova:model=tts-1` are two voices of `openai:model=tts-1`); systems without a voice are left out."""
    out = {}
    for system_id, spec in names.items():
        parsed = Spec.parse(spec)
        if parsed.voice:
            out[system_id] = Spec(parsed.provider, None, parsed.options).canonical
    return out


def voice_variance(winrates: pd.DataFrame, model_of: Mapping[str, str]) -> pd.DataFrame:
    """Spread of win-rate across the voices of one model (EmergentTTS-Eval section 4.4), per judge and category.

    Args:
        winrates: rows of ``win_rate_table`` with a ``level`` column ('overall' or 'category'; other levels are
            ignored) and ``category``.
        model_of: system_id -> the model the system is a voice of (its spec without the voice); systems absent
            from it, or the only voice of their model, are left out.

    Returns:
        One row per (judge_id, model, level, category) with at least two voices: ``n_voices``,
        ``win_rate_mean`` and ``win_rate_std``, the sample standard deviation (ddof=1) of the voices' win-rates,
        i.e. how much the choice of voice moves the score. Empty when no model has two voices.
    """
    columns = ["judge_id", "model", "level", "category", "n_voices", "win_rate_mean", "win_rate_std"]
    if winrates.empty:
        return pd.DataFrame(columns=columns)
    frame = winrates[winrates["level"].isin(["overall", "category"]) & winrates["system_id"].isin(model_of)]
    frame = frame.assign(model=frame["system_id"].map(model_of), category=frame["category"].fillna(""))
    rows = []
    for (judge_id, model, level, category), g in frame.groupby(["judge_id", "model", "level", "category"], sort=True):
        rates = g["win_rate"].dropna().astype(float).to_numpy()
        if len(rates) < 2:
            continue
        rows.append(
            {
                "judge_id": judge_id,
                "model": model,
                "level": level,
                "category": category or None,
                "n_voices": len(rates),
                "win_rate_mean": float(rates.mean()),
                "win_rate_std": float(rates.std(ddof=1)),
            }
        )
    return pd.DataFrame(rows, columns=columns)
