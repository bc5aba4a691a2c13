"""Agreement between judges, and between a judge and humans.

EmergentTTS-Eval checks judge sensitivity with Kendall's W over the system rankings of
several judges and human alignment with the Spearman correlation of system win-rates;
InstructTTSEval reports raw agreement of a judge with the human majority vote.

- ``kendalls_w``: concordance of m judges ranking n systems (tie-corrected by default).
- ``pairwise_spearman``: Spearman rho between every pair of judges' system scores.
- ``human_alignment``: Spearman rho between a judge's and humans' system scores.
- ``krippendorff_alpha``: thin wrapper over the ``krippendorff`` package.
- ``degenerate_judge``: a judge whose answers cannot rank (all unparsed, or one answer every time).
- ``judge_agreement``: Kendall's W and pairwise Spearman over the systems ranked by each judge's overall
  win-rate (a ``win_rate_table`` with a ``level`` column and ``judge_spec``).
- ``preference_alignment``: item-level agreement of judge and human preferences
  (raw agreement, nominal alpha) plus the Spearman of per-system win-rates.
- ``preference_alignment_by_judge``: ``preference_alignment`` of each judge of a judgments table.
- ``listener_agreement``: any automatic metric against listeners' ratings of the same clips: system-level Spearman
  and Kendall with bootstrap intervals over items, utterance-level correlation, pairwise accuracy.

Score tables use one layout throughout: rows = judges (raters), columns = systems.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping
from typing import Literal, TypedDict

import krippendorff
import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ttseval.metrics.winrate import WINNER_SCORES

__all__ = [
    "HumanAlignment",
    "JudgeAgreement",
    "Level",
    "ListenerAgreement",
    "PreferenceAlignment",
    "degenerate_judge",
    "human_alignment",
    "judge_agreement",
    "kendalls_w",
    "krippendorff_alpha",
    "listener_agreement",
    "pairwise_spearman",
    "preference_alignment",
    "preference_alignment_by_judge",
]

Level = Literal["nominal", "ordinal", "interval", "ratio"]
_LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio")
_PREF_KEY = ("item_id", "system_id")


class HumanAlignment(TypedDict):
    """human_alignment's result."""

    spearman: float
    p_value: float
    n_systems: int


class PreferenceAlignment(TypedDict):
    """preference_alignment's result (its docstring says what each figure is)."""

    by_category: dict[str, tuple[int, float]]
    n: int
    n_judge_only: int
    n_human_only: int
    raw_agreement: float
    krippendorff_alpha: float
    spearman: float
    n_systems: int


class JudgeAgreement(TypedDict):
    """judge_agreement's result."""

    kendalls_w: float
    spearman: pd.DataFrame  # judge x judge rho
    n_systems: int


def _score_matrix(
    scores: pd.DataFrame | NDArray[np.float64], name: str
) -> tuple[NDArray[np.float64], list[Hashable], list[Hashable]]:
    """Return (values, judge labels, system labels); refuse missing or non-finite scores."""
    if isinstance(scores, pd.DataFrame):
        judges, systems = list(scores.index), list(scores.columns)
        values: NDArray[np.float64] = scores.to_numpy(dtype=float, na_value=np.nan)
    elif isinstance(scores, np.ndarray):
        values = np.asarray(scores, dtype=np.float64)
        if values.ndim != 2:
            raise ValueError(f"{name} must be two-dimensional (judges x systems), got shape {values.shape}")
        judges, systems = list(range(values.shape[0])), list(range(values.shape[1]))
    else:
        raise TypeError(f"{name} must be a DataFrame or a 2-D ndarray, got {type(scores).__name__}")
    bad = np.argwhere(~np.isfinite(values))
    if bad.size:
        i, j = (int(x) for x in bad[0])
        raise ValueError(
            f"{name} has a missing or non-finite score {values[i, j]!r} for judge={judges[i]!r}, "
            f"system={systems[j]!r}; every judge must score every system"
        )
    return values, judges, systems


def kendalls_w(scores: pd.DataFrame | NDArray[np.float64], *, correct_ties: bool = True) -> float:
    """Kendall's coefficient of concordance W of m judges over n systems.

    Each judge's row is ranked with ``scipy.stats.rankdata`` (average ranks for ties);
    with R_i the rank sum of system i and S = sum_i (R_i - m (n + 1) / 2)^2,

        W = 12 S / (m^2 (n^3 - n) - m sum_j T_j),  T_j = sum over tie groups of (t^3 - t)

    Ties are corrected by default (``correct_ties=True``); with ``correct_ties=False`` the
    sum_j T_j term is dropped, which biases W downwards when there are ties. Ranking
    ascending or descending gives the same W (it depends only on squared deviations), so
    "higher score = better" needs no sign flip.

    Relation to Friedman's test: chi2 = m (n - 1) W holds exactly between the
    tie-corrected W and the tie-corrected Friedman statistic (what
    ``scipy.stats.friedmanchisquare`` returns), and between the uncorrected pair; without
    ties both pairs coincide.

    Args:
        scores: rows = judges (raters, m >= 2), columns = systems (objects, n >= 2);
            higher = better. No missing values.

    Returns:
        W in [0, 1]: 1 = identical rankings, 0 = no agreement.

    Raises:
        ValueError: m < 2 or n < 2, a missing/non-finite score (naming judge and system),
            or every judge scoring all systems equally (W is 0/0).
    """
    import scipy.stats

    values, _, _ = _score_matrix(scores, "scores")
    m, n = values.shape
    if m < 2 or n < 2:
        raise ValueError(f"Kendall's W needs at least 2 judges and 2 systems, got {m} judges x {n} systems")
    ranks = scipy.stats.rankdata(values, axis=1, method="average")
    rank_sums = ranks.sum(axis=0)
    s = float(np.sum((rank_sums - m * (n + 1) / 2.0) ** 2))
    tie_term = 0.0
    if correct_ties:
        for row in values:
            _, counts = np.unique(row, return_counts=True)
            tie_term += float(np.sum(counts.astype(float) ** 3 - counts))
    denominator = m**2 * (n**3 - n) - m * tie_term
    if denominator <= 0:
        raise ValueError("every judge gives all systems the same score: Kendall's W is undefined (0/0)")
    return float(12.0 * s / denominator)


def _spearman(x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
    import scipy.stats

    with warnings.catch_warnings():
        # A constant input makes rho undefined; callers decide (NaN or an error).
        warnings.simplefilter("ignore", scipy.stats.ConstantInputWarning)
        result = scipy.stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)


def pairwise_spearman(scores: pd.DataFrame) -> pd.DataFrame:
    """Spearman rho between each pair of judges' system scores.

    Args:
        scores: rows = judges, columns = systems (at least 2), higher = better; no
            missing values.

    Returns:
        Square DataFrame, index and columns = judges in input order, from
        ``scipy.stats.spearmanr`` per pair. The diagonal is 1.0. A judge that scores all
        systems equally has an undefined rho: its row and column (diagonal included) are
        NaN, not a fallback value.

    Raises:
        ValueError: fewer than 2 systems, a missing score (naming judge and system), or
            duplicate judge labels.
    """
    if not isinstance(scores, pd.DataFrame):
        raise TypeError(f"scores must be a DataFrame (rows = judges), got {type(scores).__name__}")
    values, judges, systems = _score_matrix(scores, "scores")
    if len(systems) < 2:
        raise ValueError(f"pairwise Spearman needs at least 2 systems, got {len(systems)}")
    if scores.index.has_duplicates:
        raise ValueError(f"scores has duplicate judge labels {list(scores.index[scores.index.duplicated()])}")
    m = len(judges)
    out = np.full((m, m), np.nan)
    for i in range(m):
        for j in range(i, m):
            rho, _ = _spearman(values[i], values[j])
            out[i, j] = out[j, i] = rho
    return pd.DataFrame(out, index=scores.index.copy(), columns=scores.index.copy())


def human_alignment(judge_scores: pd.Series, human_scores: pd.Series) -> HumanAlignment:
    """Spearman correlation between a judge's and humans' per-system scores.

    Args:
        judge_scores: Score per system (index = system_id), e.g. judge win-rates.
        human_scores: Score per system (index = system_id), e.g. human win-rates.

    Returns:
        ``{"spearman": rho, "p_value": p, "n_systems": n}``; p is scipy's two-sided
        t-distribution approximation, rough for small n.

    Raises:
        ValueError: the two indexes hold different systems (the message names those
            missing from each side), duplicate systems, a missing score, fewer than 3
            systems (2 systems always give rho = +-1 and no p-value), or a constant side
            (rho undefined).
    """
    for name, series in (("judge_scores", judge_scores), ("human_scores", human_scores)):
        if not isinstance(series, pd.Series):
            raise TypeError(f"{name} must be a pandas Series indexed by system_id, got {type(series).__name__}")
        if series.index.has_duplicates:
            raise ValueError(f"{name} has duplicate systems {list(series.index[series.index.duplicated()])}")
        values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"{name} has a missing or non-finite score {series.iloc[i]!r} for system_id={series.index[i]!r}"
            )
    only_judge = [s for s in judge_scores.index if s not in human_scores.index]
    only_human = [s for s in human_scores.index if s not in judge_scores.index]
    if only_judge or only_human:
        raise ValueError(
            f"judge and human scores cover different systems: missing from human_scores {only_judge}, "
            f"missing from judge_scores {only_human}"
        )
    n = len(judge_scores)
    if n < 3:
        raise ValueError(f"human alignment needs at least 3 systems, got {n}")
    judge = judge_scores.to_numpy(dtype=float)
    human = human_scores.reindex(judge_scores.index).to_numpy(dtype=float)
    for name, values in (("judge_scores", judge), ("human_scores", human)):
        if np.all(values == values[0]):
            raise ValueError(f"{name} gives every system the same score {values[0]!r}: Spearman rho is undefined")
    rho, p_value = _spearman(judge, human)
    return {"spearman": rho, "p_value": p_value, "n_systems": n}


def krippendorff_alpha(ratings: ArrayLike, *, level: Level = "nominal") -> float:
    """Krippendorff's alpha via the ``krippendorff`` package.

    Args:
        ratings: Reliability data, rows = raters (coders), columns = units; numeric
            codes, NaN = missing. Units with fewer than two values are not pairable
            and do not count.
        level: "nominal", "ordinal", "interval" or "ratio" (level of measurement).

    Returns:
        alpha: 1 = perfect agreement, 0 = chance level, < 0 = systematic disagreement.

    Raises:
        ValueError: not 2-D, fewer than 2 raters, an infinite value, an unknown level,
            or fewer than 2 distinct values overall (alpha is undefined; raised by the
            package).
    """
    if level not in _LEVELS:
        raise ValueError(f"level must be one of {list(_LEVELS)}, got {level!r}")
    data = np.asarray(ratings, dtype=float)
    if data.ndim != 2:
        raise ValueError(f"ratings must be two-dimensional (raters x units), got shape {data.shape}")
    if data.shape[0] < 2:
        raise ValueError(f"Krippendorff's alpha needs at least 2 raters, got {data.shape[0]}")
    if np.isinf(data).any():
        i, j = (int(x) for x in np.argwhere(np.isinf(data))[0])
        raise ValueError(f"ratings[{i}, {j}] = {data[i, j]!r}: use NaN for missing, not infinity")
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def _preferences(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in (*_PREF_KEY, "preference") if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks column(s) {missing}; it has {list(frame.columns)}")
    duplicated = frame.duplicated(list(_PREF_KEY), keep="first")
    if duplicated.any():
        row = frame[duplicated].iloc[0]
        raise ValueError(f"{name} has a duplicate row for item_id={row['item_id']!r}, system_id={row['system_id']!r}")
    invalid = ~frame["preference"].isin(list(WINNER_SCORES))
    if invalid.any():
        row = frame[invalid].iloc[0]
        raise ValueError(
            f"{name} row item_id={row['item_id']!r}, system_id={row['system_id']!r} has preference "
            f"{row['preference']!r}; expected one of {list(WINNER_SCORES)} (filter unparsed judgments first)"
        )
    return frame[[*_PREF_KEY, "preference"]]


def preference_alignment(
    judge: pd.DataFrame, human: pd.DataFrame, category_of: Mapping[str, str] | None = None
) -> PreferenceAlignment:
    """Item-level and system-level agreement of judge and human pairwise preferences.

    Args:
        judge: Columns item_id, system_id, preference ('candidate', 'baseline', 'tie'),
            one row per (item_id, system_id).
        human: Same columns (e.g. the human majority vote).
        category_of: item_id -> category, for the agreement per category.

    Returns:
        dict with
        - n: matched (item_id, system_id) pairs (inner join); n_judge_only and
          n_human_only: pairs present on one side only (not used, but counted);
        - raw_agreement: share of matched pairs with the same preference;
        - krippendorff_alpha: nominal alpha with judge and human as the two raters over
          the matched pairs (NaN if only one label occurs in all of them: undefined);
        - spearman and n_systems: Spearman rho between per-system win-rates (candidate
          1, tie 0.5, baseline 0; mean over matched items) of judge and human; NaN when
          fewer than 2 systems or one side gives all systems the same win-rate;
        - by_category (with category_of): category -> (matched pairs, raw agreement).

    Raises:
        ValueError: a missing column, duplicate key, a preference outside the three
            labels (naming the key), or no matched pair.
    """
    j = _preferences(judge, "judge")
    h = _preferences(human, "human")
    merged = j.merge(h, on=list(_PREF_KEY), how="outer", suffixes=("_judge", "_human"), indicator=True)
    n_judge_only = int((merged["_merge"] == "left_only").sum())
    n_human_only = int((merged["_merge"] == "right_only").sum())
    matched = merged[merged["_merge"] == "both"]
    n = len(matched)
    if n == 0:
        raise ValueError("judge and human share no (item_id, system_id) pair: nothing to compare")
    pj, ph = matched["preference_judge"], matched["preference_human"]
    raw = float((pj.to_numpy() == ph.to_numpy()).mean())

    codes = {label: float(i) for i, label in enumerate(WINNER_SCORES)}
    data = np.vstack([pj.map(codes).to_numpy(dtype=float), ph.map(codes).to_numpy(dtype=float)])
    # One label throughout leaves no expected disagreement: alpha is 0/0, reported as NaN.
    alpha = krippendorff_alpha(data, level="nominal") if len(np.unique(data)) > 1 else np.nan

    rates = (
        matched.assign(judge=pj.map(WINNER_SCORES).astype(float), human=ph.map(WINNER_SCORES).astype(float))
        .groupby("system_id", sort=False)[["judge", "human"]]
        .mean()
    )
    n_systems = len(rates)
    if n_systems >= 2 and rates["judge"].nunique() > 1 and rates["human"].nunique() > 1:
        rho, _ = _spearman(rates["judge"].to_numpy(), rates["human"].to_numpy())
    else:
        rho = np.nan
    by_category: dict[str, tuple[int, float]] = {}
    if category_of is not None:
        same = pd.Series(pj.to_numpy() == ph.to_numpy(), index=matched.index)
        for category, hits in same.groupby(matched["item_id"].map(category_of).fillna("(none)"), sort=True):
            by_category[str(category)] = (len(hits), float(hits.mean()))
    return {
        "by_category": by_category,
        "n": n,
        "n_judge_only": n_judge_only,
        "n_human_only": n_human_only,
        "raw_agreement": raw,
        "krippendorff_alpha": alpha,
        "spearman": rho,
        "n_systems": n_systems,
    }


def preference_alignment_by_judge(
    judgments: pd.DataFrame, human: pd.DataFrame, category_of: Mapping[str, str] | None = None
) -> dict[str, PreferenceAlignment]:
    """``preference_alignment`` of each judge of a run's judgments table with the human preferences.

    Args:
        judgments: the judgments table's columns judge_spec, item_id, system_id, winner, status and parse_ok;
            only answered (status 'ok') and parsed rows count.
        human: columns item_id, system_id, preference.
        category_of: item_id -> category, for the agreement per category.

    Returns:
        judge spec -> its ``preference_alignment`` dict, in the order the judges first occur; empty when no row
        was answered and parsed.

    Raises:
        ValueError: as ``preference_alignment``, for the first judge it concerns.
    """
    parsed = judgments[(judgments["status"] == "ok") & judgments["parse_ok"].fillna(False).astype(bool)]
    human = human[[*_PREF_KEY, "preference"]]
    return {
        spec: preference_alignment(
            g.rename(columns={"winner": "preference"})[[*_PREF_KEY, "preference"]], human, category_of
        )
        for spec, g in parsed.groupby("judge_spec", sort=False)
    }


DEGENERATE_MIN_ANSWERS = 10
"""Answered comparisons a judge needs before the same answer every time says more than chance."""


def degenerate_judge(rows: pd.DataFrame, min_answers: int = DEGENERATE_MIN_ANSWERS) -> str | None:
    """Why one judge's pairwise verdicts cannot rank systems, or None: every answer unparsed or refused, or the same
    answer (first / second / tie, as heard) on every one of at least `min_answers` parsed comparisons. `rows` are
    the judge's rows of the judgments table (`status`, `parse_ok`, `winner_raw`)."""
    answered = rows[rows["status"] == "ok"]
    if len(answered) < min_answers:
        return None
    parsed = answered[answered["parse_ok"].fillna(False).astype(bool)]
    if parsed.empty:
        return f"none of its {len(answered)} answers parsed (refusals or malformed output): it ranks nothing"
    answers = parsed["winner_raw"].dropna().unique()
    if len(parsed) >= min_answers and len(answers) == 1:
        return f"it answered {answers[0]!r} on all {len(parsed)} parsed comparisons: a constant judge is not a ranking"
    return None


def judge_agreement(winrates: pd.DataFrame) -> JudgeAgreement | None:
    """Kendall's W over systems ranked by each judge's overall win-rate, and pairwise Spearman; None for < 2 judges.
    When every judge gives every system the same win-rate there is no ranking to agree on: W is NaN (0/0, which
    `kendalls_w` refuses) and so is every rho."""
    overall = winrates[winrates["level"] == "overall"]
    scores = overall.pivot_table(index="judge_spec", columns="system_id", values="win_rate").dropna(axis=1)
    if len(scores) < 2 or scores.shape[1] < 2:
        return None
    tied = bool((scores.nunique(axis=1) == 1).all())
    return {
        "kendalls_w": float("nan") if tied else kendalls_w(scores, correct_ties=True),
        "spearman": pairwise_spearman(scores),
        "n_systems": scores.shape[1],
    }


class ListenerAgreement(TypedDict):
    """listener_agreement's result (its docstring says what each figure is)."""

    n_systems: int
    n_items: int
    spearman: float
    spearman_ci: tuple[float, float]
    kendall: float
    kendall_ci: tuple[float, float]
    utterance_pearson: float
    utterance_spearman: float
    pairwise_accuracy: float
    n_pairs: int


def listener_agreement(
    metric: pd.DataFrame, listeners: pd.DataFrame, *, higher_is_better: bool, n_resamples: int, seed: int
) -> ListenerAgreement | None:
    """How far an automatic metric agrees with listeners, over the clips both scored (VoiceMOS-style figures).

    Args:
        metric: item_id, system_id, value (one per clip: WER, MOS, SIM, a judge's score).
        listeners: item_id, system_id, score (the listeners' mean rating of the clip).
        higher_is_better: the metric's direction; a lower-is-better metric is negated first, so every figure reads
            "higher agrees".

    Returns:
        None under 3 systems. Otherwise: system level, Spearman's rho and Kendall's tau-b of the systems' means
        (scipy), each with a percentile bootstrap 95% interval over items (items resampled, both means taken
        again; NaN under MIN_INTERVAL_ITEMS items, or when under half the resamples can be ranked); utterance
        level, Pearson's r and Spearman's rho over the clips; pairwise accuracy, the share of system pairs the
        listeners order (their means differ) that the metric orders the same way (a tie in the metric counts
        half).
    """
    import scipy.stats

    from ttseval.metrics.bootstrap import MIN_INTERVAL_ITEMS

    both = metric.merge(listeners, on=["item_id", "system_id"]).dropna(subset=["value", "score"])
    both = both.assign(value=both["value"].astype(float) * (1.0 if higher_is_better else -1.0))
    systems = sorted(both["system_id"].unique())
    if len(systems) < 3:
        return None
    v = both.pivot_table(index="item_id", columns="system_id", values="value", aggfunc="mean")[systems]
    s = both.pivot_table(index="item_id", columns="system_id", values="score", aggfunc="mean")[systems]
    mv, ms = np.nanmean(v.to_numpy(float), axis=0), np.nanmean(s.to_numpy(float), axis=0)

    def correlations(a: NDArray[np.float64], b: NDArray[np.float64]) -> tuple[float, float]:
        if np.ptp(a) == 0 or np.ptp(b) == 0:
            return float("nan"), float("nan")
        return float(scipy.stats.spearmanr(a, b).statistic), float(scipy.stats.kendalltau(a, b).statistic)

    rho, tau = correlations(mv, ms)
    n_items = len(v)
    ci_rho = ci_tau = (float("nan"), float("nan"))
    if n_items >= MIN_INTERVAL_ITEMS:
        rng = np.random.default_rng(seed)
        values, scores = v.to_numpy(float), s.to_numpy(float)
        fits = []
        for _ in range(n_resamples):
            pick = rng.integers(0, n_items, n_items)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a system with no clip in the resample: skipped
                a, b = np.nanmean(values[pick], axis=0), np.nanmean(scores[pick], axis=0)
            if np.isfinite(a).all() and np.isfinite(b).all():
                fits.append(correlations(a, b))
        drawn = np.array([f for f in fits if np.isfinite(f).all()])
        if len(drawn) >= n_resamples / 2:
            low, high = np.percentile(drawn, [2.5, 97.5], axis=0)
            ci_rho, ci_tau = (float(low[0]), float(high[0])), (float(low[1]), float(high[1]))
    x, y = both["value"].to_numpy(float), both["score"].to_numpy(float)
    constant = np.ptp(x) == 0 or np.ptp(y) == 0  # no correlation is defined (scipy warns and answers NaN)
    clips = (
        (float("nan"), float("nan"))
        if constant
        else (float(scipy.stats.pearsonr(x, y).statistic), float(scipy.stats.spearmanr(x, y).statistic))
    )
    agree = n_pairs = 0.0
    for i in range(len(systems)):
        for j in range(i + 1, len(systems)):
            listened = np.sign(ms[i] - ms[j])
            if listened == 0:
                continue
            n_pairs += 1
            measured = np.sign(mv[i] - mv[j])
            agree += 0.5 if measured == 0 else float(measured == listened)
    return {
        "n_systems": len(systems),
        "n_items": n_items,
        "spearman": rho,
        "spearman_ci": ci_rho,
        "kendall": tau,
        "kendall_ci": ci_tau,
        "utterance_pearson": clips[0],
        "utterance_spearman": clips[1],
        "pairwise_accuracy": agree / n_pairs if n_pairs else float("nan"),
        "n_pairs": int(n_pairs),
    }
