"""Reporting: the per-(system, recogniser) summary, win-rate leaderboards and figures, instruction scores, drift,
and their rendering as Markdown (files and Prefect artifacts), HTML, PNG figures or a rich table (terminals).

One module per job:

    compute   the stage tables read once (RunTables), the summary and win-rates computed and stored
    format    how figures are written (pct, num, header, markdown_table, section, ...), shared by every renderer
    markdown  the report's head, cost, tables, listening tests, drift, generated-dataset statistics
    stages    sections over the clip stages: INSV-A screening, recognisers, paired, prosody, similarity, ...
    judges    sections over the judges: win-rates per judge, voice variance, agreement, position bias, InstructTTSEval
    figures   PNG figures (win-rate by depth)
    per_item  the tidy per-item table (runs/<run>/per_sentence.csv), every run's
    terminal  the summary table and leaderboard on a terminal, stored with the report
    html      the static web page (runs/<run>/html/, assets in tasks/report_html/)
    full      write_full_report: all of the above for a run, report.md written once

A metric's header carries its declared direction from `ttseval.metrics.registry` (↓ lower is better, ↑ higher is
better). Every name below is importable from `ttseval.tasks.report`, as before the split.
"""

from ttseval.metrics.agreement import judge_agreement
from ttseval.metrics.winrate import model_of_voices
from ttseval.tasks.report.compute import (
    LEVELS,
    ROLE_ORDER,
    RunTables,
    compute_rankings,
    compute_summary,
    compute_winrates,
    store_summary,
    store_winrates,
)
from ttseval.tasks.report.figures import depth_figure
from ttseval.tasks.report.format import ROLE_LABEL, markdown_table
from ttseval.tasks.report.full import stored_terminal_view, write_full_report
from ttseval.tasks.report.html import build_data, html_location, write_html_report
from ttseval.tasks.report.judges import (
    instruction_markdown,
    leaderboard_markdown,
    position_bias_markdown,
    voice_variance_markdown,
)
from ttseval.tasks.report.markdown import (
    canary_markdown,
    cost_markdown,
    dataset_statistics_markdown,
    drift_alert,
    drift_markdown,
    flagged_changes,
    instruction_statistics_markdown,
    listening_markdown,
    render_markdown,
    rows_for_display,
    tables_markdown,
    verdict_rows,
)
from ttseval.tasks.report.per_item import per_item_table, write_per_item
from ttseval.tasks.report.stages import (
    audio_checks_markdown,
    grouped_markdown,
    insv_markdown,
    paired_markdown,
    planning_markdown,
    predictors_markdown,
    prosody_markdown,
    recognisers_markdown,
    significance_markdown,
    similarity_markdown,
)
from ttseval.tasks.report.terminal import print_view

__all__ = [
    "LEVELS",
    "ROLE_LABEL",
    "ROLE_ORDER",
    "RunTables",
    "audio_checks_markdown",
    "build_data",
    "canary_markdown",
    "compute_rankings",
    "compute_summary",
    "compute_winrates",
    "cost_markdown",
    "dataset_statistics_markdown",
    "depth_figure",
    "drift_alert",
    "drift_markdown",
    "flagged_changes",
    "grouped_markdown",
    "html_location",
    "instruction_markdown",
    "instruction_statistics_markdown",
    "insv_markdown",
    "judge_agreement",
    "leaderboard_markdown",
    "listening_markdown",
    "markdown_table",
    "model_of_voices",
    "paired_markdown",
    "per_item_table",
    "planning_markdown",
    "position_bias_markdown",
    "predictors_markdown",
    "print_view",
    "prosody_markdown",
    "recognisers_markdown",
    "render_markdown",
    "rows_for_display",
    "significance_markdown",
    "similarity_markdown",
    "store_summary",
    "store_winrates",
    "stored_terminal_view",
    "tables_markdown",
    "verdict_rows",
    "voice_variance_markdown",
    "write_full_report",
    "write_html_report",
    "write_per_item",
]
