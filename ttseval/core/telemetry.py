"""Telemetry off, declared once: the variables that stop Prefect, the libraries that honour DO_NOT_TRACK and
Great Expectations from reporting usage. ttseval runs offline (and Prefect's analytics raised "database is
locked" on a first local run), so every entry point applies these: the CLI, the local stack's processes, the
deployment registration, the validation layer, the tests and benchmarks. The container images and manifests
under infra/ set the same variables (tests/unit/test_infra.py holds them to this list).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

TELEMETRY_OFF: dict[str, str] = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "GX_ANALYTICS_ENABLED": "false",
}


def telemetry_off(environ: MutableMapping[str, str] = os.environ) -> MutableMapping[str, str]:
    """Set each variable of TELEMETRY_OFF in `environ` unless the user set it; returns `environ`."""
    for name, value in TELEMETRY_OFF.items():
        environ.setdefault(name, value)
    return environ
