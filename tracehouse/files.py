"""Small file helpers shared by the build, the exports and the Hub cache."""

from __future__ import annotations

import contextlib
import filecmp
import hashlib
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

Written = TypeVar("Written")


def temporary_sibling(path: Path) -> Path:
    """`.<name>.<pid>.tmp` beside `path`: hidden, per process, and swept by the warehouse."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def replace_atomically(
    path: Path, write: Callable[[Path], Written], *, temporary: Path | None = None
) -> Written:
    """Have `write` fill a temporary path, then rename it over `path`, so readers never see a
    partial file (or folder). The one atomic writer: every file a build, an export or the Hub
    cache writes goes through it (or through `replacing_atomically`, its form for a file
    written over a while).

    The temporary is `temporary_sibling(path)` unless the caller names one on the same file
    system (the Hub cache keeps its in-flight files in its own `tmp/` folder). If `write` fails
    or is interrupted, the temporary is removed and the error goes on; `path` is untouched.
    Returns what `write` returns.
    """
    with replacing_atomically(path, temporary=temporary) as filling:
        return write(filling)


@contextlib.contextmanager
def replacing_atomically(path: Path, *, temporary: Path | None = None) -> Iterator[Path]:
    """The temporary path to fill for `path`, renamed over it when the block ends without an
    exception and removed when it raises (see `replace_atomically`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if temporary is None:
        temporary = temporary_sibling(path)
    try:
        yield temporary
        os.replace(temporary, path)
    except OSError as error:
        _remove(temporary)
        named = naming_the_path(path, error)
        if named is error:
            raise
        raise named from error
    except BaseException:
        _remove(temporary)
        raise


def naming_the_path(path: Path, error: OSError) -> OSError:
    """``error``, naming the file it was about: a write that runs out of space (ENOSPC) or past
    the file size limit (EFBIG) says only "No space left on device", not where."""
    if error.filename is not None or error.errno is None:
        return error
    return OSError(error.errno, error.strerror or str(error), str(path))


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


def read_parquet_file(path: Path, columns: list[str] | None = None) -> Any:
    """One Parquet file as an Arrow table (``columns`` only, when given). Not
    ``pyarrow.parquet.read_table``: its first call imports pyarrow's dataset layer, ~0.3 s of a
    build that reads one small file (an eighth of a build after one file changed)."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as handle:
        return handle.read(columns=columns)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_files(paths: list[Path], threads: int | None = None) -> dict[Path, str | OSError]:
    """``sha256_file`` of each path (or the error reading it), several at once (on ``threads``,
    by default up to 4), in the order given (the caller's largest first keeps every thread busy
    to the end): hashlib and file reads release the GIL."""
    from concurrent.futures import ThreadPoolExecutor

    def digest(path: Path) -> str | OSError:
        try:
            return sha256_file(path)
        except OSError as error:
            return error

    with ThreadPoolExecutor(max_workers=threads or min(4, os.cpu_count() or 1)) as pool:
        return dict(zip(paths, pool.map(digest, paths), strict=True))


class NotARegularFile(ValueError):
    """A file the command reads is a FIFO, a device, a folder, or larger than its budget."""


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, refused beyond ``max_bytes``.

    Opened without blocking, so a FIFO (which would wait for a writer for ever) or a device
    (``/dev/zero`` never ends) is refused after ``fstat`` instead of read; at most
    ``max_bytes + 1`` bytes are ever read, so a file growing meanwhile cannot exhaust memory.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as handle:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a pipe, socket or device"
            raise NotARegularFile(f"{path}: is {kind}, not a regular file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise NotARegularFile(f"{path}: larger than the {max_bytes:,} bytes allowed")
    return data


def same_file(a: Path, b: Path) -> bool:
    """Whether two files hold the same bytes: one file (a link: a generation links what did
    not change from its base), or two of the same size and content (a file written again by
    every build, often with the same bytes)."""
    first, second = a.stat(), b.stat()
    if (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino):
        return True
    return first.st_size == second.st_size and filecmp.cmp(a, b, shallow=False)
