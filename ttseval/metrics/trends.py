"""Trends across nightly runs: every metric of every system, one value a night with its interval, and two rules
that flag a change: a step between two nights and a slow drift over many.

- `night_values`: one night's figures from its stored tables, one row per (system, metric, detail), where detail
  names the recogniser, MOS predictor, judge or speaker encoder the figure belongs to: completion, WER and CER
  (per recogniser), MOS per predictor, speaker similarity per encoder, win-rate per judge, and, for remote
  voices, over the requests made that night (reused clips made none): latency in total and to the first byte,
  the error rate per request, and the fresh canary clips' duration, mean F0 and speech time. Each value has a
  standard error `se` and a 95% interval: a Wilson interval for a proportion (statsmodels), else value
  +- 1.96 se (cut at 0 for times, durations and F0); the report's own bootstrap CI where it stored one (WER,
  CER, win-rate).
- Step: a night whose drift report (ttseval.metrics.drift: the paired permutation test between that night and
  the one before, Holm across the night's tests) or canary test (ttseval.metrics.canary) flagged the series.
- Slow drift: a one-sided CUSUM (Page 1954) toward the metric's worse side (both sides for a measure with no
  better side: canary duration, F0, speech time) of z_t = (x_t - x_ref) / sqrt(se_t^2 + se_ref^2), the night's
  distance from the reference night in standard errors. The reference is the series' first night, and after a
  flagged step the step's night: the step was reported, and the CUSUM then watches the series from its new level.
  S_t = max(0, S_{t-1} + z_t - k); an alarm when S_t > h, after which S restarts at 0. A night-to-night test
  cannot see a slide of a fraction of a standard error a night; the CUSUM adds them up. k = 0.5 and h = 5
  (settings `trend_cusum_k`, `trend_cusum_h`) give, for independent z with a known reference, an in-control
  average run length of 931 nights one-sided (Brook and Evans' Markov chain). The reference night's own noise is
  shared by every z of a series, which raises the false-alarm rate: 4.2% of a series' weeks (6 nights after the
  reference) raise a false drift alarm, by the Markov chain integrated over the reference's error and by
  simulation (tests/unit/test_metrics_trends.py, stated in docs/monitoring.md with the detection delays).

Hand-written: the CUSUM is four lines, and no well-kept Python library offers an online CUSUM for a series with
its own standard errors (statsmodels' CUSUM tests are for regression residuals).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TypedDict

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ttseval.metrics.registry import METRICS

__all__ = ["CANARY_MEASURES", "TREND_COLUMNS", "TREND_METRICS", "cusum", "night_values", "trend_changes"]

# The metrics a trend follows, in display order.
TREND_METRICS: tuple[str, ...] = (
    "completion_rate",
    "wer",
    "cer",
    "mos",
    "similarity",
    "win_rate",
    "latency_s",
    "first_byte_s",
    "error_rate",
    "cost_usd",
    "duration_s",
    "f0_mean_hz",
    "speech_s",
)
CANARY_MEASURES = ("duration_s", "f0_mean_hz", "speech_s")  # no better side: a change either way is a change
NON_NEGATIVE = ("latency_s", "first_byte_s", "cost_usd", *CANARY_MEASURES)  # a normal interval's low end is cut at 0

TREND_COLUMNS = [
    "night",
    "run_id",
    "system_id",
    "system_spec",
    "metric",
    "detail",
    "value",
    "ci_low",
    "ci_high",
    "se",
    "n",
    "z",
    "cusum",
    "step",
    "drift",
]

Z95 = 1.959963984540054


class _TrendRow(TypedDict):
    """One night's figure of a series: TREND_COLUMNS without night, run_id and the change columns."""

    system_id: str
    system_spec: str
    metric: str
    detail: str
    value: float
    ci_low: float
    ci_high: float
    se: float
    n: int


def side(metric: str) -> int:
    """+1 when a rise is worse, -1 when a fall is worse (METRICS' declared direction), 0 when neither is."""
    if metric in CANARY_MEASURES:
        return 0
    return -1 if METRICS[metric].higher_is_better else 1


def _row(
    system_id: str,
    spec: str,
    metric: str,
    detail: str,
    value: float,
    se: float,
    n: int,
    ci: tuple[float, float] | None = None,
) -> _TrendRow:
    low, high = ci if ci is not None else (value - Z95 * se, value + Z95 * se)
    if metric in NON_NEGATIVE:
        low = max(low, 0.0)
    return {
        "system_id": system_id,
        "system_spec": spec,
        "metric": metric,
        "detail": detail,
        "value": float(value),
        "ci_low": float(low),
        "ci_high": float(high),
        "se": float(se),
        "n": int(n),
    }


def _mean(values: pd.Series) -> tuple[float, float, int]:
    v = values.astype(float).dropna()
    n = len(v)
    if n == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan, n


def _proportion(successes: float, n: int) -> tuple[float, float, tuple[float, float]]:
    from statsmodels.stats.proportion import proportion_confint

    p = successes / n
    low, high = proportion_confint(successes, n, method="wilson")
    return p, math.sqrt(p * (1 - p) / n), (float(low), float(high))


def _ratio(errors: pd.Series, words: pd.Series) -> tuple[float, float]:
    """Corpus rate sum(errors) / sum(words) and its standard error by linearization (Cochran, ratio estimator)."""
    e, w = errors.astype(float).to_numpy(), words.astype(float).to_numpy()
    n, total = len(e), w.sum()
    if n == 0 or total == 0:
        return math.nan, math.nan
    r = e.sum() / total
    if n < 2:
        return r, math.nan
    residual = e - r * w
    return r, float(math.sqrt((residual**2).sum() / (n * (n - 1))) / w.mean())


def night_values(tables: Mapping[str, pd.DataFrame], remote: Sequence[str] = ()) -> pd.DataFrame:
    """One night's figures (TREND_COLUMNS without night, run_id and the change columns), from its stored tables:
    `report`, `transcripts`, `quality`, `synthesis` and, where the run has them, `winrates`, `similarity`,
    `prosody`. `remote` are the canonical specs of the remote voices, whose requests and fresh clips are summed."""
    rows = []
    report = tables["report"]
    specs = dict(zip(report["system_id"], report["system_spec"]))
    for r in report.drop_duplicates("system_id").itertuples():
        if r.n_items:
            p, se, ci = _proportion(float(r.n_ok), int(r.n_items))
            rows.append(_row(r.system_id, r.system_spec, "completion_rate", "", p, se, int(r.n_items), ci))
    transcripts = tables["transcripts"]
    ok = transcripts[transcripts["status"] == "ok"]
    for (system_id, asr_spec), group in ok.groupby(["system_id", "asr_spec"], sort=True):
        for metric, errors, size in (("wer", "word_errors", "ref_words"), ("cer", "char_errors", "ref_chars")):
            value, se = _ratio(group[errors], group[size])
            stored = report[(report["system_id"] == system_id) & (report["asr_spec"] == asr_spec)]
            stored_ci: tuple[float, float] | None = None
            if len(stored) and not pd.isna(stored[f"{metric}_ci_low"].iloc[0]):
                stored_ci = (stored[f"{metric}_ci_low"].iloc[0], stored[f"{metric}_ci_high"].iloc[0])
            rows.append(
                _row(system_id, specs.get(system_id, system_id), metric, asr_spec, value, se, len(group), stored_ci)
            )
    quality = tables["quality"]
    for (system_id, predictor), group in quality[quality["status"] == "ok"].groupby(["system_id", "quality_spec"]):
        rows.append(_row(system_id, specs.get(system_id, system_id), "mos", predictor, *_mean(group["mos"])))
    similarity = tables.get("similarity")
    if similarity is not None and len(similarity):
        for (system_id, encoder), group in similarity[similarity["status"] == "ok"].groupby(
            ["system_id", "encoder_spec"]
        ):
            rows.append(
                _row(system_id, specs.get(system_id, system_id), "similarity", encoder, *_mean(group["similarity"]))
            )
    winrates = tables.get("winrates")
    if winrates is not None and len(winrates):
        for r in winrates[(winrates["level"] == "overall") & (winrates["n_judged"] > 0)].itertuples():
            p, se, ci = _proportion(r.win_rate * r.n_judged, int(r.n_judged))
            if not pd.isna(r.win_rate_ci_low):
                ci = (r.win_rate_ci_low, r.win_rate_ci_high)
            rows.append(
                _row(
                    r.system_id,
                    specs.get(r.system_id, r.system_id),
                    "win_rate",
                    r.judge_spec,
                    p,
                    se,
                    int(r.n_judged),
                    ci,
                )
            )
    rows += _remote_rows(tables, remote)
    return pd.DataFrame(rows, columns=TREND_COLUMNS[2:11])


def _remote_rows(tables: Mapping[str, pd.DataFrame], remote: Sequence[str]) -> list[_TrendRow]:
    """A remote voice's requests of the night (its rows that made a call: not reused) and its fresh clips."""
    synthesis = tables["synthesis"]
    called = synthesis[
        synthesis["system_spec"].isin(remote)
        & ~synthesis["cache_hit"].fillna(False).astype(bool)
        & (synthesis["attempt"].fillna(0) > 0)
    ]
    prosody = tables.get("prosody")
    rows = []
    for (system_id, spec), group in called.groupby(["system_id", "system_spec"], sort=True):
        answered = group[group["status"].isin(["ok", "empty"])]
        requests = int(group["attempt"].sum())
        errors = requests - len(answered)  # every attempt but an answered row's last failed
        p, se, ci = _proportion(float(errors), requests)
        rows.append(_row(system_id, spec, "error_rate", "per request", p, se, requests, ci))
        fresh = group[group["status"] == "ok"]
        rows.append(_row(system_id, spec, "latency_s", "total", *_mean(fresh["latency_s"])))
        if "first_byte_s" in fresh and fresh["first_byte_s"].notna().any():
            rows.append(_row(system_id, spec, "first_byte_s", "", *_mean(fresh["first_byte_s"])))
        if "cost_usd" in group and group["cost_usd"].notna().any():
            # the night's spend: n x the mean per priced call, its noise n x the mean's standard error
            mean, se, n = _mean(group["cost_usd"])
            rows.append(_row(system_id, spec, "cost_usd", "night total", mean * n, se * n, n))
        rows.append(_row(system_id, spec, "duration_s", "fresh clips", *_mean(fresh["duration_s"])))
        if prosody is not None and len(prosody):
            measured = prosody[
                (prosody["status"] == "ok")
                & (prosody["system_id"] == system_id)
                & prosody["item_id"].isin(fresh["item_id"])
            ].drop_duplicates("item_id", keep="last")
            for measure in ("f0_mean_hz", "speech_s"):
                if measured[measure].notna().sum() >= 2:
                    rows.append(_row(system_id, spec, measure, "fresh clips", *_mean(measured[measure])))
    return rows


def cusum(z: Iterable[float], k: float, h: float) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Page's one-sided upper CUSUM of `z`: S_t = max(0, S_{t-1} + z_t - k), an alarm when S_t > h, S restarting at
    0 after one. A NaN z leaves S as it was. Returns (S before any restart, alarm flags)."""
    s = 0.0
    stats: list[float] = []
    alarms: list[bool] = []
    for value in z:
        if not math.isnan(value):
            s = max(0.0, s + value - k)
        stats.append(s)
        alarms.append(s > h)
        if s > h:
            s = 0.0
    return np.asarray(stats, dtype=np.float64), np.asarray(alarms, dtype=np.bool_)


def _z(values: NDArray[np.float64], ses: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each night's distance from the first night in standard errors; a series without noise (every item's value
    the same each night: reused clips) that moves is infinitely far, one that stays is at 0."""
    diff = values - values[0]
    scale = np.sqrt(ses**2 + ses[0] ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = diff / scale
    z = np.where(diff == 0, 0.0, z)
    z[0] = 0.0
    return z


def trend_changes(
    values: pd.DataFrame, steps: pd.DataFrame | None = None, *, k: float = 0.5, h: float = 5.0
) -> pd.DataFrame:
    """Every night's values (night_values rows with `night`, an int in time order, and `run_id`) with the change
    columns (TREND_COLUMNS): `z` and `cusum` (the larger side's statistic) and `drift` (its alarm), and `step`,
    true where `steps` (rows run_id, system_id, metric and detail: the nights' flagged paired tests) names the
    series on that night.

    Raises:
        ValueError: `k` or `h` is negative, or a series repeats a night.
    """
    if k < 0 or h < 0:
        raise ValueError(
            f"trend CUSUM needs k >= 0 and h >= 0 (settings trend_cusum_k, trend_cusum_h), got k={k}, h={h}"
        )
    keys = ["system_id", "metric", "detail"]
    frame = values.sort_values("night", kind="stable").reset_index(drop=True).copy()
    if frame.duplicated([*keys, "night"]).any():
        raise ValueError("a trend series repeats a night: one row per (system_id, metric, detail, night)")
    flagged = (
        set() if steps is None or steps.empty else {tuple(r) for r in steps[["run_id", *keys]].itertuples(index=False)}
    )
    frame["step"] = [(r.run_id, r.system_id, r.metric, r.detail) in flagged for r in frame.itertuples()]
    z_all, s_all, a_all = (np.full(len(frame), np.nan), np.full(len(frame), np.nan), np.zeros(len(frame), bool))
    steps_at = frame["step"].to_numpy(bool)
    for _, series in frame.groupby(keys, sort=False).indices.items():
        sides = {1: [1], -1: [-1], 0: [1, -1]}[side(frame["metric"].iloc[series[0]])]
        # a flagged step was reported: from its night on, the series is watched from its new level
        for index in np.split(series, np.flatnonzero(steps_at[series])[np.flatnonzero(steps_at[series]) > 0]):
            z = _z(frame["value"].to_numpy(float)[index], frame["se"].to_numpy(float)[index])
            stats = [cusum(sign * z, k, h) for sign in sides]
            z_all[index], s_all[index] = z, np.max([s for s, _ in stats], axis=0)
            a_all[index] = np.any([a for _, a in stats], axis=0)
    frame["z"], frame["cusum"], frame["drift"] = z_all, s_all, a_all
    frame["drift"] = frame["drift"].astype(bool)
    return frame.reindex(columns=TREND_COLUMNS)
