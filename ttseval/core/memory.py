"""Giving freed memory back to the system between a command's phases (a run's stages, compaction, the report), so
that one phase's peak is not added to the next's; and the allocator for Arrow's tables that gives it back."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import MutableMapping

ARROW_ALLOCATOR: dict[str, str] = {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}
"""Arrow's memory on jemalloc, which Arrow configures to return freed pages to the system within a second. mimalloc,
Arrow's default, keeps the pages its threads freed (Arrow decodes Parquet on a thread pool, and
`release_unused` reaches the calling thread's heap only): the report's page at 100,000 clips, many small arrays
taken and freed, left 214 MiB resident on mimalloc, 76 MiB on jemalloc (benchmarks/HISTORY.md). Arrow's Linux wheels
have jemalloc; the container images restate this variable (tests/unit/test_infra.py)."""


def prompt_allocator(environ: MutableMapping[str, str] = os.environ) -> MutableMapping[str, str]:
    """Set ARROW_ALLOCATOR in `environ` (on Linux, unless the user chose a pool), for the processes started with it;
    for this process's own environment, also switch Arrow's pool now when pyarrow is already imported (Arrow reads
    the variable once, at its first allocation). Returns `environ`."""
    if sys.platform != "linux":  # other platforms' wheels may lack jemalloc; Arrow warns on an unknown pool
        return environ
    for name, value in ARROW_ALLOCATOR.items():
        environ.setdefault(name, value)
    pyarrow = sys.modules.get("pyarrow")
    if environ is os.environ and pyarrow is not None and environ["ARROW_DEFAULT_MEMORY_POOL"] == "jemalloc":
        with contextlib.suppress(NotImplementedError):  # an Arrow built without jemalloc keeps its default
            pyarrow.set_memory_pool(pyarrow.jemalloc_memory_pool())
    return environ


def give_back_freed_memory() -> None:
    """Collect cycles, then return the pages that Arrow's allocator and glibc's malloc keep for the process after a
    free (neither gives them back on its own: glibc keeps a freed heap, mimalloc and jemalloc their segments). The
    memory still in use is untouched; this lowers the resident size, not what the next phase can allocate."""
    gc.collect()
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    if sys.platform == "linux":
        import ctypes

        with contextlib.suppress(OSError, AttributeError):  # a libc other than glibc (musl) has no malloc_trim
            ctypes.CDLL("libc.so.6").malloc_trim(0)
