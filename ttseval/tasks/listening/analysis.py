"""analyse_test: a test's stored ratings analysed (the statistics are ttseval.metrics.listening's) into Markdown,
stored with its figures under runs/<run>/listening/<test>/, beside the run's automatic metrics of the same clips."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.errors import SpecError
from ttseval.core.schemas import DG_SHEET
from ttseval.core.store import ArtifactStore
from ttseval.metrics.listening import (
    COUNT_FIELDS,
    DG_FIELDS,
    closest_pair,
    cmos_summary,
    difference_planning,
    fault_isolation,
    lambda_effect,
    metric_correlation,
    mos_alpha,
    rater_rejection,
    subsampling,
    subsampling_grid,
    system_stats,
)
from ttseval.tasks.listening.common import MUSHRA_KINDS, dg_weights, of_test, scale_of
from ttseval.tasks.listening.figures import fault_figure, rater_boxplot, subsampling_figure
from ttseval.tasks.parts import get_store
from ttseval.tasks.report.format import markdown_table


def _automatic(store: ArtifactStore, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Automatic metrics of the run's clips: per clip (item, system) and per system; one column per metric."""
    clip_parts, system_parts = [], []
    transcripts = store.read(run_id, "transcripts", columns=["item_id", "system_id", "asr_id", "wer", "cer", "status"])
    for asr_id, g in transcripts[transcripts["status"] == "ok"].groupby("asr_id"):
        clip_parts.append(g.set_index(["item_id", "system_id"])[["wer", "cer"]].add_suffix(f" ({asr_id})"))
    quality = store.read(run_id, "quality", columns=["item_id", "system_id", "quality_id", "mos", "status"])
    for quality_id, g in quality[quality["status"] == "ok"].groupby("quality_id"):
        clip_parts.append(g.set_index(["item_id", "system_id"])[["mos"]].rename(columns={"mos": f"MOS ({quality_id})"}))
    clips = (
        pd.concat(clip_parts, axis=1).reset_index() if clip_parts else pd.DataFrame(columns=["item_id", "system_id"])
    )
    if clip_parts:
        system_parts.append(clips.drop(columns="item_id").groupby("system_id").mean())
    winrates = store.read(run_id, "winrates")
    overall = winrates[winrates["level"] == "overall"]
    for judge_id, g in overall.groupby("judge_id"):
        system_parts.append(
            g.set_index("system_id")[["win_rate"]].rename(columns={"win_rate": f"win-rate ({judge_id})"})
        )
    systems = (
        pd.concat(system_parts, axis=1).reset_index().rename(columns={"index": "system_id"})
        if system_parts
        else pd.DataFrame(columns=["system_id"])
    )
    return clips, systems


def _planning_lines(used: pd.DataFrame, settings: Settings) -> list[str]:
    """Raters x items planning from this test as a pilot: the 95% half-width of the closest pair's difference
    per (listeners, utterances) cell (ttseval.metrics.listening.difference_planning)."""
    systems = used[used["role"].fillna("system") == "system"]
    pair = closest_pair(systems)
    if pair is None:
        return []
    cfg = settings.listening
    plan = difference_planning(
        systems,
        *pair,
        subsampling_grid(systems["rater_id"].nunique()),
        subsampling_grid(systems["item_id"].nunique()),
        trials=cfg.subsample_trials,
        seed=settings.seed,
    )
    cell = {
        (r.listeners, r.utterances): "–"
        if np.isnan(r.half_width)
        else f"±{r.half_width:.1f} ({100 * r.same_sign:.0f}%)"
        for r in plan.itertuples()
    }
    listeners, utterances = sorted(plan["listeners"].unique()), sorted(plan["utterances"].unique())
    return [
        "",
        (
            f"**Planning: listeners x utterances for `{pair[0]}` vs `{pair[1]}`** (the two systems whose means "
            "are closest; this test as the pilot): the 95% half-width of their mean difference measured with that "
            f"many listeners and utterances, from {cfg.subsample_trials} draws of listeners, then utterances, with "
            "replacement (MANGO's subsampling, with replacement so a cell the pilot's size still shows its spread), "
            "and in brackets the share of draws ordering the two as the whole test does."
        ),
        "",
        markdown_table(
            ["listeners \\ utterances", *map(str, utterances)],
            [[str(k), *(cell[(k, u)] for u in utterances)] for k in listeners],
        ),
    ]


def _bradley_terry_lines(used: pd.DataFrame, settings: Settings) -> list[str]:
    """The listeners' Bradley-Terry ranking of a CMOS test: each rating's sign as an outcome (0 a tie), the fit
    of ttseval.metrics.bradley_terry, intervals by resampling raters and items (the pigeonhole bootstrap)."""
    from ttseval.metrics.bootstrap import MIN_INTERVAL_ITEMS
    from ttseval.metrics.bradley_terry import bradley_terry, rating_outcomes

    outcomes = rating_outcomes(used)
    if outcomes.empty:
        return []
    ranked = bradley_terry(
        outcomes, n_resamples=settings.bootstrap_resamples, seed=settings.seed, resample="raters+items"
    )

    def ci(value: float, low: float, high: float, digits: int) -> str:
        if np.isnan(low):
            return f"{value:.{digits}f} (n too small)"
        return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"

    rows = [
        [
            str(r.rank),
            r.system_id,
            ci(r.strength, r.strength_ci_low, r.strength_ci_high, 3),
            ci(r.elo, r.elo_ci_low, r.elo_ci_high, 0),
            str(r.n_items),
            str(r.n_comparisons),
        ]
        for r in ranked.itertuples()
    ]
    return [
        "",
        (
            f"**Bradley-Terry ranking from the listeners' choices** (ttseval.metrics.bradley_terry): each "
            "rating's sign is an outcome (the system preferred 1, no preference a tie at half a win each side, the "
            "other preferred 0); strengths with a 95% percentile interval from resampling raters, then items, "
            f'with replacement ({settings.bootstrap_resamples} resamples; "n too small" under '
            f"{MIN_INTERVAL_ITEMS} items or 2 raters); ordered by the lower bound, systems whose intervals overlap "
            "share a rank; Elo is the same fit on the arena scale."
        ),
        "",
        markdown_table(["rank", "system", "strength [95% CI]", "Elo [95% CI]", "items", "comparisons"], rows),
    ]


def analyse_test(settings: Settings, run_id: str, test_id: str) -> str:
    """The analysis of test `test_id` as Markdown, stored with its figures under runs/<run>/listening/<test>/.

    Raises:
        SpecError: the run has no ratings of the test.
    """
    store = get_store(settings.store, settings.store_wait_s)
    ratings = of_test(store, run_id, "ratings", test_id)
    if ratings.empty:
        raise SpecError(
            f"run {run_id!r} has no ratings of test {test_id!r}; ingest them with ttseval human-eval ingest"
        )
    cfg = settings.listening
    kind = ratings["kind"].iloc[0]
    used = ratings[ratings["flag"].isna()].dropna(subset=["score"])
    low, high = scale_of(kind)
    base = f"runs/{run_id}/listening/{test_id}"
    figures = f"{store.display()}/{base}"
    lines = [
        f"### Listening test `{test_id}` ({kind})",
        "",
        (
            f"{used['rater_id'].nunique()} raters, {used['item_id'].nunique()} items, {len(used)} ratings used; "
            f"{int(ratings['flag'].notna().sum())} flagged and left out (a rater's second rating of a page); "
            f"{int(ratings[['rater_id', 'trial_id']][ratings['note'].notna()].drop_duplicates().shape[0])} pages "
            "without a hidden-reference rating."
        ),
    ]
    for r in (
        ratings[ratings["flag"].notna()].drop_duplicates(["rater_id", "trial_id", "session"]).head(10).itertuples()
    ):
        lines.append(f"- flagged: {r.flag}")
    lines.append("")
    if kind == "cmos":
        table = cmos_summary(used)
        others = ratings["other_system_id"].dropna().unique()
        lines += [
            (
                f"CMOS against `{', '.join(others)}` (positive: the system preferred), mean and 95% CI "
                "(Student's t); and the share of ratings preferring each side (Rethinking MUSHRA, Table 8)."
            ),
            "",
            markdown_table(
                ["system", "ratings", "CMOS", "sigma", "95% CI", "prefer other %", "equal %", "prefer system %"],
                [
                    [
                        r.system_id,
                        r.n,
                        f"{r.cmos:+.2f}",
                        f"{r.sigma:.2f}",
                        f"±{r.ci95:.2f}",
                        f"{100 * r.prefer_reference:.1f}",
                        f"{100 * r.equal:.1f}",
                        f"{100 * r.prefer_system:.1f}",
                    ]
                    for r in table.itertuples()
                ],
            ),
        ]
        human = table.rename(columns={"cmos": "score"})[["system_id", "score"]]
        lines += _bradley_terry_lines(used, settings)
    else:
        table = system_stats(used)
        alpha = mos_alpha(used, level="ordinal" if kind == "mos" else "interval")
        what = {
            "mos": "MOS (1-5)",
            "mushra": "MUSHRA (0-100)",
            "mushra-nmr": "MUSHRA-NMR (0-100)",
            "mushra-dg": "MUSHRA-DG (appendix A.6 formula)",
            "mushra-dg-nmr": "MUSHRA-DG-NMR (appendix A.6 formula)",
        }
        lines += [
            f"{what[kind]}: mean, sigma and 95% CI (mean ± t(0.975, n-1) sigma / sqrt(n), over ratings); "
            f"Krippendorff's alpha ({'ordinal' if kind == 'mos' else 'interval'}) over (item, system) units: "
            + ("undefined" if np.isnan(alpha) else f"{alpha:.3f}")
            + ".",
            "",
        ]
        headers = ["rank", "system", "role", "ratings", "mean", "sigma", "95% CI"]
        body = [
            [r.rank, r.system_id, r.role, r.n, f"{r.mean:.2f}", f"{r.sigma:.2f}", f"±{r.ci95:.2f}"]
            for r in table.itertuples()
        ]
        if kind.startswith("mushra-dg"):
            sliders = system_stats(used.dropna(subset=["slider"]), score="slider").set_index("system_id")["mean"]
            headers.append("slider mean")
            body = [[*row, f"{sliders.get(row[1], np.nan):.2f}"] for row in body]
            weights = dg_weights(settings)
            lines += [
                f"Scores from the scoresheet: (L + VQ + R) / 3 - {weights.mild_pronunciation:g} min(MP, "
                f"{weights.mild_cap:g}) - {weights.severe_pronunciation:g} min(SP, {weights.severe_cap:g}) - "
                f"{weights.unnatural_pauses:g} US - {weights.digital_artifacts:g} DA - {weights.word_skips:g} "
                f"WS - {weights.energy_fluctuations:g} SEF"
                + (", clipped to 0-100" if weights.clip else "")
                + "; the slider column is the page's MUSHRA slider beside it.",
                "",
            ]
        lines.append(markdown_table(headers, body))
        human = table[["system_id", "mean"]].rename(columns={"mean": "score"})
        png = rater_boxplot(used, low, high)
        store.write_bytes(f"{base}/raters.png", png)
        lines += ["", f"Per-rater score distributions (Figure 1): `{figures}/raters.png`."]
        if kind in MUSHRA_KINDS and (used["role"] == "reference").any():
            verdict = rater_rejection(used, cfg.rejection_lambda, cfg.rejection_share)
            rejected = verdict[verdict["rejected"].fillna(False).astype(bool)]
            lines += [
                "",
                f"**Rater rejection rule** (reported, not applied): a rater who scores the hidden "
                f"reference below {cfg.rejection_lambda:g} on more than {100 * cfg.rejection_share:g}% of "
                f"their pages would be rejected: {len(rejected)} of {len(verdict)} raters"
                + (f" ({', '.join(rejected['rater_id'])})" if len(rejected) else "")
                + ".",
                "",
                markdown_table(
                    ["rater", "pages", f"hidden ref < {cfg.rejection_lambda:g}", "share", "rejected"],
                    [
                        [
                            r.rater_id,
                            r.pages,
                            r.below,
                            "–" if np.isnan(r.share_below) else f"{100 * r.share_below:.0f}%",
                            "–" if pd.isna(r.rejected) else ("yes" if r.rejected else "no"),
                        ]
                        for r in verdict.itertuples()
                    ],
                ),
            ]
            effect = lambda_effect(used, list(cfg.lambdas), cfg.rejection_share)
            systems = list(table["system_id"])
            rows = []
            for lam, g in effect.groupby("lambda", dropna=False, sort=False):
                means = g.set_index("system_id")
                rows.append(
                    ["none" if np.isnan(lam) else f"{lam:g}", g["raters_kept"].iloc[0]]
                    + [
                        f"{means.loc[s, 'mean']:.1f} ({means.loc[s, 'rank']})" if s in means.index else "–"
                        for s in systems
                    ]
                )
            lines += [
                "",
                "Effect of the rule's lambda on scores (and ranks) (section 4.4, Figure 3):",
                "",
                markdown_table(["lambda", "raters kept", *systems], rows),
            ]
        curve = subsampling(
            used,
            subsampling_grid(used["rater_id"].nunique()),
            subsampling_grid(used["item_id"].nunique()),
            trials=cfg.subsample_trials,
            seed=settings.seed,
        )
        if not curve.empty and len(table) > 1:
            store.write_bytes(f"{base}/subsampling.png", subsampling_figure(curve))
            pivot = curve.pivot(index="listeners", columns="utterances", values="mean_rho")
            lines += [
                "",
                (
                    f"**Listeners x utterances** (section 4.3): mean Spearman correlation of the systems' means "
                    f"with all ratings' over {cfg.subsample_trials} random draws per cell "
                    f"(`{figures}/subsampling.png`)."
                ),
                "",
                markdown_table(
                    ["listeners \\ utterances", *pivot.columns],
                    [
                        [k, *("–" if np.isnan(v) else f"{v:.3f}" for v in row)]
                        for k, row in zip(pivot.index, pivot.to_numpy())
                    ],
                ),
            ]
        lines += _planning_lines(used, settings)
        if kind.startswith("mushra-dg"):
            faults = fault_isolation(used)
            store.write_bytes(f"{base}/faults.png", fault_figure(faults))
            lines += [
                "",
                (
                    f"**Fault isolation** (Figure 5): share of clips with at least one fault of each kind, and "
                    f"the mean perceptual scores (`{figures}/faults.png`)."
                ),
                "",
                markdown_table(
                    ["system", "clips", *(DG_SHEET[f] for f in DG_FIELDS)],
                    [
                        [
                            r["system_id"],
                            r["n"],
                            *(f"{100 * r[f]:.0f}%" for f in COUNT_FIELDS),
                            *(f"{r[f]:.1f}" for f in DG_FIELDS[6:]),
                        ]
                        for r in faults.to_dict("records")
                    ],
                ),
            ]
    clips, systems_auto = _automatic(store, run_id)
    per_clip = used.groupby(["item_id", "system_id"])["score"].mean().reset_index()
    corr = pd.concat(
        [
            metric_correlation(human, systems_auto, ["system_id"]).assign(level="systems"),
            metric_correlation(per_clip, clips, ["item_id", "system_id"]).assign(level="clips"),
        ]
    )
    corr = corr[corr["n"] > 0]
    if len(corr):
        lines += [
            "",
            (
                "**Automatic metrics of the same audio against the human scores** (Spearman and Pearson; "
                "across systems, and across clips with each clip's mean human score; WER should correlate "
                "negatively):"
            ),
            "",
            markdown_table(
                ["metric", "over", "n", "Spearman", "Pearson"],
                [
                    [
                        r.metric,
                        r.level,
                        r.n,
                        "–" if np.isnan(r.spearman) else f"{r.spearman:+.2f}",
                        "–" if np.isnan(r.pearson) else f"{r.pearson:+.2f}",
                    ]
                    for r in corr.itertuples()
                ],
            ),
        ]
    markdown = "\n".join(lines) + "\n"
    store.write_bytes(f"{base}/analysis.md", markdown.encode("utf-8"))
    return markdown
