"""What every file's rows depend on besides its own bytes (``DatasetContext``).

A module of its own so that both ingest paths and the context loader import it without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DatasetContext:
    """What every file's rows depend on besides its own bytes. Picklable, sent once per worker."""

    definitions: dict[str, dict[str, Any]]  # name -> definition object as parsed
    operation_digests: dict[str, str | None]
    definition_stems: frozenset[str]
    fingerprint: str  # changes whenever anything above changes
    # Each solution whose definition is the source's: (author, implementation digest or None).
    # Outside the fingerprint on purpose: a worker completes its runs with these, and finalize
    # resolves again the parts whose runs took a solution otherwise (ingest/resolution.py), so
    # staging parts stay valid when only the solutions or the revision change.
    solutions: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
