"""What every file's rows depend on besides its own bytes (``DatasetContext``).

A module of its own so that both ingest paths and the context loader import it without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DatasetContext:
    """What every file's rows depend on besides its own bytes. Picklable, sent once per worker."""

    definitions: dict[str, dict[str, Any]]  # name -> definition object as parsed
    operation_digests: dict[str, str | None]
    definition_stems: frozenset[str]
    fingerprint: str  # changes whenever anything above changes
