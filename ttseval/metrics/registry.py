"""Direction and aggregation of every metric ttseval reports, declared once.

Each entry is keyed by the column name the metric has in the output tables (``report``,
``winrates``, the instruction scores, drift). Summaries name their CI columns from it, drift
reads the direction to call a change better or worse, and reports mark each metric's header
with it (``↓`` lower is better, ``↑`` higher is better). Nothing else declares a direction.

Pure data and one pure function; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["METRICS", "MetricInfo", "arrow", "change", "ci_columns"]


@dataclass(frozen=True)
class MetricInfo:
    """How to read and aggregate a metric.

    Attributes:
        higher_is_better: Direction of the metric.
        aggregate: How per-utterance (or per-item) values are combined into the reported figure.
        ci: The (low, high) CI columns beside the metric in its table, or None when it has no CI.
    """

    higher_is_better: bool
    aggregate: str
    ci: tuple[str, str] | None = None


def _ci(name: str) -> tuple[str, str]:
    return (f"{name}_ci_low", f"{name}_ci_high")


METRICS: Mapping[str, MetricInfo] = MappingProxyType(
    {
        # per (system, recogniser): ttseval.metrics.summary
        "completion_rate": MetricInfo(True, "n_ok / n_items: clips synthesized over items in the run"),
        "wer": MetricInfo(False, "corpus: sum of word errors / sum of reference words", _ci("wer")),
        "wer_utt_mean": MetricInfo(False, "mean over utterances of word errors / ref words"),
        "cer": MetricInfo(
            False, "corpus: sum of char errors / sum of reference chars (spaces count as chars)", _ci("cer")
        ),
        "cer_utt_mean": MetricInfo(False, "mean over utterances of char errors / ref chars"),
        "perfect_pct": MetricInfo(True, "100 * share of transcripts with 0 word errors"),
        "mos": MetricInfo(True, "mean of per-utterance predicted MOS over ok quality rows", _ci("mos")),
        "rtf": MetricInfo(False, "sum latency_s / sum duration_s over ok rows with a latency"),
        # per (system, speaker encoder): ttseval.metrics.similarity
        "similarity": MetricInfo(True, "mean cosine similarity of each clip's speaker embedding to its reference"),
        # per remote system and night, over the requests made that night: ttseval.metrics.trends
        "latency_s": MetricInfo(False, "mean wall time of a synthesize call over the night's ok fresh clips"),
        "first_byte_s": MetricInfo(False, "mean time to the response's first byte over the night's ok fresh clips"),
        "error_rate": MetricInfo(False, "failed requests / requests made (retries count), over the night's calls"),
        "cost_usd": MetricInfo(False, "USD the night's synthesis calls cost (fresh clips; reused audio is free)"),
        # per (judge, candidate, baseline[, group]): ttseval.metrics.winrate
        "win_rate": MetricInfo(
            True,
            "(wins + 0.5 * ties) / n_judged over status-ok, parsed judgments; 0.5 = parity with baseline",
            _ci("win_rate"),
        ),
        # per (judge, system, language, task): ttseval.metrics.instruct
        "score": MetricInfo(
            True, "per task: n_true / (n_true + n_false); macro: unweighted mean of the APS, DSD, RP scores"
        ),
        "score_all_items": MetricInfo(
            True, "per task: n_true / n (undecidable and unparsed count as not followed); macro: mean of tasks"
        ),
        # between judges, or a judge and people: ttseval.metrics.agreement
        "kendalls_w": MetricInfo(True, "concordance of judges' system rankings, 0-1"),
        "spearman": MetricInfo(True, "rank correlation of system scores, -1 to 1"),
        "krippendorff_alpha": MetricInfo(True, "1 - observed / expected disagreement"),
        "raw_agreement": MetricInfo(True, "share of matched items with equal labels"),
    }
)


def change(metric: str, previous: float, current: float) -> str:
    """'better', 'worse' or 'same' for a move of `metric` from `previous` to `current`, by its declared direction.

    A missing value on either side (None or NaN) is 'same': there is no change to call.

    Raises:
        KeyError: `metric` is not declared in ``METRICS``.
    """
    info = METRICS[metric]
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (previous, current)):
        return "same"
    if current == previous:
        return "same"
    return "better" if (current > previous) == info.higher_is_better else "worse"


def ci_columns(metric: str) -> tuple[str, str]:
    """The (low, high) CI columns of `metric`.

    Raises:
        KeyError: `metric` is not declared in ``METRICS``.
        ValueError: `metric` is declared without a CI.
    """
    ci = METRICS[metric].ci
    if ci is None:
        raise ValueError(f"metric {metric!r} has no CI columns")
    return ci


def arrow(metric: str) -> str:
    """'↓' when lower is better, '↑' when higher is better, '' for a column that is not a declared metric."""
    info = METRICS.get(metric)
    if info is None:
        return ""
    return "↑" if info.higher_is_better else "↓"
