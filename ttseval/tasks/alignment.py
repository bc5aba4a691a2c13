"""Judge-human alignment of a stored run: the human preferences CSV and the run's judgments read, each judge
compared (the computation is ttseval.metrics.agreement.preference_alignment_by_judge)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.errors import DatasetError, TTSEvalError
from ttseval.core.store import open_store
from ttseval.metrics.agreement import PreferenceAlignment, preference_alignment_by_judge
from ttseval.metrics.winrate import against_baseline

HUMAN_COLUMNS = ("item_id", "system_id", "preference")


def listener_alignment(settings: Settings, run_id: str) -> str:
    """The report's "Agreement with listeners" section of a stored run (every recogniser's WER, predictor's MOS,
    encoder's SIM and judge against its MUSHRA and MOS tests), or a line saying it has no such test.

    Raises:
        NotFoundError: no such store, or no such run in it.
    """
    from ttseval.tasks.quality import primary_quality_id
    from ttseval.tasks.report.compute import RunTables
    from ttseval.tasks.report.stages import listener_agreement_markdown

    store = open_store(settings)
    store.require(run_id)
    section = listener_agreement_markdown(
        store, run_id, settings, RunTables.read(store, run_id, None, primary_quality_id(settings))
    )
    return section or (
        f"run {run_id!r} has no MUSHRA or MOS ratings of 3 or more systems to compare its metrics with; bring a test "
        "in with `ttseval human-eval analyze` (or compare judges with human preferences: --human CSV)"
    )


def read_human_preferences(path: str | Path) -> pd.DataFrame:
    """A CSV of human pairwise preferences (item_id, system_id, preference: candidate / baseline / tie)."""
    human = pd.read_csv(path, dtype=str)
    missing = set(HUMAN_COLUMNS) - set(human.columns)
    if missing:
        raise DatasetError(
            f"{path}: missing column(s) {', '.join(sorted(missing))}; expected item_id, "
            "system_id (or system_spec), preference (candidate / baseline / tie)",
            source=str(path),
        )
    return human[list(HUMAN_COLUMNS)]


def human_alignment(settings: Settings, run_id: str, human_csv: str | Path) -> dict[str, PreferenceAlignment]:
    """judge spec -> how well it agrees with the human preferences in `human_csv` over run `run_id` (raw
    agreement, Krippendorff's alpha, Spearman of per-system win-rates, agreement per category).

    Raises:
        DatasetError: the CSV lacks a column, or its rows do not fit the run's (duplicate, unknown label,
            nothing in common); exit 2.
        TTSEvalError: the run has no parsed judgment to compare with.
    """
    human = read_human_preferences(human_csv)
    store = open_store(settings)
    judgments = against_baseline(store.read(run_id, "judgments"))  # human preferences are vs the baseline
    items = store.read(run_id, "items", columns=["item_id", "category"])
    try:
        aligned = preference_alignment_by_judge(judgments, human, dict(zip(items["item_id"], items["category"])))
    except ValueError as e:
        raise DatasetError(f"{human_csv}: {e}", source=str(human_csv)) from e
    if not aligned:
        raise TTSEvalError(f"run {run_id!r} has no parsed judgments to compare with")
    return aligned
