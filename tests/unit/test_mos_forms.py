"""Native MOS forms (metrics/mos_forms.py): the counterbalancing property over many seeds, the stratified
subset, and the analysis against hand computations (the ordinal alpha against Krippendorff's coincidence-matrix
formula written out here, not the package the code uses)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.support.alpha import ordinal_alpha_by_hand
from ttseval.metrics.mos_forms import analyse_mos, counterbalanced_forms, select_subset


@pytest.mark.parametrize("n_systems,n_items,multiple", [(4, 50, 1), (3, 10, 2), (2, 7, 3), (5, 12, 1)])
def test_every_form_hears_each_sentence_once_and_each_square_each_sentence_once_per_system(
    n_systems: int, n_items: int, multiple: int
) -> None:
    systems = [f"s{k}" for k in range(n_systems)]
    items = [f"i{k}" for k in range(n_items)]
    controls = [("c0", "urdu"), ("c1", "urdu")]
    for seed in range(40):
        forms = counterbalanced_forms(
            items, systems, n_forms=n_systems * multiple, repeats=3, controls=controls, seed=seed
        )
        tests = forms[forms["kind"] == "test"]
        for form, g in forms.groupby("form"):
            mine = tests[tests["form"] == form]
            assert sorted(mine["item_id"]) == sorted(items)  # each sentence once per form (once per rater)
            assert sorted(g["position"]) == list(range(1, len(g) + 1))
            repeats = g[g["kind"] == "repeat"]
            assert len(repeats) == 3 and set(zip(repeats["item_id"], repeats["system_id"])) <= set(
                zip(mine["item_id"], mine["system_id"])
            )  # a repeat is one of the form's own clips
            assert sorted(zip(*g[g["kind"] == "control"][["item_id", "system_id"]].T.values)) == sorted(controls)
        for square in range(multiple):  # within each Latin square: each sentence once from every system
            block = tests[(tests["form"] - 1) // n_systems == square]
            assert (block.groupby(["item_id", "system_id"]).size() == 1).all()
            assert len(block) == n_items * n_systems
        # blinded names: one per distinct clip, the same in every form, nothing of the clip in it
        assert forms.groupby("file")[["item_id", "system_id"]].nunique().max().max() == 1
        assert forms.drop_duplicates(["item_id", "system_id"])["file"].is_unique
        assert forms["file"].str.fullmatch(r"mos_[0-9a-f]{6}\.wav").all()
    a = counterbalanced_forms(items, systems, seed=1)
    b = counterbalanced_forms(items, systems, seed=2)
    assert a.equals(counterbalanced_forms(items, systems, seed=1)) and not a.equals(b)  # recorded seed


def test_bad_designs_are_refused() -> None:
    with pytest.raises(ValueError, match="multiple of the 3 systems"):
        counterbalanced_forms(["i"], ["a", "b", "c"], n_forms=4)
    with pytest.raises(ValueError, match="repeats"):
        counterbalanced_forms(["i"], ["a"], repeats=2)


def test_the_subset_keeps_lengths_in_range_and_covers_every_class() -> None:
    texts = {
        "a": "ټ " + "x " * 6,
        "b": "ښ " + "x " * 10,
        "c": "ځ " + "x " * 20,
        "d": "y " * 8,
        "e": "ټ " + "x " * 40,
        "f": "ښ x",
        "g": "ځ " + "x " * 5,
    }
    items = pd.DataFrame({"item_id": list(texts), "text": list(texts.values())})
    classes = {"retroflex": ["ټ"], "lateral": ["ښ"], "affricate": ["ځ"]}
    subset = select_subset(items, 3, classes=classes, seed=0)
    assert set(subset["item_id"]) <= {"a", "b", "c", "g"}  # d has no class letter, e is too long, f too short
    covered = {name for t in subset["text"] for name, letters in classes.items() if any(c in t for c in letters)}
    assert len(subset) == 3 and covered == set(classes)


def test_analysis_mos_alpha_repeats_and_controls_by_hand() -> None:
    key = counterbalanced_forms(["i0", "i1", "i2", "i3"], ["good", "bad"], repeats=1, controls=[("c0", "urdu")], seed=3)
    rng = np.random.default_rng(0)
    rows = []
    for rater in range(6):
        form = rater % 2 + 1
        for r in key[key["form"] == form].itertuples():
            base = {"good": 4, "bad": 2, "urdu": 1}[r.system_id]
            score = int(np.clip(base + rng.integers(-1, 2), 1, 5)) if r.kind != "repeat" else None
            rows.append(
                {
                    "rater_id": f"r{rater}",
                    "form": form,
                    "position": r.position,
                    "score": score,
                    "item_id": r.item_id,
                    "system_id": r.system_id,
                    "kind": r.kind,
                }
            )
    ratings = pd.DataFrame(rows)
    first = ratings[ratings["kind"] == "test"].set_index(["rater_id", "item_id", "system_id"])["score"]
    is_repeat = ratings["kind"] == "repeat"
    ratings.loc[is_repeat, "score"] = [
        first[(r.rater_id, r.item_id, r.system_id)] + (1 if r.rater_id == "r0" else 0)
        for r in ratings[is_repeat].itertuples()
    ]  # r0 is off by one on its repeat
    result = analyse_mos(key, ratings[["rater_id", "form", "position", "score"]], n_resamples=500)
    systems = result["systems"].set_index("system_id")
    tests = ratings[ratings["kind"] == "test"]
    for system in ("good", "bad"):
        assert systems.loc[system, "mos"] == pytest.approx(tests[tests["system_id"] == system]["score"].mean())
        assert systems.loc[system, "n_ratings"] == 12  # 6 raters x 4 items / 2 systems
        assert systems.loc[system, "ci_low"] <= systems.loc[system, "mos"] <= systems.loc[system, "ci_high"]
    assert "urdu" not in systems.index  # controls are excluded from MOS means
    units = tests.pivot_table(index="rater_id", columns=["item_id", "system_id"], values="score").to_numpy(float)
    assert result["alpha"] == pytest.approx(ordinal_alpha_by_hand(units))
    raters = result["raters"].set_index("rater_id")
    assert raters.loc["r0", "repeat_mad"] == 1.0 and raters.loc["r1", "repeat_mad"] == 0.0
    assert raters["control_mean"].between(1, 2).all()
    assert result["n_raters"] == 6 and result["preliminary"]  # fewer than 16 raters


def test_bad_ratings_name_the_row() -> None:
    key = counterbalanced_forms(["i0"], ["a"], repeats=0, seed=0)
    with pytest.raises(ValueError, match="score 7 of rater 'r1' at form 1, position 1 is outside 1-5"):
        analyse_mos(key, pd.DataFrame({"rater_id": ["r1"], "form": [1], "position": [1], "score": [7]}))
    with pytest.raises(ValueError, match="form 3 position 1, which the forms' key does not have"):
        analyse_mos(key, pd.DataFrame({"rater_id": ["r1"], "form": [3], "position": [1], "score": [3]}))
