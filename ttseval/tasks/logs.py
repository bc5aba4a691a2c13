"""The log of a stage: Prefect's run logger where there is one, and user errors logged as their message alone."""

from __future__ import annotations

import logging

from ttseval.core.errors import USER_ERRORS

# Prefect's loggers of flow and task runs: each logs an exception that ends a run with its traceback
# ("Encountered exception during execution", "Task run failed with exception").
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


class UserErrorsWithoutTraceback(logging.Filter):
    """Logs a user error (ttseval.core.errors.USER_ERRORS) that ends a flow or task run as its message alone:
    `refused: <message>`, no traceback, in the terminal and in the run's logs in the UI (the run is still marked
    failed, with the message as its state's). Any other exception keeps its traceback: it is a bug or a failure
    someone must read."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, USER_ERRORS):
            record.msg, record.args = "refused: %s", (error,)
            record.exc_info, record.exc_text = None, None
        return True


def quiet_user_errors() -> None:
    """Install UserErrorsWithoutTraceback on Prefect's run loggers (once per process; any process that imports
    the stages: the CLI's, a deployment's worker, a Dask worker)."""
    for name in RUN_LOGGERS:
        run_logger = logging.getLogger(name)
        if not any(isinstance(f, UserErrorsWithoutTraceback) for f in run_logger.filters):
            run_logger.addFilter(UserErrorsWithoutTraceback())


quiet_user_errors()


def logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """Prefect's run logger inside a task or flow, the module logger elsewhere (plain calls, tests)."""
    try:
        from prefect import get_run_logger
        from prefect.exceptions import MissingContextError

        try:
            return get_run_logger()
        except MissingContextError:
            pass
    except ImportError:
        pass
    return logging.getLogger("ttseval")
