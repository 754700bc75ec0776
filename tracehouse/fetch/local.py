"""Finding the data files of a dataset folder, whatever its layout era.

Only the four top-level folders the format defines are searched (``definitions/``,
``solutions/``, ``workloads/``, ``traces/``, legacy ``traces/workloads/`` included) plus
``*.jsonl`` at the root (the July 2025 single ``traces.jsonl``), leaving out any folder that is
a tracehouse warehouse (one built inside its own source would otherwise read its own cache and
manifests as records, and never be up to date). What a record *is* is decided later by its
content; the path is only an audit column. Symbolic links are followed only when
they stay inside the folder (or, for a Hub snapshot, inside its cache's ``blobs/``, where
huggingface_hub's snapshot links lead).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from tracehouse.files import read_bounded
from tracehouse.kernelindex import is_commit_sha
from tracehouse.rejects import Reject

DATA_FOLDERS = ("definitions", "solutions", "workloads", "traces")
# What marks a tracehouse warehouse folder (tracehouse/warehouse.py's layout): the build lock every
# build takes before it reads its source, beside the generations or the cache it writes.
WAREHOUSE_LOCK = ".build.lock"
WAREHOUSE_FOLDERS = ("generations", "cache")


def is_warehouse_folder(folder: str | Path) -> bool:
    """Whether ``folder`` is a tracehouse warehouse (this build's or any other): never data."""
    return os.path.isfile(os.path.join(folder, WAREHOUSE_LOCK)) and any(
        os.path.isdir(os.path.join(folder, name)) for name in WAREHOUSE_FOLDERS
    )


@dataclass(frozen=True, slots=True)
class SourceFile:
    rel: str  # dataset-relative path with "/" separators
    location: str  # the path as found (a str: a Path per file costs a warm build ~10%)
    kind: str  # "json" (one document) or "jsonl" (one record per line)
    size: int
    mtime_ns: int
    inode: int

    @property
    def path(self) -> Path:
        return Path(self.location)

    @property
    def fingerprint(self) -> list[int]:
        return [self.size, self.mtime_ns, self.inode]


def discover(root: Path, links_within: Path | None = None) -> tuple[list[SourceFile], list[Reject]]:
    """Every data file under ``root`` in path order, and the entries that were refused; links
    may lead inside ``root`` or inside ``links_within``."""
    root = root.resolve()
    allowed = [root] if links_within is None else [root, links_within.resolve()]
    if not root.is_dir():
        raise FileNotFoundError(f"source folder {root} does not exist or is not a folder")
    files: list[SourceFile] = []
    rejects: list[Reject] = []
    visited: set[tuple[int, int]] = set()

    def add_file(entry: os.DirEntry[str], rel: str) -> None:
        kind = "jsonl" if rel.endswith(".jsonl") else "json"
        try:
            stat = entry.stat()  # follows a link, as the file's reader will
        except OSError as error:
            rejects.append(
                Reject(rel, None, "unreadable_file", f"cannot stat: {error.strerror}", None)
            )
            return
        files.append(SourceFile(rel, entry.path, kind, stat.st_size, stat.st_mtime_ns, stat.st_ino))

    def walk(folder: str, rel_folder: str) -> None:
        # Plain strings and os calls, not pathlib: a warm build's time is mostly this walk.
        # A folder is known by its device and inode, which a link loop leads back to.
        try:
            info = os.stat(folder)
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as error:
            rejects.append(
                Reject(rel_folder, None, "unreadable_file", f"cannot list: {error.strerror}", None)
            )
            return
        identity = (info.st_dev, info.st_ino)
        if identity in visited:
            return
        visited.add(identity)
        for entry in entries:
            rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
            if not _valid_name(entry.name):
                rejects.append(_bad_name(rel))
                continue
            data_like = entry.name.endswith((".json", ".jsonl"))
            if entry.is_symlink():
                try:
                    target = Path(entry.path).resolve(strict=True)
                except (OSError, RuntimeError) as error:  # a loop, or a link to nothing
                    if data_like:
                        rejects.append(_broken_link(rel, error))
                    continue
                if not any(target.is_relative_to(folder) for folder in allowed):
                    if data_like or target.is_dir():
                        rejects.append(
                            Reject(
                                rel,
                                None,
                                "symlink_outside_source",
                                "link leads outside the source folder; not followed",
                                None,
                            )
                        )
                    continue
            if entry.is_dir():
                if is_warehouse_folder(entry.path):
                    continue
                if data_like:
                    rejects.append(
                        Reject(
                            rel, None, "unreadable_file", "a folder named like a data file", None
                        )
                    )
                walk(entry.path, rel)
            elif data_like:
                if entry.is_file():
                    add_file(entry, rel)
                else:
                    rejects.append(Reject(rel, None, "unreadable_file", "not a regular file", None))

    for name in DATA_FOLDERS:
        folder = root / name
        inside = True
        if folder.is_symlink():
            try:
                inside = folder.resolve(strict=True).is_relative_to(root)
            except (OSError, RuntimeError) as error:
                rejects.append(_broken_link(name, error))
                continue
        if not inside:
            rejects.append(
                Reject(
                    name,
                    None,
                    "symlink_outside_source",
                    "link leads outside the source folder; not followed",
                    None,
                )
            )
        elif folder.is_dir() and not is_warehouse_folder(folder):
            walk(str(folder), name)
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not entry.name.endswith(".jsonl") or not entry.is_file(follow_symlinks=False):
            continue
        if _valid_name(entry.name):
            add_file(entry, entry.name)
        else:
            rejects.append(_bad_name(entry.name))
    files.sort(key=lambda f: f.rel)
    return files, rejects


def _valid_name(name: str) -> bool:
    """A name the warehouse can store: os.scandir hands undecodable bytes over as surrogates,
    which no UTF-8 column (rejects.file, runs.file) can hold."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(rel: str) -> str:
    """``rel`` with the bytes that are not UTF-8 written as ``\\xNN``."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _bad_name(rel: str) -> Reject:
    return Reject(
        shown_name(rel), None, "invalid_file_name", "the name is not valid UTF-8; not read", None
    )


def _broken_link(rel: str, error: BaseException) -> Reject:
    why = "a loop of symbolic links" if isinstance(error, RuntimeError) else "leads nowhere"
    if isinstance(error, OSError) and error.errno == errno.ELOOP:
        why = "a loop of symbolic links"
    return Reject(
        shown_name(rel), None, "unreadable_file", f"symbolic link: {why}; not followed", None
    )


class NotADataset(ValueError):
    """The source folder holds none of the places a FlashInfer-Trace dataset keeps its files."""


def require_dataset(root: Path, shown: str) -> None:
    """Refuse a folder that is missing, not a folder, or holds no dataset: an empty or wrong
    folder must not build an empty warehouse over a good one."""
    if not root.exists():
        raise FileNotFoundError(f"source {shown}: no such folder")
    if not root.is_dir():
        raise NotADataset(f"source {shown}: is a file, not a dataset folder")
    if any((root / name).is_dir() for name in DATA_FOLDERS):
        return
    if any(entry.name.endswith(".jsonl") for entry in os.scandir(root)):
        return
    wanted = ", ".join(f"{name}/" for name in DATA_FOLDERS)
    raise NotADataset(
        f"source {shown}: not a FlashInfer-Trace dataset: none of {wanted} or a *.jsonl file "
        "at its top level"
    )


# A ref file holds one line; packed-refs one line per branch and tag (a big repository's is a
# few MB). Anything larger is not git metadata.
GIT_REF_MAX_BYTES = 4096
PACKED_REFS_MAX_BYTES = 64 << 20


def _git_file(git: Path, name: str, max_bytes: int) -> str | None:
    """A git metadata file's text: a regular file below ``git`` (a ref naming a path outside it,
    a FIFO or a device is not read), within ``max_bytes``; else None."""
    path = git / name
    try:
        if not path.resolve().is_relative_to(git.resolve()):
            return None
        return read_bounded(path, max_bytes).decode("utf-8")
    except (OSError, ValueError):  # unreadable, not regular, too large, not UTF-8
        return None


def git_revision(root: Path) -> str | None:
    """The commit a git checkout of the dataset (e.g. a clone of the Hub repo) is at, or None
    when its metadata does not say so plainly."""
    git = root / ".git"
    head = (_git_file(git, "HEAD", GIT_REF_MAX_BYTES) or "").strip()
    if is_commit_sha(head):
        return head
    if not head.startswith("ref: "):
        return None
    ref = head[5:]
    sha = (_git_file(git, ref, GIT_REF_MAX_BYTES) or "").strip()
    if is_commit_sha(sha):
        return sha
    for line in (_git_file(git, "packed-refs", PACKED_REFS_MAX_BYTES) or "").splitlines():
        parts = line.split(" ")
        if len(parts) == 2 and parts[1] == ref and is_commit_sha(parts[0]):
            return parts[0]
    return None
