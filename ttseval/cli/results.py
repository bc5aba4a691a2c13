"""Results of stored runs: report, export, leaderboard, trends; the report and exit-code policy a run ends with."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ttseval.cli.common import EXIT_BREACHED, EXIT_DONE, Subcommands, add_store, csv_list, run_id_arg

if TYPE_CHECKING:
    import pandas as pd

    from ttseval.core.config import Settings


def policy_exit(settings: Settings, run_id: str, regressions: pd.DataFrame | None = None) -> int:
    """The exit code of a finished run under the exit-code policy (settings min_completion, fail_on_regression;
    ttseval.metrics.policy): EXIT_BREACHED with each breach on stderr, else EXIT_DONE."""
    from ttseval.core.store import open_store
    from ttseval.metrics.policy import threshold_breaches

    breaches = threshold_breaches(
        open_store(settings).read(run_id, "report"),
        min_completion=settings.min_completion,
        regressions=regressions,
        fail_on_regression=settings.fail_on_regression,
    )
    for line in breaches:
        print(f"ttseval: threshold breached (exit {EXIT_BREACHED}): {line}", file=sys.stderr)
    return EXIT_BREACHED if breaches else EXIT_DONE


def print_report(settings: Settings, run_id: str, system_ids: list[str] | None) -> None:
    """The run's per-system table, its leaderboard and where its HTML report is: as its report stored them while
    the run's files, the settings, the code and the systems are those the report was written from
    (ttseval.tasks.report.full.stored_terminal_view), computed from its tables otherwise."""
    from ttseval.core.store import open_store
    from ttseval.tasks.report import print_view, stored_terminal_view

    store = open_store(settings)
    store.require(run_id)
    view = stored_terminal_view(store, run_id, settings, system_ids)
    if view is None:
        from ttseval.tasks.report import compute_summary, compute_winrates, leaderboard_markdown, rows_for_display
        from ttseval.tasks.report.compute import compute_rankings

        summary = compute_summary(store, run_id, settings, system_ids)
        winrates = compute_winrates(store, run_id, settings)
        rankings = compute_rankings(store, run_id, settings) if not winrates.empty else None
        view = {
            "rows": rows_for_display(summary),
            "leaderboard": leaderboard_markdown(store, run_id, summary, winrates, rankings),
        }
    print_view(store, run_id, view["rows"], view["leaderboard"])
    if store.exists(f"runs/{run_id}/html/index.html"):
        from ttseval.tasks.report.html import html_location

        print(
            f"HTML report (every clip playable, with its transcript, scores and verdicts): "
            f"{html_location(store, run_id)}"
        )


def cmd_trends(args: argparse.Namespace) -> int:
    from ttseval.core.config import load_settings
    from ttseval.core.errors import NotFoundError
    from ttseval.core.store import open_store
    from ttseval.tasks.trends import DEFAULT_SERIES, check_series, trends_table, write_trends

    series = check_series(DEFAULT_SERIES if args.series is None else args.series)
    settings = load_settings(store=args.store)
    store = open_store(settings)
    store.require()
    trends, page = write_trends(store, settings, series=series)
    if page is None:
        raise NotFoundError(
            f"no night of series {series!r} with a report in {store.display()}: run ttseval nightly --series {series}",
            uri=store.display(),
        )
    if args.system:
        trends = trends[trends["system_spec"].isin(args.system) | trends["system_id"].isin(args.system)]
        if trends.empty:
            raise NotFoundError(
                f"--system {','.join(args.system)}: no such system in the nightly runs of {store.display()}",
                uri=store.display(),
            )
    table = trends_table(trends)
    print(
        f"ttseval trends of series {series}: {trends['night'].max() + 1} night(s) in {store.display()}; a step is a "
        "flagged paired "
        f"test between two nights, a drift the CUSUM (k {settings.trend_cusum_k:g}, h {settings.trend_cusum_h:g})"
    )
    print(table.to_string(index=False))
    print(f"trends page: {'file://' if store.is_local else ''}{page}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ttseval.core.config import load_settings

    settings = load_settings(store=args.store)
    print_report(settings, args.run_id, None)
    return policy_exit(settings, args.run_id)


def cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ttseval.core.config import load_settings
    from ttseval.tasks.export import export_run

    tables = export_run(load_settings(store=args.store), args.run_id, Path(args.out))
    print(f"{len(tables)} tables ({', '.join(tables)}), the report and the run logs in {args.out}; no audio")
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from ttseval.core.config import load_settings
    from ttseval.core.errors import NotFoundError
    from ttseval.core.store import open_store
    from ttseval.tasks.leaderboard import leaderboard, leaderboard_markdown

    settings = load_settings(store=args.store)
    store = open_store(settings)
    store.require()
    boards = leaderboard(settings)
    if not boards:
        raise NotFoundError(f"no run with a report in {store.display()}: run ttseval evaluate", uri=store.display())
    print(leaderboard_markdown(boards))
    return 0


# -- parsers ------------------------------------------------------------------------------------------------------


def add_report(sub: Subcommands) -> None:
    rep = sub.add_parser("report", help="print the per-system table of a stored run")
    add_store(rep)
    rep.add_argument("--run-id", type=run_id_arg, default="demo")
    rep.set_defaults(func=cmd_report)


def add_trends(sub: Subcommands) -> None:
    tr = sub.add_parser(
        "trends",
        help="every metric of every system across the nightly runs, with steps and slow "
        "drifts flagged; writes the trends page beside the latest night's report",
    )
    add_store(tr)
    tr.add_argument("--system", type=csv_list, default=None, help="only these systems (comma-separated specs or ids)")
    tr.add_argument(
        "--series", default=None, help="the nightly series to draw (default: the nights run without --series)"
    )
    tr.set_defaults(func=cmd_trends)


def add_export(sub: Subcommands) -> None:
    ex = sub.add_parser("export", help="a run's tables, report and logs as CSV without its audio, to share")
    add_store(ex)
    ex.add_argument("--run-id", type=run_id_arg, required=True)
    ex.add_argument("--out", required=True, help="folder to write")
    ex.set_defaults(func=cmd_export)


def add_leaderboard(sub: Subcommands) -> None:
    lb = sub.add_parser("leaderboard", help="every system evaluated in a store, per dataset version, latest figures")
    add_store(lb)
    lb.set_defaults(func=cmd_leaderboard)
