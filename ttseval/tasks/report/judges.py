"""The report's judge sections: per judge, win-rates by category beside WER and MOS with cost, self-consistency
and cascade figures; voice variance; agreement between judges; position bias; and InstructTTSEval scores.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ttseval.core.registry import system_name
from ttseval.core.store import ArtifactStore
from ttseval.metrics.agreement import judge_agreement
from ttseval.metrics.registry import arrow
from ttseval.metrics.winrate import model_of_voices, voice_variance
from ttseval.tasks.report.compute import read_judgments
from ttseval.tasks.report.format import header, judge_label, markdown_table, num, pct, with_ci


def _system_metric(summary: pd.DataFrame, system_id: str, column: str, fmt: Callable[[float], str]) -> str:
    """A system's figure beside its win-rate: the value, or each recogniser's value named when it has several."""
    rows = summary[summary["system_id"] == system_id]
    if rows.empty:
        return "–"
    values = rows[column].tolist()
    if len(set(map(str, values))) == 1:  # one recogniser, or a system-wide figure (MOS) repeated on each row
        return fmt(values[0])
    return ", ".join(f"{fmt(v)} ({spec})" for v, spec in zip(values, rows["asr_spec"]))


def _cell(frame: pd.DataFrame, key: tuple[str, str | int]) -> str:
    """A win-rate cell with its CI from a frame of win_rate_table rows indexed by (system_id, group)."""
    if key not in frame.index:
        return "–"
    r = frame.loc[key]
    return with_ci(r["win_rate"], r["win_rate_ci_low"], r["win_rate_ci_high"], percent=True)


def leaderboard_markdown(
    store: ArtifactStore,
    run_id: str,
    summary: pd.DataFrame,
    winrates: pd.DataFrame,
    rankings: pd.DataFrame | None = None,
) -> str:
    """Per judge: system x category win-rates beside WER and MOS, parse failures, the run's judge cost, and a
    warning for a judge whose answers cannot rank (ttseval.metrics.agreement.degenerate_judge); win-rates by depth;
    with `rankings` (ttseval.tasks.report.compute.compute_rankings), the judge's Bradley-Terry ranking."""
    from ttseval.metrics.agreement import degenerate_judge
    from ttseval.metrics.cascade import cascade_summary
    from ttseval.metrics.winrate import against_baseline

    if winrates.empty:
        return ""
    names = dict(zip(summary["system_id"], summary["system_spec"].map(system_name)))
    judgments = read_judgments(store, run_id)
    lines = []
    for judge_id, rows in winrates.groupby("judge_id", sort=False):
        spec = rows["judge_spec"].iloc[0]
        baseline = names.get(rows["baseline_id"].iloc[0], rows["baseline_id"].iloc[0])
        every = judgments[judgments["judge_id"] == judge_id]  # every pair judged (judge_pairs): the judge's cost
        mine = against_baseline(every)
        cost = float(every["cost_usd"].fillna(0).sum())
        tokens = int(every["input_tokens"].fillna(0).sum() + every["output_tokens"].fillna(0).sum())
        lines += [
            "",
            f"## Win-rate vs baseline `{baseline}`: judge {judge_label(spec)}",
            "",
            (
                f"judge_id `{judge_id}`; cost ${cost:.4f} ({tokens} tokens); win 1, tie 0.5, loss 0; "
                '95% CI (BCa bootstrap over items) on every win-rate, overall and per category and depth; "n '
                'too small" where a cell has under 10 judged items; parse failures are counted, not scored.'
            ),
            "",
        ]
        if why := degenerate_judge(mine):
            lines += [f"**Warning: this judge does not rank.** {why}.", ""]
        lines += _served_lines(every)
        sampled = mine[mine["samples"].fillna(1) > 1]
        if not sampled.empty:
            lines += [
                (
                    f"Self-consistency: {int(sampled['samples'].max())} samples per comparison at temperature "
                    f"> 0; the samples agree with the majority verdict {pct(sampled['sample_agreement'].mean())}% "
                    "of the time on average."
                ),
                "",
            ]
        if spec.startswith("cascade:") and (c := cascade_summary(mine)):
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(c["why"].items()))
            kept = (
                f" {c['not_drawn']} unsettled pairs not drawn for the strong judge (`escalate_sample`) kept "
                "the cheap verdict."
                if c["not_drawn"]
                else ""
            )
            audit = (
                f" On {c['audited']} settled pairs the strong judge also heard, it gave the cheap judge's "
                f"answer {pct(c['agreement'])}% of the time."
                if c["audited"]
                else ""
            )
            lines += [
                (
                    f"Cascade: {c['escalated']} of {c['n']} pairs ({pct(c['escalated_share'])}%) went to the "
                    f"strong judge ({reasons or 'none'}); cheap judge ${c['cheap_usd']:.4f}, strong judge "
                    f"${c['strong_usd']:.4f}.{kept}{audit}"
                ),
                "",
            ]
        overall = rows[rows["level"] == "overall"].set_index("system_id")
        by_cat = rows[rows["level"] == "category"].set_index(["system_id", "category"])
        cats = sorted(by_cat.index.get_level_values("category").unique())
        headers = [
            "system",
            header("win-rate %", "win_rate", "[95% CI]"),
            "ties %",
            "parse fail",
            *cats,
            header("WER %", "wer"),
            header("MOS", "mos"),
            "judge $",
        ]
        cost_by_system = mine.groupby("system_id")["cost_usd"].sum(min_count=1)
        table = []
        for system_id, r in overall.iterrows():
            cells = [
                names.get(system_id, system_id),
                with_ci(r["win_rate"], r["win_rate_ci_low"], r["win_rate_ci_high"], percent=True),
                pct(r["tie_rate"]),
                str(int(r["n_parse_failures"])),
            ]
            cells += [_cell(by_cat, (system_id, c)) for c in cats]
            cells += [
                _system_metric(summary, system_id, "wer", pct),
                _system_metric(summary, system_id, "mos", num),
                num(cost_by_system.get(system_id, float("nan")), 4),
            ]
            table.append(cells)
        lines.append(markdown_table(headers, table))
        lines.append(f"\n![win-rate by depth](figures/winrate-by-depth-{judge_id}.png)")
        by_depth = rows[rows["level"] == "depth"].dropna(subset=["depth"]).set_index(["system_id", "depth"])
        depths = sorted(int(d) for d in by_depth.index.get_level_values("depth").unique())
        if len(depths) > 1:
            lines += [
                "",
                "Win-rate % by depth [95% CI]:",
                "",
                markdown_table(
                    ["system", *(f"depth {d}" for d in depths)],
                    [[names.get(s, s), *(_cell(by_depth, (s, d)) for d in depths)] for s in overall.index],
                ),
            ]
        if rankings is not None and not (ranked := rankings[rankings["judge_id"] == judge_id]).empty:
            lines += bradley_terry_markdown(ranked, names)
    lines += voice_variance_markdown(winrates, names)
    agreement = judge_agreement(winrates)
    if agreement:
        w = agreement["kendalls_w"]
        w_text = (
            f"{w:.3f}"
            if w == w
            else "undefined: every judge gives all of them the same win-rate, so there is no ranking to agree on"
        )
        lines += [
            "",
            "## Judge agreement",
            "",
            (
                f"Kendall's W over {agreement['n_systems']} systems ranked by each "
                f"judge's overall win-rate (tie-corrected): {w_text}"
            ),
            "",
            "Pairwise Spearman between judges' system rankings:",
            "",
        ]
        rho = agreement["spearman"]
        lines.append(
            markdown_table(
                ["judge", *map(str, rho.columns)], [[j, *(num(v, 3) for v in row)] for j, row in rho.iterrows()]
            )
        )
    lines += position_bias_markdown(store, run_id, against_baseline(judgments), names)
    return "\n".join(lines) + "\n"


def _served_lines(judgments: pd.DataFrame) -> list[str]:
    """What the vendor says answered a judge's verdicts (`served_model`): one model named; more than one, a warning,
    since a fixed model name served other versions and their verdicts are pooled here."""
    counts = judgments["served_model"].dropna().value_counts()
    if counts.empty:
        return []
    if len(counts) == 1:
        return [f"Served model (as the vendor's answers name it): `{counts.index[0]}`.", ""]
    listed = ", ".join(f"`{model}` ({n} verdicts)" for model, n in counts.items())
    return [
        (
            f"**Warning: the served model changed under this judge's name**: {listed}. The verdicts of different "
            "versions are pooled here; judge again under one version (a backfill) to compare like with like."
        ),
        "",
    ]


def position_bias_markdown(
    store: ArtifactStore, run_id: str, judgments: pd.DataFrame, names: dict[str, str]
) -> list[str]:
    """Per audited judge: consistency under the swap, first-position wins, and win-rates with the swapped answers
    included (ttseval.metrics.position_bias)."""
    from ttseval.metrics.position_bias import position_bias

    audit = store.read(run_id, "position_audit")
    if audit.empty or judgments.empty:
        return []
    judges, systems = position_bias(judgments, audit)
    if judges.empty:
        return []
    specs = judgments.drop_duplicates("judge_id").set_index("judge_id")["judge_spec"]
    lines = [
        "",
        "## Position bias",
        "",
        (
            "A sample of pairs (`position_audit_share`, at least `position_audit_min`) asked again with the clips "
            "in the other order. Consistency: share of audited pairs whose verdict survives the swap. First "
            "position: share of decided answers won by the clip heard first (0.5 = no bias). Win-rate with swaps: "
            "an audited pair scores the mean of its two answers."
        ),
        "",
    ]
    rows = []
    for j in judges.itertuples(index=False):
        mine = systems[systems["judge_id"] == j.judge_id]
        per_system = "; ".join(
            f"{names.get(r.system_id, r.system_id)} {pct(r.win_rate)} -> {pct(r.win_rate_swapped)}"
            for r in mine.itertuples(index=False)
        )
        rows.append(
            [
                judge_label(specs.get(j.judge_id, j.judge_id)),
                str(j.n_audited),
                pct(j.consistency),
                pct(j.first_position_wins),
                per_system,
            ]
        )
    lines.append(
        markdown_table(
            ["judge", "pairs audited", "consistency %", "first-position wins %", "win-rate % -> with swaps"], rows
        )
    )
    return lines


def bradley_terry_markdown(ranked: pd.DataFrame, names: dict[str, str]) -> list[str]:
    """One judge's Bradley-Terry ranking (ttseval.metrics.bradley_terry) as report lines: ordered by the lower
    bound, strength and Elo with their intervals."""
    from ttseval.metrics.bootstrap import MIN_INTERVAL_ITEMS

    rows = [
        [
            str(r.rank),
            names.get(r.system_id, r.system_id),
            with_ci(r.strength, r.strength_ci_low, r.strength_ci_high, 3),
            with_ci(r.elo, r.elo_ci_low, r.elo_ci_high, 0),
            str(r.n_items),
            str(r.n_comparisons),
        ]
        for r in ranked.itertuples()
    ]
    return [
        "",
        (
            "Bradley-Terry ranking (ttseval.metrics.bradley_terry): strengths fitted to this judge's verdicts, a "
            'tie counting half a win for each side, with a BCa bootstrap 95% CI over items ("n too small" under '
            f"{MIN_INTERVAL_ITEMS} items); ordered by the lower bound, as TTS Arena ranks; systems whose intervals "
            "overlap share a rank. Elo is the same fit on the arena scale (1000 + 400 log10 of the odds). Every pair "
            "the judge heard is fitted (setting judge_pairs); systems judged only against the baseline are compared "
            "with each other through it."
        ),
        "",
        markdown_table(["rank", "system", "strength [95% CI]", "Elo [95% CI]", "items", "comparisons"], rows),
    ]


def voice_variance_markdown(winrates: pd.DataFrame, names: dict[str, str]) -> list[str]:
    """The standard deviation of win-rate across the voices of each model with several voices in the run."""
    spread = voice_variance(winrates, model_of_voices(names))
    if spread.empty:
        return []
    lines = [
        "",
        "## Voice variance (EmergentTTS-Eval 4.4)",
        "",
        (
            "Standard deviation (ddof=1) of win-rate across the voices of one model, per judge and category: how "
            "much the choice of voice alone moves the score."
        ),
        "",
    ]
    judge_specs = dict(zip(winrates["judge_id"], winrates["judge_spec"]))
    table = [
        [
            judge_label(judge_specs.get(r["judge_id"], r["judge_id"])),
            f"`{r['model']}`",
            "overall" if r["level"] == "overall" else r["category"],
            str(r["n_voices"]),
            pct(r["win_rate_mean"]),
            pct(r["win_rate_std"]),
        ]
        for _, r in spread.sort_values(["judge_id", "model", "level"], ascending=[True, True, False]).iterrows()
    ]
    lines.append(markdown_table(["judge", "model", "category", "voices", "mean win-rate %", "std %"], table))
    return lines


def instruction_markdown(store: ArtifactStore, run_id: str, names: dict[str, str]) -> str:
    """InstructTTSEval scores per judge, system and language: share of clips judged to follow, per task and
    macro-averaged over APS, DSD and RP, with the undecidable count beside them."""
    from ttseval.metrics.instruct import instruction_scores

    frame = store.read(run_id, "instruction_judgments")
    frame = frame[frame["status"] == "ok"]
    if frame.empty:
        return ""
    items = store.read(run_id, "items", columns=["item_id", "language"])
    scores = instruction_scores(frame.merge(items, on="item_id"))
    specs = frame.drop_duplicates("judge_id").set_index("judge_id")["judge_spec"]
    table = []
    for (judge_id, system_id, language), g in scores.groupby(["judge_id", "system_id", "language"], sort=False):
        by_task = g.set_index("task")
        tasks = by_task.drop(index="macro", errors="ignore")
        undecided = int(tasks["n_undecidable"].sum() + tasks["n_parse_failures"].sum())
        table.append(
            [
                specs.get(judge_id, judge_id),
                names.get(system_id, system_id),
                language,
                *(pct(by_task.loc[t, "score"]) if t in by_task.index else "–" for t in ("APS", "DSD", "RP", "macro")),
                undecided,
            ]
        )
    up = arrow("score")
    headers = [
        "judge",
        "system",
        "language",
        f"APS % {up}",
        f"DSD % {up}",
        f"RP % {up}",
        f"macro % {up}",
        "undecidable",
    ]
    lines = [
        "",
        "## Instruction following (InstructTTSEval)",
        "",
        "score = clips judged to follow / decided clips; macro = unweighted mean of APS, DSD, RP.",
        "",
        markdown_table(headers, table),
    ]
    return "\n".join(lines) + "\n"
