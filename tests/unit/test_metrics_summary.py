"""Tests for ttseval.metrics.summary on small hand-built frames with the numbers worked by hand.

Independent computation: the expectations in comments, derived by hand from the frames.
CIs are checked for determinism, containment and independence from other systems, and
against ttseval.metrics.bootstrap directly (itself checked against independent computations).
"""

import numpy as np
import pandas as pd
import pytest

from ttseval.metrics.summary import SUMMARY_COLUMNS, summarize_by, summarize_systems

NAN = float("nan")

ITEMS = pd.DataFrame(
    {
        "item_id": ["i1", "i2", "i3", "i4"],
        "language": ["ps", "fa", "ps", "fa"],
        "category": ["news", "news", "names", "names"],
        "depth": [1, 1, 2, 2],
        "text": ["t1", "t2", "t3", "t4"],
    }
)

# sysB appears first in synthesis, so it must come first in the output (not sorted).
# sysB: i1 ok (2.0 s, latency 1.0), i2 ok (3.0 s, 0.5), i3 failed, i4 ok (1.0 s, no latency)
# sysA: i1 ok (4.0 s, 2.0), i2 empty, i3 unsupported, i4 has no row at all (missing)
# sysC: every item failed
SYNTHESIS = pd.DataFrame(
    [
        ("i1", "sysB", "piper:joe", "ok", 2.0, 1.0),
        ("i2", "sysB", "piper:joe", "ok", 3.0, 0.5),
        ("i3", "sysB", "piper:joe", "failed", NAN, 0.1),
        ("i4", "sysB", "piper:joe", "ok", 1.0, NAN),
        ("i1", "sysA", "edge:gul", "ok", 4.0, 2.0),
        ("i2", "sysA", "edge:gul", "empty", NAN, 0.2),
        ("i3", "sysA", "edge:gul", "unsupported", NAN, NAN),
        ("i1", "sysC", "x:y", "failed", NAN, NAN),
        ("i2", "sysC", "x:y", "failed", NAN, NAN),
        ("i3", "sysC", "x:y", "failed", NAN, NAN),
        ("i4", "sysC", "x:y", "failed", NAN, NAN),
    ],
    columns=["item_id", "system_id", "system_spec", "status", "duration_s", "latency_s"],
)

# sysB: i1 1/4 words, 2/10 chars; i2 0/6, 0/20; i4 3/2 (insertions), 5/10. sysA i1 failed.
TRANSCRIPTS = pd.DataFrame(
    [
        ("i1", "sysB", "omni", "w:omni", "ok", 1, 4, 2, 10),
        ("i2", "sysB", "omni", "w:omni", "ok", 0, 6, 0, 20),
        ("i4", "sysB", "omni", "w:omni", "ok", 3, 2, 5, 10),
        ("i1", "sysA", "omni", "w:omni", "failed", None, None, None, None),
    ],
    columns=[
        "item_id",
        "system_id",
        "asr_id",
        "asr_spec",
        "status",
        "word_errors",
        "ref_words",
        "char_errors",
        "ref_chars",
    ],
).astype(dict.fromkeys(("word_errors", "ref_words", "char_errors", "ref_chars"), "Int64"))

# sysB: 4.0 and 3.0 ok, i4 failed. sysA: one score 2.5.
QUALITY = pd.DataFrame(
    [
        ("i1", "sysB", "utmos", "ok", 4.0),
        ("i2", "sysB", "utmos", "ok", 3.0),
        ("i4", "sysB", "utmos", "failed", NAN),
        ("i1", "sysA", "utmos", "ok", 2.5),
    ],
    columns=["item_id", "system_id", "quality_id", "status", "mos"],
)


def _summary(**kwargs):
    frames = {"items": ITEMS, "synthesis": SYNTHESIS, "transcripts": TRANSCRIPTS, "quality": QUALITY, **kwargs}
    return summarize_systems(frames["items"], frames["synthesis"], frames["transcripts"], frames["quality"], seed=0)


def test_columns_and_order():
    summary = _summary()
    assert tuple(summary.columns) == SUMMARY_COLUMNS
    assert list(summary["system_id"]) == ["sysB", "sysA", "sysC"]  # order of first appearance
    assert list(summary["system_spec"]) == ["piper:joe", "edge:gul", "x:y"]


def test_counts_and_completion_hand_worked():
    summary = _summary().set_index("system_id")
    counts = summary[["n_items", "n_ok", "n_failed", "n_empty", "n_unsupported", "n_missing", "n_transcribed", "n_mos"]]
    assert counts.loc["sysB"].tolist() == [4, 3, 1, 0, 0, 0, 3, 2]
    assert counts.loc["sysA"].tolist() == [4, 1, 0, 1, 1, 1, 0, 1]
    assert counts.loc["sysC"].tolist() == [4, 0, 4, 0, 0, 0, 0, 0]
    assert all(dtype == np.int64 for dtype in counts.dtypes)
    # completion = n_ok / n_items: 3/4, 1/4 (the missing i4 counts against sysA), 0/4.
    assert summary["completion_rate"].tolist() == [0.75, 0.25, 0.0]


def test_error_rates_hand_worked():
    row = _summary().set_index("system_id").loc["sysB"]
    assert row["wer"] == pytest.approx(4 / 12, abs=1e-12)  # (1+0+3) / (4+6+2)
    assert row["wer_utt_mean"] == pytest.approx((1 / 4 + 0 / 6 + 3 / 2) / 3, abs=1e-12)  # 0.58333
    assert row["cer"] == pytest.approx(7 / 40, abs=1e-12)  # (2+0+5) / (10+20+10)
    assert row["cer_utt_mean"] == pytest.approx((2 / 10 + 0 / 20 + 5 / 10) / 3, abs=1e-12)  # 0.23333
    assert row["perfect_pct"] == pytest.approx(100 / 3, abs=1e-12)  # only i2 has 0 word errors
    # 3 transcripts, under MIN_INTERVAL_ITEMS: the point estimates, no interval ("n too small")
    assert row[["wer_ci_low", "wer_ci_high", "cer_ci_low", "cer_ci_high"]].isna().all()


def test_mos_duration_and_rtf_hand_worked():
    summary = _summary().set_index("system_id")
    b, a = summary.loc["sysB"], summary.loc["sysA"]
    assert b["mos"] == pytest.approx(3.5, abs=1e-12)  # (4.0 + 3.0) / 2, failed row excluded
    assert a["mos"] == 2.5  # n=1
    assert b[["mos_ci_low", "mos_ci_high"]].isna().all() and a[["mos_ci_low", "mos_ci_high"]].isna().all()  # n < 10
    assert b["mean_duration_s"] == pytest.approx(2.0, abs=1e-12)  # (2 + 3 + 1) / 3 ok rows
    # rtf over ok rows with a latency: (1.0 + 0.5) / (2.0 + 3.0); i4 has none, i3 not ok.
    assert b["rtf"] == pytest.approx(0.3, abs=1e-12)
    assert a["mean_duration_s"] == 4.0
    assert a["rtf"] == pytest.approx(0.5, abs=1e-12)  # 2.0 / 4.0; the empty row is not ok


def test_no_data_is_nan_never_zero():
    summary = _summary().set_index("system_id")
    no_transcripts = ["wer", "wer_ci_low", "wer_ci_high", "wer_utt_mean", "cer", "cer_ci_low", "cer_ci_high",
                      "cer_utt_mean", "perfect_pct"]  # fmt: skip
    assert summary.loc["sysA", no_transcripts].isna().all()  # its only transcript failed
    assert (
        summary.loc["sysC", [*no_transcripts, "mos", "mos_ci_low", "mos_ci_high", "mean_duration_s", "rtf"]]
        .isna()
        .all()
    )
    empty_quality = QUALITY.iloc[0:0]
    assert _summary(quality=empty_quality)["mos"].isna().all()


def _twelve(system_id: str, order: list[int]) -> tuple[pd.DataFrame, ...]:
    """Items q0..q11 and one system's ok clips, transcripts (word errors k % 4 of 5 + k % 3 words, char errors
    k % 5 of 20) and MOS (3 + k % 4 / 2), rows in `order`."""
    items = pd.DataFrame({"item_id": [f"q{k}" for k in range(12)], "language": "ps", "category": "c", "depth": 0,
                          "text": "t"})  # fmt: skip
    synthesis = pd.DataFrame(
        [(f"q{k}", system_id, "x:y", "ok", 1.0, NAN) for k in order],
        columns=["item_id", "system_id", "system_spec", "status", "duration_s", "latency_s"],
    )
    transcripts = pd.DataFrame(
        [(f"q{k}", system_id, "omni", "w:omni", "ok", k % 4, 5 + k % 3, k % 5, 20) for k in order],
        columns=TRANSCRIPTS.columns,
    ).astype(dict.fromkeys(("word_errors", "ref_words", "char_errors", "ref_chars"), "Int64"))
    quality = pd.DataFrame(
        [(f"q{k}", system_id, "utmos", "ok", 3 + (k % 4) / 2) for k in order], columns=QUALITY.columns
    )
    return items, synthesis, transcripts, quality


CI_COLUMNS = ["wer_ci_low", "wer_ci_high", "cer_ci_low", "cer_ci_high", "mos_ci_low", "mos_ci_high"]


def test_the_same_clips_give_the_same_interval_under_any_name_in_any_order():
    """Two runs over the same clips print the same intervals: the interval is seeded from the seed and the data,
    not from the system's name or the order the rows were read in; another seed moves only the intervals."""
    first = summarize_systems(*_twelve("sysB", list(range(12))), seed=0)
    renamed = summarize_systems(*_twelve("files:/elsewhere/cut", [7, 3, 11, 0, 5, 9, 1, 10, 2, 8, 4, 6]), seed=0)
    assert first[CI_COLUMNS].notna().all(axis=None)  # 12 items: intervals given
    assert renamed[CI_COLUMNS].iloc[0].tolist() == first[CI_COLUMNS].iloc[0].tolist()
    other_seed = summarize_systems(*_twelve("sysB", list(range(12))), seed=1)
    assert other_seed[CI_COLUMNS].iloc[0].tolist() != first[CI_COLUMNS].iloc[0].tolist()
    point_cols = ["wer", "cer", "wer_utt_mean", "perfect_pct", "mos"]
    pd.testing.assert_frame_equal(other_seed[point_cols], first[point_cols])


def test_ci_is_the_bootstrap_of_the_systems_utterances():
    # Independent of the summary plumbing: calling bootstrap_ratio_ci / bootstrap_mean_ci on the system's counts
    # listed by hand (in another order) with the same int seed gives the very same interval, so the summary feeds
    # the right rows and columns to the bootstrap.
    from ttseval.metrics.bootstrap import bootstrap_mean_ci, bootstrap_ratio_ci

    row = summarize_systems(*_twelve("sysB", list(range(12))), seed=0).iloc[0]
    ks = list(range(11, -1, -1))
    wer = bootstrap_ratio_ci([k % 4 for k in ks], [5 + k % 3 for k in ks], seed=0)
    cer = bootstrap_ratio_ci([k % 5 for k in ks], [20] * 12, seed=0)
    mos = bootstrap_mean_ci([3 + (k % 4) / 2 for k in ks], seed=0)
    assert (row["wer_ci_low"], row["wer_ci_high"]) == (wer.low, wer.high)
    assert (row["cer_ci_low"], row["cer_ci_high"]) == (cer.low, cer.high)
    assert (row["mos_ci_low"], row["mos_ci_high"]) == (mos.low, mos.high)


def test_summarize_by_category_hand_worked():
    table = summarize_by(ITEMS, SYNTHESIS, TRANSCRIPTS, by="category")
    assert list(table.columns) == [
        "system_id",
        "asr_id",
        "category",
        "n_items",
        "n_ok",
        "completion_rate",
        "n_transcribed",
        "wer",
        "cer",
    ]
    # sysC has no transcript at all: its rows have a null asr_id.
    assert list(zip(table.system_id, table.asr_id.fillna("-"), table.category)) == [
        ("sysB", "omni", "news"), ("sysB", "omni", "names"), ("sysA", "omni", "news"), ("sysA", "omni", "names"),
        ("sysC", "-", "news"), ("sysC", "-", "names"),
    ]  # fmt: skip
    # sysB news = i1, i2: both ok; wer (1+0)/(4+6) = 0.1, cer (2+0)/(10+20) = 1/15.
    # sysB names = i3 failed, i4 ok: completion 0.5; wer 3/2, cer 5/10.
    # sysA news: i1 ok (1/2) but its transcript failed -> NaN; names: nothing ok -> 0, NaN.
    assert table["n_items"].tolist() == [2, 2, 2, 2, 2, 2]
    assert table["n_ok"].tolist() == [2, 1, 1, 0, 0, 0]
    assert table["completion_rate"].tolist() == [1.0, 0.5, 0.5, 0.0, 0.0, 0.0]
    assert table["n_transcribed"].tolist() == [2, 1, 0, 0, 0, 0]
    np.testing.assert_allclose(table["wer"], [0.1, 1.5, NAN, NAN, NAN, NAN], atol=1e-12)
    np.testing.assert_allclose(table["cer"], [1 / 15, 0.5, NAN, NAN, NAN, NAN], atol=1e-12)


def test_summarize_by_language_hand_worked():
    table = summarize_by(ITEMS, SYNTHESIS, TRANSCRIPTS, by="language")
    b = table[table.system_id == "sysB"].set_index("language")
    # ps = i1 (ok), i3 (failed): completion 0.5, wer 1/4, cer 2/10.
    # fa = i2, i4 (both ok): completion 1.0, wer (0+3)/(6+2), cer (0+5)/(20+10).
    assert b.loc["ps", ["n_ok", "completion_rate"]].tolist() == [1, 0.5]
    assert b.loc["fa", ["n_ok", "completion_rate"]].tolist() == [2, 1.0]
    assert b.loc["ps", "wer"] == pytest.approx(0.25, abs=1e-12)
    assert b.loc["fa", "wer"] == pytest.approx(3 / 8, abs=1e-12)
    assert b.loc["ps", "cer"] == pytest.approx(0.2, abs=1e-12)
    assert b.loc["fa", "cer"] == pytest.approx(1 / 6, abs=1e-12)


def test_summarize_by_rejects_unknown_column():
    with pytest.raises(ValueError, match="by must be one of"):
        summarize_by(ITEMS, SYNTHESIS, TRANSCRIPTS, by="text")


def _with_row(frame, row):
    return pd.concat([frame, pd.DataFrame([row], columns=frame.columns)], ignore_index=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # What the summary cannot compute at all. Rules of the stored tables (status values, duplicate keys, counts
        # of ok rows, durations) are ttseval.core.validation's, tested in tests/unit/test_validation.py.
        ({"transcripts": _with_row(TRANSCRIPTS.iloc[:3], ("i1", "sysA", "omni", "w:omni", "ok", None, 4, 1, 9))},
         "errors.*must be finite"),
        ({"transcripts": _with_row(TRANSCRIPTS.iloc[:3], ("i1", "sysA", "omni", "w:omni", "ok", 0, 0, 0, 0))},
         "totals sum to 0|= 0"),
        ({"quality": _with_row(QUALITY, ("i2", "sysB", "dnsmos", "ok", 3.0))},
         "several quality_id values.*item_id='i2', system_id='sysB'"),
        ({"quality": _with_row(QUALITY, ("i2", "sysA", "utmos", "ok", 3.0)).drop(columns="mos")}, "lacks column"),
        ({"transcripts": TRANSCRIPTS.drop(columns="asr_id")}, "transcripts lacks column"),
        ({"items": ITEMS.iloc[0:0]}, "items is empty"),
    ],
)  # fmt: skip
def test_bad_input_raises(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _summary(**kwargs)


def test_bad_seed_raises():
    with pytest.raises(ValueError, match="seed"):
        summarize_systems(ITEMS, SYNTHESIS, TRANSCRIPTS, QUALITY, seed=-1)


def test_two_recognisers_on_one_clip_give_one_row_each_never_pooled():
    # sysB's clips transcribed again by a second recogniser "tiny" (the asr setting changed): i1 0/4 words,
    # 1/10 chars; i2 2/6, 4/20; i4 failed. "omni" keeps its rows: (1+0+3)/(4+6+2) = 4/12, CER 7/40.
    tiny = pd.DataFrame(
        [
            ("i1", "sysB", "tiny", "w:tiny", "ok", 0, 4, 1, 10),
            ("i2", "sysB", "tiny", "w:tiny", "ok", 2, 6, 4, 20),
            ("i4", "sysB", "tiny", "w:tiny", "failed", None, None, None, None),
        ],
        columns=TRANSCRIPTS.columns,
    ).astype(TRANSCRIPTS.dtypes.to_dict())
    summary = _summary(transcripts=pd.concat([TRANSCRIPTS, tiny], ignore_index=True))
    assert list(zip(summary["system_id"], summary["asr_id"].fillna("-"))) == [
        ("sysB", "omni"),
        ("sysB", "tiny"),
        ("sysA", "omni"),
        ("sysC", "-"),
    ]  # sysC: no transcript, null asr_id
    rows = summary.set_index(["system_id", "asr_id"])
    assert rows.loc[("sysB", "tiny"), "asr_spec"] == "w:tiny"
    assert rows.loc[("sysB", "omni"), "wer"] == pytest.approx(4 / 12, abs=1e-12)
    assert rows.loc[("sysB", "tiny"), "wer"] == pytest.approx(2 / 10, abs=1e-12)  # (0+2) / (4+6)
    assert rows.loc[("sysB", "omni"), "cer"] == pytest.approx(7 / 40, abs=1e-12)
    assert rows.loc[("sysB", "tiny"), "cer"] == pytest.approx(5 / 30, abs=1e-12)  # (1+4) / (10+20)
    assert rows.loc[("sysB", "tiny"), "perfect_pct"] == pytest.approx(50.0)  # i1 only, of 2
    assert rows.loc[("sysB", "omni"), "n_transcribed"] == 3 and rows.loc[("sysB", "tiny"), "n_transcribed"] == 2
    # the system's own figures repeat on each of its rows
    for column in ("completion_rate", "n_ok", "mos", "rtf"):
        assert rows.loc[("sysB", "omni"), column] == rows.loc[("sysB", "tiny"), column]


def test_recognisers_routed_by_language_have_a_row_each():
    # i2 is transcribed by another model than i1 and i4 (routing by language): two rows, each its own pool.
    routed = TRANSCRIPTS.assign(
        asr_id=["omni", "whisper", "omni", "omni"], asr_spec=["w:omni", "w:whisper", "w:omni", "w:omni"]
    )
    rows = _summary(transcripts=routed).set_index(["system_id", "asr_id"])
    assert rows.loc[("sysB", "omni"), "wer"] == pytest.approx(4 / 6, abs=1e-12)  # i1, i4: (1+3) / (4+2)
    assert rows.loc[("sysB", "whisper"), "wer"] == pytest.approx(0.0, abs=1e-12)  # i2: 0 / 6


def test_transcripts_of_clips_without_ok_synthesis_are_not_counted():
    # sysB's i3 failed synthesis; a transcript for it (of audio this summary does not know) must not move WER.
    stray = _with_row(TRANSCRIPTS, ("i3", "sysB", "omni", "w:omni", "ok", 9, 3, 9, 9))
    assert _summary(transcripts=stray).set_index("system_id").loc["sysB", "wer"] == pytest.approx(4 / 12, abs=1e-12)
