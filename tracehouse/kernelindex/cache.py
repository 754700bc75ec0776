"""A small first-in-first-out cache for values computed once per distinct definition or workload."""

from __future__ import annotations

from typing import Any

# How many distinct workloads each per-workload cache of a parser process keeps (KernelIndex's
# workload identities and validations, tracehouse's workload rows and line combinations). A
# workload costs a few KB in each, so a source of 200,000 workloads held whole took each parser
# worker past 3 GB; beyond the bound the oldest are derived again when seen again, with the
# same result.
WORKLOAD_CACHE_ENTRIES = 16_384


class BoundedCache:
    """A dict cache that forgets its oldest entries beyond `maxsize` (FIFO)."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self.data: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def put(self, key: Any, value: Any) -> None:
        if len(self.data) >= self.maxsize:
            del self.data[next(iter(self.data))]
        self.data[key] = value

    def clear(self) -> None:
        self.data.clear()
