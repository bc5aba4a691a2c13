"""Per-stage progress of a flow run: done / total, rate and ETA, in the terminal and in the Prefect UI.

In a terminal the stages are rich progress bars; otherwise (CI, a worker's log) each advance logs one line
such as `synthesis 16/165 (10%), 2.1 rows/s, ETA 71 s`. In the Prefect UI the run has a progress artifact
(`ttseval-progress-<run>`) whose value is the share of all rows done and whose description lists the stages.
Totals may change while the run goes (a failed clip leaves nothing for ASR to do), so they can be lowered.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Any

MIN_RATE_S = 1.0
"""A rate is shown only over at least this long: rows counted in one step (a stage whose rows were all reused or
done before it was declared) over microseconds would read as hundreds of thousands of rows a second."""


@dataclass
class _Stage:
    total: int
    done: int = 0
    started: float = field(default_factory=time.perf_counter)

    def rate(self) -> float | None:
        """Rows per second since the stage started; None before MIN_RATE_S has passed."""
        elapsed = time.perf_counter() - self.started
        return self.done / elapsed if elapsed >= MIN_RATE_S else None

    def line(self, name: str) -> str:
        rate = self.rate()
        pct = 100.0 * self.done / self.total if self.total else 100.0
        if self.done >= self.total:
            eta = "done"
        elif rate:
            eta = f"ETA {(self.total - self.done) / rate:.0f} s"
        else:
            eta = "ETA unknown"
        return f"{name} {self.done}/{self.total} ({pct:.0f}%), {_rate_text(rate)}, {eta}"


def _rate_text(rate: float | None, unit: str = "rows/s") -> str:
    return f"{rate:.1f} {unit}" if rate is not None else f"under {MIN_RATE_S:g} s, no rate"


class StageProgress:
    """Progress of named stages. Use as a context manager inside a flow run (the artifact needs its context);
    outside one (plain calls, tests) only the terminal or log side runs.

    Args:
        title: what runs, e.g. "evaluate run 'demo'".
        key: the Prefect artifact key (see ttseval.flows.common.artifact_key).
        log: where non-terminal progress lines go.
        console: a rich Console to draw bars on; default stderr when it is a terminal, else none (log lines).
    """

    def __init__(
        self,
        title: str,
        key: str,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger],
        console: Any | None = None,
    ) -> None:
        self.title, self.key, self.log = title, key, log
        self.stages: dict[str, _Stage] = {}
        self._console = console
        self._bars: Any = None
        self._tasks: dict[str, Any] = {}
        self._artifact: Any = None
        self._unpublished = False  # the last update did not reach the Prefect API

    def __enter__(self) -> StageProgress:
        if self._console is None and sys.stderr.isatty():
            from rich.console import Console

            self._console = Console(stderr=True)
        if self._console is not None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            self._bars = Progress(
                TextColumn("{task.description:<22}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=self._console,
            )
            self._bars.start()
        self._artifact = _create_artifact(self.key, self.title)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bars is not None:
            self._bars.stop()
        self._publish()

    def add(self, stage: str, total: int, started: float | None = None) -> None:
        """Declare `stage` with `total` rows to compute (0 is allowed: it shows as done); `started`: when its work
        began (time.perf_counter), for a stage declared after it ran; default now."""
        self.stages[stage] = _Stage(total) if started is None else _Stage(total, started=started)
        if self._bars is not None:
            self._tasks[stage] = self._bars.add_task(stage, total=total, rate="")

    def lower(self, stage: str, by: int) -> None:
        """`by` fewer rows than announced will come (e.g. clips that failed synthesis need no ASR)."""
        if by:
            s = self.stages[stage]
            s.total = max(s.done, s.total - by)
            if self._bars is not None:
                self._bars.update(self._tasks[stage], total=s.total)

    def advance(self, stage: str, n: int) -> None:
        """`n` more rows of `stage` are done."""
        s = self.stages[stage]
        s.done = min(s.total, s.done + n) if s.total else s.done + n
        s.total = max(s.total, s.done)
        if self._bars is not None:
            self._bars.update(self._tasks[stage], completed=s.done, total=s.total, rate=_rate_text(s.rate(), "/s"))
        else:
            self.log.info(s.line(stage))
        self._publish()

    @property
    def fraction(self) -> float:
        total = sum(s.total for s in self.stages.values())
        return sum(s.done for s in self.stages.values()) / total if total else 1.0

    def describe(self) -> str:
        return f"{self.title}: " + "; ".join(s.line(name) for name, s in self.stages.items())

    def _publish(self) -> None:
        """The progress artifact in the Prefect UI, best effort: a Prefect server away (restarting, its host cut
        off) for longer than its client's retries leaves the artifact behind, never the run; one warning per
        outage, and the next update after it catches up."""
        if self._artifact is None:
            return
        from prefect.artifacts import update_progress_artifact

        try:
            update_progress_artifact(
                self._artifact, progress=round(100 * self.fraction, 1), description=self.describe()
            )
        except Exception as e:  # noqa: BLE001 - the UI's progress bar must not end the run it shows
            if not self._unpublished:
                self.log.warning(
                    "progress in the Prefect UI not updated: the Prefect API did not answer (%s: %s); the run goes "
                    "on and the progress catches up once it answers",
                    type(e).__name__,
                    e,
                )
            self._unpublished = True
        else:
            self._unpublished = False


def _create_artifact(key: str, title: str) -> Any:
    """A progress artifact for the current flow run; None outside a flow run."""
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is None:
        return None
    from prefect.artifacts import create_progress_artifact

    return create_progress_artifact(progress=0.0, key=key, description=title)
