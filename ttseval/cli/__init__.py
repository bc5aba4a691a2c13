"""The `ttseval` command: the top layer, above the flows. One module per command group; each command parses its
arguments, calls one flow or task function, and prints. Heavy imports (prefect, dask, GE) happen inside the
command that needs them.

    runs.py        evaluate, backfill-judge, nightly
    results.py     report, export, leaderboard, trends
    datasets.py    import-dataset, generate-dataset, generate-instructions
    registered.py  datasets push|list|show, systems push|list (what a shared server's runs name from its store),
                   store repair (its catalog objects that do not parse, set aside)
    listening.py   human-eval, mos-forms, mos-analyze, human-alignment
    operations.py  stack, server, series, serve
    catalog.py     providers, voices
    signals.py     SIGTERM: an orderly stop, bounded by a watchdog
    common.py      exit codes, quiet defaults, the Prefect API context, argument types

Exit codes: 0 done, 1 the run failed, 2 bad input (dataset, spec, settings, a store or run that is not there):
nothing was written, 3 the run finished and breached a threshold of the exit-code policy (off by default).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

from ttseval.cli import catalog, datasets, listening, operations, registered, results, runs
from ttseval.cli.catalog import cmd_providers, cmd_voices
from ttseval.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, USER_ERRORS, IntermixedParser, prefect_api, quiet_defaults
from ttseval.cli.datasets import cmd_generate_dataset, cmd_generate_instructions, cmd_import_dataset
from ttseval.cli.listening import cmd_human_alignment, cmd_human_eval, cmd_mos_analyze, cmd_mos_forms
from ttseval.cli.operations import cmd_series, cmd_serve, cmd_server, cmd_stack
from ttseval.cli.results import cmd_export, cmd_leaderboard, cmd_report, cmd_trends
from ttseval.cli.runs import cmd_backfill_judge, cmd_evaluate, cmd_nightly
from ttseval.cli.signals import handle_sigterm
from ttseval.core.errors import TTSEvalError

__all__ = [
    "USER_ERRORS",
    "build_parser",
    "cmd_backfill_judge",
    "cmd_evaluate",
    "cmd_export",
    "cmd_generate_dataset",
    "cmd_generate_instructions",
    "cmd_human_alignment",
    "cmd_human_eval",
    "cmd_import_dataset",
    "cmd_leaderboard",
    "cmd_mos_analyze",
    "cmd_mos_forms",
    "cmd_nightly",
    "cmd_providers",
    "cmd_report",
    "cmd_series",
    "cmd_serve",
    "cmd_server",
    "cmd_stack",
    "cmd_trends",
    "cmd_voices",
    "main",
    "prefect_api",
]

# The commands in the order `ttseval --help` lists them.
COMMANDS = (
    runs.add_evaluate,
    runs.add_backfill_judge,
    results.add_report,
    operations.add_stack,
    operations.add_server,
    runs.add_nightly,
    operations.add_series,
    results.add_trends,
    listening.add_human_alignment,
    datasets.add_import_dataset,
    datasets.add_generate_dataset,
    datasets.add_generate_instructions,
    registered.add_datasets,
    registered.add_systems,
    registered.add_store_repair,
    listening.add_mos_forms,
    listening.add_mos_analyze,
    listening.add_human_eval,
    operations.add_serve,
    results.add_export,
    results.add_leaderboard,
    catalog.add_providers,
    catalog.add_voices,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ttseval", description="Evaluate text-to-speech systems.")
    # Every command's positionals may come before, between or after its options (common.IntermixedParser).
    sub = parser.add_subparsers(dest="command", required=True, parser_class=IntermixedParser)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    handle_sigterm()
    quiet_defaults()
    logging.getLogger("ttseval").setLevel(logging.INFO)
    args = build_parser().parse_args(argv)
    if getattr(args, "wait_lease", None) is not None:  # the flows read it from the settings, in any process
        os.environ["TTSEVAL_LEASE_WAIT_S"] = str(args.wait_lease)
    command: Callable[[argparse.Namespace], int] = args.func  # each command's set_defaults(func=...)
    try:
        return command(args)
    except USER_ERRORS as e:
        print(f"ttseval: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except TTSEvalError as e:
        print(f"ttseval: run failed: {e}", file=sys.stderr)
        return EXIT_FAILED
