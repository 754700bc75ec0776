"""Where the shared reference data lives: ../shared beside the checkout.

Tests that need it use the `requires_shared` mark, which skips them when the folder is absent
(e.g. in a bare clone).
"""

from __future__ import annotations

from pathlib import Path

import pytest

_CANDIDATE = Path(__file__).resolve().parents[2] / "shared"

SHARED: Path | None = _CANDIDATE if _CANDIDATE.is_dir() else None
GOLDEN_DIR: Path = _CANDIDATE / "golden" / "kernelindex-2026-08-16"
SAMPLES_DIR: Path = _CANDIDATE / "samples" / "flashinfer-trace"
DOCS_DIR: Path = _CANDIDATE / "docs"

requires_shared = pytest.mark.skipif(
    SHARED is None, reason="../shared not found beside the checkout"
)
