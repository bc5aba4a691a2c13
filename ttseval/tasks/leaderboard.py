"""A leaderboard across a store's runs: every system ever evaluated on a dataset version, with its latest figures.

A dataset version is the SHA-256 of the items a run evaluated (its log's `dataset_sha256`). For each system the
figures come from the latest run that evaluated it on that version, with that run's id and date. Figures from
different tools never share a column: WER and CER are per recogniser (one row each), MOS is headed by its
predictor, and each judge's overall win-rate (with its 95% CI) has its own column headed by the judge and the
baseline.

Each pairwise judge also ranks every system of the dataset version on one scale: a Bradley-Terry fit
(ttseval.metrics.bradley_terry) to the verdicts of every run on that version, so systems that were never judged
against each other are placed through the opponents they shared (two runs with one baseline). A comparison judged
in several runs (the same judge, item and pair) counts once, with the latest run's verdict. Shown as the Elo view
with its BCa interval over items and the rank by lower bound.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.registry import system_name
from ttseval.tasks.parts import get_store
from ttseval.tasks.report.format import markdown_table, missing, num, pct, with_ci


def _latest_logs(store: Any) -> list[dict[str, Any]]:
    """Each reported run's latest record (ArtifactStore.run_log)."""
    return [log for run_id in store.runs() if store.part_files(run_id, "report") and (log := store.run_log(run_id))]


def cross_run_rankings(
    store: Any, runs: dict[str, dict[str, str]], settings: Settings
) -> dict[str, tuple[pd.DataFrame, dict[str, list[str]]]]:
    """Judge spec -> (Bradley-Terry table, system_id holding the system's spec (BT_COLUMNS), fitted to every verdict
    of `runs` (run id -> its system ids' specs, oldest first; a comparison judged again counts once, with the latest
    verdict); each system's spec -> the runs whose verdicts on it the fit used)."""
    from ttseval.metrics.bradley_terry import bradley_terry, judgment_outcomes

    parts = []
    for order, (run_id, specs) in enumerate(runs.items()):
        if not store.part_files(run_id, "judgments"):
            continue
        judgments = store.read(run_id, "judgments")
        judges = dict(zip(judgments["judge_id"], judgments["judge_spec"]))
        outcomes = judgment_outcomes(judgments)
        outcomes = outcomes.assign(
            judge_spec=outcomes["judge_id"].map(judges),
            a=outcomes["a"].map(specs),
            b=outcomes["b"].map(specs),
            order=order,
            run_id=run_id,
        ).dropna(subset=["a", "b"])
        parts.append(outcomes)
    if not parts:
        return {}
    outcomes = pd.concat(parts, ignore_index=True).sort_values("order", kind="stable")
    outcomes["pair"] = [" | ".join(sorted(p)) for p in zip(outcomes["a"], outcomes["b"])]
    outcomes = outcomes.drop_duplicates(["judge_spec", "item_id", "pair"], keep="last")
    fits = {}
    for judge, mine in outcomes.groupby("judge_spec", sort=True):
        table = bradley_terry(
            mine[["item_id", "a", "b", "score"]], n_resamples=settings.bootstrap_resamples, seed=settings.seed
        )
        sides = pd.concat([mine[["a", "run_id"]].set_axis(["spec", "run_id"], axis=1),
                           mine[["b", "run_id"]].set_axis(["spec", "run_id"], axis=1)])  # fmt: skip
        fits[judge] = (table, {spec: sorted(set(g)) for spec, g in sides.groupby("spec")["run_id"]})
    return fits


def leaderboard(settings: Settings) -> dict[str, pd.DataFrame]:
    """Dataset SHA-256 (first 12 hex digits) -> one row per (system, recogniser): system_spec, asr_spec, wer,
    cer, completion_rate, `MOS (<predictor>)`, `win-rate (<judge> vs <baseline>)` columns each with its
    `... ci` column (low, high), `Elo (<judge>)` with its `... ci`, `rank (<judge>)` and `runs (<judge>)` columns
    (cross_run_rankings),
    run_id, date."""
    store = get_store(settings.store, settings.store_wait_s)
    boards: dict[str, dict[tuple[str, str | None], dict[str, Any]]] = {}
    runs: dict[str, dict[str, dict[str, str]]] = {}  # dataset -> run id -> its system ids' specs
    for log in sorted(_latest_logs(store), key=lambda entry: entry["date"]):
        run_id, dataset = log["run_id"], str(log["dataset_sha256"])[:12]
        report = store.read(run_id, "report")
        winrates = store.read(run_id, "winrates") if store.part_files(run_id, "winrates") else pd.DataFrame()
        overall = winrates[winrates["level"] == "overall"] if len(winrates) else winrates
        specs = dict(zip(report["system_id"], report["system_spec"]))
        board = boards.setdefault(dataset, {})
        runs.setdefault(dataset, {})[run_id] = specs
        for r in report.to_dict("records"):
            key = (r["system_spec"], r.get("asr_spec"))
            row = {
                "system_spec": r["system_spec"],
                "asr_spec": r.get("asr_spec"),
                "completion_rate": r["completion_rate"],
                "wer": r["wer"],
                "cer": r["cer"],
                f"MOS ({log['quality']})": r["mos"],
                "run_id": run_id,
                "date": log["date"][:10],
            }
            for w in overall[overall["system_id"] == r["system_id"]].to_dict("records") if len(overall) else []:
                baseline = specs.get(w["baseline_id"], w["baseline_id"])
                column = f"win-rate ({w['judge_spec']} vs {baseline})"
                row[column] = w["win_rate"]
                row[f"{column} ci"] = (w["win_rate_ci_low"], w["win_rate_ci_high"])
            board[key] = row  # a later run replaces an earlier one's figures for the same system and recogniser
    for dataset, board in boards.items():
        for judge, (table, sources) in cross_run_rankings(store, runs[dataset], settings).items():
            by_spec = table.set_index("system_id")
            for row in board.values():
                if row["system_spec"] in by_spec.index:
                    r = by_spec.loc[row["system_spec"]]
                    row[f"Elo ({judge})"], row[f"Elo ({judge}) ci"] = r["elo"], (r["elo_ci_low"], r["elo_ci_high"])
                    row[f"rank ({judge})"] = int(r["rank"])
                    row[f"runs ({judge})"] = sources.get(row["system_spec"], [])
    return {dataset: pd.DataFrame(list(rows.values())) for dataset, rows in boards.items()}


def _win_rate(row: dict[str, Any], column: str) -> str:
    ci = row.get(f"{column} ci")
    return with_ci(row[column], *(ci if isinstance(ci, tuple) else (float("nan"), float("nan"))), percent=True)


def _elo(row: dict[str, Any], column: str) -> str:
    if missing(row.get(column)):
        return "–"
    low, high = row[f"{column} ci"]
    runs = ", ".join(row.get(column.replace("Elo", "runs", 1)) or [])
    return f"{with_ci(row[column], low, high, 0)} #{row[column.replace('Elo', 'rank', 1)]} (from {runs})"


def leaderboard_markdown(boards: dict[str, pd.DataFrame]) -> str:
    lines = [
        "# ttseval leaderboard",
        "",
        (
            "Every system evaluated on each dataset version (the SHA-256 of its items), with the figures of the "
            "latest run that evaluated it. WER/CER are per recogniser; MOS and win-rates are headed by the tool "
            "that gave them; `run` names the run they come from. Elo: each judge's Bradley-Terry fit to the "
            "verdicts of every run on the version, on one scale, with its 95% CI over items, #rank by lower bound "
            "and the runs whose verdicts on the system it rests on (another run than the row's, when a later run "
            "was judged or a backfill judged another night's clips)."
        ),
    ]
    for dataset, board in boards.items():
        tools = [c for c in board.columns if c.startswith(("MOS (", "win-rate (")) and not c.endswith(" ci")]
        elos = [c for c in board.columns if c.startswith("Elo (") and not c.endswith(" ci")]
        board = board.sort_values(["asr_spec", "wer"], na_position="last")
        rows = [
            [
                system_name(r["system_spec"]),
                r["asr_spec"] or "–",
                pct(r["completion_rate"]),
                pct(r["wer"]),
                pct(r["cer"]),
                *(num(r[c]) if c.startswith("MOS") else _win_rate(r, c) for c in tools),
                *(_elo(r, c) for c in elos),
                r["run_id"],
                r["date"],
            ]
            for r in board.to_dict("records")
        ]
        lines += [
            "",
            f"## Dataset `{dataset}`",
            "",
            markdown_table(
                [
                    "system",
                    "recogniser",
                    "completion %",
                    "WER %",
                    "CER %",
                    *(c if c.startswith("MOS") else f"{c} %" for c in tools),
                    *elos,
                    "run",
                    "date",
                ],
                rows,
            ),
        ]
    return "\n".join(lines) + "\n"
