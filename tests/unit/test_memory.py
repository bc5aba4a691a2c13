"""Arrow's allocator: jemalloc in the CLI's process and the processes it and the local stack start, unless the
user chose a pool (ttseval.core.memory)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ttseval.core.memory import ARROW_ALLOCATOR, prompt_allocator

SCRIPT = """
import os
import pyarrow as pa
pa.array(range(1000))  # Arrow's default pool is chosen at its first allocation, before the CLI's defaults
from ttseval.cli.common import quiet_defaults
quiet_defaults()
pa.array(range(1000))
print(pa.default_memory_pool().backend_name, os.environ["ARROW_DEFAULT_MEMORY_POOL"])
"""


@pytest.mark.parametrize(("chosen", "expected"), [(None, "jemalloc jemalloc"), ("system", "system system")])
def test_the_cli_switches_arrow_to_jemalloc_unless_the_user_chose_a_pool(chosen: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected.split()
    assert "Unsupported backend" not in done.stderr  # Arrow warns on a pool its build lacks


def test_the_environment_of_started_processes_gets_the_pool_and_keeps_a_chosen_one() -> None:
    from ttseval.infra.stack import _base_env

    assert prompt_allocator({}) == ARROW_ALLOCATOR
    assert prompt_allocator({"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}) == {"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}
    assert _base_env()["ARROW_DEFAULT_MEMORY_POOL"] == os.environ.get("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
