"""Native MOS listening forms and their analysis (PashtoTTS-Bench sections 3.2, 4.2.3 and 4.3), as pure functions.

Design: a stratified subset of sentences; F forms (a multiple of the S systems, one Latin square per S forms):
form f hears sentence i from system (i + f) mod S, so each sentence is heard once per form (once per rater: a
rater takes one form) and, over each S forms, once from every system; each form adds `repeats` of its own clips
again (within-rater consistency) and `controls` clips of the negative-control system (attention and language
checks, excluded from MOS means); the order is shuffled per form with a recorded seed and the file names are
blinded.

Analysis: per-system MOS with a bootstrap 95% CI over ratings, the raters counted; Krippendorff's alpha
(ordinal) over (sentence, system) units; each rater's repeat consistency (mean absolute difference between a clip
and its repeat) and mean control rating. Fewer than 16 raters: the results are preliminary (section 3.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import numpy as np
import pandas as pd

from ttseval.metrics.agreement import krippendorff_alpha
from ttseval.metrics.bootstrap import bootstrap_mean_ci

__all__ = ["FORM_COLUMNS", "MosAnalysis", "analyse_mos", "counterbalanced_forms", "select_subset"]

FORM_COLUMNS = ("form", "position", "file", "kind", "item_id", "system_id")
MIN_RATERS = 16  # section 3.2: below this, MOS tables are preliminary


def select_subset(
    items: pd.DataFrame,
    n: int,
    *,
    classes: dict[str, list[str]] | None = None,
    min_words: int = 5,
    max_words: int = 25,
    seed: int = 0,
) -> pd.DataFrame:
    """Up to `n` items with `min_words`-`max_words` words that contain a letter of at least one class (when the
    language has classes), drawn round-robin over strata (the first class an item contains x its length tercile)
    so every class and length is represented. `items`: item_id, text (the eligible ones: audio from every
    system)."""
    words = items["text"].str.split().str.len()
    pool = items[(words >= min_words) & (words <= max_words)].copy()
    if classes:

        def first_class(text: str) -> str | None:
            return next((name for name, letters in classes.items() if any(c in text for c in letters)), None)

        pool["stratum_class"] = pool["text"].map(first_class)
        pool = pool[pool["stratum_class"].notna()]
    else:
        pool["stratum_class"] = ""
    if pool.empty:
        return pool.drop(columns="stratum_class")
    lengths = pool["text"].str.split().str.len()
    pool["stratum_length"] = pd.qcut(lengths.rank(method="first"), q=min(3, len(pool)), labels=False)
    rng = np.random.default_rng(seed)

    def interleave(groups: list[pd.DataFrame]) -> list[pd.Series]:
        queues = [[r for _, r in g.sample(frac=1.0, random_state=int(rng.integers(2**31))).iterrows()] for g in groups]
        out = []
        while any(queues):
            out += [q.pop(0) for q in queues if q]
        return out

    # classes take turns; within a class, its length terciles take turns
    per_class = [
        pd.DataFrame(interleave([g for _, g in c.groupby("stratum_length", sort=True)]))
        for _, c in pool.groupby("stratum_class", sort=True)
    ]
    picked: list[pd.Series] = []
    queues = [list(c.iterrows()) for c in per_class]
    while len(picked) < n and any(queues):
        for q in queues:
            if q and len(picked) < n:
                picked.append(q.pop(0)[1])
    return pd.DataFrame(picked).drop(columns=["stratum_class", "stratum_length"]).reset_index(drop=True)


def counterbalanced_forms(
    item_ids: list[str],
    systems: list[str],
    *,
    n_forms: int | None = None,
    repeats: int = 3,
    controls: Sequence[tuple[str, str]] = (),
    seed: int = 0,
) -> pd.DataFrame:
    """The forms' rows (FORM_COLUMNS): kind 'test', 'repeat' or 'control'; `file` is a blinded name
    (mos_<6 hex digits>.wav) per distinct clip, the same clip keeping its name in every form; `controls` are
    (item_id, system_id) clips given to every form.

    Raises:
        ValueError: no systems or items, n_forms not a positive multiple of the number of systems, or more repeats
            than a form has clips.
    """
    s = len(systems)
    if not s or not item_ids:
        raise ValueError("counterbalanced forms need at least one system and one item")
    n_forms = n_forms or s
    if n_forms < 1 or n_forms % s:
        raise ValueError(
            f"n_forms must be a positive multiple of the {s} systems (one Latin square per {s} forms), got {n_forms}"
        )
    if repeats > len(item_ids):
        raise ValueError(f"{repeats} repeats but only {len(item_ids)} items per form")
    rng = np.random.default_rng(seed)
    names: dict[tuple[str, str], str] = {}

    def blinded(clip: tuple[str, str]) -> str:
        while clip not in names:
            name = f"mos_{int(rng.integers(16**6)):06x}.wav"
            if name not in names.values():
                names[clip] = name
        return names[clip]

    rows = []
    for f in range(n_forms):
        clips = [("test", (item, systems[(i + f) % s])) for i, item in enumerate(item_ids)]
        again = [("repeat", clips[j][1]) for j in sorted(rng.choice(len(clips), size=repeats, replace=False))]
        extra = [("control", c) for c in controls]
        order = list(rng.permutation(len(clips) + len(again) + len(extra)))
        everything = clips + again + extra
        for position, k in enumerate(order, start=1):
            kind, (item, system) = everything[k]
            rows.append(
                {
                    "form": f + 1,
                    "position": position,
                    "file": blinded((item, system)),
                    "kind": kind,
                    "item_id": item,
                    "system_id": system,
                }
            )
    return pd.DataFrame(rows, columns=list(FORM_COLUMNS))


class MosAnalysis(TypedDict):
    """analyse_mos's result."""

    systems: pd.DataFrame  # system_id, mos, ci_low, ci_high, n_ratings
    n_raters: int
    preliminary: bool  # fewer than MIN_RATERS raters
    alpha: float  # Krippendorff's alpha (ordinal); NaN where undefined
    raters: pd.DataFrame  # rater_id, form, n_rated, repeat_mad, control_mean


def analyse_mos(key: pd.DataFrame, ratings: pd.DataFrame, *, n_resamples: int = 1000, seed: int = 0) -> MosAnalysis:
    """Ratings (rater_id, form, position, score 1-5) joined to the key (FORM_COLUMNS) by form and position.

    Returns {systems: DataFrame(system_id, mos, ci_low, ci_high, n_ratings), n_raters, preliminary, alpha,
    raters: DataFrame(rater_id, form, n_rated, repeat_mad, control_mean)}.

    Raises:
        ValueError: a score outside 1-5, or a (form, position) the key does not have (named).
    """
    bad = ratings[~ratings["score"].between(1, 5)]
    if len(bad):
        r = bad.iloc[0]
        raise ValueError(
            f"score {r['score']} of rater {r['rater_id']!r} at form {r['form']}, position "
            f"{r['position']} is outside 1-5"
        )
    joined = ratings.merge(key, on=["form", "position"], how="left", indicator=True)
    missing = joined[joined["_merge"] == "left_only"]
    if len(missing):
        r = missing.iloc[0]
        raise ValueError(
            f"rater {r['rater_id']!r} rated form {r['form']} position {r['position']}, which the "
            "forms' key does not have: check the form number"
        )
    tests = joined[joined["kind"] == "test"]
    systems = []
    for system_id, g in tests.groupby("system_id", sort=True):
        ci = bootstrap_mean_ci(g["score"].to_numpy(float), n_resamples=n_resamples, seed=seed)
        systems.append(
            {"system_id": system_id, "mos": ci.point, "ci_low": ci.low, "ci_high": ci.high, "n_ratings": len(g)}
        )
    units = tests.pivot_table(index="rater_id", columns=["item_id", "system_id"], values="score", aggfunc="first")
    try:  # undefined (NaN) with fewer than two raters or a single value overall
        alpha = krippendorff_alpha(units.to_numpy(float), level="ordinal")
    except ValueError:
        alpha = float("nan")
    raters = []
    for (rater, form), g in joined.groupby(["rater_id", "form"], sort=True):
        first = g[g["kind"] == "test"].set_index(["item_id", "system_id"])["score"]
        again = g[g["kind"] == "repeat"].set_index(["item_id", "system_id"])["score"]
        pairs = again.index.intersection(first.index)
        raters.append(
            {
                "rater_id": rater,
                "form": form,
                "n_rated": len(g),
                "repeat_mad": float((first[pairs] - again[pairs]).abs().mean()) if len(pairs) else np.nan,
                "control_mean": float(g.loc[g["kind"] == "control", "score"].mean()),
            }
        )
    n_raters = int(ratings["rater_id"].nunique())
    return {
        "systems": pd.DataFrame(systems),
        "n_raters": n_raters,
        "preliminary": n_raters < MIN_RATERS,
        "alpha": alpha,
        "raters": pd.DataFrame(raters),
    }
