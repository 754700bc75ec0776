"""Giving freed memory back to the operating system, an allocator that does, and what DuckDB
says when it runs out."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from dataclasses import dataclass
from typing import Literal


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


@dataclass(frozen=True)
class DuckdbShortage:
    """What a DuckDB Out of Memory Error says ran out: the disk it spills to (``spill``, past
    ``max_temp_directory_size``), memory the system refused before DuckDB's limit (``system``),
    or DuckDB's memory limit (``limit``); ``reason`` is the message's first line."""

    kind: Literal["spill", "system", "limit"]
    reason: str

    @property
    def first_sentence(self) -> str:
        """The reason without DuckDB's advice on its own settings, which follows it."""
        return self.reason.split(". ")[0]


def duckdb_shortage(error: BaseException) -> DuckdbShortage | None:
    """``error`` read as DuckDB running out of memory or spill space, or None when it is not
    (recognised by its type's name, so a caller need not import DuckDB)."""
    if type(error).__name__ != "OutOfMemoryException":
        return None
    message = str(error)
    reason = message.split("\n")[0].strip()
    if "max_temp_directory_size" in message:
        return DuckdbShortage("spill", reason)
    if " used)" not in reason:  # not DuckDB's limit: the system refused it memory
        return DuckdbShortage("system", reason)
    return DuckdbShortage("limit", reason)
