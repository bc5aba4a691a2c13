"""The `ttseval` command: the top layer, above the flows. One module per command group; each command parses its
arguments, calls one flow or task function, and prints. Heavy imports (prefect, dask, GE) happen inside the
command that needs them.

    runs.py        evaluate, backfill-judge, nightly, report, export, leaderboard
    datasets.py    import-dataset, generate-dataset, generate-instructions
    registered.py  datasets push|list|show, systems push|list (what a shared server's runs name from its store)
    listening.py   human-eval, mos-forms, mos-analyze, human-alignment
    operations.py  stack, server, serve
    catalog.py     providers, voices
    common.py      exit codes, quiet defaults, the Prefect API context, argument types

Exit codes: 0 done, 1 the run failed, 2 bad input (dataset, spec, settings, a store or run that is not there):
nothing was written, 3 the run finished and breached a threshold of the exit-code policy (off by default).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys

from ttseval.cli import catalog, datasets, listening, operations, registered, runs
from ttseval.cli.catalog import cmd_providers, cmd_voices
from ttseval.cli.common import (EXIT_BAD_INPUT, EXIT_FAILED, USER_ERRORS, IntermixedParser, prefect_api,
                                quiet_defaults)
from ttseval.cli.datasets import cmd_generate_dataset, cmd_generate_instructions, cmd_import_dataset
from ttseval.cli.listening import cmd_human_alignment, cmd_human_eval, cmd_mos_analyze, cmd_mos_forms
from ttseval.cli.operations import cmd_serve, cmd_server, cmd_stack
from ttseval.cli.runs import (cmd_backfill_judge, cmd_evaluate, cmd_export, cmd_leaderboard, cmd_nightly,
                              cmd_report, cmd_trends)
from ttseval.core.errors import TTSEvalError

__all__ = ["build_parser", "main", "prefect_api", "USER_ERRORS", "cmd_backfill_judge", "cmd_evaluate",
           "cmd_export", "cmd_generate_dataset", "cmd_generate_instructions", "cmd_human_alignment",
           "cmd_human_eval", "cmd_import_dataset", "cmd_leaderboard", "cmd_mos_analyze", "cmd_mos_forms",
           "cmd_nightly", "cmd_providers", "cmd_report", "cmd_serve", "cmd_server", "cmd_stack", "cmd_trends",
           "cmd_voices"]

# The commands in the order `ttseval --help` lists them.
COMMANDS = (runs.add_evaluate, runs.add_backfill_judge, runs.add_report, operations.add_stack, operations.add_server,
            runs.add_nightly, runs.add_trends, listening.add_human_alignment, datasets.add_import_dataset,
            datasets.add_generate_dataset, datasets.add_generate_instructions, registered.add_datasets,
            registered.add_systems, listening.add_mos_forms, listening.add_mos_analyze, listening.add_human_eval,
            operations.add_serve, runs.add_export, runs.add_leaderboard, catalog.add_providers, catalog.add_voices)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ttseval", description="Evaluate text-to-speech systems.")
    # Every command's positionals may come before, between or after its options (common.IntermixedParser).
    sub = parser.add_subparsers(dest="command", required=True, parser_class=IntermixedParser)
    for add in COMMANDS:
        add(sub)
    return parser


# How long SIGTERM's orderly stop may take before the command stops its own processes and exits. Below the
# grace a batch system gives before SIGKILL (Slurm's KillWait and Kubernetes' terminationGracePeriodSeconds are
# both 30 s by default), so the command, not SIGKILL, decides what is left behind.
SIGTERM_GRACE_S = 25.0


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # SystemExit unwinds the stack, so the temporary Prefect server and the Dask cluster are stopped by their
    # context managers instead of being left behind; Prefect marks the flow run Crashed and calls this after.
    # A watchdog bounds that unwinding: on a loaded machine closing a LocalCluster's workers was seen to take over
    # 60 s. After SIGTERM_GRACE_S (or at a second SIGTERM) it terminates every process the command started and
    # exits.
    if _watchdog["redelivered"]:  # Prefect's bridge armed the watchdog and hands the signal back as it unwinds
        _watchdog["redelivered"] = False
    else:
        _arm_watchdog(signum)
    raise SystemExit(128 + signum)


_watchdog = {"armed": False, "redelivered": False}


def _arm_watchdog(signum: int) -> None:
    """The first SIGTERM starts the grace timer; a second one stops everything at once."""
    import threading

    if _watchdog["armed"]:
        _stop_now(signum)
    _watchdog["armed"] = True
    threading.Thread(target=_stop_after_grace, args=(signum,), name="ttseval-sigterm-grace", daemon=True).start()


def bridge_prefect_sigterm() -> None:
    """Make a SIGTERM that lands while a flow runs arm the watchdog too (idempotent; called once Prefect is in use).

    Why: while a flow runs, Prefect's engine swaps its own SIGTERM handler in for ours (it raises TerminationSignal,
    so the run is marked Crashed) and hands the signal back to ours only once that exception has unwound the flow.
    An unwinding that hangs (closing a LocalCluster under load) was then never bounded: a `ttseval nightly` was seen
    alive 2 min after SIGTERM, and a second SIGTERM only raised TerminationSignal again. Prefect looks its handler up
    by module name each time a flow starts, so wrapping that name is enough; its own behaviour is unchanged."""
    from prefect.utilities import engine

    prefect_handler = engine._prefect_sigterm_handler
    if getattr(prefect_handler, "ttseval_watchdog", False):
        return

    def handler(signum: int, *args: object) -> None:
        _arm_watchdog(signum)
        _watchdog["redelivered"] = True  # Prefect re-sends this signal to our handler after the flow unwinds
        prefect_handler(signum, *args)

    handler.ttseval_watchdog = True  # type: ignore[attr-defined]
    engine._prefect_sigterm_handler = handler


def _stop_after_grace(signum: int) -> None:
    import time

    time.sleep(SIGTERM_GRACE_S)
    print(f"ttseval: the orderly stop took over {SIGTERM_GRACE_S:.0f} s; stopping the processes this command "
          "started", file=sys.stderr)
    _stop_now(signum)


def _stop_now(signum: int) -> None:
    import psutil

    family = psutil.Process().children(recursive=True)
    for p in family:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(family, timeout=5)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    os._exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    import signal

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    quiet_defaults()
    logging.getLogger("ttseval").setLevel(logging.INFO)
    args = build_parser().parse_args(argv)
    if getattr(args, "wait_lease", None) is not None:  # the flows read it from the settings, in any process
        os.environ["TTSEVAL_LEASE_WAIT_S"] = str(args.wait_lease)
    try:
        return args.func(args)
    except USER_ERRORS as e:
        print(f"ttseval: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except TTSEvalError as e:
        print(f"ttseval: run failed: {e}", file=sys.stderr)
        return EXIT_FAILED
