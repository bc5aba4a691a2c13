"""Native MOS forms from a stored run, and the analysis of the ratings that come back (PashtoTTS-Bench 3.2, 4.3).

The design and the statistics are pure functions (metrics/mos_forms.py); this module reads the store, writes the
folder raters are given and reads their ratings:

    <out>/audio/mos_<hex>.wav     every clip once, under a blinded name
    <out>/forms/form_<k>.csv      what rater k's form lists: position, file (no system, no item)
    <out>/ratings_template.csv    rater_id, form, position, score (1-5), dialect, daily_use: one row per clip
    <out>/instructions.md         the rating instruction of section 3.2 and the scale
    <out>/key.csv                 position -> item, system, kind (test / repeat / control): keep it from raters
    <out>/manifest.json           run, language, systems, seed and counts
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.errors import DatasetError, SpecError
from ttseval.core.languages import base_language
from ttseval.metrics.mos_forms import FORM_COLUMNS, analyse_mos, counterbalanced_forms, select_subset
from ttseval.metrics.script import language_data
from ttseval.tasks.parts import get_store

INSTRUCTIONS = """# Listening test: naturalness

Rate how natural the speech sounds, as if from a native {language} speaker, regardless of any content errors or
mispronunciations.

Play each file of your form in the order listed and give it one score:

| score | meaning |
|---|---|
| 5 | Excellent |
| 4 | Good |
| 3 | Fair |
| 2 | Poor |
| 1 | Bad |

Some files may sound alike or come back later in the form; rate each one as you hear it. Write your scores in
`ratings_template.csv` (your rater id, your form number, the position, the score), with your dialect or region and
how much you use {language} each day. Names, addresses and IP addresses are not collected.
"""


def export_mos_forms(
    settings: Settings,
    run_id: str,
    out: Path,
    *,
    language: str,
    n: int = 50,
    n_forms: int | None = None,
    repeats: int = 3,
    controls: int = 2,
    seed: int = 0,
) -> dict[str, Any]:
    """Write the forms folder for `language`'s items of a stored run; returns the manifest.

    Raises:
        SpecError: no TTS system has audio of every eligible item, or nothing is eligible (the message says why).
    """
    store = get_store(settings.store, settings.store_wait_s)
    items = store.read(run_id, "items")
    items = items[items["language"].map(base_language) == base_language(language)]
    synthesis = store.read(run_id, "synthesis", columns=["item_id", "system_id", "status", "audio_sha256"])
    ok = synthesis[synthesis["status"] == "ok"]
    roles = {s: settings.role_of(s) for s in synthesis["system_id"].unique()}
    systems = sorted(s for s, role in roles.items() if role == "tts" and (ok["system_id"] == s).any())
    if not systems or items.empty:
        raise SpecError(f"run {run_id!r} has no {language} items with audio from a TTS system: nothing to rate")
    heard = ok[ok["system_id"].isin(systems)].groupby("item_id")["system_id"].nunique()
    eligible = items[items["item_id"].map(heard).fillna(0) == len(systems)]
    subset = select_subset(eligible, n, classes=language_data(language).get("grapheme_classes"), seed=seed)
    if subset.empty:
        raise SpecError(
            f"no {language} item of run {run_id!r} has 5-25 words, a letter of one of the language's "
            f"classes and audio from every TTS system ({', '.join(systems)})"
        )
    control_clips = ok[ok["system_id"].map(roles) == "control"]
    picked = (
        control_clips.sample(n=min(controls, len(control_clips)), random_state=seed) if controls else control_clips[:0]
    )
    forms = counterbalanced_forms(
        list(subset["item_id"]),
        systems,
        n_forms=n_forms,
        repeats=min(repeats, len(subset)),
        controls=list(zip(picked["item_id"], picked["system_id"])),
        seed=seed,
    )
    sha = ok.set_index(["item_id", "system_id"])["audio_sha256"]
    (out / "audio").mkdir(parents=True, exist_ok=True)
    (out / "forms").mkdir(exist_ok=True)
    for r in forms.drop_duplicates("file").itertuples():
        (out / "audio" / r.file).write_bytes(store.get_audio(sha[(r.item_id, r.system_id)]))
    for form, g in forms.groupby("form"):
        g[["position", "file"]].to_csv(out / "forms" / f"form_{form}.csv", index=False)
    template = forms[["form", "position"]].assign(rater_id="", score="", dialect="", daily_use="")
    template[["rater_id", "form", "position", "score", "dialect", "daily_use"]].to_csv(
        out / "ratings_template.csv", index=False
    )
    forms.to_csv(out / "key.csv", index=False)
    (out / "instructions.md").write_text(INSTRUCTIONS.format(language=language), encoding="utf-8")
    manifest = {
        "run_id": run_id,
        "language": language,
        "systems": systems,
        "seed": seed,
        "items": len(subset),
        "forms": int(forms["form"].max()),
        "repeats": int((forms["kind"] == "repeat").sum() / forms["form"].max()),
        "controls": [list(c) for c in zip(picked["item_id"], picked["system_id"])],
        "clips": int(forms["file"].nunique()),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


def _read_ratings(path: Path) -> pd.DataFrame:
    """The ratings file with its types checked cell by cell (every cell is read as text): rater_id non-empty, form
    and position whole numbers, score a number or empty (not rated yet: dropped). A wrong cell is refused naming
    its row (1-based, header excluded, as in items files), column and value.

    Raises:
        DatasetError: unreadable, a missing column, or a cell of the wrong type.
    """
    try:
        ratings = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise DatasetError(
            f"{path}: cannot read it as a UTF-8 CSV ({e}); start from ratings_template.csv", source=str(path)
        ) from e
    missing = [c for c in ("rater_id", "form", "position", "score") if c not in ratings.columns]
    if missing:
        raise DatasetError(f"{path}: missing column(s) {missing}; start from ratings_template.csv", source=str(path))
    ratings = ratings.assign(row=range(1, len(ratings) + 1))
    ratings = ratings[ratings["score"].str.strip() != ""].copy()

    def refuse(column: str, mask: pd.Series, what: str) -> None:
        if mask.any():
            wrong = ratings[mask]
            shown = ", ".join(f"row {r} ({column}={v!r})" for r, v in zip(wrong["row"], wrong[column]))
            raise DatasetError(
                f"{path}: column {column} must be {what}; {int(mask.sum())} row(s) are not: "
                f"{shown}. Fix: correct those cells (rows count from 1 after the header)",
                source=str(path),
            )

    refuse("rater_id", ratings["rater_id"].str.strip() == "", "a rater's id (not empty)")
    for column in ("form", "position"):
        number = pd.to_numeric(ratings[column].str.strip(), errors="coerce")
        refuse(column, number.isna() | (number % 1 != 0), "a whole number")
        ratings[column] = number.astype("int64")
    score = pd.to_numeric(ratings["score"].str.strip(), errors="coerce")
    refuse("score", score.isna(), "a number from 1 to 5 (or empty: not rated)")
    return ratings.assign(score=score, rater_id=ratings["rater_id"].str.strip()).drop(columns="row")


def analyse_mos_ratings(folder: Path, ratings_path: Path, *, n_resamples: int = 1000, seed: int = 0) -> str:
    """The analysis of returned ratings as Markdown, also written to <folder>/analysis.md.

    Raises:
        DatasetError: the ratings file lacks a column or has a bad score or position (named, with its row).
    """
    key = pd.read_csv(folder / "key.csv")[list(FORM_COLUMNS)]
    ratings = _read_ratings(ratings_path)
    try:
        result = analyse_mos(key, ratings, n_resamples=n_resamples, seed=seed)
    except ValueError as e:
        raise DatasetError(f"{ratings_path}: {e}", source=str(ratings_path)) from e
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    lines = [
        f"# Native MOS: run `{manifest['run_id']}`, {manifest['language']}",
        "",
        f"{result['n_raters']} raters over {manifest['forms']} counterbalanced forms of {manifest['items']} "
        f"sentences; Krippendorff's alpha (ordinal) "
        + (
            "undefined (fewer than two raters of a clip, or one score overall)"
            if np.isnan(result["alpha"])
            else f"{result['alpha']:.3f}"
            + (" (below 0.667: report MOS as unreliable)" if result["alpha"] < 0.667 else "")
        )
        + ".",
    ]
    if result["preliminary"]:
        lines += ["", f"**Preliminary:** fewer than 16 raters ({result['n_raters']})."]
    lines += ["", "| system | MOS [95% CI] | ratings |", "|---|---|---|"]
    for r in result["systems"].itertuples():
        lines.append(f"| {r.system_id} | {r.mos:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}] | {r.n_ratings} |")
    lines += [
        "",
        (
            "Raters: repeat consistency (mean absolute difference between a clip and its repeat) and the "
            "mean score of the language-control clips (excluded from MOS; high means the rater did not notice "
            "another language)."
        ),
        "",
        "| rater | form | rated | repeat MAD | control mean |",
        "|---|---|---|---|---|",
    ]
    for r in result["raters"].itertuples():
        mad = "–" if np.isnan(r.repeat_mad) else f"{r.repeat_mad:.2f}"
        control = "–" if np.isnan(r.control_mean) else f"{r.control_mean:.2f}"
        lines.append(f"| {r.rater_id} | {r.form} | {r.n_rated} | {mad} | {control} |")
    markdown = "\n".join(lines) + "\n"
    (folder / "analysis.md").write_text(markdown, encoding="utf-8")
    return markdown
