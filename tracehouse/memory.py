"""Giving freed memory back to the operating system."""

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
