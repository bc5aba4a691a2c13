"""Trends across nightly runs (ttseval.metrics.trends): the slow-drift CUSUM against an independent computation
of its run-length distribution (Brook and Evans' Markov chain, 1972, worked here with scipy's normal cdf), its
false-alarm rate over many seeded simulated weeks, the nights it takes to catch a slow slide, and one night's
figures recomputed from hand-made tables (Wilson intervals by statsmodels)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from numpy.polynomial.hermite_e import hermegauss
from scipy.stats import norm
from statsmodels.stats.proportion import proportion_confint

from ttseval.metrics.trends import TREND_COLUMNS, cusum, night_values, trend_changes

K, H, NIGHTS = 0.5, 5.0, 7


def transitions(k: float, h: float, mean: float = 0.0, sd: float = 1.0, m: int = 300) -> np.ndarray:
    """Brook and Evans: the CUSUM's value discretized into m states of width 2h / (2m - 1) below h (state 0 is
    S = 0); the matrix of moves between them for an increment z ~ N(mean, sd^2); the rest of each row is the
    alarm."""
    w = 2 * h / (2 * m - 1)
    centre = np.arange(m) * w
    matrix = np.empty((m, m))
    for i in range(m):
        matrix[i, 0] = norm.cdf(k - centre[i] + w / 2, mean, sd)
        matrix[i, 1:] = norm.cdf(k + centre[1:] - centre[i] + w / 2, mean, sd) - norm.cdf(
            k + centre[1:] - centre[i] - w / 2, mean, sd
        )
    return matrix


def alarm_within(nights: int, k: float, h: float, mean: float = 0.0, sd: float = 1.0) -> float:
    matrix, alive = transitions(k, h, mean, sd), None
    alive = np.ones(len(matrix))
    for _ in range(nights):
        alive = matrix @ alive
    return float(1 - alive[0])


def week(values: np.ndarray, se: float, metric: str = "wer") -> pd.DataFrame:
    """Simulated nights: `values` is weeks x nights; one series per week."""
    weeks, nights = values.shape
    return pd.DataFrame(
        {
            "night": np.tile(np.arange(nights), weeks),
            "run_id": [f"n{j}" for j in np.tile(np.arange(nights), weeks)],
            "system_id": np.repeat([f"w{i}" for i in range(weeks)], nights),
            "system_spec": "fake",
            "metric": metric,
            "detail": "",
            "value": values.ravel(),
            "ci_low": np.nan,
            "ci_high": np.nan,
            "se": se,
            "n": 8,
        }
    )


def test_cusum_by_hand() -> None:
    # S: 0, max(0, 0 + 1 - .5) = .5, .5 + 2 - .5 = 2, 2 + 3 - .5 = 4.5 > 4: alarm, restart; 0 + -1 - .5 -> 0; 4.5
    stats, alarms = cusum([0, 1, 2, 3, -1, 5], 0.5, 4)
    assert stats.tolist() == [0, 0.5, 2, 4.5, 0, 4.5]
    assert alarms.tolist() == [False, False, False, True, False, True]
    stats, alarms = cusum([1, math.nan, 1], 0.5, 4)  # a night without a value leaves S as it was
    assert stats.tolist() == [0.5, 0.5, 1.0] and not alarms.any()


def test_in_control_run_length_matches_the_markov_chain() -> None:
    # Independent z with a known reference: the chain's ARL0 (931 nights for k .5, h 5), and its probability of an
    # alarm within 30 nights against 20,000 seeded simulated series of `cusum`
    matrix = transitions(K, H)
    arl0 = np.linalg.solve(np.eye(len(matrix)) - matrix, np.ones(len(matrix)))[0]
    assert arl0 == pytest.approx(931, abs=2)  # Siegmund's approximation says 938
    rng = np.random.default_rng(1)
    simulated = np.mean([cusum(z, K, H)[1].any() for z in rng.standard_normal((20_000, 30))])
    expected = alarm_within(30, K, H)
    assert expected == pytest.approx(0.0256, abs=5e-4)
    assert abs(simulated - expected) < 3 * math.sqrt(expected * (1 - expected) / 20_000)


def test_false_alarm_rate_over_seeded_weeks_against_the_chain() -> None:
    # The rule as run: a week of 7 nights, night 1 the reference, no change. z_t = (e_t - e_1) / sqrt 2 shares
    # the reference's error e_1: given e_1, the z are independent N(-e_1 / sqrt 2, 1/2), so the chain's
    # probability is integrated over e_1 ~ N(0, 1) by Gauss-Hermite quadrature: 4.2% of weeks per series.
    x, weights = hermegauss(60)
    expected = sum(
        w * alarm_within(NIGHTS - 1, K, H, -xi / math.sqrt(2), math.sqrt(0.5))
        for xi, w in zip(x, weights / weights.sum())
    )
    assert expected == pytest.approx(0.0423, abs=5e-4)
    weeks = 4000
    values = 0.2 + 0.01 * np.random.default_rng(7).standard_normal((weeks, NIGHTS))
    out = trend_changes(week(values, 0.01), k=K, h=H)
    rate = out.groupby("system_id")["drift"].any().mean()
    assert abs(rate - expected) < 3 * math.sqrt(expected * (1 - expected) / weeks)
    # known reference (independent z, the design): 0.13% of weeks
    assert alarm_within(NIGHTS - 1, K, H) == pytest.approx(0.0013, abs=1e-4)


def test_a_slow_drift_is_caught_within_stated_nights() -> None:
    # WER a little worse every night: +0.5 standard error a night from night 2 on. Simulated over 4000 seeded
    # series: half are flagged by night 7 (6 nights into the slide), 90% by night 10, every one by night 15.
    weeks, nights = 4000, 15
    rng = np.random.default_rng(11)
    values = 0.2 + 0.01 * (rng.standard_normal((weeks, nights)) + 0.5 * np.arange(nights))
    out = trend_changes(week(values, 0.01), k=K, h=H)
    first = out[out["drift"]].groupby("system_id")["night"].min().reindex([f"w{i}" for i in range(weeks)]) + 1
    assert first.notna().all()
    assert first.median() == 7 and first.quantile(0.9) <= 10 and first.max() <= 15
    # a fall of WER (better) never alarms: the rule watches the worse side only
    better = trend_changes(week(0.2 + 0.01 * (rng.standard_normal((200, nights)) - 0.5 * np.arange(nights)), 0.01))
    assert not better["drift"].any()


def test_a_step_is_the_new_reference_and_a_measure_without_a_better_side_drifts_both_ways() -> None:
    # a measure with no better side moved 0.9 (SE 0.1 a night) on night 3, up for w0 and w2, down for w1
    nights = np.array([[3.0, 3.0, 3.9, 3.9], [3.0, 3.0, 2.1, 2.1], [3.0, 3.0, 3.9, 3.9]])
    step = pd.DataFrame({"run_id": ["n2"], "system_id": ["w2"], "metric": ["duration_s"], "detail": [""]})
    out = trend_changes(week(nights, 0.1, metric="duration_s"), steps=step)
    assert list(out.columns) == TREND_COLUMNS
    for series in ("w0", "w1"):  # no step flagged: z = 0.9 / sqrt(0.1^2 + 0.1^2) = 6.36; S = 5.86 > 5 either way
        rows = out[out["system_id"] == series].set_index("night")
        assert rows["z"].abs().tolist() == pytest.approx([0, 0, 0.9 / math.sqrt(0.02), 0.9 / math.sqrt(0.02)])
        assert rows["drift"].tolist() == [False, False, True, True]
    # the paired test flagged w2 on night 3: reported as a step, and watched from its new level on (no drift)
    flagged = out[out["system_id"] == "w2"]
    assert flagged["step"].tolist() == [False, False, True, False]
    assert flagged["z"].tolist() == [0, 0, 0, 0] and not flagged["drift"].any()
    flat = trend_changes(week(np.full((1, 5), 0.1), 0.0))
    assert not flat["drift"].any() and (flat["z"] == 0).all()
    with pytest.raises(ValueError, match="trend_cusum_k"):
        trend_changes(flat, k=-1)


def test_one_nights_values_from_its_tables() -> None:
    report = pd.DataFrame(
        {
            "system_id": ["a"],
            "system_spec": ["openai:alloy"],
            "asr_spec": ["whisper"],
            "n_items": [4],
            "n_ok": [3],
            "wer_ci_low": [np.nan],
            "wer_ci_high": [np.nan],
            "cer_ci_low": [np.nan],
            "cer_ci_high": [np.nan],
        }
    )
    transcripts = pd.DataFrame(
        {
            "system_id": "a",
            "asr_spec": "whisper",
            "status": "ok",
            "word_errors": [0, 1, 2],
            "ref_words": [4, 5, 5],
            "char_errors": [0, 2, 4],
            "ref_chars": [20, 25, 25],
        }
    )
    quality = pd.DataFrame({"system_id": "a", "quality_spec": "dnsmos", "status": "ok", "mos": [3.0, 3.5, 4.0]})
    synthesis = pd.DataFrame(
        {
            "item_id": ["i1", "i2", "i3", "i4"],
            "system_id": "a",
            "system_spec": "openai:alloy",
            "cache_hit": [False, False, False, True],
            "attempt": [1, 3, 2, 0],
            "status": ["ok", "ok", "failed", "ok"],
            "latency_s": [0.5, 1.5, 2.0, 9.0],
            "first_byte_s": [0.1, 0.3, np.nan, 9.0],
            "duration_s": [1.0, 2.0, np.nan, 5.0],
            "cost_usd": [0.002, 0.004, np.nan, 0.0],
        }
    )
    got = night_values(
        {"report": report, "transcripts": transcripts, "quality": quality, "synthesis": synthesis},
        remote=["openai:alloy"],
    ).set_index(["metric", "detail"])
    completion = got.loc[("completion_rate", "")]
    assert completion["value"] == 0.75 and (completion["ci_low"], completion["ci_high"]) == pytest.approx(
        proportion_confint(3, 4, method="wilson")
    )
    wer = got.loc[("wer", "whisper")]
    # corpus WER 3/14; linearized SE: residuals e - r w = -6/7, -1/14, 13/14 -> sqrt(sum r^2 / (3 * 2)) / (14/3)
    residuals = np.array([0, 1, 2]) - 3 / 14 * np.array([4, 5, 5])
    assert wer["value"] == pytest.approx(3 / 14) and wer["se"] == pytest.approx(
        math.sqrt((residuals**2).sum() / 6) / (14 / 3)
    )
    mos = got.loc[("mos", "dnsmos")]
    assert (mos["value"], mos["se"], mos["n"]) == pytest.approx((3.5, 0.5 / math.sqrt(3), 3))
    # 3 fresh rows made 1 + 3 + 2 = 6 requests; 2 answered: 4 errors; the reused row made none
    errors = got.loc[("error_rate", "per request")]
    assert (errors["value"], errors["n"]) == (4 / 6, 6)
    assert (errors["ci_low"], errors["ci_high"]) == pytest.approx(proportion_confint(4, 6, method="wilson"))
    assert got.loc[("latency_s", "total"), "value"] == 1.0 and got.loc[("first_byte_s", ""), "value"] == 0.2
    assert got.loc[("duration_s", "fresh clips"), "value"] == 1.5
    # the night's spend: the two priced calls (the failed one cost nothing; the reused clip made no call), 0.006;
    # its noise 2 x the mean's standard error, sd(0.002, 0.004) / sqrt(2) = 0.001
    cost = got.loc[("cost_usd", "night total")]
    assert (cost["value"], cost["se"], cost["n"]) == pytest.approx((0.006, 2 * 0.001, 2))


def test_a_time_interval_stops_at_zero() -> None:
    synthesis = pd.DataFrame(
        {
            "item_id": ["i1", "i2", "i3"],
            "system_id": "a",
            "system_spec": "openai:alloy",
            "cache_hit": False,
            "attempt": 1,
            "status": "ok",
            "latency_s": [0.1, 0.1, 3.0],
            "first_byte_s": np.nan,
            "duration_s": [1.0, 1.2, 1.4],
        }
    )
    empty = pd.DataFrame({c: [] for c in ("system_id", "asr_spec", "status", "quality_spec", "mos")})
    report = pd.DataFrame({"system_id": ["a"], "system_spec": ["openai:alloy"], "n_items": [3], "n_ok": [3]})
    got = night_values(
        {"report": report, "transcripts": empty, "quality": empty, "synthesis": synthesis}, ["openai:alloy"]
    ).set_index("metric")
    latency = got.loc["latency_s"]
    se = np.std([0.1, 0.1, 3.0], ddof=1) / math.sqrt(3)
    assert (latency["ci_low"], latency["ci_high"]) == pytest.approx((0.0, 1.0666667 + 1.959964 * se))
    assert "first_byte_s" not in got.index  # no request was timed to its first byte


def test_the_trends_page_draws_each_series_with_dated_axes_its_interval_and_its_marks() -> None:
    """A series of 5 nights whose WER rises (a step the paired test flagged on night 3) and one with a slow MOS
    drift, through the page: each chart is an SVG whose text names the x axis, the nights by their UTC start, the y
    axis with its better side, and a legend entry for each kind of mark it has; the nights' table gives the same
    dates and marks the step night once."""
    from ttseval.tasks.trends import night_date, trends_html

    runs = [f"nightly-2026112{d}T020000Z" for d in range(3, 8)]
    values = pd.DataFrame(
        [
            {
                "night": i,
                "run_id": run,
                "system_id": "s",
                "system_spec": "espeak-ng",
                "metric": "wer",
                "detail": "whisper:tiny",
                "value": w,
                "se": 0.01,
                "n": 40,
                "ci_low": w - 0.02,
                "ci_high": w + 0.02,
            }
            for i, (run, w) in enumerate(zip(runs, [0.10, 0.11, 0.25, 0.26, 0.25]))
        ]
        + [
            {
                "night": i,
                "run_id": run,
                "system_id": "s",
                "system_spec": "espeak-ng",
                "metric": "mos",
                "detail": "dnsmos",
                "value": m,
                "se": 0.02,
                "n": 40,
                "ci_low": m - 0.04,
                "ci_high": m + 0.04,
            }
            for i, (run, m) in enumerate(zip(runs, [3.2, 3.15, 3.08, 3.0, 2.93]))
        ]
    )
    steps = pd.DataFrame([{"run_id": runs[2], "system_id": "s", "metric": "wer", "detail": "whisper:tiny"}])
    trends = trend_changes(values, steps, k=0.5, h=5.0)
    assert trends.loc[trends["metric"] == "mos", "drift"].any()  # the slide adds up to an alarm
    page = trends_html(trends, "ttseval trends of series nightly: 5 nights", 0.5, 5.0)
    [wer, mos] = [part.split("</svg>")[0] for part in page.split("<svg")[1:]]
    for chart in (wer, mos):
        assert "night (UTC)" in chart and all(night_date(run) in chart for run in runs)
        assert "95% interval" in chart
    assert night_date(runs[0]) == "2026-11-23 02:00" and night_date("my-run") == "my-run"
    assert "wer (whisper:tiny): lower is better" in wer and "step (paired test)" in wer and "slow drift" not in wer
    assert "mos (dnsmos): higher is better" in mos and "slow drift" in mos and "step (paired test)" not in mos
    assert page.count('<td class="step">step</td>') == 1 and f"<td>{night_date(runs[2])}</td>" in page
