"""The nightly canary (ttseval.metrics.canary): which items remote voices speak afresh, and when their fresh clips
say the voice changed. The permutation p is checked against an exact sign-flip enumeration worked here with
itertools (every one of the 2^n flips), the family adjustment against statsmodels' multipletests."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from ttseval.core.config import Settings
from ttseval.metrics.canary import CANARY_COLUMNS, canary_changes, canary_sample
from ttseval.tasks.synthesize import reuses_audio


def items_frame() -> pd.DataFrame:
    """30 items in 3 categories x 2 languages: strata of 8, 6, 5, 5, 3 and 3 items."""
    sizes = {
        ("emotions", "en"): 8,
        ("emotions", "fr"): 6,
        ("questions", "en"): 5,
        ("questions", "fr"): 5,
        ("syntax", "en"): 3,
        ("syntax", "fr"): 3,
    }
    rows = [
        {"item_id": f"{c[:3]}-{lang}-{i}", "category": c, "language": lang}
        for (c, lang), n in sizes.items()
        for i in range(n)
    ]
    return pd.DataFrame(rows)


def test_the_fixed_part_covers_every_stratum_and_does_not_move() -> None:
    items = items_frame()
    night1 = canary_sample(items, 8, 4, "2026-11-23")
    shuffled = items.sample(frac=1, random_state=7)
    night2 = canary_sample(shuffled, 8, 4, "2026-11-24")
    assert len(night1) == len(night2) == 12 and len(set(night1)) == 12
    assert night1[:8] == night2[:8]  # the same fixed part each night, whatever the row order
    strata = items.set_index("item_id")[["category", "language"]].apply(tuple, axis=1)
    # 6 strata and 8 fixed items: every stratum once, then two strata a second time
    counts = strata[night1[:8]].value_counts()
    assert set(counts.index) == set(strata) and sorted(counts.tolist()) == [1, 1, 1, 1, 2, 2]
    assert not set(night1[8:]) & set(night1[:8])  # the rotating part comes from the other items
    assert night1[8:] != night2[8:]  # and moves with the date
    assert canary_sample(items, 8, 4, "2026-11-23") == night1  # the same date, the same night


def test_over_the_weeks_every_item_is_heard_fresh() -> None:
    items = items_frame()
    heard: set[str] = set()
    for day in pd.date_range("2026-11-01", periods=42):  # six weeks of 4 rotating items a night
        heard |= set(canary_sample(items, 8, 4, day.date().isoformat()))
    assert heard == set(items["item_id"])


def test_a_small_dataset_gives_what_it_has_and_sizes_are_checked() -> None:
    items = items_frame().head(5)
    assert sorted(canary_sample(items, 8, 4, "2026-11-23")) == sorted(items["item_id"])
    assert canary_sample(items, 0, 0, "2026-11-23") == []
    with pytest.raises(ValueError, match="canary sizes must be >= 0"):
        canary_sample(items, -1, 0, "2026-11-23")


def exact_sign_flip_p(diff: np.ndarray) -> float:
    """Two-sided p of the mean difference over every sign flip, worked out by enumeration."""
    observed = abs(diff.mean())
    flips = [
        abs((diff * np.array(signs)).mean()) >= observed - 1e-12
        for signs in itertools.product([1, -1], repeat=len(diff))
    ]
    return sum(flips) / len(flips)


def clips(
    durations: list[float], system: str = "s1", spec: str = "openai:alloy", same: int = 0, f0: list[float] | None = None
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "system_id": system,
            "system_spec": spec,
            "item_id": [f"i{k}" for k in range(len(durations))],
            "audio_sha256": [("same" if k < same else f"{system}-{k}-{d}") for k, d in enumerate(durations)],
            "duration_s": durations,
            "f0_mean_hz": f0 if f0 is not None else np.nan,
            "speech_s": np.nan,
        }
    )


def test_a_voice_that_slowed_down_is_flagged_and_an_unchanged_one_is_not() -> None:
    rng = np.random.default_rng(3)
    reference = rng.uniform(1.0, 3.0, 8)
    noise = rng.normal(0, 0.05, 8)  # fresh clips of the same voice: a little longer or shorter each night
    slower = reference * 1.3  # the vendor's new voice speaks 30% slower
    unchanged = reference + noise
    f0_ref = rng.uniform(180, 220, 8)
    ref = pd.concat([clips(list(reference), f0=list(f0_ref)), clips(list(reference), "s2", "elevenlabs:Rachel")])
    tonight = pd.concat([clips(list(slower), f0=list(f0_ref - 40)), clips(list(unchanged), "s2", "elevenlabs:Rachel")])
    out = canary_changes(ref, tonight, n_resamples=200, n_permutations=10_000)
    assert list(out.columns) == CANARY_COLUMNS
    by = out.set_index(["system_id", "measure"])
    assert list(by.index) == [("s1", "duration_s"), ("s1", "f0_mean_hz"), ("s2", "duration_s")]  # no F0 for s2
    expected_p = [
        exact_sign_flip_p(slower - reference),
        exact_sign_flip_p(np.full(8, -40.0)),
        exact_sign_flip_p(unchanged - reference),
    ]
    assert expected_p[:2] == [2 / 256, 2 / 256]  # every item moved one way: 2 of the 256 flips are as extreme
    assert by["p_permutation"].tolist() == pytest.approx(expected_p)
    assert by["p_adjusted"].tolist() == pytest.approx(multipletests(expected_p, method="holm")[1].tolist())
    assert by["flagged"].tolist() == [True, True, False]
    assert by.loc[("s1", "duration_s"), "delta"] == pytest.approx((slower - reference).mean())
    assert by.loc[("s1", "duration_s"), "identical_clips"] == 0
    assert np.isnan(by.loc[("s1", "duration_s"), "ci_low"])  # 8 items: under MIN_INTERVAL_ITEMS, no interval


def test_reused_clips_are_identical_and_never_flagged() -> None:
    reference = clips([1.0, 2.0, 1.5], same=3)
    out = canary_changes(reference, reference.copy())
    assert out[["identical_clips", "delta", "p_permutation", "flagged"]].values.tolist() == [[3, 0.0, 1.0, False]]


class Remote:
    remote = True


class Local:
    pass


def test_only_remote_voices_speak_the_fresh_items_afresh() -> None:
    settings = Settings(fresh_items=["i1"])
    assert [
        reuses_audio(Remote(), "i1", settings),
        reuses_audio(Remote(), "i2", settings),
        reuses_audio(Local(), "i1", settings),
    ] == [False, True, True]
    assert not reuses_audio(Local(), "i1", Settings(reuse_audio=False))


def test_a_jitter_leaning_one_way_is_significant_but_too_small_to_flag() -> None:
    # every one of 8 fresh clips 1% shorter than the night before: the exact sign-flip p is 2/256 (as a 30% change
    # would give), but 1% is under canary_min_change (5% of the reference mean); at 0 it would be flagged
    reference = clips([1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4])
    tonight = clips([0.99 * d for d in [1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4]])
    small = canary_changes(reference, tonight, min_change=0.05).iloc[0]
    assert small["p_permutation"] == 2 / 256 and small["delta"] == pytest.approx(-0.017) and not small["flagged"]
    assert bool(canary_changes(reference, tonight, min_change=0.0).iloc[0]["flagged"])
    assert bool(
        canary_changes(
            reference, clips([1.06 * d for d in [1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4]]), min_change=0.05
        ).iloc[0]["flagged"]
    )
