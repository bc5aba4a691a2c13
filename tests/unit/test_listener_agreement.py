"""Each automatic metric's agreement with listeners (ttseval.metrics.agreement.listener_agreement) and its report
section. Independent computations: scipy's spearmanr, kendalltau and pearsonr on the system means and clips taken
here with pandas, the pairwise accuracy counted by hand in the comments, the bootstrap by its documented scheme."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from ttseval.metrics.agreement import listener_agreement

SYSTEMS = ["a", "b", "c", "d", "e"]


def _clips(n_items: int = 12) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Listeners rate a > b > c > d > e by 10 points a step (+ item noise); the metric (a MOS) orders them a, c, b,
    d, e: one pair of ten swapped."""
    rng = np.random.default_rng(4)
    quality = {"a": 4.4, "b": 3.6, "c": 3.8, "d": 3.0, "e": 2.2}
    listened = {"a": 80, "b": 70, "c": 60, "d": 50, "e": 40}
    rows = [
        (f"i{k}", s, quality[s] + rng.normal(0, 0.2), listened[s] + rng.normal(0, 5))
        for k in range(n_items)
        for s in SYSTEMS
    ]
    frame = pd.DataFrame(rows, columns=["item_id", "system_id", "value", "score"])
    return frame[["item_id", "system_id", "value"]], frame[["item_id", "system_id", "score"]]


def _write_ratings(store, kind: str, scores: list[tuple[str, str, float]]) -> None:
    """One rater's ratings of test t1 (kind mushra or mos): (item_id, system_id, score) each."""
    from datetime import UTC, datetime

    from ttseval.core.schemas import table_from_rows

    now = datetime(2026, 11, 28, tzinfo=UTC)
    rows = [
        {"test_id": "t1", "kind": kind, "rater_id": "r1", "session": "s", "trial_id": f"{i}-{s}", "item_id": i,
         "system_id": s, "role": "system", "score": float(x), "created_at": now}
        for i, s, x in scores
    ]  # fmt: skip
    store.write_part("r", "ratings", table_from_rows("ratings", rows))


def test_the_figures_equal_scipy_on_the_system_means_and_the_clips() -> None:
    metric, listeners = _clips()
    got = listener_agreement(metric, listeners, higher_is_better=True, n_resamples=200, seed=3)
    assert got is not None
    means = metric.groupby("system_id")["value"].mean(), listeners.groupby("system_id")["score"].mean()
    assert got["spearman"] == pytest.approx(scipy.stats.spearmanr(*means).statistic)
    assert got["kendall"] == pytest.approx(scipy.stats.kendalltau(*means).statistic)
    both = metric.merge(listeners)
    assert got["utterance_pearson"] == pytest.approx(scipy.stats.pearsonr(both["value"], both["score"]).statistic)
    # 10 pairs, the listeners order every one; the metric swaps b and c only: 9 of 10
    assert (got["pairwise_accuracy"], got["n_pairs"]) == (0.9, 10)
    assert got["spearman"] == pytest.approx(0.9) and got["kendall"] == pytest.approx(0.8)  # one adjacent swap of 5
    low, high = got["spearman_ci"]
    assert low <= got["spearman"] <= high and (got["n_systems"], got["n_items"]) == (5, 12)
    # the documented scheme: items resampled with rng = default_rng(seed), both means again, 2.5/97.5 percentiles
    v = metric.pivot(index="item_id", columns="system_id", values="value")[SYSTEMS].to_numpy()
    s = listeners.pivot(index="item_id", columns="system_id", values="score")[SYSTEMS].to_numpy()
    rng = np.random.default_rng(3)
    rhos = []
    for _ in range(200):
        pick = rng.integers(0, 12, 12)
        rhos.append(scipy.stats.spearmanr(v[pick].mean(axis=0), s[pick].mean(axis=0)).statistic)
    assert (low, high) == pytest.approx(tuple(np.percentile(rhos, [2.5, 97.5])))


def test_a_lower_is_better_metric_is_negated_and_small_runs_say_so() -> None:
    metric, listeners = _clips()
    wer = metric.assign(value=-metric["value"])  # a WER-like metric: lower where listeners rate higher
    got = listener_agreement(wer, listeners, higher_is_better=False, n_resamples=50, seed=0)
    assert got is not None and got["spearman"] == pytest.approx(0.9) and got["pairwise_accuracy"] == 0.9
    assert listener_agreement(metric[metric["system_id"].isin(["a", "b"])], listeners, higher_is_better=True,
                              n_resamples=10, seed=0) is None  # fmt: skip
    few = listener_agreement(*_clips(6), higher_is_better=True, n_resamples=50, seed=0)
    assert few is not None and np.isnan(few["spearman_ci"]).all() and not np.isnan(few["spearman"])  # 6 items


def test_the_report_section_scores_every_predictor_against_the_mushra_test(tmp_path) -> None:

    from ttseval.core.config import Settings
    from ttseval.core.store import ArtifactStore
    from ttseval.tasks.report.compute import RunTables
    from ttseval.tasks.report.stages import listener_agreement_markdown

    metric, listeners = _clips()
    store = ArtifactStore(str(tmp_path))
    _write_ratings(store, "mushra", list(listeners.itertuples(index=False)))
    quality = metric.rename(columns={"value": "mos"}).assign(quality_spec="dnsmos", status="ok")
    empty = pd.DataFrame()
    tables = RunTables(empty, empty, empty, empty, SYSTEMS, quality, empty)
    section = listener_agreement_markdown(store, "r", Settings(store=str(tmp_path), bootstrap_resamples=200), tables)
    assert "## Agreement with listeners" in section
    [row] = [line for line in section.splitlines() if line.startswith("| t1 |")]
    assert row.startswith("| t1 | MOS (dnsmos) | 5 | 12 | 0.90 [") and row.endswith("| 90.0% of 10 |")


def test_human_alignment_without_a_csv_prints_the_run_s_agreement_with_its_listeners(tmp_path, capsys) -> None:
    """`ttseval human-alignment --run-id R` (no --human): the report's section for the stored run, or a line saying
    the run has no listening test to compare with. The run is tests/unit/test_report.py's judged run (3 systems,
    20 items, every clip MOS 3.0: a constant metric has no rank correlation, shown as '–')."""

    from tests.unit.test_report import _judged_run
    from ttseval.cli import main

    store, _ = _judged_run(tmp_path, {"s1": ["candidate"] * 20, "s2": ["baseline"] * 20}, ["q"] * 20, [0] * 20)
    args = ["human-alignment", "--run-id", "r", "--store", store.display()]
    assert main(args) == 0
    assert "has no MUSHRA or MOS ratings" in capsys.readouterr().out
    _write_ratings(
        store, "mos", [(f"i{k:02d}", sys, score) for k in range(20) for sys, score in (("s0", 3), ("s1", 4), ("s2", 2))]
    )
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Agreement with listeners") and "| t1 | MOS (dnsmos) | 3 | 20 | – |" in out


def test_a_judge_is_scored_on_its_verdicts_against_the_baseline_only(tmp_path) -> None:
    """Under judge_pairs all, a judge also compares candidates with each other (vs_baseline false); the section's
    'score against the baseline' counts only the verdicts against the baseline. Here a beats the baseline z on every
    item, b ties, c loses, and listeners order a > b > c: rho 1 and every pair ordered alike. c beating a in the
    other pairs would make c's mean 0.5, level with b's, if it were counted."""
    from datetime import UTC, datetime

    from ttseval.core.config import Settings
    from ttseval.core.schemas import table_from_rows
    from ttseval.core.store import ArtifactStore
    from ttseval.tasks.report.compute import RunTables
    from ttseval.tasks.report.stages import listener_agreement_markdown

    store = ArtifactStore(str(tmp_path))
    now = datetime(2026, 11, 28, tzinfo=UTC)
    verdicts = [(s, "z", w, True) for s, w in (("a", "candidate"), ("b", "tie"), ("c", "baseline"))]
    verdicts.append(("c", "a", "candidate", False))  # another pair: c over a
    store.write_part(
        "r",
        "judgments",
        table_from_rows(
            "judgments",
            [
                {"item_id": f"i{k}", "system_id": s, "baseline_id": b, "judge_id": "j", "judge_spec": "objective",
                 "vs_baseline": vs, "candidate_first": True, "winner": w, "parse_ok": True, "status": "ok",
                 "created_at": now}
                for k in range(12)
                for s, b, w, vs in verdicts
            ],
        ),
    )  # fmt: skip
    _write_ratings(store, "mos", [(f"i{k}", s, x) for k in range(12) for s, x in (("a", 4.5), ("b", 3.0), ("c", 1.5))])
    empty = pd.DataFrame()
    tables = RunTables(empty, empty, empty, empty, ["a", "b", "c"], empty, empty)
    section = listener_agreement_markdown(store, "r", Settings(store=str(tmp_path), bootstrap_resamples=50), tables)
    [row] = [line for line in section.splitlines() if line.startswith("| t1 | judge objective")]
    assert "| 3 | 12 | 1.00 " in row and row.endswith("| 100.0% of 3 |")
