"""Reporting, in one place: the per-(system, recogniser) summary, win-rate leaderboards and figures, instruction
scores, drift, and their rendering as Markdown (files and Prefect artifacts) or a rich table (terminals).

Every Markdown table goes through `markdown_table`. A metric's header carries its declared direction from
`ttseval.metrics.registry` (↓ lower is better, ↑ higher is better). `write_full_report` writes `report.md` once per run.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from ttseval.metrics.registry import arrow
from ttseval.metrics.summary import summarize_systems
from ttseval.metrics.winrate import voice_variance
from ttseval.tasks.export import spreadsheet_safe
from ttseval.tasks.html_report import build_data, html_location, write_html_report
from ttseval.tasks.quality import primary_quality_id
from ttseval.core.config import Settings
from ttseval.core.registry import Spec
from ttseval.core.schemas import REPORT, TABLES, WINRATES
from ttseval.core.store import ArtifactStore

# -- formatting ------------------------------------------------------------------------------------------------


def _missing(v: object) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _pct(v: float) -> str:
    return "–" if _missing(v) else f"{100 * v:.1f}"


def _num(v: float, digits: int = 2) -> str:
    return "–" if _missing(v) else f"{v:.{digits}f}"


def _header(label: str, metric: str, suffix: str = "") -> str:
    """`label`, the metric's direction arrow, then `suffix`: 'WER % ↓ [95% CI]'."""
    return " ".join(part for part in (label, arrow(metric), suffix) if part)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub Markdown table, one line per row, cells as given (str() of each), unpadded.

    Hand-written rather than `DataFrame.to_markdown`: that needs `tabulate`, which is not a dependency, and pads
    cells to align columns, which changes every line when one value widens. A `|` in a cell is escaped and a
    line break becomes a space, so a cell can never split the row.
    """

    def cell(value: object) -> str:
        return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        row = list(row)
        if len(row) != len(headers):
            raise ValueError(f"a row has {len(row)} cells for {len(headers)} headers: {row!r}")
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


# -- frozen dataset statistics (EmergentTTS-Eval appendix A.7; InstructTTSEval instructions) ----------------------

def _min_mean_max(row: object, column: str, *, decimals: int = 0) -> str:
    return (f"{getattr(row, column + '_min'):.{decimals}f} / {getattr(row, column + '_mean'):.2f} / "
            f"{getattr(row, column + '_max'):.{decimals}f}")


def dataset_statistics_markdown(stats: pd.DataFrame, *, words_per_minute: float) -> str:
    """The statistics table of a generated dataset (ttseval.corpus.generation.dataset_statistics), one row a category."""
    table = markdown_table(
        ["category", "items", "chars min / mean / max", "words min / mean / max", "est. audio s min / mean / max"],
        [[r.category, r.n_items, _min_mean_max(r, "chars"), _min_mean_max(r, "words"),
          _min_mean_max(r, "est_audio_s", decimals=2)] for r in stats.itertuples()])
    return f"{table}\n\nAudio length is estimated at {words_per_minute:g} words per minute.\n"


def instruction_statistics_markdown(stats: pd.DataFrame) -> str:
    """The statistics table of generated instructions (ttseval.corpus.instructions.instruction_statistics), one row a task."""
    columns = ("instruction_chars", "instruction_words", "text_chars", "text_words")
    headers = ["task", "items", *[f"{c.replace('_', ' ')} min / mean / max" for c in columns]]
    return markdown_table(headers, [[r.task, r.n_items, *[_min_mean_max(r, c) for c in columns]]
                                    for r in stats.itertuples()]) + "\n"


# -- per-(system, recogniser) summary ----------------------------------------------------------------------------


@dataclass
class RunTables:
    """The stage tables a report is built from, read from the store once: items, synthesis (the systems asked
    for, in their order, items of the run only), transcripts, and quality (every system's rows): `quality` holds
    one predictor's (`quality_id`, the first of settings.quality, the summary's MOS; when the run has none of its
    rows, the first predictor the table holds), `all_quality` every predictor's."""

    items: pd.DataFrame
    synthesis: pd.DataFrame
    transcripts: pd.DataFrame
    quality: pd.DataFrame
    system_ids: list[str]
    all_quality: pd.DataFrame
    similarity: pd.DataFrame  # every encoder's rows (empty when the run compares no voices)

    @classmethod
    def read(cls, store: ArtifactStore, run_id: str, system_ids: list[str] | None = None,
             quality_id: str | None = None) -> RunTables:
        items = store.read(run_id, "items")
        synthesis = store.read(run_id, "synthesis")
        if system_ids is not None:
            synthesis = synthesis[synthesis["system_id"].isin(system_ids)]
            order = {s: i for i, s in enumerate(system_ids)}
            synthesis = synthesis.sort_values("system_id", key=lambda c: c.map(order), kind="stable")
        synthesis = synthesis[synthesis["item_id"].isin(items["item_id"])]
        ids = list(system_ids) if system_ids is not None else list(pd.unique(synthesis["system_id"]))
        quality = store.read(run_id, "quality")
        present = list(pd.unique(quality["quality_id"])) if "quality_id" in quality else []
        chosen = quality_id if quality_id in present else (present[0] if present else None)
        primary = quality[quality["quality_id"] == chosen] if chosen else quality
        return cls(items, synthesis, store.read(run_id, "transcripts"), primary, ids, quality,
                   store.read(run_id, "similarity"))

    @functools.cached_property
    def own_transcripts(self) -> pd.DataFrame:
        """The transcripts of the run's systems, each ok one with `text_language`, its text's language by fastText
        lid.176 (ttseval.providers.lid.fasttext_text)."""
        from ttseval.providers.lid.fasttext_text import text_languages

        mine = self.transcripts[self.transcripts["system_id"].isin(self.system_ids)].copy()
        ok = mine["status"] == "ok"
        mine.loc[ok, "text_language"] = text_languages(mine.loc[ok, "hypothesis"].fillna("").tolist())
        return mine


def compute_summary(store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str] | None = None,
                    tables: RunTables | None = None) -> pd.DataFrame:
    """The summary of a run from its stored tables, one row per (system, recogniser); all systems unless
    `system_ids` is given. The stage tables are checked where they are written (ttseval.core.validation)."""
    t = tables or RunTables.read(store, run_id, system_ids, primary_quality_id(settings))
    summary = summarize_systems(t.items, t.synthesis, t.transcripts, t.quality,
                                n_resamples=settings.bootstrap_resamples, seed=settings.seed)
    # PashtoTTS-Bench's roles: TTS systems first, then natural speech, then negative controls (shown apart)
    summary["role"] = summary["system_id"].map(settings.role_of)
    return summary.sort_values("role", key=lambda r: r.map(ROLE_ORDER), kind="stable").reset_index(drop=True)


ROLE_ORDER = {"tts": 0, "natural": 1, "control": 2}
ROLE_LABEL = {"tts": "", "natural": " (natural speech)", "control": " (negative control)"}


def rows_for_display(summary: pd.DataFrame) -> list[dict[str, str]]:
    """One dict of display strings per (system, recogniser), in summary order."""
    out = []
    for r in summary.to_dict("records"):
        out.append({
            "system": r["system_spec"] + ROLE_LABEL[r.get("role") or "tts"],
            "recogniser": "–" if _missing(r.get("asr_spec")) else r["asr_spec"],
            _header("completion %", "completion_rate"): f"{_pct(r['completion_rate'])} ({r['n_ok']}/{r['n_items']})",
            "failed/empty/unsup.": f"{r['n_failed']}/{r['n_empty']}/{r['n_unsupported']}",
            _header("WER %", "wer", "[95% CI]"): f"{_pct(r['wer'])} [{_pct(r['wer_ci_low'])}, {_pct(r['wer_ci_high'])}]",
            _header("CER %", "cer", "[95% CI]"): f"{_pct(r['cer'])} [{_pct(r['cer_ci_low'])}, {_pct(r['cer_ci_high'])}]",
            _header("Perfect %", "perfect_pct"): _num(r["perfect_pct"], 1),
            _header("MOS", "mos", "[95% CI]"): f"{_num(r['mos'])} [{_num(r['mos_ci_low'])}, {_num(r['mos_ci_high'])}]",
            "mean dur. s": _num(r["mean_duration_s"]),
            _header("RTF", "rtf"): _num(r["rtf"], 3),
        })
    return out


def render_markdown(summary: pd.DataFrame, meta: dict[str, Any]) -> str:
    """The report's head: run metadata and the per-(system, recogniser) table."""
    rows = rows_for_display(summary)
    lines = [f"# ttseval report: run `{meta['run_id']}`", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items() if k != "run_id"]
    lines += ["", "One row per system and recogniser: WER/CER are that recogniser's, never pooled across "
              "recognisers; completion, MOS and RTF are the system's. WER/CER are corpus figures (errors pooled over "
              "utterances) with a percentile bootstrap 95% CI over utterances; MOS is predicted (by "
              f"`{meta.get('quality', 'the MOS predictor')}`), not human; RTF is synthesis time over audio time. ↓ "
              "lower is better, ↑ higher is better.", ""]
    if rows:
        lines.append(markdown_table(list(rows[0]), [r.values() for r in rows]))
    else:
        lines.append("No systems in this run yet.")
    return "\n".join(lines) + "\n"


def print_table(summary: pd.DataFrame, title: str) -> None:
    """The per-(system, recogniser) table on the terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    rows = rows_for_display(summary)
    for header in (rows[0] if rows else ["system"]):
        table.add_column(header, overflow="fold")
    for r in rows:
        table.add_row(*r.values())
    Console(width=200).print(table)


def store_summary(store: ArtifactStore, run_id: str, summary: pd.DataFrame) -> None:
    """Store the summary as the run's `report` table."""
    table = pa.Table.from_pandas(summary[REPORT.names], schema=REPORT, preserve_index=False)
    store.replace_table(run_id, "report", table)


# -- judges: win-rates, agreement, figures -----------------------------------------------------------------------

LEVELS = {"overall": (), "category": ("category",), "category_depth": ("category", "depth")}


def compute_winrates(store: ArtifactStore, run_id: str, settings: Settings) -> pd.DataFrame:
    """Win-rates of every judge, at the three levels of EmergentTTS-Eval's tables, in one long table."""
    from ttseval.metrics.winrate import win_rate_table

    judgments = store.read(run_id, "judgments")
    if judgments.empty:
        return WINRATES.empty_table().to_pandas()
    items = store.read(run_id, "items", columns=["item_id", "category", "depth"])
    frame = judgments.merge(items, on="item_id", how="left")
    specs = judgments.drop_duplicates("judge_id").set_index("judge_id")["judge_spec"]
    parts = []
    for level, by in LEVELS.items():
        table = win_rate_table(frame, by=by, n_resamples=settings.bootstrap_resamples, seed=settings.seed)
        parts.append(table.assign(level=level))
    out = pd.concat(parts, ignore_index=True)
    out["judge_spec"] = out["judge_id"].map(specs)
    for name in WINRATES.names:
        if name not in out.columns:
            out[name] = None
    return out[WINRATES.names]


def judge_agreement(winrates: pd.DataFrame) -> dict[str, Any] | None:
    """Kendall's W over systems ranked by each judge's overall win-rate, and pairwise Spearman; None for < 2 judges."""
    from ttseval.metrics.agreement import kendalls_w, pairwise_spearman

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
    from ttseval.providers.judges.objective import LABEL

    return LABEL if spec.split(":")[0] == "objective" else spec


def _system_metric(summary: pd.DataFrame, system_id: str, column: str, fmt) -> str:
    """A system's figure beside its win-rate: the value, or each recogniser's value named when it has several."""
    rows = summary[summary["system_id"] == system_id]
    if rows.empty:
        return "–"
    values = rows[column].tolist()
    if len(set(map(str, values))) == 1:  # one recogniser, or a system-wide figure (MOS) repeated on each row
        return fmt(values[0])
    return ", ".join(f"{fmt(v)} ({spec})" for v, spec in zip(values, rows["asr_spec"]))


def leaderboard_markdown(store: ArtifactStore, run_id: str, summary: pd.DataFrame, winrates: pd.DataFrame) -> str:
    """Per judge: system x category win-rates beside WER and MOS, parse failures, the run's judge cost, and a
    warning for a judge whose answers cannot rank (ttseval.metrics.agreement.degenerate_judge)."""
    from ttseval.metrics.agreement import degenerate_judge
    from ttseval.metrics.cascade import cascade_summary

    if winrates.empty:
        return ""
    names = dict(zip(summary["system_id"], summary["system_spec"]))
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
        if why := degenerate_judge(mine):
            lines += [f"**Warning: this judge does not rank.** {why}.", ""]
        sampled = mine[mine["samples"].fillna(1) > 1]
        if not sampled.empty:
            lines += [f"Self-consistency: {int(sampled['samples'].max())} samples per comparison at temperature "
                      f"> 0; the samples agree with the majority verdict {_pct(sampled['sample_agreement'].mean())}% "
                      "of the time on average.", ""]
        if spec.startswith("cascade:") and (c := cascade_summary(mine)):
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(c["why"].items()))
            kept = (f" {c['not_drawn']} unsettled pairs not drawn for the strong judge (`escalate_sample`) kept "
                    "the cheap verdict." if c["not_drawn"] else "")
            audit = (f" On {c['audited']} settled pairs the strong judge also heard, it gave the cheap judge's "
                     f"answer {_pct(c['agreement'])}% of the time." if c["audited"] else "")
            lines += [f"Cascade: {c['escalated']} of {c['n']} pairs ({_pct(c['escalated_share'])}%) went to the "
                      f"strong judge ({reasons or 'none'}); cheap judge ${c['cheap_usd']:.4f}, strong judge "
                      f"${c['strong_usd']:.4f}.{kept}{audit}", ""]
        overall = rows[rows["level"] == "overall"].set_index("system_id")
        by_cat = rows[rows["level"] == "category"].pivot_table(index="system_id", columns="category", values="win_rate")
        cats = list(by_cat.columns)
        headers = ["system", _header("win-rate %", "win_rate", "[95% CI]"), "ties %", "parse fail", *cats,
                   _header("WER %", "wer"), _header("MOS", "mos"), "judge $"]
        cost_by_system = mine.groupby("system_id")["cost_usd"].sum(min_count=1)
        table = []
        for system_id, r in overall.iterrows():
            cells = [names.get(system_id, system_id), f"{_pct(r['win_rate'])} [{_pct(r['win_rate_ci_low'])}, "
                     f"{_pct(r['win_rate_ci_high'])}]", _pct(r["tie_rate"]), str(int(r["n_parse_failures"]))]
            cells += [_pct(by_cat.loc[system_id, c]) if system_id in by_cat.index else "–" for c in cats]
            cells += [_system_metric(summary, system_id, "wer", _pct), _system_metric(summary, system_id, "mos", _num),
                      _num(cost_by_system.get(system_id, float("nan")), 4)]
            table.append(cells)
        lines.append(markdown_table(headers, table))
        lines.append(f"\n![win-rate by depth](figures/winrate-by-depth-{judge_id}.png)")
    lines += voice_variance_markdown(winrates, names)
    agreement = judge_agreement(winrates)
    if agreement:
        lines += ["", "## Judge agreement", "", f"Kendall's W over {agreement['n_systems']} systems ranked by each "
                  f"judge's overall win-rate (tie-corrected): {agreement['kendalls_w']:.3f}", "",
                  "Pairwise Spearman between judges' system rankings:", ""]
        rho = agreement["spearman"]
        lines.append(markdown_table(["judge", *map(str, rho.columns)],
                                    [[j, *(_num(v, 3) for v in row)] for j, row in rho.iterrows()]))
    lines += position_bias_markdown(store, run_id, judgments, names)
    return "\n".join(lines) + "\n"


def position_bias_markdown(store: ArtifactStore, run_id: str, judgments: pd.DataFrame,
                           names: dict[str, str]) -> list[str]:
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
    lines = ["", "## Position bias", "",
             "A sample of pairs (`position_audit_share`, at least `position_audit_min`) asked again with the clips "
             "in the other order. Consistency: share of audited pairs whose verdict survives the swap. First "
             "position: share of decided answers won by the clip heard first (0.5 = no bias). Win-rate with swaps: "
             "an audited pair scores the mean of its two answers.", ""]
    rows = []
    for j in judges.itertuples(index=False):
        mine = systems[systems["judge_id"] == j.judge_id]
        per_system = "; ".join(f"{names.get(r.system_id, r.system_id)} {_pct(r.win_rate)} -> "
                               f"{_pct(r.win_rate_swapped)}" for r in mine.itertuples(index=False))
        rows.append([_judge_label(specs.get(j.judge_id, j.judge_id)), str(j.n_audited), _pct(j.consistency),
                     _pct(j.first_position_wins), per_system])
    lines.append(markdown_table(["judge", "pairs audited", "consistency %", "first-position wins %",
                                 "win-rate % -> with swaps"], rows))
    return lines


def model_of_voices(names: dict[str, str]) -> dict[str, str]:
    """system_id -> the model it is a voice of: its spec without the voice slot (`openai:alloy:model=tts-1`
    and `openai:nova:model=tts-1` are two voices of `openai:model=tts-1`)."""
    out = {}
    for system_id, spec in names.items():
        parsed = Spec.parse(spec)
        if parsed.voice:
            out[system_id] = Spec(parsed.provider, None, parsed.options).canonical
    return out


def voice_variance_markdown(winrates: pd.DataFrame, names: dict[str, str]) -> list[str]:
    """The standard deviation of win-rate across the voices of each model with several voices in the run."""
    spread = voice_variance(winrates, model_of_voices(names))
    if spread.empty:
        return []
    lines = ["", "## Voice variance (EmergentTTS-Eval 4.4)", "",
             "Standard deviation (ddof=1) of win-rate across the voices of one model, per judge and category: how "
             "much the choice of voice alone moves the score.", ""]
    judge_specs = dict(zip(winrates["judge_id"], winrates["judge_spec"]))
    table = [[_judge_label(judge_specs.get(r["judge_id"], r["judge_id"])), f"`{r['model']}`", "overall" if r["level"] == "overall" else r["category"],
              str(r["n_voices"]), _pct(r["win_rate_mean"]), _pct(r["win_rate_std"])]
             for _, r in spread.sort_values(["judge_id", "model", "level"], ascending=[True, True, False]).iterrows()]
    lines.append(markdown_table(["judge", "model", "category", "voices", "mean win-rate %", "std %"], table))
    return lines


def cost_markdown(store: ArtifactStore, run_id: str, names: dict[str, str]) -> str:
    """What the run's synthesis calls cost per system (rows computed by this run id; reused audio is free)."""
    synthesis = store.read(run_id, "synthesis")
    if synthesis.empty or "cost_usd" not in synthesis or not synthesis["cost_usd"].fillna(0).gt(0).any():
        return ""
    rows = []
    for system_id, g in synthesis.groupby("system_id", sort=False):
        rows.append([names.get(system_id, system_id), str(int(g["billable_chars"].fillna(0).sum())),
                     f"${float(g['cost_usd'].fillna(0).sum()):.4f}",
                     str(int(g["cache_hit"].fillna(False).astype(bool).sum()))])
    return "\n## Synthesis cost\n\n" + markdown_table(["system", "billable chars", "USD", "reused clips"], rows) + "\n"


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
        table.append([specs.get(judge_id, judge_id), names.get(system_id, system_id), language,
                      *(_pct(by_task.loc[t, "score"]) if t in by_task.index else "–" for t in ("APS", "DSD", "RP", "macro")),
                      undecided])
    up = arrow("score")
    headers = ["judge", "system", "language", f"APS % {up}", f"DSD % {up}", f"RP % {up}", f"macro % {up}", "undecidable"]
    lines = ["", "## Instruction following (InstructTTSEval)", "",
             "score = clips judged to follow / decided clips; macro = unweighted mean of APS, DSD, RP.", "",
             markdown_table(headers, table)]
    return "\n".join(lines) + "\n"


def tables_markdown(store: ArtifactStore, run_id: str) -> str:
    """Where each of the run's tables lives, so the Prefect UI's report links to the data behind it."""
    lines = ["", "## Tables", "", "Each reads with `pandas.read_parquet(URI)`.", ""]
    for name in TABLES:
        if store.part_files(run_id, name) or name == "report":
            uri = store.display("runs", run_id, name)
            link = f"file://{uri}" if store.is_local else uri
            lines.append(f"- {name}: [{uri}]({link})")
    return "\n".join(lines) + "\n"


# -- INSV-A screening and grouped tables ---------------------------------------------------------------------------


def _gate(value: object, gate: str) -> str:
    return f"{value} ({gate})"


def insv_markdown(store: ArtifactStore, run_id: str, settings: Settings, tables: RunTables) -> str:
    """The INSV-A report card (PashtoTTS-Bench Table 8, ttseval.metrics.screening) per system, language and recogniser,
    grapheme-class WER where the language has letter classes, and the per-sentence table written beside the
    report (runs/<id>/per_sentence.csv). Only for runs with an item in a language other than English."""
    from ttseval.metrics.screening import grapheme_class_wer, insv_card, per_sentence
    from ttseval.providers.lid.fasttext_text import MODEL
    from ttseval.core.languages import base_language

    items, synthesis = tables.items, tables.synthesis
    if all(base_language(lang) == "en" for lang in items["language"].unique()):
        return ""
    lid = store.read(run_id, "lid") if store.part_files(run_id, "lid") else None
    t = settings.insv
    roles = {system_id: settings.role_of(system_id) for system_id in synthesis["system_id"].unique()}
    card = insv_card(items, synthesis, tables.own_transcripts, lid, roles=roles, thresholds=t,
                     n_resamples=settings.bootstrap_resamples, seed=settings.seed)
    sentences = per_sentence(items, tables.own_transcripts, digits=t.digits)
    columns = ["item_id", "language", "system_id", "asr_id", "asr_spec", "normalizer", "text", "hypothesis",
               "wer", "cer", "sfr", "detected_language", "asr_lid_target", "text_language"]
    store.write_bytes(f"runs/{run_id}/per_sentence.csv",
                      spreadsheet_safe(sentences.reindex(columns=columns)).to_csv(index=False).encode("utf-8"))
    rows = []
    for r in card.to_dict("records"):
        lid = ", ".join(f"{k} {_pct(v)}%" for k, v in r["lid_rates"].items()) or "no LID model"
        rows.append([
            r["system_spec"] + ROLE_LABEL[r["role"]], r["language"], "–" if _missing(r["asr_spec"]) else r["asr_spec"],
            _gate(f"{_pct(r['completion_rate'])}% ({r['n_audio']}/{r['n_items']})", r["gate_f1"]),
            _gate(f"{_num(r['sfr'], 3)}" + (f", {r['n_sfr_undefined']} undefined" if r["n_sfr_undefined"] else ""),
                  r["gate_s"]),
            _gate(lid, r["gate_v"]), f"{_pct(r['asr_lid_rate'])}%", f"{_pct(r['text_lid_rate'])}%",
            f"{_pct(r['wer'])} [{_pct(r['wer_ci_low'])}, {_pct(r['wer_ci_high'])}]"
            + ("" if _missing(r["natural_wer"]) or r["role"] == "natural" else f" (natural {_pct(r['natural_wer'])})"),
            _num(r["perfect_pct"], 1),
            _num(r["low_error_pct"], 1), r["f1"], r["f2"], r["f3"] + (f" ({r['f3_classes']})" if r["f3_classes"] else ""),
            r["f4"], r["f5"] + (f" ({r['n_high_cer_wer']})" if r["n_high_cer_wer"] else ""), str(r["n_for_mos"]),
        ])
    headers = ["system", "language", "recogniser", "F1 synthesis", "S: SFR", "V: LID", "recogniser's detection "
               "(diagnostic)", "transcript language (diagnostic)", "I: WER % [95% CI]", "Perfect %", "Low-error %", "F1", "F2", "F3", "F4", "F5",
               "N: clips for native MOS"]
    lines = ["", "## INSV-A screening (PashtoTTS-Bench)", "",
             f"Gates: F1 audio for at least {_pct(t.completion)}% of items; S mean transcript Script Fidelity Rate "
             f"at least {t.sfr} (undefined transcripts counted apart; digits {t.digits}d); V every LID model's "
             f"target-language rate at least {_pct(t.lid_pass)}% passes, all below {_pct(t.lid_fail)}% fail, "
             "anything else is unresolved; the recogniser's own language detection and the transcript's text "
             f"language ({MODEL}) are diagnostics and never vote; WER is descriptive, beside the natural-speech baseline's when the run has one. Labels are screening labels, never more than the automatic evidence "
             f"supports (F4 needs native listeners). Low-error: WER at most {_pct(t.low_error_wer)}%. Per-sentence "
             f"WER, CER, SFR and detected language: `{store.display('runs', run_id, 'per_sentence.csv')}`.", "",
             markdown_table(headers, rows)]
    classes = []
    for (system_id, asr_id, language), g in sentences.groupby(["system_id", "asr_id", "language"], sort=False):
        for c in grapheme_class_wer(g, language).to_dict("records"):
            spec = card.loc[card["system_id"] == system_id, "system_spec"].iloc[0]
            classes.append([spec, language, c["class"], c["letters"], str(c["n_items"]), _pct(c["wer"]),
                            _pct(c["overall_wer"])])
    if classes:
        lines += ["", f"Grapheme-class WER (F3 screening: a class at least {t.f3_ratio}x the overall WER over at "
                  f"least {t.f3_min_items} utterances is a candidate):", "",
                  markdown_table(["system", "language", "class", "letters", "utterances", "class WER %",
                                  "overall WER %"], classes)]
    return "\n".join(lines) + "\n"


def recognisers_markdown(settings: Settings, tables: RunTables, names: dict[str, str]) -> str:
    """For each language the `asr` setting gives several recognisers: each one's WER per system over the clips all
    of them transcribed, which recogniser ranks (the first listed: put the independent one first, PashtoTTS-Bench
    4.4), and whether the rankings agree (Kendall's W)."""
    from ttseval.metrics.screening import per_sentence, recogniser_rankings
    from ttseval.core.languages import base_language
    from ttseval.core.registry import Spec

    items = tables.items
    groups: dict[tuple[str, ...], list[str]] = {}
    for language in items["language"].unique():
        specs = tuple(settings.asrs_for(language))
        if len(specs) > 1:
            groups.setdefault(specs, []).append(language)
    if not groups:
        return ""
    transcripts = tables.transcripts
    sentences = per_sentence(items, transcripts[transcripts["system_id"].isin(tables.system_ids)])
    ids_of = dict(zip(transcripts["asr_spec"], transcripts["asr_id"]))
    lines = ["", "## Recognisers", "",
             "Languages with several recognisers: each one's WER % per system over the clips all of them "
             "transcribed. The first listed ranks the systems (list the independent recogniser first: "
             "PashtoTTS-Bench 4.4); Kendall's W says how far the rankings agree (1: the same order)."]
    for specs, languages in groups.items():
        asr_ids = [ids_of.get(Spec.parse(x).canonical) for x in specs]
        if any(a is None for a in asr_ids):
            missing = [x for x, a in zip(specs, asr_ids) if a is None]
            lines += ["", f"{', '.join(languages)}: no transcripts yet from {', '.join(missing)}."]
            continue
        mine = sentences[sentences["language"].map(base_language).isin({base_language(x) for x in languages})]
        wer, w = recogniser_rankings(mine, asr_ids)
        ranked = wer.sort_values(asr_ids[0]) if len(wer) else wer
        rows = [[names.get(system_id, system_id), *(_pct(v) for v in r)]
                for system_id, r in zip(ranked.index, ranked.to_numpy())]
        lines += ["", f"{', '.join(languages)}: ranked by `{specs[0]}`; Kendall's W across recognisers "
                  f"{_num(w, 3)}.", "", markdown_table(["system", *(f"WER % {x}" for x in specs)], rows)]
    return "\n".join(lines) + "\n"


def _section(title: str, intro: str, headers: list[str], rows: list[list[str]]) -> str:
    """A report section: a heading, a paragraph saying what the table is, the table; empty without rows."""
    return "\n".join(["", f"## {title}", "", intro, "", markdown_table(headers, rows)]) + "\n" if rows else ""


def paired_markdown(settings: Settings, tables: RunTables, baseline_id: str, names: dict[str, str]) -> str:
    """Each system against the baseline, item by item (ttseval.metrics.paired): WER and CER per recogniser the two share,
    MOS; the difference with its paired bootstrap 95% CI and the Wilcoxon and permutation p-values."""
    from dataclasses import asdict

    from ttseval.metrics.paired import paired_mean, paired_table

    system_ids = tables.system_ids
    if baseline_id not in system_ids or len(system_ids) < 2:
        return ""
    transcripts, quality = tables.transcripts, tables.quality
    specs = dict(zip(transcripts["asr_id"], transcripts["asr_spec"]))
    no_rows_t, no_rows_q = transcripts.iloc[0:0], quality.iloc[0:0]

    def compare(base_t, sys_t, base_q, sys_q) -> list[dict[str, Any]]:
        return paired_table(base_t, sys_t, base_q, sys_q, n_resamples=settings.bootstrap_resamples,
                            seed=settings.seed).to_dict("records")

    rows = []
    for system_id in system_ids:
        if system_id == baseline_id:
            continue
        found = []  # WER and CER per recogniser the two share, then MOS once (it does not depend on one)
        for asr_id in transcripts.loc[transcripts["system_id"] == system_id, "asr_id"].unique():
            mine = transcripts[transcripts["asr_id"] == asr_id]
            found += [(specs[asr_id], r) for r in compare(mine[mine["system_id"] == baseline_id],
                                                          mine[mine["system_id"] == system_id], no_rows_q, no_rows_q)]
        found += [("–", r) for r in compare(no_rows_t, no_rows_t, quality[quality["system_id"] == baseline_id],
                                            quality[quality["system_id"] == system_id])]
        sim = tables.similarity[tables.similarity["status"] == "ok"]
        for encoder_spec, mine in sim.groupby("encoder_spec", sort=False):  # SIM per encoder, never pooled
            by = {s: mine[mine["system_id"] == s].set_index("item_id")["similarity"] for s in (baseline_id, system_id)}
            shared = by[baseline_id].index.intersection(by[system_id].index)
            if len(shared):
                r = paired_mean("sim", by[baseline_id].loc[shared], by[system_id].loc[shared],
                                n_resamples=settings.bootstrap_resamples, seed=settings.seed)
                found.append((f"SIM: {encoder_spec}", asdict(r) | {"flagged": r.flagged}))
        for recogniser, r in found:
            rows.append([names.get(system_id, system_id), recogniser, r["metric"], str(r["n_items"]), _num(r["b"], 3),
                         _num(r["a"], 3), f"{_num(r['delta'], 3)} [{_num(r['ci_low'], 3)}, {_num(r['ci_high'], 3)}]",
                         _num(r["p_wilcoxon"], 4), _num(r["p_permutation"], 4), "**yes**" if r["flagged"] else "no"])
    return _section(f"Paired comparisons with the baseline `{names.get(baseline_id, baseline_id)}`",
                    "Item by item on the items both have (ttseval.metrics.paired): system - baseline, a paired bootstrap 95% "
                    "CI of the difference (pooled WER/CER, mean MOS and speaker similarity), the Wilcoxon signed-rank "
                    "and a paired permutation p-value (scipy); 'differs' when the CI excludes 0.",
                    ["system", "recogniser / encoder", "metric", "items", "system", "baseline", "difference [95% CI]",
                     "Wilcoxon p", "permutation p", "differs"], rows)


def prosody_markdown(store: ArtifactStore, run_id: str, tables: RunTables, names: dict[str, str]) -> str:
    """Per system, medians of the prosody table (metrics/prosody.py), the speaking rate from each clip's first
    transcript, and the clips the timing gates flag."""
    from ttseval.metrics.prosody import audio_gates, speaking_rate

    if not store.part_files(run_id, "prosody"):
        return ""
    system_ids = tables.system_ids
    prosody = store.read(run_id, "prosody")
    prosody = prosody[(prosody["status"] == "ok") & prosody["system_id"].isin(system_ids)]
    transcripts = tables.transcripts
    words = (transcripts[transcripts["status"] == "ok"].drop_duplicates(["item_id", "system_id"])
             .set_index(["item_id", "system_id"])["hypothesis"].fillna("").str.split().str.len())
    rows = []
    for system_id in system_ids:
        mine = prosody[prosody["system_id"] == system_id]
        if mine.empty:
            continue
        rate = [speaking_rate(int(words.get((r.item_id, r.system_id), 0)), r.speech_s) for r in mine.itertuples()]
        gates = [g for r in mine.itertuples() for g in audio_gates(r.leading_silence_s, r.trailing_silence_s)]
        rows.append([names.get(system_id, system_id), str(len(mine)), _num(mine["f0_mean_hz"].median(), 0),
                     _num(mine["f0_range_st"].median(), 1), _num(float(pd.Series(rate).median()), 2),
                     _num(mine["leading_silence_s"].median()), _num(mine["trailing_silence_s"].median()),
                     str(int(mine["n_long_pauses"].sum())), str(gates.count("padded")), str(gates.count("cut short"))])
    return _section("Prosody and timing",
                    "Medians per clip: F0 by Praat (parselmouth), speech and silences by Silero VAD, speaking rate = "
                    "transcript words / speech seconds. Padded: more than 1 s of silence before or after the speech; "
                    "cut short: speech within 30 ms of the end.",
                    ["system", "clips", "F0 Hz", "F0 range st", "words/s", "lead silence s", "trail silence s",
                     "pauses >= 0.5 s", "padded", "cut short"], rows)


def _clones(system_spec: str) -> bool:
    """Whether the system's provider declares that it imitates voice prompts (TTSProvider.clones_voice)."""
    from ttseval.core.registry import TTS, Spec

    try:
        return bool(getattr(TTS.info(Spec.parse(system_spec).provider).cls, "clones_voice", False))
    except Exception:  # noqa: BLE001 - a plugin that cannot be imported here: say nothing rather than guess
        return False


def similarity_markdown(settings: Settings, tables: RunTables, names: dict[str, str]) -> str:
    """Speaker similarity per encoder and system (ttseval.metrics.similarity): mean SIM with its bootstrap 95% CI, one
    table per encoder (figures from two encoders are never in one column)."""
    from ttseval.metrics.similarity import similarity_summary

    rows_all = tables.similarity[tables.similarity["system_id"].isin(tables.system_ids)]
    if rows_all.empty:
        return ""
    summary = similarity_summary(rows_all, n_resamples=settings.bootstrap_resamples, seed=settings.seed)
    order = {s: i for i, s in enumerate(tables.system_ids)}
    out = []
    for encoder_id, mine in summary.groupby("encoder_id", sort=False):
        failed = rows_all[(rows_all["encoder_id"] == encoder_id) & (rows_all["status"] != "ok")]
        rows = [[names.get(r.system_id, r.system_id), "yes" if _clones(names.get(r.system_id, r.system_id)) else "no",
                 r.reference, str(r.n), f"{_num(r.sim, 3)} [{_num(r.sim_ci_low, 3)}, {_num(r.sim_ci_high, 3)}]",
                 str(int((failed["system_id"] == r.system_id).sum()))]
                for r in mine.sort_values("system_id", key=lambda c: c.map(order)).itertuples()]
        out.append(_section(f"Speaker similarity: `{mine['encoder_spec'].iloc[0]}`",
                            "Cosine similarity of each clip's speaker embedding to its item's voice prompt "
                            "(reference 'prompt') or its system's reference voice ('voice'), mean over clips with a "
                            "bootstrap 95% CI; higher is closer. 'clones' says whether the system takes the prompt "
                            "(a system that does not speaks its own voice).",
                            ["system", "clones", "reference", "clips", "SIM [95% CI]", "failed"], rows))
    return "".join(out)


def predictors_markdown(settings: Settings, tables: RunTables, names: dict[str, str]) -> str:
    """Each MOS predictor's mean per system with a bootstrap 95% CI, when the run has more than one predictor:
    one column per predictor, never pooled."""
    from ttseval.metrics.bootstrap import bootstrap_mean_ci

    quality = tables.all_quality
    quality = quality[(quality["status"] == "ok") & quality["system_id"].isin(tables.system_ids)]
    predictors = list(dict.fromkeys(zip(quality["quality_id"], quality["quality_spec"])))
    if len(predictors) < 2:
        return ""
    rows = []
    for system_id in tables.system_ids:
        cells = []
        for quality_id, _ in predictors:
            values = quality.loc[(quality["system_id"] == system_id) & (quality["quality_id"] == quality_id), "mos"]
            if values.empty:
                cells.append("–")
                continue
            ci = bootstrap_mean_ci(values.astype(float).to_numpy(), n_resamples=settings.bootstrap_resamples,
                                   seed=settings.seed)
            cells.append(f"{_num(ci.point, 2)} [{_num(ci.low, 2)}, {_num(ci.high, 2)}] (n={len(values)})")
        rows.append([names.get(system_id, system_id), *cells])
    return _section("MOS predictors",
                    "Each predictor's mean predicted MOS per system with a bootstrap 95% CI over clips. Predictors are "
                    "trained on different listening tests and their scales differ: compare systems within a column. "
                    "The summary's MOS is the first predictor's.",
                    ["system", *[f"MOS ({spec})" for _, spec in predictors]], rows)


def grouped_markdown(tables: RunTables, names: dict[str, str]) -> str:
    """WER per category, language and depth (ttseval.metrics.summary.summarize_by), a table each, for groups with more
    than one value."""
    from ttseval.metrics.summary import summarize_by

    items, synthesis, transcripts = tables.items, tables.synthesis, tables.transcripts
    specs = dict(zip(transcripts["asr_id"], transcripts["asr_spec"]))
    lines = []
    for by in ("category", "language", "depth"):
        if by not in items or items[by].nunique(dropna=True) < 2:
            continue
        table = summarize_by(items[items[by].notna()], synthesis, transcripts, by=by)
        wide = table.pivot_table(index=["system_id", "asr_id"], columns=by, values="wer", sort=False, dropna=False)
        wide = wide.dropna(how="all")  # a recogniser that heard none of a system's clips (another language's)
        rows = [[names.get(system_id, system_id), specs.get(asr_id, "–"), *(_pct(v) for v in r)]
                for (system_id, asr_id), r in zip(wide.index, wide.to_numpy())]
        lines += ["", f"### WER % by {by}", "", markdown_table(["system", "recogniser", *map(str, wide.columns)], rows)]
    return ("\n## By category, language and depth\n" + "\n".join(lines) + "\n") if lines else ""


# -- drift --------------------------------------------------------------------------------------------------------


def drift_markdown(drift: pd.DataFrame, previous: str, current: str) -> str:
    """A drift table (ttseval.metrics.drift.compare_reports) as Markdown: one line per (system, recogniser, metric)."""
    flagged = drift[drift["flagged"].fillna(False).astype(bool)]
    table = []
    for r in drift.to_dict("records"):
        recogniser = "–" if _missing(r.get("asr_spec")) else r["asr_spec"]
        if r["metric"] == "presence":
            table.append([r["system_spec"], recogniser, "presence", "", "", "", r["direction"], "yes"])
            continue

        def ci(lo: str, hi: str) -> str:
            return "" if _missing(r.get(lo)) else f" [{_num(r[lo], 3)}, {_num(r[hi], 3)}]"

        p_value = "" if _missing(r.get("p_value")) else _num(r["p_value"], 4)
        table.append([r["system_spec"], recogniser, _header(r["metric"], r["metric"]),
                      f"{_num(r['previous'], 3)}{ci('previous_ci_low', 'previous_ci_high')}",
                      f"{_num(r['current'], 3)}{ci('current_ci_low', 'current_ci_high')}",
                      f"{_num(r['delta'], 3)}{ci('delta_ci_low', 'delta_ci_high')}", p_value,
                      "" if _missing(r.get("test")) else r["test"], r["direction"],
                      "**yes**" if r["flagged"] else "no"])
    headers = ["system", "recogniser", "metric", "previous [95% CI]", "current [95% CI]", "delta [paired 95% CI]",
               "Wilcoxon p", "test", "change", "flagged"]
    lines = [f"# Drift: `{current}` against `{previous}`", "",
             f"{len(flagged)} flagged change(s). WER, CER and MOS are compared item by item (ttseval.metrics.paired): "
             "flagged when the paired bootstrap 95% CI of the difference excludes 0 (test `paired`); without "
             "per-item rows, when the two runs' CIs do not overlap (`ci-overlap`); completion: any change.", "",
             markdown_table(headers, table)]
    return "\n".join(lines) + "\n"


# -- the whole report ---------------------------------------------------------------------------------------------


def audio_checks_markdown(tables: RunTables, names: dict[str, str]) -> str:
    """Clips that failed a quality gate (metrics/audio_checks.py), per system and gate; empty when none did."""
    synthesis = tables.synthesis
    if "audio_flags" not in synthesis or not synthesis["audio_flags"].notna().any():
        return ""
    flagged = synthesis.dropna(subset=["audio_flags"]).assign(flag=lambda f: f["audio_flags"].str.split(","))
    counts = flagged.explode("flag").groupby(["system_id", "flag"]).size().unstack(fill_value=0)
    ok = synthesis[synthesis["status"] == "ok"].groupby("system_id").size()
    gates = list(counts.columns)
    rows = [[names.get(s, s), int(ok.get(s, 0)), *(int(counts.loc[s, g]) for g in gates)] for s in counts.index]
    return _section("Audio checks", "Clips that failed a quality gate: non-finite samples (nan), over 0.1% of "
                    "samples at full scale (clipped), a duration under a third or over three times what the text "
                    "predicts at 14 characters a second (too_short, too_long), a rate other than the provider "
                    "declares (sample_rate). They are scored like any clip; here they are counted.",
                    ["system", "clips", *gates], rows)


def listening_markdown(store: ArtifactStore, run_id: str) -> str:
    """Each listening test's stored analysis (ttseval.tasks.listening.analyse_test writes it), under one heading."""
    ratings = store.read(run_id, "ratings", columns=["test_id", "created_at"])
    tests = list(ratings.sort_values("created_at")["test_id"].drop_duplicates())
    parts = [store.read_bytes(f"runs/{run_id}/listening/{t}/analysis.md").decode("utf-8") for t in tests
             if store.exists(f"runs/{run_id}/listening/{t}/analysis.md")]
    return "\n## Listening tests\n\n" + "\n".join(parts) if parts else ""


def _baseline_id(meta: dict[str, Any]) -> str:
    from ttseval.core.registry import Spec

    return Spec.parse(meta["baseline"]).id if meta.get("baseline") else ""


def write_full_report(store: ArtifactStore, run_id: str, settings: Settings, system_ids: list[str],
                      meta: dict[str, Any]) -> str:
    """Summary, win-rates, figures and Markdown for a run; returns the Markdown, stored once as report.md."""
    tables = RunTables.read(store, run_id, system_ids, primary_quality_id(settings))  # every section reads these
    meta = {**meta, "html report": html_location(store, run_id)}
    summary = compute_summary(store, run_id, settings, system_ids, tables)
    store_summary(store, run_id, summary)
    winrates = compute_winrates(store, run_id, settings)
    names = dict(zip(summary["system_id"], summary["system_spec"]))
    if not winrates.empty:
        store.replace_table(run_id, "winrates", pa.Table.from_pandas(winrates, schema=WINRATES, preserve_index=False))
        for judge_id in winrates["judge_id"].unique():
            png = depth_figure(winrates, judge_id, names)
            if png:
                store.write_bytes(f"runs/{run_id}/figures/winrate-by-depth-{judge_id}.png", png)
    markdown = (render_markdown(summary, meta) + cost_markdown(store, run_id, names)
                + insv_markdown(store, run_id, settings, tables)
                + recognisers_markdown(settings, tables, names)
                + paired_markdown(settings, tables, _baseline_id(meta), names)
                + prosody_markdown(store, run_id, tables, names)
                + similarity_markdown(settings, tables, names)
                + predictors_markdown(settings, tables, names)
                + audio_checks_markdown(tables, names)
                + grouped_markdown(tables, names)
                + leaderboard_markdown(store, run_id, summary, winrates)
                + instruction_markdown(store, run_id, names) + listening_markdown(store, run_id)
                + tables_markdown(store, run_id))
    store.write_bytes(f"runs/{run_id}/report.md", markdown.encode("utf-8"))
    write_html_report(store, run_id, build_data(store, run_id, tables, summary, winrates, markdown, meta))
    return markdown
