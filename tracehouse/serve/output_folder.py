"""Folders a user names as output (`report --out DIR`, `export --snapshot DIR`): a command
writes into one only when it is new, empty, or carries that command's own marker, and one
writer at a time.

The marker is a small file whose exact bytes the command checks (a folder that merely looks
like a report, ``index.html`` beside ``definitions/*.html``, or a folder of someone's own
``runs.parquet``, carries none, and is refused untouched). It is written once, when the
command first claims the folder, and never replaced, so that it can also be the folder's lock:
the command holds an exclusive ``flock`` on it for as long as it writes. A second command into
the same folder (another `tracehouse report`, or the Dagster report asset beside a CLI report)
waits for the first to finish instead of sweeping the pages the first one's index links to.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# How often a waiting writer tries the lock again.
LOCK_POLL_S = 0.1


class OutputFolderBusy(BlockingIOError):
    """Another command held the folder's lock for longer than the wait allowed."""


@dataclass(frozen=True)
class OutputKind:
    """What one command writes: the flag that names the folder, its marker and their bytes."""

    command: str  # "tracehouse report"
    flag: str  # "--out"
    marker: str  # the marker's file name inside the folder
    marker_bytes: bytes  # its exact content

    def refusal(self, folder: Path, why: str) -> ValueError:
        return ValueError(
            f"{self.flag} {folder}: {why}; {self.command} writes only into a new or empty folder "
            f"or one it wrote before (it holds {self.marker}): name another folder, or remove "
            "this one yourself if it is an older tracehouse's output (which has no marker)"
        )


def _marker_content(kind: OutputKind, marker: Path) -> bytes | None:
    """The marker's first bytes, read once (None: not a regular file, or unreadable)."""
    try:
        if marker.is_symlink() or not marker.is_file():
            return None
        with marker.open("rb") as handle:
            return handle.read(len(kind.marker_bytes) + 1)
    except OSError:
        return None


@contextlib.contextmanager
def claimed(kind: OutputKind, folder: Path, timeout_s: float) -> Iterator[None]:
    """Hold ``folder`` for one write of ``kind``: made if missing, marked if empty, refused
    (ValueError, one line naming the flag, the folder untouched) if it holds anything but
    ``kind``'s marker and what came with it; waits up to ``timeout_s`` for another writer."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ValueError(f"{kind.flag} {folder}: exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / kind.marker
    if marker.is_symlink():
        raise kind.refusal(folder, f"{marker.name} there is not its marker")
    # Listed before the marker is looked for: a writer started at the same moment creates the
    # marker before anything else, so other entries listed while no marker exists after the
    # listing were not written by this command.
    others = any(entry.name != kind.marker for entry in folder.iterdir())
    if not marker.exists():
        if others:
            raise kind.refusal(folder, "folder is not empty and was not written by it")
    elif _marker_content(kind, marker) not in (b"", kind.marker_bytes):
        # Read once: an empty marker is another writer's, created a moment ago (its lock tells
        # below), and it may be filled meanwhile (checking emptiness apart from the content
        # refused a report started beside another one).
        raise kind.refusal(folder, f"{marker.name} there is not its marker")
    # O_NOFOLLOW: a symbolic link put there meanwhile is refused, never followed
    descriptor = os.open(marker, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        _lock(descriptor, kind, folder, timeout_s)
        content = os.pread(descriptor, len(kind.marker_bytes) + 1, 0)
        if content != kind.marker_bytes:
            # Only a marker this command created and had no time to fill, in a folder that
            # holds nothing else, is claimed; anything else came from elsewhere.
            if content or {p.name for p in folder.iterdir()} != {marker.name}:
                raise kind.refusal(folder, f"{marker.name} there is not its marker")
            os.pwrite(descriptor, kind.marker_bytes, 0)
            os.fsync(descriptor)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _lock(descriptor: int, kind: OutputKind, folder: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            raise OutputFolderBusy(
                f"{kind.flag} {folder}: another {kind.command} is writing into it; waited "
                f"{timeout_s:.0f} s (TRACEHOUSE_LOCK_TIMEOUT_S). Try again when it finishes."
            )
        time.sleep(LOCK_POLL_S)
