"""A run's results in a form that can be shared without its audio (PashtoTTS-Bench 7.6 and 8.1): commercial audio
may not be redistributable, so the export holds every stored table as CSV (scores, per-sentence rows, LID
answers, failures with their reasons, provider metadata and each clip's SHA-256), the report and the run logs,
and no audio: a reader regenerates the clips from the prompts and the provider metadata and checks them against
the hashes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.ids import slug
from ttseval.core.registry import system_name
from ttseval.core.schemas import TABLES
from ttseval.core.store import ArtifactStore
from ttseval.tasks.parts import get_store
from ttseval.tasks.report.compute import RunTables
from ttseval.tasks.report.format import spreadsheet_safe

DATA_CARD = """# ttseval results: run `{run_id}` (no audio)

Exported {date} from `{store}`. Every table of the run as CSV, one row per key, as the run stored it:

{tables}

Audio is not included: commercial TTS output may not be redistributable. `synthesis.csv` gives each clip's
`audio_sha256`, `provider_version` and `provider_metadata` (model, voice, API version), so a reader can regenerate
a clip from `items.csv` and check it against its hash. `per_sentence.csv` is the tidy per-item table: one row per
item, system (by its spec) and recogniser, with the text, transcript, WER, CER, each MOS predictor, speaker
similarity, audio flags and each judge's verdict. `report.md` is the run's report; `log/` holds one record
per invocation (code version, dataset hash, settings; never a key).

For other tools: `battles.jsonl` holds every parsed pairwise verdict in the arena convention (model_a, model_b in
the order the judge heard the clips, winner model_a / model_b / tie, judge, item, tstamp), which an arena-style
Bradley-Terry refit reads as it is; `clips.jsonl` one line per clip with every metric the run computed
(`wer:<recogniser>`, `cer:<recogniser>`, `mos:<predictor>`, `sim:<encoder>`, `duration_s`) and each metric's
direction, as VERSA writes per-utterance scores; `emergenttts_<judge>_<date>.json`, per pairwise judge, each
system's win-rate overall and per category beside the WER of the same items, as EmergentTTS-Eval publishes its
table. Systems are named as in the report (a spec's `label=`).
"""


def export_run(settings: Settings, run_id: str, out: Path) -> list[str]:
    """Write the export folder; returns the tables written.

    Raises:
        NotFoundError: no such store, or no such run in it.
    """
    store = get_store(settings.store, settings.store_wait_s)
    store.require(run_id)
    tables = [name for name in TABLES if store.part_files(run_id, name)]
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for name in tables:
        frame = store.read(run_id, name)
        spreadsheet_safe(frame).to_csv(out / f"{name}.csv", index=False)
        lines.append(f"- `{name}.csv`: {len(frame)} rows, key {', '.join(TABLES[name].key)}")
    for extra in ("report.md", "per_sentence.csv"):
        path = f"runs/{run_id}/{extra}"
        if store.exists(path):
            (out / extra).write_bytes(store.read_bytes(path))
    from ttseval.tasks.quality import primary_quality_id

    run = RunTables.read(store, run_id, None, primary_quality_id(settings))  # read once for every file below
    judgments = store.read(run_id, "judgments")
    if not (out / "per_sentence.csv").exists():  # a run reported before every run had one: made from its tables
        from ttseval.tasks.report.per_item import per_item_table

        table = per_item_table(run, settings, judgments, store.read(run_id, "instruction_judgments"))
        spreadsheet_safe(table).to_csv(out / "per_sentence.csv", index=False)
    import pyarrow.fs as pafs

    logs = store.fs.get_file_info(pafs.FileSelector(store.path(f"runs/{run_id}/log"), allow_not_found=True))
    for info in logs:
        if info.type == pafs.FileType.File:
            (out / "log").mkdir(exist_ok=True)
            (out / "log" / info.base_name).write_bytes(store.read_bytes(f"runs/{run_id}/log/{info.base_name}"))
    names = {i: system_name(spec) for i, spec in zip(run.synthesis["system_id"], run.synthesis["system_spec"])}
    _write_jsonl(out / "battles.jsonl", battles(judgments, names))
    _write_jsonl(out / "clips.jsonl", clip_scores(run, names))
    date = str((store.run_log(run_id) or {}).get("date", ""))[:10] or datetime.now(UTC).date().isoformat()
    for judge, table in emergent_tables(store, run_id, settings, run, names).items():
        (out / f"emergenttts_{slug(judge)}_{date}.json").write_text(
            json.dumps({"judge": judge, "date": date, **table}, indent=2, default=str), encoding="utf-8"
        )
    (out / "README.md").write_text(
        DATA_CARD.format(
            run_id=run_id, date=datetime.now(UTC).date().isoformat(), store=store.display(), tables="\n".join(lines)
        ),
        encoding="utf-8",
    )
    (out / "manifest.json").write_text(
        json.dumps({"run_id": run_id, "tables": tables, "audio": False}, indent=2), encoding="utf-8"
    )
    return tables


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows), encoding="utf-8")


def battles(judgments: pd.DataFrame, names: dict[str, str]) -> list[dict[str, Any]]:
    """Every parsed verdict of a pairwise judge as an arena battle: model_a is the clip the judge heard first
    (`candidate_first`), winner model_a / model_b / tie, judge (its spec), item, tstamp (Unix seconds of the
    verdict)."""
    from ttseval.metrics.winrate import scored_verdicts

    out = []
    for r in scored_verdicts(judgments).to_dict("records"):
        first = bool(r["candidate_first"]) if pd.notna(r["candidate_first"]) else True
        candidate, baseline = names.get(r["system_id"], r["system_id"]), names.get(r["baseline_id"], r["baseline_id"])
        side = {"candidate": "model_a" if first else "model_b", "baseline": "model_b" if first else "model_a"}
        out.append(
            {
                "model_a": candidate if first else baseline,
                "model_b": baseline if first else candidate,
                "winner": side.get(r["winner"], "tie"),
                "judge": r["judge_spec"],
                "item": r["item_id"],
                "tstamp": pd.Timestamp(r["created_at"]).timestamp(),
            }
        )
    return out


def clip_scores(run: RunTables, names: dict[str, str]) -> list[dict[str, Any]]:
    """One record per ok clip (item, system): every metric the run computed for it, keyed by metric and tool, and
    `directions` (lower or higher is better, per key)."""
    synthesis = run.synthesis
    clips: dict[tuple[str, str], dict[str, Any]] = {
        (r["item_id"], r["system_id"]): {
            "key": f"{r['item_id']}/{names.get(r['system_id'], r['system_id'])}",
            "item": r["item_id"],
            "system": names.get(r["system_id"], r["system_id"]),
            "audio_sha256": r["audio_sha256"],
            "duration_s": r["duration_s"],
        }
        for r in synthesis[synthesis["status"] == "ok"].to_dict("records")
    }
    directions: dict[str, str] = {}  # duration_s is a measure, not a quality: no better side
    for rows, tool, measures in (
        (run.transcripts, "asr_spec", {"wer": "lower", "cer": "lower"}),
        (run.all_quality, "quality_spec", {"mos": "higher"}),
        (run.similarity, "encoder_spec", {"similarity": "higher"}),
    ):
        for r in rows[rows["status"] == "ok"].to_dict("records") if len(rows) else []:
            clip = clips.get((r["item_id"], r["system_id"]))
            for measure, direction in measures.items():
                key = f"{'sim' if measure == 'similarity' else measure}:{r[tool]}"
                if clip is not None and pd.notna(r[measure]):
                    clip[key] = float(r[measure])
                    directions[key] = direction
    return [clip | {"directions": {k: v for k, v in directions.items() if k in clip}} for clip in clips.values()]


def emergent_tables(
    store: ArtifactStore, run_id: str, settings: Settings, tables: RunTables, names: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Judge spec -> its EmergentTTS-Eval-style leaderboard: per system, the win-rate against the baseline overall
    and per category (with the 95% CI, null under 10 items) beside the WER of the same items, per recogniser."""
    from ttseval.metrics.summary import summarize_by
    from ttseval.tasks.report.compute import compute_winrates

    winrates = compute_winrates(store, run_id, settings)
    if winrates.empty:
        return {}
    wer = pd.concat(
        [
            summarize_by(tables.items, tables.synthesis, tables.transcripts, by="category"),
            summarize_by(tables.items.assign(category="overall"), tables.synthesis, tables.transcripts, by="category"),
        ]
    )
    asr = dict(zip(tables.transcripts["asr_id"], tables.transcripts["asr_spec"]))
    out: dict[str, dict[str, Any]] = {}
    for judge, mine in winrates[winrates["level"].isin(["overall", "category"])].groupby("judge_spec"):
        rows = []
        for r in mine.to_dict("records"):
            category = "overall" if r["level"] == "overall" else r["category"]
            cell = wer[(wer["system_id"] == r["system_id"]) & (wer["category"] == category)]
            interval = None if pd.isna(r["win_rate_ci_low"]) else [r["win_rate_ci_low"], r["win_rate_ci_high"]]
            rows.append(
                {
                    "system": names.get(r["system_id"], r["system_id"]),
                    "category": category,
                    "win_rate": r["win_rate"],
                    "win_rate_ci": interval,
                    "n_judged": int(r["n_judged"]),
                    "wer": {asr.get(w["asr_id"], w["asr_id"]): w["wer"] for w in cell.to_dict("records")},
                }
            )
        baseline = mine["baseline_id"].iloc[0]
        out[str(judge)] = {"baseline": names.get(baseline, baseline), "rows": rows}
    return out
