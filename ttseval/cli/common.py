"""What the command modules share: exit codes, quiet defaults, the Prefect API a command talks to, argument types.

Nothing here imports Prefect, Dask or a model at import time: `ttseval --help`, `ttseval providers` and
`ttseval evaluate --help` stay cheap (tests/unit/test_layers.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeAlias, TypeVar, overload

# exit 2: nothing written (declared with the errors; a store or run that is not there is the same mistake everywhere)
from ttseval.core.errors import USER_ERRORS as USER_ERRORS

_N = TypeVar("_N")

# 3: the run finished, and a threshold of the exit-code policy was breached (settings min_completion,
# fail_on_regression; ttseval.metrics.policy): automation can tell it from 1, a run that could not run
EXIT_DONE, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_BREACHED = 0, 1, 2, 3


def quiet_defaults() -> None:
    from ttseval.core.memory import prompt_allocator
    from ttseval.core.telemetry import telemetry_off

    telemetry_off()
    prompt_allocator()  # inherited by the worker processes too
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # inherited by the worker processes


def seconds_since_start() -> float:
    """Seconds since this process started (the interpreter's start-up and imports included), by the process's
    own start time (psutil)."""
    import time

    import psutil

    return time.time() - psutil.Process().create_time()


def csv_list(value: str) -> list[str]:
    """A comma-separated argument as its non-empty parts."""
    return [v.strip() for v in value.split(",") if v.strip()]


def run_id_arg(value: str) -> str:
    """A `--run-id` argument, checked as every run id is (ttseval.core.store.check_run_id): exit 2 before anything
    starts."""
    from ttseval.core.errors import ConfigError
    from ttseval.core.store import check_run_id

    try:
        return check_run_id(value)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def csv_ints(value: str) -> list[int]:
    try:
        return [int(v) for v in csv_list(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, e.g. 0,1; got {value!r}") from None


class IntermixedParser(argparse.ArgumentParser):
    """A subcommand's parser that takes its positionals anywhere among its options, so
    `human-eval analyze --run-id demo --test-id t1 results/*.csv` parses like `human-eval analyze results/*.csv
    --run-id demo --test-id t1`. Plain argparse binds a `nargs='*'` positional to nothing as soon as the options
    begin, and then refuses the files after them ('unrecognized arguments')."""

    _intermixing = False

    # The overloads argparse's own parse_known_args declares (a given namespace object comes back filled).
    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, args: Iterable[str] | None, namespace: _N) -> tuple[_N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...

    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: _N | None = None
    ) -> tuple[argparse.Namespace | _N, list[str]]:
        if self._intermixing:  # parse_known_intermixed_args calls back here for its two passes
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


Subcommands: TypeAlias = "argparse._SubParsersAction[IntermixedParser]"
"""What each command module's add_* function is given to add its command to (build_parser's subparsers)."""


@contextlib.contextmanager
def prefect_api() -> Iterator[None]:
    """Use PREFECT_API_URL when set; otherwise the local Prefect server commands share (started by the first, left
    running until idle for the prefect_server_keep_s setting: ttseval.infra.prefect_server), or with that
    setting 0 one temporary server for this command.

    Prefect would otherwise start a temporary server in every Dask worker process as well (seconds each);
    exporting the URL lets the workers report to the same one.
    """
    from ttseval.cli.signals import bridge_prefect_sigterm

    bridge_prefect_sigterm()  # a SIGTERM during the flow is bounded by ttseval's watchdog too
    if os.environ.get("PREFECT_API_URL"):
        yield
        return
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from ttseval.core.config import load_settings

    keep_s = load_settings().prefect_server_keep_s
    if os.environ.get("SLURM_JOB_ID"):  # a job's end kills all it started: no server other jobs use (infra docs)
        keep_s = 0
    with contextlib.ExitStack() as stack:
        if keep_s > 0:
            from ttseval.infra.prefect_server import shared_server

            shared = stack.enter_context(shared_server(keep_s))
            api_url = shared.api_url
            print(
                f"Prefect server {api_url} "
                + (
                    f"started; shared with later commands until none has used it for {shared.keep_s:g} s"
                    if shared.started
                    else f"(shared, stops after {shared.keep_s:g} s unused)"
                )
                + " (prefect_server_keep_s; ttseval server stop)",
                file=sys.stderr,
            )
        else:
            api_url = stack.enter_context(_temporary_server())
        os.environ["PREFECT_API_URL"] = api_url
        try:
            with temporary_settings({PREFECT_API_URL: api_url}):
                yield
        finally:
            from prefect.logging.handlers import APILogHandler

            APILogHandler().flush()  # send the last log lines before the server they go to stops or is left
            os.environ.pop("PREFECT_API_URL", None)


@contextlib.contextmanager
def _temporary_server() -> Iterator[str]:
    from prefect.server.api.server import SubprocessASGIServer

    from ttseval.infra.prefect_server import start_timeout_s

    server = SubprocessASGIServer()
    server.start(timeout=start_timeout_s())
    try:
        yield server.api_url
    finally:
        server.stop()


def add_wait_lease(parser: argparse.ArgumentParser) -> None:
    """--wait-lease of the commands that write a run (main() hands it to the settings, in every process)."""
    parser.add_argument(
        "--wait-lease",
        type=float,
        default=None,
        metavar="SECONDS",
        help="when another invocation is writing this run id, wait up to this long for it (default: "
        "the lease_wait_s setting, 0: refuse at once, exit 2)",
    )


STORE_HELP = (
    "artifact store: a local folder or s3://bucket/prefix (default: the store setting, ./artifacts, or TTSEVAL_STORE)"
)


def add_store(parser: argparse.ArgumentParser) -> None:
    """--store, declared once for every command that reads or writes a store."""
    parser.add_argument("--store", default=None, metavar="URI", help=STORE_HELP)
