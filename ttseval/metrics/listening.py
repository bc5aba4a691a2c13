"""Listening-test statistics as Rethinking MUSHRA (MANGO) computes them, as pure functions over a ratings frame.

A ratings frame has one row per rating: test_id, rater_id, trial_id (the page), item_id, system_id, role
('system', 'reference' for the hidden reference, 'anchor-x', 'anchor-y'), score, and for MUSHRA-DG the nine
scoresheet fields of appendix A.6 (DG_FIELDS). Every function here reads only the rows it is given: the caller
drops flagged rows (a rater's second pass over a page) first.

- `dg_score`: the appendix A.6 formula, its weights and caps a `DGWeights`; clipped to 0-100 by default (the
  paper does not say; a clip with three word skips would otherwise score below zero on a 0-100 scale).
- `system_stats`: mean, sigma (n - 1) and the 95% CI as mean +- t(0.975, n - 1) * sigma / sqrt(n) over ratings
  (Student's t rather than the paper's unstated normal quantile: the two agree to 0.1% from n = 1,000, and t is
  right for the small tests most labs run).
- `rater_rejection`: the MUSHRA rule (a rater who scores the hidden reference below lambda on more than 15% of
  the pages they rated), and `lambda_effect`: scores and ranks as lambda varies (section 4.4, Figure 3). Neither
  removes anyone from another result: the caller reports them beside the unfiltered scores.
- `subsampling`: Wester et al.'s procedure (section 4.3): draw listeners and utterances at random, average each
  system, Spearman-correlate with the full set's means; `trials` draws per cell. `subsampling_grid` gives the
  counts of listeners or utterances a report draws (GRID below the number there are, and that number).
- `cmos_summary` (with appendix A.2's Table 8 preference shares), `mos_alpha` (Krippendorff's alpha over
  (item, system) units), `fault_isolation` (Figure 5) and `metric_correlation` (human scores against automatic
  metrics of the same audio).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ttseval.core.schemas import DG_SHEET
from ttseval.metrics.agreement import Level, krippendorff_alpha

__all__ = [
    "COUNT_FIELDS",
    "DG_FIELDS",
    "GRID",
    "PERCEPTUAL_FIELDS",
    "DGWeights",
    "closest_pair",
    "cmos_summary",
    "dg_score",
    "difference_planning",
    "fault_isolation",
    "lambda_effect",
    "metric_correlation",
    "mos_alpha",
    "rater_rejection",
    "subsampling",
    "subsampling_grid",
    "system_stats",
]

DG_FIELDS = tuple(DG_SHEET)  # appendix A.6's scoresheet: six counts of faults, three perceptual scores on 0-100
COUNT_FIELDS, PERCEPTUAL_FIELDS = DG_FIELDS[:6], DG_FIELDS[6:]


@dataclass(frozen=True)
class DGWeights:
    """Appendix A.6: S_M = (L + VQ + R) / 3 - 5 min(MP, 15) - 10 min(SP, 7) - 5 US - 5 DA - 25 WS - 5 SEF."""

    mild_pronunciation: float = 5.0
    severe_pronunciation: float = 10.0
    unnatural_pauses: float = 5.0
    digital_artifacts: float = 5.0
    energy_fluctuations: float = 5.0
    word_skips: float = 25.0
    mild_cap: float = 15.0
    severe_cap: float = 7.0
    clip: bool = True  # clip to 0-100 (our choice; the paper is silent)


def dg_score(sheet: pd.DataFrame, weights: DGWeights = DGWeights()) -> pd.Series:
    """The MUSHRA-DG score of each scoresheet row (DG_FIELDS columns); NaN where a field is missing."""
    perceptual = sheet[list(PERCEPTUAL_FIELDS)].astype(float).mean(axis=1, skipna=False)
    penalty = (
        weights.mild_pronunciation * sheet["mild_pronunciation"].clip(upper=weights.mild_cap)
        + weights.severe_pronunciation * sheet["severe_pronunciation"].clip(upper=weights.severe_cap)
        + weights.unnatural_pauses * sheet["unnatural_pauses"]
        + weights.digital_artifacts * sheet["digital_artifacts"]
        + weights.word_skips * sheet["word_skips"]
        + weights.energy_fluctuations * sheet["energy_fluctuations"]
    )
    score = perceptual - penalty.astype(float)
    return score.clip(0.0, 100.0) if weights.clip else score


def _ci(values: np.ndarray) -> tuple[float, float, float]:
    """mean, sigma (n - 1), and the half-width of the 95% t interval (NaN below two values)."""
    from scipy import stats

    n = len(values)
    mean = float(values.mean()) if n else float("nan")
    if n < 2:
        return mean, float("nan"), float("nan")
    sigma = float(values.std(ddof=1))
    return mean, sigma, float(stats.t.ppf(0.975, n - 1) * sigma / np.sqrt(n))


def system_stats(ratings: pd.DataFrame, score: str = "score") -> pd.DataFrame:
    """Per system (with its role): n, mean, sigma, ci95 (half-width), ci_low, ci_high, rank (1 = highest mean)."""
    rows = []
    for (system_id, role), g in ratings.dropna(subset=[score]).groupby(["system_id", "role"], sort=True):
        mean, sigma, half = _ci(g[score].to_numpy(float))
        rows.append(
            {
                "system_id": system_id,
                "role": role,
                "n": len(g),
                "mean": mean,
                "sigma": sigma,
                "ci95": half,
                "ci_low": mean - half,
                "ci_high": mean + half,
            }
        )
    out = pd.DataFrame(rows, columns=["system_id", "role", "n", "mean", "sigma", "ci95", "ci_low", "ci_high"])
    out["rank"] = out["mean"].rank(ascending=False, method="min").astype("Int64")
    return out.sort_values("mean", ascending=False, kind="stable").reset_index(drop=True)


def rater_rejection(ratings: pd.DataFrame, lam: float, share: float = 0.15) -> pd.DataFrame:
    """Per rater: pages with a hidden-reference rating, how many scored it below `lam`, that share, and whether
    the MUSHRA rule rejects the rater (share > `share`). A rater with no hidden-reference rating is not judged
    (rejected is NA)."""
    ref = ratings[ratings["role"] == "reference"].dropna(subset=["score"])
    per_page = ref.groupby(["rater_id", "trial_id"])["score"].min()  # one hidden reference per page
    rows = []
    for rater in sorted(ratings["rater_id"].unique()):
        scores = per_page.loc[rater] if rater in per_page.index.get_level_values(0) else pd.Series(dtype=float)
        below = int((scores < lam).sum())
        frac = below / len(scores) if len(scores) else float("nan")
        rows.append(
            {
                "rater_id": rater,
                "pages": len(scores),
                "below": below,
                "share_below": frac,
                "rejected": pd.NA if not len(scores) else bool(frac > share),
            }
        )
    return pd.DataFrame(rows, columns=["rater_id", "pages", "below", "share_below", "rejected"])


def lambda_effect(ratings: pd.DataFrame, lambdas: list[float], share: float = 0.15) -> pd.DataFrame:
    """For no rejection (lambda NaN) and each lambda: raters kept, and every system's mean and rank over the
    kept raters' ratings (Figure 3). Raters the rule cannot judge are kept."""
    rows = []
    for lam in [float("nan"), *lambdas]:
        if np.isnan(lam):
            kept = ratings
        else:
            verdict = rater_rejection(ratings, lam, share)
            out = set(verdict.loc[verdict["rejected"].fillna(False).astype(bool), "rater_id"])
            kept = ratings[~ratings["rater_id"].isin(out)]
        s = system_stats(kept) if len(kept) else pd.DataFrame(columns=["system_id", "mean", "rank"])
        for r in s.itertuples():
            rows.append(
                {
                    "lambda": lam,
                    "raters_kept": kept["rater_id"].nunique(),
                    "system_id": r.system_id,
                    "mean": r.mean,
                    "rank": r.rank,
                }
            )
    return pd.DataFrame(rows, columns=["lambda", "raters_kept", "system_id", "mean", "rank"])


def _cube(ratings: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """rater x item x system array of mean scores (NaN where a rater did not rate), and the systems' order."""
    table = ratings.pivot_table(index=["rater_id", "item_id"], columns="system_id", values="score", aggfunc="mean")
    raters = sorted(ratings["rater_id"].unique())
    items = sorted(ratings["item_id"].unique())
    table = table.reindex(pd.MultiIndex.from_product([raters, items]))
    return table.to_numpy(float).reshape(len(raters), len(items), table.shape[1]), list(table.columns)


def _rank_rows(x: np.ndarray) -> np.ndarray:
    from scipy import stats

    return stats.rankdata(x, axis=1)


def subsampling(
    ratings: pd.DataFrame, listeners: list[int], utterances: list[int], *, trials: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """For each (listeners, utterances) cell: the mean Spearman correlation, over `trials` draws without
    replacement, between the systems' mean scores on the drawn raters' ratings of the drawn items and the means
    over everything. A draw where some system has no rating or every mean ties is not counted (`trials_used`)."""
    from scipy import stats

    cube, _ = _cube(ratings)
    n_raters, n_items, _ = cube.shape
    full = np.nanmean(cube.reshape(-1, cube.shape[2]), axis=0)
    full_rank = stats.rankdata(full)
    rng = np.random.default_rng(seed)
    rows = []
    for k_l in listeners:
        for k_u in utterances:
            if k_l > n_raters or k_u > n_items:
                continue
            r_idx = np.argsort(rng.random((trials, n_raters)), axis=1)[:, :k_l]
            i_idx = np.argsort(rng.random((trials, n_items)), axis=1)[:, :k_u]
            total = np.zeros((trials, cube.shape[2]))
            count = np.zeros((trials, cube.shape[2]))
            step = max(1, int(4e6 // (k_l * k_u * cube.shape[2])))  # draws per gather: ~32 MB at most
            for a in range(0, trials, step):
                sub = cube[r_idx[a : a + step, :, None], i_idx[a : a + step, None, :], :]  # draws x k_l x k_u x systems
                total[a : a + step] = np.nansum(sub, axis=(1, 2))
                count[a : a + step] = np.sum(~np.isnan(sub), axis=(1, 2))
            with np.errstate(invalid="ignore", divide="ignore"):
                means = total / count
            ok = (count > 0).all(axis=1) & (np.ptp(np.where(count > 0, means, 0), axis=1) > 0)
            if ok.any():
                ranks = _rank_rows(means[ok])
                a = ranks - ranks.mean(axis=1, keepdims=True)
                b = full_rank - full_rank.mean()
                rho = (a @ b) / (np.sqrt((a**2).sum(axis=1)) * np.sqrt((b**2).sum()))
                mean_rho = float(rho.mean())
            else:
                mean_rho = float("nan")
            rows.append({"listeners": k_l, "utterances": k_u, "mean_rho": mean_rho, "trials_used": int(ok.sum())})
    return pd.DataFrame(rows, columns=["listeners", "utterances", "mean_rho", "trials_used"])


def closest_pair(ratings: pd.DataFrame) -> tuple[str, str] | None:
    """The two systems whose mean scores are closest (the pair a test finds hardest to tell apart), the higher
    first; None under two systems."""
    means = ratings.dropna(subset=["score"]).groupby("system_id")["score"].mean().sort_values(ascending=False)
    if len(means) < 2:
        return None
    k = int(np.argmin(-np.diff(means.to_numpy())))
    return str(means.index[k]), str(means.index[k + 1])


def difference_planning(
    ratings: pd.DataFrame,
    a: str,
    b: str,
    listeners: list[int],
    utterances: list[int],
    *,
    trials: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Planning a listening test from a pilot's ratings: for each (listeners, utterances) cell, how precisely a
    test of that size measures the difference of the mean scores of systems `a` and `b`.

    As MANGO's subsampling (section 4.3) draws listeners and utterances from the pilot, but **with replacement**
    (so a cell as large as the pilot still shows its spread: drawn without replacement it would be the pilot
    itself every time): per trial, `listeners` raters then `utterances` items are drawn (numpy's
    default_rng(seed), raters first), and the difference is mean(a) - mean(b) over the drawn raters' ratings of the
    drawn items. `half_width` is half the distance between the 2.5th and 97.5th percentiles of the trials'
    differences (a 95% interval's half-width); `same_sign` the share of trials whose difference has the pilot's
    sign (how often a test of that size orders the two as the pilot does). A trial where a system has no rating is
    not counted (`trials_used`)."""
    pilot = ratings[ratings["system_id"].isin([a, b])].dropna(subset=["score"])
    cube, systems = _cube(pilot)
    cube = cube[:, :, [systems.index(a), systems.index(b)]]
    n_raters, n_items, _ = cube.shape
    full = np.nanmean(cube.reshape(-1, 2), axis=0)
    rng = np.random.default_rng(seed)
    rows = []
    for k_l in listeners:
        for k_u in utterances:
            r_idx = rng.integers(0, n_raters, (trials, k_l))
            i_idx = rng.integers(0, n_items, (trials, k_u))
            total, count = np.zeros((trials, 2)), np.zeros((trials, 2))
            step = max(1, int(4e6 // (k_l * k_u * 2)))
            for s in range(0, trials, step):
                sub = cube[r_idx[s : s + step, :, None], i_idx[s : s + step, None, :], :]
                total[s : s + step] = np.nansum(sub, axis=(1, 2))
                count[s : s + step] = np.sum(~np.isnan(sub), axis=(1, 2))
            ok = (count > 0).all(axis=1)
            diff = total[ok, 0] / count[ok, 0] - total[ok, 1] / count[ok, 1]
            low, high = np.percentile(diff, [2.5, 97.5]) if ok.any() else (np.nan, np.nan)
            same = float((np.sign(diff) == np.sign(full[0] - full[1])).mean()) if ok.any() else np.nan
            rows.append(
                {
                    "listeners": k_l,
                    "utterances": k_u,
                    "difference": float(diff.mean()) if ok.any() else np.nan,
                    "half_width": float((high - low) / 2),
                    "same_sign": same,
                    "trials_used": int(ok.sum()),
                }
            )
    return pd.DataFrame(
        rows, columns=["listeners", "utterances", "difference", "half_width", "same_sign", "trials_used"]
    )


GRID = (2, 3, 5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200)


def subsampling_grid(n: int) -> list[int]:
    """The sizes `subsampling` is asked for out of `n` listeners (or utterances): every GRID size below n, and n."""
    return sorted({k for k in GRID if k < n} | {n})


def cmos_summary(ratings: pd.DataFrame) -> pd.DataFrame:
    """Per system: CMOS (score > 0: the system preferred over the reference), sigma, 95% CI, and the shares of
    ratings preferring the reference, neither and the system (appendix A.2's Table 8)."""
    rows = []
    for system_id, g in ratings.dropna(subset=["score"]).groupby("system_id", sort=True):
        scores = g["score"].to_numpy(float)
        mean, sigma, half = _ci(scores)
        rows.append(
            {
                "system_id": system_id,
                "n": len(g),
                "cmos": mean,
                "sigma": sigma,
                "ci95": half,
                "prefer_reference": float((scores < 0).mean()),
                "equal": float((scores == 0).mean()),
                "prefer_system": float((scores > 0).mean()),
            }
        )
    return pd.DataFrame(
        rows, columns=["system_id", "n", "cmos", "sigma", "ci95", "prefer_reference", "equal", "prefer_system"]
    )


def mos_alpha(ratings: pd.DataFrame, level: Level = "ordinal") -> float:
    """Krippendorff's alpha over (item, system) units rated by the raters; NaN when undefined (fewer than two
    raters of any unit, or one value overall)."""
    units = ratings.pivot_table(index="rater_id", columns=["item_id", "system_id"], values="score", aggfunc="first")
    try:
        return float(krippendorff_alpha(units.to_numpy(float), level=level))
    except ValueError:
        return float("nan")


def fault_isolation(sheets: pd.DataFrame) -> pd.DataFrame:
    """Figure 5: per system, the share of scoresheets with at least one fault of each count field, and the mean
    of each perceptual field."""
    rows = []
    for system_id, g in sheets.dropna(subset=list(DG_FIELDS), how="all").groupby("system_id", sort=True):
        row: dict[str, Any] = {"system_id": system_id, "n": len(g)}
        row |= {f: float((g[f] > 0).mean()) for f in COUNT_FIELDS}
        row |= {f: float(g[f].mean()) for f in PERCEPTUAL_FIELDS}
        rows.append(row)
    return pd.DataFrame(rows, columns=["system_id", "n", *DG_FIELDS])


def metric_correlation(human: pd.DataFrame, metrics: pd.DataFrame, on: list[str]) -> pd.DataFrame:
    """Spearman and Pearson correlation of the human `score` with each metric column, joined `on` (system_id for
    system means; item_id and system_id for clips); NaN below three pairs or when either side is constant."""
    from scipy import stats

    joined = human.merge(metrics, on=on, how="inner")
    rows = []
    for column in [c for c in metrics.columns if c not in on]:
        pair = joined[["score", column]].dropna()
        n = len(pair)
        if n < 3 or pair["score"].nunique() < 2 or pair[column].nunique() < 2:
            rho = r = float("nan")
        else:
            rho = float(stats.spearmanr(pair["score"], pair[column]).statistic)
            r = float(stats.pearsonr(pair["score"], pair[column]).statistic)
        rows.append({"metric": column, "n": n, "spearman": rho, "pearson": r})
    return pd.DataFrame(rows, columns=["metric", "n", "spearman", "pearson"])
