"""A small first-in-first-out cache for values computed once per distinct definition or workload."""

from __future__ import annotations

from collections import deque
from typing import Any

# How many distinct workloads each per-workload cache of a parser process keeps (KernelIndex's
# workload identities and validations, tracehouse's workload rows and line combinations). A
# source of 200,000 workloads held whole took each parser worker past 3 GB; beyond the bound
# the oldest are derived again when seen again, with the same result. The files of one
# definition are parsed one after the other (ingest.plan.file_group_name), so the bound need
# only hold one definition's workloads.
WORKLOAD_CACHE_ENTRIES = 16_384


def own_size(data: bytes) -> bytes:
    """``data`` in a block of its own size. orjson hands its output over in the buffer it wrote
    it into (4 KiB for a 150-byte workload), so a cache keyed by orjson's bytes held ~4 KiB a
    key: at 16,384 workloads in each of four caches, ~250 MiB of a parser worker."""
    return bytes(memoryview(data))


def _kept_key(key: Any) -> Any:
    if type(key) is bytes:
        return own_size(key)
    if type(key) is tuple:
        return tuple(own_size(part) if type(part) is bytes else part for part in key)
    return key


class BoundedCache:
    """A dict cache that forgets its oldest entries beyond `maxsize` (FIFO). A key of bytes
    (or a tuple holding bytes) is stored as a copy of its own size (``own_size``); lookups
    take any equal key."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self.data: dict[Any, Any] = {}
        # Keys in the order they were put. Taking the oldest key of the dict itself
        # (``next(iter(data))``) walks past every slot deleted before it, so a full cache's
        # every put cost up to thousands of steps (11 us each, a sixth of a full derivation).
        self._order: deque[Any] = deque()

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def put(self, key: Any, value: Any) -> None:
        kept = _kept_key(key)
        if kept not in self.data:
            if len(self.data) >= self.maxsize:
                del self.data[self._order.popleft()]
            self._order.append(kept)
        self.data[kept] = value

    def clear(self) -> None:
        self.data.clear()
        self._order.clear()
