"""Small file helpers shared by the build and the exports."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from pathlib import Path


def temporary_sibling(path: Path) -> Path:
    """`.<name>.<pid>.tmp` beside `path`: hidden, per process, and swept by the warehouse."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def replace_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Have `write` fill a temporary sibling of `path`, then rename it over `path`, so readers
    never see a partial file. The one atomic writer: every file a build or export writes goes
    through it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_sibling(path)
    write(temporary)
    os.replace(temporary, path)


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary sibling and a rename."""
    replace_atomically(path, lambda temporary: temporary.write_bytes(data))


def symlink_atomically(path: Path, target: str) -> None:
    """Point the symbolic link `path` at `target` in one rename (never a moment without it)."""
    temporary = temporary_sibling(path)
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    os.symlink(target, temporary)
    os.replace(temporary, path)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
