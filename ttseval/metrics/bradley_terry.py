"""Bradley-Terry strengths from pairwise outcomes, with bootstrap intervals over items, ranked by lower bound.

The field's public leaderboards (TTS Arena, Chatbot Arena) fit a Bradley-Terry model to pairwise outcomes:
P(i beats j) = 1 / (1 + exp(-(s_i - s_j))), and publish bootstrap intervals. Here:

- **Outcomes**: one row per comparison of system `a` with system `b` on an item, `score` the share of the
  comparison `a` won: 1 a win, 0 a loss, **0.5 a tie (a tie counts as half a win for each side**, as win-rates
  count it; Davidson's tie model is not used). The pairwise judge's verdicts give them (`judgment_outcomes`:
  candidate against baseline, or any pair under the setting judge_pairs), and so do listeners' CMOS ratings
  (`rating_outcomes`: the rating's sign).
- **Fit**: the maximum a-posteriori strengths under a weak Gaussian prior, i.e. the negative log-likelihood
  sum over comparisons of score * log(1 + exp(-(s_a - s_b))) + (1 - score) * log(1 + exp(-(s_b - s_a))) plus
  `alpha` * sum(s^2) (`alpha` = PRIOR, 0.01: it keeps a system that wins every comparison finite and centres the
  strengths on mean 0), minimised by Newton's method with a line search (the objective is convex) on the
  comparisons summed per pair of systems.
  Checked against choix's `opt_pairwise` (a tie there is one win each way, a win two) and a case worked by hand.
- **Intervals**: items are resampled (every comparison on an item travels with it) and the model refitted; the BCa
  95% interval of each strength: scipy.stats.bootstrap's BCa interval (equal to it to 1e-9, tested), its jackknife
  refitting without one item at a time rather than holding every leave-one-out sample at once as scipy does.
  Under MIN_INTERVAL_ITEMS items no interval (NaN: "n too small").
  Listeners' outcomes (`rating_outcomes`: CMOS ratings by sign, 0 a tie) are resampled over raters **and** items
  (`resample="raters+items"`): raters are drawn with replacement, then items with replacement, independently (the
  two are crossed: a rater hears many items, an item is heard by many raters), and each outcome counts (times its
  rater was drawn) x (times its item was drawn): Owen's pigeonhole bootstrap for crossed random effects (Owen 2007,
  "The pigeonhole bootstrap"). The interval is the percentile interval of the refits (BCa's jackknife has no
  two-way form); no interval under MIN_INTERVAL_ITEMS items or under 2 raters.
- **Ranking**: by the interval's lower bound (highest first), as TTS Arena ranks; `rank` is 1 + the number of
  systems whose lower bound is above this system's upper bound (systems whose intervals overlap share a rank).
- **Elo view**: the same strengths on the arena's scale, 1000 + 400 / ln(10) * s (a strength difference of 400
  Elo is odds of 10 to 1). It is a rescaling of the fit, not an online Elo update (which depends on the order).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ttseval.metrics.bootstrap import MIN_INTERVAL_ITEMS, bca_bounds, resample_batch

__all__ = [
    "BT_COLUMNS",
    "ELO_BASE",
    "ELO_SCALE",
    "PRIOR",
    "bradley_terry",
    "fit_strengths",
    "judgment_outcomes",
    "pigeonhole_draws",
    "rating_outcomes",
]

PRIOR = 0.01  # alpha of the Gaussian prior (penalty alpha * sum(s^2))
ELO_BASE, ELO_SCALE = 1000.0, 400.0 / np.log(10.0)
BT_COLUMNS = (
    "system_id",
    "rank",
    "strength",
    "strength_ci_low",
    "strength_ci_high",
    "elo",
    "elo_ci_low",
    "elo_ci_high",
    "n_comparisons",
    "n_items",
)


def _newton(
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    w_ij: NDArray[np.float64],
    w_ji: NDArray[np.float64],
    n: int,
    alpha: float,
    x0: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Minimise the penalised negative log-likelihood over aggregated pair counts (i beat j w_ij times, j beat i
    w_ji times) by Newton's method with a backtracking line search; the objective is convex, so this finds the
    minimum (with alpha 0 the strengths are found up to a shift, removed by the caller)."""

    def objective(s: NDArray[np.float64]) -> float:
        d = s[i] - s[j]
        return float(np.sum(w_ij * np.logaddexp(0, -d) + w_ji * np.logaddexp(0, d)) + alpha * np.sum(s * s))

    s = x0.astype(float).copy()
    value = objective(s)
    for _ in range(200):
        p = 1 / (1 + np.exp(-(s[i] - s[j])))  # P(i beats j)
        g_pair = -w_ij * (1 - p) + w_ji * p
        grad = 2 * alpha * s + np.bincount(i, g_pair, n) - np.bincount(j, g_pair, n)
        v = (w_ij + w_ji) * p * (1 - p)
        hess = 2 * alpha * np.eye(n)
        np.add.at(hess, (i, i), v)
        np.add.at(hess, (j, j), v)
        np.add.at(hess, (i, j), -v)
        np.add.at(hess, (j, i), -v)
        step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        t = 1.0
        while t > 1e-8 and (candidate := objective(s - t * step)) > value - 1e-4 * t * float(grad @ step):
            t /= 2
        if t <= 1e-8:
            break
        s, value = s - t * step, candidate
        if np.max(np.abs(t * step)) < 1e-10:
            break
    return s


def fit_strengths(
    n_systems: int,
    a: ArrayLike,
    b: ArrayLike,
    score: ArrayLike,
    *,
    alpha: float = PRIOR,
    weights: ArrayLike | None = None,
    initial: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Bradley-Terry strengths (mean 0) of systems 0..n_systems-1 from comparisons of system a[k] with b[k] that
    a won by score[k] (1, 0.5 a tie, 0), each counted weights[k] times (default once).

    Raises:
        ValueError: arrays of different lengths, a score outside [0, 1], a system index out of range or a system
            compared with itself, or alpha < 0.
    """
    ia, ib = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    sc = np.asarray(score, dtype=np.float64)
    w = np.ones(len(ia)) if weights is None else np.asarray(weights, dtype=np.float64)
    if not (len(ia) == len(ib) == len(sc) == len(w)):
        raise ValueError("a, b, score and weights must be of one length")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha!r}")
    bad = np.flatnonzero(
        (sc < 0) | (sc > 1) | np.isnan(sc) | (ia == ib) | (ia < 0) | (ib < 0) | (ia >= n_systems) | (ib >= n_systems)
    )
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"comparison {k}: a={ia[k]}, b={ib[k]}, score={sc[k]}: scores are in [0, 1] and a "
            f"system is compared with another of the {n_systems}"
        )
    pair, inverse = np.unique(ia * n_systems + ib, return_inverse=True)  # comparisons summed per ordered pair
    # weighted counts are float64 (numpy's stubs type every bincount as intp); astype(copy=False) keeps the array
    w_ij = np.bincount(inverse, w * sc, len(pair)).astype(np.float64, copy=False)
    w_ji = np.bincount(inverse, w * (1 - sc), len(pair)).astype(np.float64, copy=False)
    x0 = np.zeros(n_systems) if initial is None else np.asarray(initial, dtype=np.float64)
    s = _newton(pair // n_systems, pair % n_systems, w_ij, w_ji, n_systems, alpha, x0)
    return s - np.mean(s)


def judgment_outcomes(judgments: pd.DataFrame) -> pd.DataFrame:
    """The pairwise judge's scored verdicts (status ok, parsed) as outcomes: judge_id, item_id, a (the candidate),
    b (its baseline), score (ttseval.metrics.winrate.WINNER_SCORES: candidate 1, tie 0.5, baseline 0)."""
    from ttseval.metrics.winrate import WINNER_SCORES, scored_verdicts

    ok = scored_verdicts(judgments)
    return pd.DataFrame(
        {
            "judge_id": ok["judge_id"],
            "item_id": ok["item_id"].astype(str),
            "a": ok["system_id"],
            "b": ok["baseline_id"],
            "score": ok["winner"].map(WINNER_SCORES).astype(float),
        }
    )


def rating_outcomes(ratings: pd.DataFrame) -> pd.DataFrame:
    """Listeners' pairwise ratings (the ratings table's CMOS rows: `score` of `system_id` over `other_system_id`,
    positive when the system is preferred) as outcomes: item_id, rater_id, a (the system), b (the other), score 1
    when preferred, 0.5 at 0 (no preference: a tie), 0 when the other is preferred. Rows flagged, without a score
    or without an other system are left out."""
    used = ratings.dropna(subset=["score", "other_system_id"])
    if "flag" in used.columns:
        used = used[used["flag"].isna()]
    sign = np.sign(used["score"].astype(float).to_numpy())
    return pd.DataFrame(
        {
            "item_id": used["item_id"].astype(str).to_numpy(),
            "rater_id": used["rater_id"].astype(str).to_numpy(),
            "a": used["system_id"].to_numpy(),
            "b": used["other_system_id"].to_numpy(),
            "score": (sign + 1) / 2,
        }
    )


def pigeonhole_draws(
    n_raters: int, n_items: int, n_resamples: int, seed: int
) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """The resamples of `resample="raters+items"`: per resample, how many times each rater and each item was drawn
    (raters first, n_raters draws with replacement, then items, n_items draws), from numpy's default_rng(seed)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_resamples):
        raters = np.bincount(rng.integers(0, n_raters, n_raters), minlength=n_raters)
        items = np.bincount(rng.integers(0, n_items, n_items), minlength=n_items)
        out.append((raters, items))
    return out


def bradley_terry(
    outcomes: pd.DataFrame, *, n_resamples: int = 1000, seed: int = 0, alpha: float = PRIOR, resample: str = "items"
) -> pd.DataFrame:
    """Strengths, bootstrap intervals, Elo view and rank of every system in `outcomes` (columns item_id, a, b,
    score; and rater_id when `resample` is "raters+items"), ordered by the lower bound of the strength's interval
    (highest first; by strength where there is no interval). Columns BT_COLUMNS; empty for no outcomes.

    `resample`: "items" (BCa over items: judges' verdicts) or "raters+items" (listeners: the pigeonhole bootstrap
    over raters and items, percentile interval; see the module's docstring).

    Raises:
        ValueError: a column missing, an unknown `resample`, or a bad comparison (fit_strengths).
    """
    from scipy import stats

    if resample not in ("items", "raters+items"):
        raise ValueError(f"resample must be 'items' or 'raters+items', got {resample!r}")
    need = {"item_id", "a", "b", "score"} | ({"rater_id"} if resample == "raters+items" else set())
    missing = need - set(outcomes.columns)
    if missing:
        raise ValueError(f"outcomes lack column(s) {sorted(missing)}: need {', '.join(sorted(need))}")
    if outcomes.empty:
        return pd.DataFrame(columns=list(BT_COLUMNS))
    systems = list(dict.fromkeys([*outcomes["a"], *outcomes["b"]]))
    index = {s: k for k, s in enumerate(systems)}
    items, item_of = np.unique(outcomes["item_id"].astype(str).to_numpy(), return_inverse=True)
    a = outcomes["a"].map(index).to_numpy()
    b = outcomes["b"].map(index).to_numpy()
    score = outcomes["score"].astype(float).to_numpy()
    point = fit_strengths(len(systems), a, b, score, alpha=alpha)

    def refit(drawn: NDArray[np.int64], axis: int = -1) -> NDArray[np.float64]:  # drawn: item indices of one resample
        counts = np.bincount(drawn.astype(int), minlength=len(items))[item_of]
        return fit_strengths(len(systems), a, b, score, alpha=alpha, weights=counts, initial=point)

    low = high = np.full(len(systems), np.nan)
    if resample == "raters+items":
        raters, rater_of = np.unique(outcomes["rater_id"].astype(str).to_numpy(), return_inverse=True)
        if len(items) >= MIN_INTERVAL_ITEMS and len(raters) >= 2:
            fits = np.array(
                [
                    fit_strengths(
                        len(systems),
                        a,
                        b,
                        score,
                        alpha=alpha,
                        initial=point,
                        weights=r_count[rater_of] * i_count[item_of],
                    )
                    for r_count, i_count in pigeonhole_draws(len(raters), len(items), n_resamples, seed)
                ]
            )
            low, high = np.percentile(fits, 2.5, axis=0), np.percentile(fits, 97.5, axis=0)
    elif len(items) >= MIN_INTERVAL_ITEMS:
        with warnings.catch_warnings():  # a system whose strength never moves: scipy warns, the bounds stay NaN
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            every = np.arange(len(items))
            boot = stats.bootstrap(
                (every,),
                refit,
                n_resamples=n_resamples,
                method="percentile",
                vectorized=False,
                batch=resample_batch((every,)),  # 5,000 items: 1,000 x 5,000 drawn indices held at once otherwise
                rng=np.random.default_rng(seed),
            ).bootstrap_distribution
            # BCa from the same resamples; its jackknife refits without one item at a time, where scipy's BCa
            # builds every leave-one-out sample at once (items x items: 1.2 GiB at 5,000 items)
            without = np.stack([refit(np.delete(every, i)) for i in every], axis=-1)
            low, high = bca_bounds(boot, point, without, 0.95)
    per_system = pd.concat([outcomes["a"], outcomes["b"]]).value_counts()
    sides = [outcomes[[side, "item_id"]].set_axis(["s", "item_id"], axis=1) for side in ("a", "b")]
    items_of = pd.concat(sides).groupby("s")["item_id"].nunique()
    table = pd.DataFrame(
        {
            "system_id": systems,
            "strength": point,
            "strength_ci_low": low,
            "strength_ci_high": high,
            "elo": ELO_BASE + ELO_SCALE * point,
            "elo_ci_low": ELO_BASE + ELO_SCALE * low,
            "elo_ci_high": ELO_BASE + ELO_SCALE * high,
            "n_comparisons": [int(per_system.get(s, 0)) for s in systems],
            "n_items": [int(items_of[s]) for s in systems],
        }
    )
    above = [
        int((table["strength_ci_low"] > h).sum()) if not np.isnan(h) else int((table["strength"] > p).sum())
        for p, h in zip(table["strength"], table["strength_ci_high"])
    ]
    table["rank"] = [1 + n for n in above]
    order = table["strength_ci_low"].fillna(table["strength"])
    table = table.assign(_key=order).sort_values(["_key", "strength"], ascending=False, kind="stable")
    return table.drop(columns="_key").reset_index(drop=True)[list(BT_COLUMNS)]
