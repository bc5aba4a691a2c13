"""Giving freed memory back to the system between a command's phases (a run's stages, compaction, the report), so
that one phase's peak is not added to the next's."""

from __future__ import annotations

import contextlib
import gc
import sys


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
