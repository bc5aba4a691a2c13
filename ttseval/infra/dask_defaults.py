"""Dask's housekeeping at a slower pace, declared once: the periodic callbacks every Dask scheduler, nanny and worker
runs whatever the work: a cost every run pays beside its work.

Measured with `benchmarks/bench_dask_idle.py` on 2 cores: an idle LocalCluster of 2 worker processes
spends 5.4-7.1 CPU-seconds a minute with Dask's defaults and 1.5 with these, the scheduler and nannies in the
command's process and each worker alike. On the demo (`benchmarks/bench_evaluate.py`) the pipeline's CPU over a
plain loop's fell from 69.7 to 30.2 CPU-seconds (docs/performance.md).

What each changes (Dask's default in brackets):
  - tick interval 500 ms (20 ms): how often a server checks that its event loop is responsive; the warning for an
    event loop blocked longer than `distributed.admin.tick.limit` (3 s) still comes;
  - system monitor 2 s (500 ms): the CPU, memory, disk and network figures the dashboard's System page draws;
  - worker profile 100 ms (10 ms): the statistical profiler behind the dashboard's Profile page, still on;
  - memory monitor 500 ms (100 ms): how often a nanny and a worker compare the worker's memory with its limit.

And one bound (SMALL_LOGS): the low-level logs keep the last 50 entries (1,000). Each entry of the client's and the
workers' message logs can be a whole task as submitted, its shard's items among its arguments (up to 1 MB), so
with Dask's default a 100,000-clip run's command held 2.9 GiB of logged messages (benchmarks/bench_scale.py; the
scheduler's transition log and the workers' stimulus logs are bounded by the same key).

Where they apply: the flows' own clusters through `dask_defaults()` (the scheduler and nannies in the command's
process, and the worker processes, which get their nanny's configuration), and the `dask scheduler` / `dask worker`
processes the local stack and the tests start through `dask_env()`. A value set by the user, in a Dask YAML file
or a DASK_* variable, wins in both.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

QUIET_DASK: dict[str, str] = {
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.profile.interval": "100ms",
    "distributed.worker.memory.monitor-interval": "500ms",
}

SMALL_LOGS: dict[str, int] = {"distributed.admin.low-level-log-length": 50}
DASK_DEFAULTS: dict[str, str | int] = {**QUIET_DASK, **SMALL_LOGS}
"""Every value this module makes Dask's default."""


def env_name(key: str) -> str:
    """The DASK_* variable Dask reads as the dotted configuration key `key` (`-` and `_` are the same to Dask)."""
    return "DASK_" + "__".join(part.upper().replace("-", "_") for part in key.split("."))


def dask_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables that give a `dask scheduler` or `dask worker` process DASK_DEFAULTS, less those set in
    `environ`."""
    return {env_name(k): str(v) for k, v in DASK_DEFAULTS.items() if env_name(k) not in environ}


@functools.cache
def dask_defaults() -> None:
    """Make DASK_DEFAULTS Dask's defaults in this process, once, before a cluster is made: a value the user configured
    (a Dask YAML file, a DASK_* variable) is kept, as `dask.config.update_defaults` keeps any value that is not the
    default. distributed is imported first: importing it adds its own defaults, which would replace these."""
    import dask.config
    import distributed  # noqa: F401 - its defaults first (above)

    nested: dict[str, Any] = {}
    for key, value in DASK_DEFAULTS.items():
        *parents, leaf = key.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    dask.config.update_defaults(nested)
