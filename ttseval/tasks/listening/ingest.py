"""ingest_ratings: raw rating rows (ttseval.tasks.listening.results) checked against the test's key and scales,
mapped into the run's `ratings` table, second ratings of a page flagged."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.errors import DatasetError, SpecError
from ttseval.core.schemas import TABLES, table_from_rows
from ttseval.metrics.listening import COUNT_FIELDS, DG_FIELDS, DGWeights, dg_score
from ttseval.tasks.listening.common import MUSHRA_KINDS, dg_weights, of_test, scale_of
from ttseval.tasks.listening.results import read_results
from ttseval.tasks.parts import get_store


def ingest_ratings(settings: Settings, run_id: str, test_id: str, paths: list[Path]) -> dict[str, Any]:
    """Map every rating of `paths` through the test's key into the run's `ratings` table; returns counts.

    Refused as a whole, nothing written (DatasetError naming file, row, rater, page and stimulus): a stimulus or
    page the test does not have, a score outside the test's scale, a scoresheet value outside its scale. Stored
    and flagged, left out of the analysis: a rater's second rating of a page (another session or a repeated
    row; the first one counts). Stored with a note: a MUSHRA page whose hidden reference the rater did not rate.
    Re-ingesting a file changes nothing (its rows have the same keys).
    """
    store = get_store(settings.store, settings.store_wait_s)
    key = of_test(store, run_id, "listening_stimuli", test_id)
    if key.empty:
        raise SpecError(f"run {run_id!r} has no listening test {test_id!r}; export one with ttseval human-eval export")
    kind = key["kind"].iloc[0]
    raw = pd.concat([read_results(Path(p), test_id) for p in paths], ignore_index=True)
    if raw.empty:
        raise DatasetError(f"{', '.join(str(p) for p in paths)}: a header and no ratings; nothing to ingest")
    for column in ("score", *DG_FIELDS, "rating_time_s"):
        if column not in raw:
            raw[column] = np.nan
    for column in ("comment", "questionnaire"):
        if column not in raw:
            raw[column] = None
    raw = raw[raw["trial_id"] != "practice-sheet"]
    joined = raw.merge(key.drop(columns=["created_at"]), on=["trial_id", "stimulus"], how="left")
    unknown = joined[joined["item_id"].isna()]
    if len(unknown):
        r = unknown.iloc[0]
        raise DatasetError(
            f"{r['source_file']} row {r['line']}: rater {r['rater_id']!r}, page {r['trial_id']!r}: "
            f"stimulus {r['stimulus']!r} is not one test {test_id!r} exported ({len(unknown)} such "
            "rows): results of another test, or an edited file",
            source=str(r["source_file"]),
        )
    low, high = scale_of(kind)
    scored = joined[joined["source"] != "sheet"]
    bad = scored[scored["score"].notna() & ~scored["score"].between(low, high)]
    if len(bad):
        r = bad.iloc[0]
        raise DatasetError(
            f"{r['source_file']} row {r['line']}: rater {r['rater_id']!r}, page {r['trial_id']!r}, "
            f"stimulus {r['stimulus']!r}: score {r['score']:g} is outside the {kind} scale "
            f"{low:g}..{high:g}",
            source=str(r["source_file"]),
        )
    sheets = joined[joined["source"] == "sheet"]
    for field in DG_FIELDS:
        top = 100 if field not in COUNT_FIELDS else np.inf
        wrong = sheets[sheets[field].notna() & ~sheets[field].between(0, top)]
        if len(wrong):
            r = wrong.iloc[0]
            raise DatasetError(
                f"{r['source_file']} row {r['line']}: rater {r['rater_id']!r}, page "
                f"{r['trial_id']!r}, stimulus {r['stimulus']!r}: {field} {r[field]:g} is outside "
                f"0..{top:g}",
                source=str(r["source_file"]),
            )
    existing = of_test(store, run_id, "ratings", test_id)
    rows = _assemble(joined, kind, dg_weights(settings))
    rows["test_id"], rows["kind"] = test_id, kind
    # a second rating of one page by one rater (a second session, a repeated row) is kept but flagged: the first
    # counts, whether it came in earlier or earlier in this file
    seen = existing[["rater_id", "trial_id", "item_id", "system_id", "session"]].assign(_old=True)
    both = pd.concat([seen, rows.assign(_old=False)], ignore_index=True)
    both = both.drop_duplicates(["rater_id", "trial_id", "item_id", "system_id", "session"], keep="first")
    first = both.drop_duplicates(["rater_id", "trial_id", "item_id", "system_id"], keep="first")
    firsts = set(first[["rater_id", "trial_id", "item_id", "system_id", "session"]].itertuples(index=False, name=None))
    new = rows.merge(seen, on=["rater_id", "trial_id", "item_id", "system_id", "session"], how="left")
    new = new[new["_old"].isna()].drop(columns="_old")
    is_first = [
        t in firsts
        for t in new[["rater_id", "trial_id", "item_id", "system_id", "session"]].itertuples(index=False, name=None)
    ]
    new["flag"] = [
        None if f else f"rater {r!r} rated page {t!r} again (session {s!r}); the first rating counts"
        for f, r, t, s in zip(is_first, new["rater_id"], new["trial_id"], new["session"])
    ]
    if kind in MUSHRA_KINDS:
        hidden = new[new["role"] == "reference"].groupby(["rater_id", "trial_id"]).size()
        has_ref = key[key["role"] == "reference"]["trial_id"].unique()
        lacking = [
            (r, t)
            for r, t in new[["rater_id", "trial_id"]].drop_duplicates().itertuples(index=False)
            if t in has_ref and (r, t) not in hidden.index
        ]
        lacking_set = set(lacking)
        new["note"] = [
            ("no hidden-reference rating on this page" if (r, t) in lacking_set else None)
            for r, t in zip(new["rater_id"], new["trial_id"])
        ]
    now = datetime.now(UTC)
    new["created_at"] = now
    records = new.astype(object).where(new.notna(), None).to_dict("records")  # NaN is no string: None
    store.write_part(run_id, "ratings", table_from_rows("ratings", records), label=test_id)
    return {
        "test_id": test_id,
        "kind": kind,
        "read": len(raw),
        "stored": len(new),
        "already_stored": len(rows) - len(new),
        "flagged": int(new["flag"].notna().sum()),
        "pages_without_hidden_reference": int(
            new.loc[new["note"].notna(), ["rater_id", "trial_id"]].drop_duplicates().shape[0]
        )
        if "note" in new
        else 0,
        "raters": sorted(new["rater_id"].unique()),
    }


def _assemble(joined: pd.DataFrame, kind: str, weights: DGWeights) -> pd.DataFrame:
    """Raw rows mapped through the key into ratings rows: a session is numbered per repeated (rater, page,
    stimulus) within a file, CMOS scores turned to 'system over the other', MUSHRA-DG's slider and scoresheet of
    one clip joined into one row scored by the formula."""
    joined = joined.copy()
    repeat = joined.groupby(["source_file", "session", "rater_id", "trial_id", "stimulus"]).cumcount()
    joined["session"] = [
        f"{s or Path(f).stem}#{k}" if (k or not s) else s
        for s, f, k in zip(joined["session"], joined["source_file"], repeat)
    ]
    if kind == "cmos":  # the rater scored B against A; the system is B or A
        joined["score"] = np.where(joined["b_is_system"].astype(bool), joined["score"], -joined["score"])
    if kind.startswith("mushra-dg"):
        sliders = joined[joined["source"] == "mushra"]
        sheets = joined[joined["source"] == "sheet"].copy()
        sheets["trial_id"] = sheets["trial_id"].str.removesuffix("-sheet")
        sheets["n"] = sheets.groupby(["rater_id", "trial_id", "system_id"]).cumcount()
        sliders = sliders.assign(n=sliders.groupby(["rater_id", "trial_id", "system_id"]).cumcount())
        keep = ["rater_id", "trial_id", "item_id", "system_id", "role", "n"]
        merged = sliders[[*keep, "score", "session", "rating_time_s", "comment", "questionnaire", "source_file"]].merge(
            sheets[[*keep, *DG_FIELDS, "session", "source_file"]], on=keep, how="outer", suffixes=("", "_sheet")
        )
        merged["slider"] = merged["score"]
        merged["session"] = merged["session"].fillna(merged["session_sheet"])
        merged["source_file"] = merged["source_file"].fillna(merged["source_file_sheet"])
        merged["score"] = dg_score(merged, weights)
        joined = merged.drop(columns=["n", "session_sheet", "source_file_sheet"])
    columns = [c for c in TABLES["ratings"].schema.names if c in joined.columns]
    return joined[columns].reset_index(drop=True)
