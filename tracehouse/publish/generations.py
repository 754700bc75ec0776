"""Publishing a generation: the atomic switch of ``current`` to a new (or, rolling back, an
earlier) generation, the record of its files, and the removal of the generations no reader
needs any more (tracehouse/warehouse.py describes the layout).

A build writes a new generation folder beside the current one and only then swaps the
``current`` symlink with one ``rename`` (atomic on POSIX). A crash at any moment leaves either
the previous generation or, on a first build, nothing at all behind ``current``; leftovers are
removed by the next build.

A generation some connection still has open is never removed under it: every DuckDB opener
(``tracehouse query``, ``tracehouse.connect``, the ``duckdb`` command, DBeaver, a notebook)
holds DuckDB's lock on one of the generation's two DuckDB files, and a build removes a stale
generation only after taking a write lock on both itself (``claim_generation``); one it cannot
lock stays until a later build finds it closed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
from collections.abc import Collection, Iterator
from pathlib import Path

from tracehouse import interrupts
from tracehouse.files import read_parquet_file, sha256_file, symlink_atomically, write_atomically
from tracehouse.warehouse import (
    COMPLETE_MARKER,
    DUCKDB_FILE,
    DUCKDB_SPILL_DIR,
    FILES_LIST,
    PUBLISHED_FILE_MODE,
    QUERY_SPILL_DIR,
    READER_DUCKDB_FILE,
    GenerationMoved,
    Warehouse,
    WarehouseDamaged,
    WarehouseOutdated,
    generation_damage,
    recorded_files,
    schema_difference,
    schema_version,
    table_row_count,
)

# files.temporary_sibling's names: `.<name>.<pid>.tmp`.
_TEMPORARY_NAME = re.compile(r"\..+\.[0-9]+\.tmp")


def publish(warehouse: Warehouse, generation: Path) -> None:
    """Make ``generation`` the current state in one atomic rename, then tidy up."""
    record_generation_files(generation)
    _fsync_tree(generation)
    with interrupts.deferred():  # Ctrl-C now would leave the user guessing: finish first
        symlink_atomically(warehouse.current, os.path.relpath(generation, warehouse.root))
        interrupts.note_published(generation.name)
        _fsync_path(warehouse.root)
    (warehouse.cache / QUERY_SPILL_DIR).mkdir(parents=True, exist_ok=True)  # readers spill here
    if not warehouse.duckdb_path.is_symlink():
        with contextlib.suppress(FileNotFoundError):
            warehouse.duckdb_path.unlink()
        symlink_atomically(warehouse.duckdb_path, f"current/{DUCKDB_FILE}")
    remove_stale_generations(warehouse)


def rollback(warehouse: Warehouse, generation: Path) -> None:
    """Make an earlier completed generation current again, atomically (under the lock)."""
    with interrupts.deferred():
        symlink_atomically(warehouse.current, os.path.relpath(generation, warehouse.root))
        interrupts.note_published(generation.name)
        _fsync_path(warehouse.root)


def roll_back(
    warehouse: Warehouse, wanted: str | None, timeout_s: float
) -> tuple[Path | None, Path]:
    """Make an earlier completed generation current again (``find_generation(wanted)``):
    (what was current, what is now). Both are resolved under the build lock; a build that
    published while this waited for the lock is not undone blindly (``GenerationMoved``),
    and a target that is damaged or of another schema version is refused."""
    seen = warehouse.current_generation()
    if seen is None and not warehouse.completed_generations():
        warehouse.require_current()  # says there is no warehouse (and creates no folder)
    with warehouse.build_lock(timeout_s):
        current = warehouse.current_generation()
        if current != seen:
            raise GenerationMoved(
                f"{warehouse.root}: the current generation changed from "
                f"{seen.name if seen else 'none'} to {current.name if current else 'none'} "
                "while this rollback waited for the build lock (a build published it); "
                "nothing was switched. `tracehouse generations` lists them; run "
                "`tracehouse rollback` again to roll that one back"
            )
        target = warehouse.find_generation(wanted)
        if target == current:
            return current, target
        problem = generation_damage(target, content=True)
        if problem is not None:
            raise WarehouseDamaged(
                f"generation {target.name} is damaged: {problem}; nothing was switched"
                f" ({current.name if current else 'none'} stays current)"
            )
        outdated = schema_difference(target)
        if outdated is not None:
            raise WarehouseOutdated(
                f"generation {target.name} {outdated}; this version cannot read it, so "
                f"nothing was switched ({current.name if current else 'none'} stays current)"
            )
        rollback(warehouse, target)
    return current, target


def remove_stale_generations(warehouse: Warehouse) -> None:
    """Drop unfinished generations and all but the newest completed ones, and whatever
    temporary files a killed build left (only ever called while holding the build lock)."""
    _remove_temporary_files(warehouse)
    if not warehouse.generations.exists():
        return
    current = warehouse.current_generation()
    folders = sorted(warehouse.generations.iterdir(), key=lambda p: p.name)
    completed = [p for p in folders if p == current or (p / COMPLETE_MARKER).exists()]
    keep = set(completed[-warehouse.keep_generations :])
    if current is not None:
        keep.add(current)
    for folder in folders:
        if folder in keep:
            continue
        if folder not in completed:  # an unfinished build's: nobody reads it
            shutil.rmtree(folder, ignore_errors=True)
            continue
        remove_generation_unless_open(folder)


def _remove_temporary_files(warehouse: Warehouse) -> None:
    # Every file a build writes is first written as `.<name>.<pid>.tmp` and then renamed;
    # a build killed in between leaves the temporary file (e.g. cache/.context.pickle.<pid>.tmp),
    # and DuckDB leaves its spill files in cache/duckdb_tmp.
    # Only names of that form: the folder may be one the user also keeps other files in.
    for folder in (warehouse.root, warehouse.cache, warehouse.staging):
        for leftover in folder.glob(".*.tmp"):
            if _TEMPORARY_NAME.fullmatch(leftover.name):
                with contextlib.suppress(OSError):
                    leftover.unlink()
    shutil.rmtree(warehouse.cache / DUCKDB_SPILL_DIR, ignore_errors=True)


def remove_generation_unless_open(folder: Path) -> bool:
    """Remove a generation folder unless a connection has it open; True when removed."""
    with claim_generation(folder) as claimed:
        if claimed:
            shutil.rmtree(folder, ignore_errors=True)
        return claimed


@contextlib.contextmanager
def claim_generation(folder: Path) -> Iterator[bool]:
    """True, holding a write lock on each DuckDB file of ``folder`` for the ``with`` block, when
    no connection has one open; False when one has (a reader still uses the generation).

    The locks are open-file-description locks (Linux), which conflict with the POSIX record
    locks DuckDB takes for every connection, its own process's included, and whose release
    never drops a lock a connection of this process holds. Where they are missing, POSIX locks
    stand in (they cannot see this process's own connections)."""
    handles: list[int] = []
    try:
        for name in (DUCKDB_FILE, READER_DUCKDB_FILE):
            try:
                handle = _open_for_write_lock(folder / name)
            except FileNotFoundError:
                continue
            handles.append(handle)
            if not _try_write_lock(handle):
                yield False
                return
        yield True
    finally:
        for handle in handles:
            os.close(handle)


def _open_for_write_lock(path: Path) -> int:
    """A descriptor open for writing (a write lock needs one), also on a sealed published file:
    made writable for the one ``open``. Only a generation about to be removed is claimed, so
    nobody opens that file read-write meanwhile (clients open the current one)."""
    try:
        return os.open(path, os.O_RDWR)
    except PermissionError:
        os.chmod(path, PUBLISHED_FILE_MODE | 0o200)
        try:
            return os.open(path, os.O_RDWR)
        finally:
            os.chmod(path, PUBLISHED_FILE_MODE)


def _try_write_lock(handle: int) -> bool:
    import struct

    try:
        if hasattr(fcntl, "F_OFD_SETLK"):
            # struct flock: l_type, l_whence, l_start, l_len (0: the whole file), l_pid (0)
            request = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            fcntl.fcntl(handle, fcntl.F_OFD_SETLK, request)
        else:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def record_generation_files(generation: Path, only: Collection[str] | None = None) -> None:
    """Write ``FILES_LIST``: the schema version, and every regular file below ``generation``
    with its size and SHA-256 (with ``only``, those files are recorded again and the others
    keep their entries: a rewrite of one file must not bless damage to another). The published
    DuckDB file has its size only: it is whole while DuckDB opens it (``generation_damage``),
    and reading all of it (81 MB of the bench corpus's, ~0.07 s) came last in every build.

    A file that is a hard link of a file another kept generation recorded (the files a build
    leaves alone) takes that entry's digest instead of being read again: cheaper, and a file
    damaged since it was first published is never recorded as good."""
    import json

    files: dict[str, dict[str, object]] = {}
    if only is not None:
        files = dict(recorded_files(generation)[1])
    known = _recorded_by_inode(generation)
    for dirpath, _, filenames in os.walk(generation):
        for name in filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(generation).as_posix()
            if rel == FILES_LIST or path.is_symlink() or (only is not None and rel not in only):
                continue
            info = path.stat()
            entry: dict[str, object] | None = known.get((info.st_dev, info.st_ino))
            if rel == DUCKDB_FILE:
                entry = {"size": info.st_size}
            elif entry is None or entry["size"] != info.st_size:
                entry = {"size": info.st_size, "sha256": sha256_file(path)}
            files[rel] = entry
    lines = ",\n".join(f"{json.dumps(rel)}: {json.dumps(files[rel])}" for rel in sorted(files))
    version = json.dumps(schema_version())
    # Replaced whole: the Dagster view assets record the current generation's list again
    # while readers check against it.
    write_atomically(
        generation / FILES_LIST,
        f'{{"schema_version": {version},\n"files": {{\n{lines}\n}}}}\n'.encode(),
    )


def _recorded_by_inode(generation: Path) -> dict[tuple[int, int], dict[str, object]]:
    """The digested entries of every other completed generation's files, by inode."""
    found: dict[tuple[int, int], dict[str, object]] = {}
    for other in generation.parent.iterdir():
        if other == generation or not (other / COMPLETE_MARKER).exists():
            continue
        try:
            _, files = recorded_files(other)
        except (OSError, ValueError):
            continue
        for rel, entry in files.items():
            if "sha256" not in entry:
                continue
            with contextlib.suppress(OSError):
                info = (other / rel).stat()
                found[(info.st_dev, info.st_ino)] = entry
    return found


def _fsync_tree(folder: Path) -> None:
    """Every file and folder below ``folder`` on disk, before the switch makes it current: the
    parts in its table folders too, not only its top-level files. Without them, a power loss
    right after a build could leave the current generation naming parts whose bytes never
    reached the disk (its predecessor removed). A part linked from an earlier generation is
    clean already: its fsync returns at once (a generation of the bench corpus: ~0.01 s)."""
    for dirpath, _, filenames in os.walk(folder):  # (symlinked folders are not followed)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                _fsync_path(path)
        _fsync_path(dirpath)  # its entries: the names of the files just synced
    _fsync_path(folder.parent)  # the generation's own name


def _fsync_path(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def describe_generation(folder: Path, current: bool) -> dict[str, object]:
    """One line of `tracehouse generations`: when it was built, from what, how many runs."""
    snapshot: dict[str, object] = {}
    try:
        history = read_parquet_file(folder / "source_snapshots.parquet").to_pylist()
        snapshot = history[-1] if history else {}  # the build's own snapshot is appended last
        runs: object = table_row_count(folder, "runs")
    except (OSError, ValueError):  # a damaged part (pyarrow's ArrowInvalid is a ValueError)
        runs = None
    built_at = snapshot.get("built_at")
    return {
        "generation": folder.name,
        "current": "*" if current else "",
        "built_at": built_at.strftime("%Y-%m-%d %H:%M:%S") if built_at else None,  # type: ignore[attr-defined]
        "runs": runs,
        "source": snapshot.get("uri"),  # the folder or hf:// URI the build was given
        "revision": snapshot.get("resolved_sha"),
        "snapshot_id": snapshot.get("snapshot_id"),
    }
