"""Nightly runs whose drift is really flagged, and which earlier run each night compares with.

One recorded system (`files:rec:dir=<folder>`, nothing cached between nights since its clips are looked up by item
id) is run four nights over eight English items through the real `ttseval nightly` command:

1. the clips are the instant voice's reading of each item (tests/support/instant.py; the runs use its recogniser
   and MOS predictor, which hear a cut clip lose exactly the words it cut: what is tested is the drift statistics
   and the policy, not what a model hears);
2. the same clips cut to their first 40% of samples (a regression: every sentence loses its end) -> flagged,
   exit 3 under fail_on_regression;
3. the clips unchanged since night 2 -> compared with night 2 (the latest earlier night), nothing flagged;
4. the same clips, `--previous-run` naming night 1 -> compared with night 1 (not night 3), flagged again.

The drift table's WER, CER and MOS rows are checked against an independent computation from the stored transcripts
and quality tables: the exact paired permutation test enumerated by hand (itertools, not scipy: every one of the 2^8
swaps of an item's two nights with the pooled-ratio difference as statistic for WER and CER, every sign flip of the
per-item differences for MOS), and Holm's adjustment by statsmodels' multipletests over the drift report's family.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from statsmodels.stats.multitest import multipletests

from tests.support import instant
from tests.support.harness import demo_items, run_cli

ITEMS = ("emo-b-d0", "par-a-d0", "for-a-d0", "for-b-d0", "syn-b-d0", "pro-b-d0", "que-a-d0", "que-b-d0")
NIGHTS = [f"nightly-2026112{d}T020000Z" for d in (1, 2, 3, 4)]
KEEP = 0.4  # night 2 keeps this share of each clip's samples


def exact_paired_p(errors_a: np.ndarray, totals_a: np.ndarray, errors_b: np.ndarray, totals_b: np.ndarray) -> float:
    """Two-sided exact p of the pooled-ratio difference B - A: every way of swapping items' two sides, counted by
    hand."""
    observed = errors_b.sum() / totals_b.sum() - errors_a.sum() / totals_a.sum()
    hits = total = 0
    for swap in itertools.product((False, True), repeat=len(errors_a)):
        s = np.array(swap)
        ea, ta = np.where(s, errors_b, errors_a), np.where(s, totals_b, totals_a)
        eb, tb = np.where(s, errors_a, errors_b), np.where(s, totals_a, totals_b)
        stat = eb.sum() / tb.sum() - ea.sum() / ta.sum()
        hits += abs(stat) >= abs(observed) - 1e-12
        total += 1
    return hits / total


def exact_sign_flip_p(diff: np.ndarray) -> float:
    """Two-sided exact p of the mean per-item difference: every sign flip of the items' differences, by hand."""
    observed = diff.mean()
    flips = [np.array(s) * diff for s in itertools.product((1, -1), repeat=len(diff))]
    return sum(abs(f.mean()) >= abs(observed) - 1e-12 for f in flips) / len(flips)


@pytest.fixture(scope="module")
def nights(shared_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("nightly-drift")
    dataset = root / "items.jsonl"
    rows = demo_items(dataset, ITEMS)
    clips = root / "clips"
    clips.mkdir()
    for r in rows:
        (clips / f"{r['item_id']}.wav").write_bytes(instant.speak(r["text"]).to_wav_bytes())
    store = root / "store"
    env = shared_env | instant.ENV | {"TTSEVAL_FAIL_ON_REGRESSION": "true", "TTSEVAL_SIMILARITY": "[]"}
    args = [
        "nightly",
        "--dataset",
        str(dataset),
        "--systems",
        f"files:rec:dir={clips}",
        "--judges",
        "",
        "--store",
        str(store),
    ]
    out = {"store": store, "clips": clips}
    out[1] = run_cli([*args, "--run-id", NIGHTS[0]], env, cwd=root)
    assert out[1].returncode == 0, out[1].stderr[-3000:]
    for item in ITEMS:  # the recorded system regresses: every clip loses its last 60%
        audio, rate = sf.read(clips / f"{item}.wav")
        sf.write(clips / f"{item}.wav", audio[: int(len(audio) * KEEP)], rate)
    out[2] = run_cli([*args, "--run-id", NIGHTS[1]], env, cwd=root)
    out[3] = run_cli([*args, "--run-id", NIGHTS[2]], env, cwd=root)
    out[4] = run_cli([*args, "--run-id", NIGHTS[3], "--previous-run", NIGHTS[0]], env, cwd=root)
    return out


def read_drift(store: Path, night: int) -> tuple[dict, pd.DataFrame]:
    run = store / "runs" / NIGHTS[night - 1]
    return json.loads((run / "nightly.json").read_text()), pd.read_json(run / "drift.json")


def transcripts(store: Path, night: int) -> pd.DataFrame:
    t = pd.read_parquet(store / "runs" / NIGHTS[night - 1] / "transcripts")
    return t[t["status"] == "ok"].set_index("item_id").sort_index()


def mos(store: Path, night: int) -> pd.Series:
    q = pd.read_parquet(store / "runs" / NIGHTS[night - 1] / "quality")
    return q[q["status"] == "ok"].set_index("item_id")["mos"].sort_index()


def test_first_night_has_nothing_to_compare(nights: dict) -> None:
    assert "previous night none" in nights[1].stdout
    summary = json.loads((nights["store"] / "runs" / NIGHTS[0] / "nightly.json").read_text())
    assert summary["previous_run"] is None and summary["flagged"] is None
    assert not (nights["store"] / "runs" / NIGHTS[0] / "drift.json").exists()


def test_cut_clips_are_flagged_worse_with_exit_3(nights: dict) -> None:
    second = nights[2]
    assert second.returncode == 3, second.stderr[-3000:]
    summary, drift = read_drift(nights["store"], 2)
    assert summary["previous_run"] == NIGHTS[0]
    a, b = transcripts(nights["store"], 1), transcripts(nights["store"], 2)
    assert list(a.index) == list(b.index) == sorted(ITEMS)
    # every item lost words: the regression is real in the stored rows, not only in the summary
    assert (b["word_errors"] > a["word_errors"]).all(), pd.concat([a["word_errors"], b["word_errors"]], axis=1)
    paired = drift[drift["test"] == "paired"].set_index("metric")
    assert set(paired.index) == {"wer", "cer", "mos"}
    for metric, errors, totals in (("wer", "word_errors", "ref_words"), ("cer", "char_errors", "ref_chars")):
        row = paired.loc[metric]
        assert row["previous"] == pytest.approx(a[errors].sum() / a[totals].sum(), abs=1e-9)
        assert row["current"] == pytest.approx(b[errors].sum() / b[totals].sum(), abs=1e-9)
        p = exact_paired_p(*(x[c].to_numpy(float) for x in (a, b) for c in (errors, totals)))
        assert row["p_value"] == pytest.approx(p, abs=1e-9)
        assert row["direction"] == "worse" and bool(row["flagged"])
    before, after = mos(nights["store"], 1), mos(nights["store"], 2)
    assert paired.loc["mos", "p_value"] == pytest.approx(exact_sign_flip_p((after - before).to_numpy()), abs=1e-9)
    assert paired.loc["mos", "delta"] == pytest.approx((after - before).mean(), abs=1e-9)
    # every WER item moved the same way: only the identity and the full swap reach the observed difference
    assert paired.loc["wer", "p_value"] == pytest.approx(2 / 2 ** len(ITEMS))
    # Holm over the report's whole family (statsmodels), as the alpha setting (0.05) decides
    family = drift.dropna(subset=["p_value"])
    reject, adjusted, _, _ = multipletests(family["p_value"].to_numpy(float), alpha=0.05, method="holm")
    assert family["p_adjusted"].to_numpy(float) == pytest.approx(adjusted, abs=1e-9)
    assert list(family["flagged"].astype(bool)) == list(reject)
    assert summary["flagged"] == int(drift["flagged"].astype(bool).sum()) >= 2
    # the command says so: the drift table on stdout, each regression on stderr with the policy's exit code
    assert f"flagged changes: {summary['flagged']}" in second.stdout
    assert f"{summary['flagged']} flagged change(s)" in second.stdout
    wer = paired.loc["wer"]
    assert (
        f"regression flagged: files:rec (instant-asr) wer "
        f"{wer['previous']:.4g} -> {wer['current']:.4g}, worse than the previous run"
    ) in second.stderr
    assert "(exit 3)" in second.stderr


def test_unchanged_night_compares_with_the_latest_night_and_flags_nothing(nights: dict) -> None:
    third = nights[3]
    assert third.returncode == 0, third.stderr[-3000:]
    summary, drift = read_drift(nights["store"], 3)
    # the flow picked night 2, the latest earlier nightly run, not night 1
    assert summary["previous_run"] == NIGHTS[1]
    assert f"previous night {NIGHTS[1]}" in third.stdout
    assert f"# Drift: `{NIGHTS[2]}` against `{NIGHTS[1]}`" in third.stdout
    pd.testing.assert_series_equal(
        transcripts(nights["store"], 3)["word_errors"], transcripts(nights["store"], 2)["word_errors"]
    )
    assert (drift["delta"].abs() < 1e-12).all() and not drift["flagged"].astype(bool).any()
    assert summary["flagged"] == 0 and "threshold breached" not in third.stderr


def test_explicit_previous_run_is_the_one_compared(nights: dict) -> None:
    fourth = nights[4]
    assert fourth.returncode == 3, fourth.stderr[-3000:]
    summary, drift = read_drift(nights["store"], 4)
    assert summary["previous_run"] == NIGHTS[0]  # the latest earlier night would be night 3
    assert f"# Drift: `{NIGHTS[3]}` against `{NIGHTS[0]}`" in fourth.stdout
    wer = drift[drift["metric"] == "wer"].iloc[0]
    a = transcripts(nights["store"], 1)
    assert wer["previous"] == pytest.approx(a["word_errors"].sum() / a["ref_words"].sum(), abs=1e-9)
    assert bool(wer["flagged"]) and wer["direction"] == "worse"
