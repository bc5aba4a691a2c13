"""A run's results in a form that can be shared without its audio (PashtoTTS-Bench 7.6 and 8.1): commercial audio
may not be redistributable, so the export holds every stored table as CSV (scores, per-sentence rows, LID
answers, failures with their reasons, provider metadata and each clip's SHA-256), the report and the run logs,
and no audio: a reader regenerates the clips from the prompts and the provider metadata and checks them against
the hashes."""

from __future__ import annotations

import json
from pathlib import Path

from ttseval.core.config import Settings
from ttseval.core.schemas import TABLES
from ttseval.tasks.parts import get_store
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
    if not (out / "per_sentence.csv").exists():  # a run reported before every run had one: made from its tables
        from ttseval.tasks.quality import primary_quality_id
        from ttseval.tasks.report.compute import RunTables
        from ttseval.tasks.report.per_item import per_item_table

        table = per_item_table(
            RunTables.read(store, run_id, None, primary_quality_id(settings)),
            settings,
            store.read(run_id, "judgments"),
            store.read(run_id, "instruction_judgments"),
        )
        spreadsheet_safe(table).to_csv(out / "per_sentence.csv", index=False)
    import pyarrow.fs as pafs

    logs = store.fs.get_file_info(pafs.FileSelector(store.path(f"runs/{run_id}/log"), allow_not_found=True))
    for info in logs:
        if info.type == pafs.FileType.File:
            (out / "log").mkdir(exist_ok=True)
            (out / "log" / info.base_name).write_bytes(store.read_bytes(f"runs/{run_id}/log/{info.base_name}"))
    from datetime import UTC, datetime

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
