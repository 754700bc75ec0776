"""Giving freed memory back to the operating system, and an allocator that does."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys


def return_freed_memory() -> None:
    """Ask the C allocator to hand its free pages back. glibc keeps what Python freed in its
    heap for reuse, so a process that dropped tens of MiB (a dataset's solution rows, say)
    still counts them in its resident size until it trims; elsewhere this does nothing."""
    if not sys.platform.startswith("linux"):
        return
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # a C library without it (musl)
        return
    trim(0)


def arrow_uses_the_c_allocator() -> None:
    """Arrow's buffers from the C library's allocator instead of its own mimalloc, for this
    process. mimalloc keeps the pages of short-lived buffers: a parser worker's chunks (~45 MiB
    more a worker on the bench corpus), and in a build's parent, finalize's (its peak at
    1,000,000 lines 606-613 MiB with mimalloc, 572-586 without; the bench corpus's 515-517
    against 498-499, as fast)."""
    import pyarrow

    pyarrow.set_memory_pool(pyarrow.system_memory_pool())
