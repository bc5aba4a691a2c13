"""Dask's housekeeping at ttseval's pace (ttseval.infra.dask_defaults): ttseval's intervals differ from Dask's own, so
tests/e2e/test_dask_defaults.py, which reads them back from running clusters, can fail; and dask_env() leaves out
what the user set."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.dask_probe import ms
from ttseval.infra.dask_defaults import DASK_DEFAULTS, QUIET_DASK, dask_env, env_name


def test_dask_defaults_differ_from_dasks_own_so_the_test_above_can_fail() -> None:
    # Dask's shipped defaults, read from a process without ttseval's: each differs from ttseval's value (the
    # clusters of tests/e2e/test_dask_defaults.py would pass with Dask's own otherwise)
    code = f"import json, dask, distributed; print(json.dumps({{k: dask.config.get(k) for k in {list(QUIET_DASK)!r}}}))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    shipped = json.loads(
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    )
    assert {k: ms(v) for k, v in shipped.items()} == {
        "distributed.admin.tick.interval": 20,
        "distributed.admin.system-monitor.interval": 500,
        "distributed.worker.profile.interval": 10,
        "distributed.worker.memory.monitor-interval": 100,
    }
    assert all(ms(shipped[k]) < ms(v) for k, v in QUIET_DASK.items())


def test_dask_env_leaves_out_what_the_user_set() -> None:
    name = env_name("distributed.admin.system-monitor.interval")
    assert name == "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL"
    assert name in dask_env({}) and name not in dask_env({name: "1s"})
    assert len(dask_env({name: "1s"})) == len(DASK_DEFAULTS) - 1 == 4
