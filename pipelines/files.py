"""Small file helpers shared by the build, the exports and the Hub cache."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

Written = TypeVar("Written")


def temporary_sibling(path: Path) -> Path:
    """`.<name>.<pid>.tmp` beside `path`: hidden, per process, and swept by the warehouse."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def replace_atomically(
    path: Path, write: Callable[[Path], Written], *, temporary: Path | None = None
) -> Written:
    """Have `write` fill a temporary path, then rename it over `path`, so readers never see a
    partial file (or folder). The one atomic writer: every file a build, an export or the Hub
    cache writes goes through it.

    The temporary is `temporary_sibling(path)` unless the caller names one on the same file
    system (the Hub cache keeps its in-flight files in its own `tmp/` folder). If `write` fails
    or is interrupted, the temporary is removed and the error goes on; `path` is untouched.
    Returns what `write` returns.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if temporary is None:
        temporary = temporary_sibling(path)
    try:
        result = write(temporary)
        os.replace(temporary, path)
    except BaseException:
        _remove(temporary)
        raise
    return result


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary sibling and a rename."""
    replace_atomically(path, lambda temporary: temporary.write_bytes(data))


def symlink_atomically(path: Path, target: str) -> None:
    """Point the symbolic link `path` at `target` in one rename (never a moment without it)."""

    def link(temporary: Path) -> None:
        _remove(temporary)  # left by a killed process that had our pid
        os.symlink(target, temporary)

    replace_atomically(path, link)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
