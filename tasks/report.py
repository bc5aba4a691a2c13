"""Report stage: per-system summary as a table, Markdown in the run folder, and a Prefect artifact."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa

from metrics.summary import summarize_systems
from ttseval.config import Settings
from ttseval.report import render_markdown
from ttseval.schemas import REPORT
from ttseval.store import ArtifactStore


def compute_summary(store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str] | None = None) -> pd.DataFrame:
    """The per-system summary of a run from its stored tables (all systems unless `system_ids` is given)."""
    items = store.read(run_id, "items")
    synthesis = store.read(run_id, "synthesis")
    if system_ids is not None:
        synthesis = synthesis[synthesis["system_id"].isin(system_ids)]
        order = {s: i for i, s in enumerate(system_ids)}
        synthesis = synthesis.sort_values("system_id", key=lambda c: c.map(order), kind="stable")
    synthesis = synthesis[synthesis["item_id"].isin(items["item_id"])]
    return summarize_systems(items, synthesis, store.read(run_id, "transcripts"), store.read(run_id, "quality"),
                             n_resamples=settings.bootstrap_resamples, seed=settings.seed)


def write_report(store: ArtifactStore, run_id: str, summary: pd.DataFrame, meta: dict[str, Any]) -> str:
    """Store the summary as the run's `report` table and `report.md`; returns the Markdown."""
    table = pa.Table.from_pandas(summary[REPORT.names], schema=REPORT, preserve_index=False)
    store.replace_table(run_id, "report", table)
    markdown = render_markdown(summary, meta)
    store.write_bytes(f"runs/{run_id}/report.md", markdown.encode("utf-8"))
    return markdown


LEVELS = {"overall": (), "category": ("category",), "category_depth": ("category", "depth")}


def compute_winrates(store: ArtifactStore, run_id: str, settings: Settings) -> pd.DataFrame:
    """Win-rates of every judge, at the three levels of EmergentTTS-Eval's tables, in one long table."""
    from metrics.winrate import win_rate_table

    judgments = store.read(run_id, "judgments")
    if judgments.empty:
        return _empty_winrates()
    items = store.read(run_id, "items")[["item_id", "category", "depth"]]
    frame = judgments.merge(items, on="item_id", how="left")
    specs = judgments.drop_duplicates("judge_id").set_index("judge_id")["judge_spec"]
    parts = []
    for level, by in LEVELS.items():
        table = win_rate_table(frame, by=by, n_resamples=settings.bootstrap_resamples, seed=settings.seed)
        parts.append(table.assign(level=level))
    out = pd.concat(parts, ignore_index=True)
    out["judge_spec"] = out["judge_id"].map(specs)
    from ttseval.schemas import WINRATES

    for name in WINRATES.names:
        if name not in out.columns:
            out[name] = None
    return out[WINRATES.names]


def _empty_winrates() -> pd.DataFrame:
    from ttseval.schemas import WINRATES

    return WINRATES.empty_table().to_pandas()


def judge_agreement(winrates: pd.DataFrame) -> dict[str, Any] | None:
    """Kendall's W over systems ranked by each judge's overall win-rate, and pairwise Spearman; None for < 2 judges."""
    from metrics.agreement import kendalls_w, pairwise_spearman

    overall = winrates[winrates["level"] == "overall"]
    scores = overall.pivot_table(index="judge_spec", columns="system_id", values="win_rate").dropna(axis=1)
    if len(scores) < 2 or scores.shape[1] < 2:
        return None
    return {"kendalls_w": kendalls_w(scores, correct_ties=True), "spearman": pairwise_spearman(scores),
            "n_systems": scores.shape[1]}


def depth_figure(winrates: pd.DataFrame, judge_id: str, names: dict[str, str]) -> bytes | None:
    """PNG: win-rate against depth per category, one line per candidate system (EmergentTTS-Eval Fig. 3 style)."""
    rows = winrates[(winrates["level"] == "category_depth") & (winrates["judge_id"] == judge_id)]
    if rows.empty:
        return None
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    categories = sorted(rows["category"].dropna().unique())
    cols = min(3, len(categories))
    nrows = -(-len(categories) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False, sharey=True)
    for ax, category in zip(axes.flat, categories):
        sub = rows[rows["category"] == category]
        for system_id, g in sub.groupby("system_id", sort=False):
            g = g.sort_values("depth")
            ax.plot(g["depth"], 100 * g["win_rate"], marker="o", label=names.get(system_id, system_id))
        ax.axhline(50, color="grey", lw=0.8, ls="--")
        ax.set_title(category)
        ax.set_xlabel("depth")
        ax.set_ylim(0, 100)
        ax.set_xticks(sorted(sub["depth"].dropna().unique()))
    for ax in list(axes.flat)[len(categories):]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("win-rate vs baseline (%)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"win-rate by depth: {rows['judge_spec'].iloc[0]}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _judge_label(spec: str) -> str:
    from providers.judges.objective import LABEL

    return LABEL if spec.split(":")[0] == "objective" else spec


def leaderboard_markdown(store: ArtifactStore, run_id: str, summary: pd.DataFrame, winrates: pd.DataFrame) -> str:
    """Per judge: system x category win-rates beside WER and MOS, parse failures, and the run's judge cost."""
    from ttseval.report import _num, _pct

    if winrates.empty:
        return ""
    names = dict(zip(summary["system_id"], summary["system_spec"]))
    metrics = summary.set_index("system_id")
    judgments = store.read(run_id, "judgments")
    lines = []
    for judge_id, rows in winrates.groupby("judge_id", sort=False):
        spec = rows["judge_spec"].iloc[0]
        baseline = names.get(rows["baseline_id"].iloc[0], rows["baseline_id"].iloc[0])
        mine = judgments[judgments["judge_id"] == judge_id]
        cost = float(mine["cost_usd"].fillna(0).sum())
        tokens = int(mine["input_tokens"].fillna(0).sum() + mine["output_tokens"].fillna(0).sum())
        lines += ["", f"## Win-rate vs baseline `{baseline}`: judge {_judge_label(spec)}", "",
                  f"judge_id `{judge_id}`; cost ${cost:.4f} ({tokens} tokens); win 1, tie 0.5, loss 0; "
                  "95% CI by bootstrap over items; parse failures are counted, not scored.", ""]
        overall = rows[rows["level"] == "overall"].set_index("system_id")
        by_cat = rows[rows["level"] == "category"].pivot_table(index="system_id", columns="category", values="win_rate")
        cats = list(by_cat.columns)
        headers = ["system", "win-rate % [95% CI]", "ties %", "parse fail", *cats, "WER %", "MOS"]
        lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        for system_id, r in overall.iterrows():
            cells = [names.get(system_id, system_id), f"{_pct(r['win_rate'])} [{_pct(r['win_rate_ci_low'])}, "
                     f"{_pct(r['win_rate_ci_high'])}]", _pct(r["tie_rate"]), str(int(r["n_parse_failures"]))]
            cells += [_pct(by_cat.loc[system_id, c]) if system_id in by_cat.index else "–" for c in cats]
            m = metrics.loc[system_id] if system_id in metrics.index else None
            cells += [_pct(m["wer"]) if m is not None else "–", _num(m["mos"]) if m is not None else "–"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append(f"\n![win-rate by depth](figures/winrate-by-depth-{judge_id}.png)")
    agreement = judge_agreement(winrates)
    if agreement:
        lines += ["", "## Judge agreement", "", f"Kendall's W over {agreement['n_systems']} systems ranked by each "
                  f"judge's overall win-rate (tie-corrected): {agreement['kendalls_w']:.3f}", "",
                  "Pairwise Spearman between judges' system rankings:", ""]
        rho = agreement["spearman"]
        lines += ["| judge | " + " | ".join(map(str, rho.columns)) + " |", "|" + "---|" * (len(rho.columns) + 1)]
        lines += ["| " + str(j) + " | " + " | ".join(_num(v, 3) for v in row) + " |" for j, row in rho.iterrows()]
    return "\n".join(lines) + "\n"


def instruction_markdown(store: ArtifactStore, run_id: str, names: dict[str, str]) -> str:
    """InstructTTSEval scores per judge, system and language: share of clips judged to follow, per task and
    macro-averaged over APS, DSD and RP, with the undecidable count beside them."""
    from metrics.instruct import instruction_scores
    from ttseval.report import _pct

    frame = store.read(run_id, "instruction_judgments")
    frame = frame[frame["status"] == "ok"]
    if frame.empty:
        return ""
    items = store.read(run_id, "items")[["item_id", "language"]]
    scores = instruction_scores(frame.merge(items, on="item_id"))
    lines = ["", "## Instruction following (InstructTTSEval)", "",
             "score = clips judged to follow / decided clips; macro = unweighted mean of APS, DSD, RP.", "",
             "| judge | system | language | APS % | DSD % | RP % | macro % | undecidable |", "|---|---|---|---|---|---|---|---|"]
    specs = frame.drop_duplicates("judge_id").set_index("judge_id")["judge_spec"]
    for (judge_id, system_id, language), g in scores.groupby(["judge_id", "system_id", "language"], sort=False):
        by_task = g.set_index("task")
        cell = lambda t: _pct(by_task.loc[t, "score"]) if t in by_task.index else "–"  # noqa: E731
        tasks = by_task.drop(index="macro", errors="ignore")
        undecided = int(tasks["n_undecidable"].sum() + tasks["n_parse_failures"].sum())
        lines.append(f"| {specs.get(judge_id, judge_id)} | {names.get(system_id, system_id)} | {language} | "
                     f"{cell('APS')} | {cell('DSD')} | {cell('RP')} | {cell('macro')} | {undecided} |")
    return "\n".join(lines) + "\n"


def tables_markdown(store: ArtifactStore, run_id: str) -> str:
    """Where each of the run's tables lives, so the Prefect UI's report links to the data behind it."""
    from ttseval.schemas import TABLES

    lines = ["", "## Tables", "", "Each reads with `pandas.read_parquet(URI)`.", ""]
    for name in TABLES:
        if store.part_files(run_id, name) or name == "report":
            uri = store.display("runs", run_id, name)
            link = f"file://{uri}" if store.is_local else uri
            lines.append(f"- {name}: [{uri}]({link})")
    return "\n".join(lines) + "\n"


def write_full_report(store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str],
                      meta: dict[str, Any]) -> str:
    """Summary, win-rates, figures and Markdown for a run; returns the Markdown (also stored as report.md)."""
    summary = compute_summary(store, run_id, settings, system_ids)
    winrates = compute_winrates(store, run_id, settings)
    if not winrates.empty:
        from ttseval.schemas import WINRATES

        store.replace_table(run_id, "winrates", pa.Table.from_pandas(winrates, schema=WINRATES, preserve_index=False))
        names = dict(zip(summary["system_id"], summary["system_spec"]))
        for judge_id in winrates["judge_id"].unique():
            png = depth_figure(winrates, judge_id, names)
            if png:
                store.write_bytes(f"runs/{run_id}/figures/winrate-by-depth-{judge_id}.png", png)
    markdown = write_report(store, run_id, summary, meta)
    markdown += leaderboard_markdown(store, run_id, summary, winrates)
    markdown += instruction_markdown(store, run_id, dict(zip(summary["system_id"], summary["system_spec"])))
    markdown += tables_markdown(store, run_id)
    store.write_bytes(f"runs/{run_id}/report.md", markdown.encode("utf-8"))
    return markdown
