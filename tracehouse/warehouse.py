"""The warehouse folder's layout, the core's public API for it: its paths, the generations
and the sources they hold, each table's files and the views over them, the build lock, and
read-only access. The atomic switch between generations is tracehouse/publish/generations.py.

Layout::

    <warehouse>/
      current -> generations/<id>          the one complete state readers see (symlink)
      tracehouse.duckdb -> current/tracehouse.duckdb
      generations/<id>/<table>.parquet      one folder per completed build; the large tables
                                            (schemas.PARTED_TABLES) are folders of parts:
                                            copies of cache/parts/ (never the same file, so
                                            damage to one cannot reach the other), hard links
                                            of the generation before for what did not change
      generations/<id>/files.json           every file's size and SHA-256, the schema version
      generations/<id>/snapshot_id          the snapshot the generation shows
      generations/<id>/tracehouse.duckdb    every table stored in the file itself, and the
                                            views of sql/: self-contained, so it opens from any
                                            directory, after the folder moves, in any client
      generations/<id>/reader.duckdb        views over that folder's Parquet files and sql/,
                                            opened read-only by tracehouse's own readers only
      generations/<id>/views.fingerprint    what both files' views and comments were written
                                            from: a build whose inputs have the same one starts
                                            from copies of them (assemble/duckdb_files.py)
      cache/                                staging parts, resolved table parts and the build
                                            manifest (reusable); each source's dataset context
                                            and its rows (context-<key>.loaded.pickle and
                                            context-<key>.rows.pickle)
      .build.lock                           held by the running build

A generation a connection still has open is never removed under it (publish/generations.py).
tracehouse's readers never open the published ``tracehouse.duckdb``, so no client holding it
locks them out; it is read-only to clients (``PUBLISHED_FILE_MODE``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import os
import re
import shutil
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tracehouse import interrupts, schemas
from tracehouse.files import sha256_files
from tracehouse.settings import Settings

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

DUCKDB_FILE = "tracehouse.duckdb"  # the published, self-contained file users open
# The published file is read-only (mode 0444) to every client: a `duckdb.connect` that would
# open it read-write (DuckDB's and DBeaver's default) is refused, so a stray DROP VIEW cannot
# change what everyone else reads. tracehouse never writes a published file (a build writes a
# new generation's; the Dagster view assets replace it with one rename), and one's own tables
# go into one's own file that ATTACHes it READ_ONLY (docs/using.md).
PUBLISHED_FILE_MODE = 0o444
READER_DUCKDB_FILE = "reader.duckdb"  # views over the Parquet files, for tracehouse's readers
DUCKDB_SPILL_DIR = "duckdb_tmp"  # finalize's DuckDB temp_directory, below cache/
# Completed generations kept by default (the current one included): readers still using the
# one before, and `tracehouse rollback` targets. The setting is keep_generations.
KEEP_GENERATIONS: int = Settings.keep_generations
COMPLETE_MARKER = ".complete"


class WarehouseBusy(RuntimeError):
    """Another build holds the warehouse lock."""


class WarehouseMissing(FileNotFoundError):
    """No completed build exists in the folder."""


class WarehouseDamaged(WarehouseMissing):
    """A file of the current generation is missing, has another size than when it was
    published, or cannot be read: no answer from it can be trusted until a build repairs it."""


class WarehouseOutdated(WarehouseMissing):
    """The current generation was written with another schema version (tables or SQL) than
    this tracehouse reads: its views and columns may not be the ones the commands query."""


class GenerationMoved(WarehouseBusy):
    """The current generation changed while a command waited for the build lock."""


# Every file of a generation with its size and SHA-256, and the generation's schema version,
# written when it is published: what readers and builds check the generation against (a
# deleted part used to shorten query answers silently, a flipped bit changed a latency).
FILES_LIST = "files.json"
# A Parquet file starts and ends with these bytes: a read checks them (two tiny reads per
# file), so a file overwritten with other bytes of the same size is named, not misread.
PARQUET_MAGIC = b"PAR1"


@functools.cache
def schema_version() -> str:
    """What a generation's layout depends on, derived so that nobody has to remember to bump
    it: the table declarations (tracehouse/schemas.py, tracehouse/tables/) and every SQL file
    (sql/, the views stored in the DuckDB files and the assembly of the tables), read from the
    files' bytes."""
    from tracehouse.sql_files import sql_dir

    here = Path(__file__).parent
    digest = hashlib.sha256((here / "schemas.py").read_bytes())
    for path in sorted((here / "tables").glob("*.py")):
        digest.update(f"\0{path.name}\0".encode())
        digest.update(path.read_bytes())
    root = sql_dir()
    for path in sorted(root.rglob("*.sql")):
        digest.update(f"\0{path.relative_to(root).as_posix()}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Warehouse:
    root: Path
    keep_generations: int = KEEP_GENERATIONS

    @property
    def current(self) -> Path:
        return self.root / "current"

    @property
    def generations(self) -> Path:
        return self.root / "generations"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def parts(self) -> Path:
        """Resolved parts of the large tables, shared by generations through hard links."""
        return self.cache / "parts"

    @property
    def staging(self) -> Path:
        return self.cache / "staging"

    @property
    def manifest_path(self) -> Path:
        return self.cache / "manifest.json"

    @property
    def duckdb_path(self) -> Path:
        return self.root / DUCKDB_FILE

    def current_generation(self) -> Path | None:
        """The folder of the last completed build, or None before the first one."""
        try:
            target = os.readlink(self.current)
        except OSError:
            return None
        folder = (self.root / target).resolve()
        return folder if (folder / DUCKDB_FILE).exists() else None

    def require_current(self, *, content: bool = False) -> Path:
        """The current generation, checked against the files it was published with (sizes and
        Parquet framing: cheap enough for every read; with ``content``, every byte, as what
        reuses its files does) and against this tracehouse's schema version."""
        folder = self.current_generation()
        if folder is None:
            raise WarehouseMissing(
                f"no warehouse at {self.root}: run `tracehouse build --source DATASET "
                f"--warehouse {self.root}` first"
            )
        problem = generation_damage(folder, content=content)
        if problem is not None:
            raise WarehouseDamaged(
                f"the current generation of {self.root} is damaged: {problem}; "
                f"`tracehouse build --warehouse {self.root}` repairs it from the source"
            )
        outdated = schema_difference(folder)
        if outdated is not None:
            raise WarehouseOutdated(
                f"{self.root}: its current generation {folder.name} {outdated}; run "
                f"`tracehouse build --warehouse {self.root}` to rebuild it"
            )
        return folder

    def base_generation(self, *, content: bool = True) -> tuple[Path | None, str | None]:
        """What a build builds on: the current generation when it is intact, else the newest
        intact completed one (a damaged generation or a lost ``current`` link must neither be
        built on nor turn the next build into a first one without the shrink guard). Returns
        it and, when it is not the current generation, the one line saying why. With
        ``content``, every file's bytes are checked against their recorded SHA-256 (a build
        links the base's files into the next generation: a flipped bit must not travel on)."""
        current = self.current_generation()
        problem = generation_damage(current, content=content) if current is not None else None
        if current is not None and problem is None:
            return current, None
        if current is None and not self.current.is_symlink() and not self.current.exists():
            problem = f"{self.current}: missing"
        elif current is None:
            problem = f"{self.current}: does not lead to a complete generation"
        intact = [g for g in self.completed_generations() if g != current]
        for generation in reversed(intact):
            if generation_damage(generation, content=content) is None:
                return generation, f"{problem}; built on generation {generation.name}"
        return None, problem if self.completed_generations() else None

    def table_path(self, table: str) -> Path:
        return self.require_current() / f"{table}.parquet"

    def new_generation(self) -> Path:
        self.generations.mkdir(parents=True, exist_ok=True)
        numbers = [
            int(p.name.split("-")[0]) for p in self.generations.iterdir() if p.name[:6].isdigit()
        ]
        folder = self.generations / f"{max(numbers, default=0) + 1:06d}-{os.getpid()}"
        folder.mkdir()
        return folder

    def completed_generations(self) -> list[Path]:
        """Every generation folder a build finished, oldest first."""
        if not self.generations.exists():
            return []
        return sorted(
            (p for p in self.generations.iterdir() if (p / COMPLETE_MARKER).exists()),
            key=lambda p: p.name,
        )

    def find_generation(self, wanted: str | None) -> Path:
        """A completed generation by folder name or number (``3`` = ``000003-...``); without
        one, the newest completed generation older than the current one."""
        completed = self.completed_generations()
        current = self.current_generation()
        if wanted is None:
            older = [p for p in completed if current is None or p.name < current.name]
            if not older:
                raise LookupError(
                    f"no generation older than the current one in {self.root}; "
                    "`tracehouse generations` lists what is kept"
                )
            return older[-1]
        matches = [
            p
            for p in completed
            if p.name == wanted or (wanted.isdigit() and int(p.name.split("-")[0]) == int(wanted))
        ]
        if len(matches) != 1:
            kept = ", ".join(p.name for p in completed) or "none"
            raise LookupError(f"no completed generation {wanted!r} in {self.root} (kept: {kept})")
        return matches[0]

    @contextlib.contextmanager
    def build_lock(self, timeout_s: float) -> Iterator[None]:
        """Exclusive lock for one build; a second build waits up to ``timeout_s`` then refuses."""
        lock_file = self.root / ".build.lock"
        self.root.mkdir(parents=True, exist_ok=True)
        handle = lock_file.open("a+")
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    if _names_file(lock_file, handle.fileno()):
                        break
                    # The build that held it removed it (an interrupted or failed first build
                    # leaves the folder as it found it): lock the file that is there now.
                    handle.close()
                    self.root.mkdir(parents=True, exist_ok=True)
                    handle = lock_file.open("a+")
                    continue
                except OSError as error:
                    if error.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        holder = handle.read().strip() if handle.seek(0) == 0 else ""
                        raise WarehouseBusy(
                            f"another build is writing {self.root} ({holder or 'unknown process'}); "
                            f"waited {timeout_s:.0f} s. Try again when it finishes."
                        ) from None
                    time.sleep(0.1)
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}\n")
            handle.flush()
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()


def _names_file(path: Path, descriptor: int) -> bool:
    """``path`` is the file open as ``descriptor`` (not removed or replaced since)."""
    try:
        named = path.stat()
    except OSError:
        return False
    held = os.fstat(descriptor)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def seal_published_file(path: Path) -> None:
    """Make a just-written published DuckDB file read-only (``PUBLISHED_FILE_MODE``)."""
    os.chmod(path, PUBLISHED_FILE_MODE)


def recorded_files(generation: Path) -> tuple[str | None, dict[str, dict[str, object]]]:
    """The schema version and file entries ``FILES_LIST`` records ({"size", "sha256"}); a list
    written before schema versions (``{path: size}``) gives None and sizes only. Raises
    FileNotFoundError or ValueError."""
    import json

    record = json.loads((generation / FILES_LIST).read_bytes())
    if not isinstance(record, dict):
        raise ValueError("not an object")
    if "files" not in record:  # the first layout: sizes only, no schema version
        if not all(isinstance(size, int) for size in record.values()):
            raise ValueError("not a list of file sizes")
        return None, {rel: {"size": size} for rel, size in record.items()}
    version, files = record.get("schema_version"), record["files"]
    if not isinstance(files, dict) or not all(
        isinstance(e, dict) and isinstance(e.get("size"), int) for e in files.values()
    ):
        raise ValueError("not a list of files with sizes")
    return (str(version) if version is not None else None), files


def schema_difference(generation: Path) -> str | None:
    """None when ``generation`` was written with this tracehouse's schema version, else what
    it was written with, as words that follow the generation's name."""
    try:
        version, _ = recorded_files(generation)
    except (OSError, ValueError):
        version = None
    if version == schema_version():
        return None
    if version is None:
        return "was built by an older tracehouse (no schema version recorded)"
    return (
        f"was built by another version of tracehouse (schema version {version}; this one "
        f"reads {schema_version()})"
    )


def _opens_as_duckdb(path: Path) -> bool:
    """A DuckDB file whose size moved since publication is still whole if DuckDB reads it: the
    Dagster view assets rewrite the published file's views in place (by one rename)."""
    import duckdb

    try:
        connection = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return False
    try:
        connection.execute("SELECT count(*) FROM duckdb_views()").fetchall()
        return True
    except duckdb.Error:
        return False
    finally:
        connection.close()


# A DuckDB file's first block: an 8-byte checksum, then these magic bytes.
DUCKDB_MAGIC = b"DUCK"
DUCKDB_MAGIC_OFFSET = 8


def _has_duckdb_header(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            handle.seek(DUCKDB_MAGIC_OFFSET)
            return handle.read(len(DUCKDB_MAGIC)) == DUCKDB_MAGIC
    except OSError:
        return False


def _parquet_framing_problem(path: Path, size: int) -> str | None:
    """Whether a Parquet file still starts and ends with its magic bytes."""
    if size < 2 * len(PARQUET_MAGIC):
        return f"{path}: {size:,} bytes, too short for a Parquet file"
    with path.open("rb") as handle:
        head = handle.read(len(PARQUET_MAGIC))
        handle.seek(-len(PARQUET_MAGIC), os.SEEK_END)
        tail = handle.read(len(PARQUET_MAGIC))
    if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        return f"{path}: not a Parquet file any more (its bytes changed since it was published)"
    return None


def _content_digests(
    generation: Path, recorded: dict[str, dict[str, object]], threads: int | None
) -> dict[str, str | OSError]:
    """The SHA-256 of every recorded file that has one and still has its recorded size, by
    relative path (or the error reading it). Several files are read at once, largest first
    (``sha256_files``, on ``threads``): this is most of a warm build's time."""
    sizes: dict[str, int] = {}
    for rel, entry in recorded.items():
        if "sha256" not in entry:
            continue
        try:
            size = (generation / rel).stat().st_size
        except OSError:
            continue  # reported as missing by the caller
        if size == entry["size"]:
            sizes[rel] = size

    largest_first = sorted(sizes, key=sizes.__getitem__, reverse=True)
    digests = sha256_files([generation / rel for rel in largest_first], threads)
    return {rel: digests[generation / rel] for rel in largest_first}


def generation_damage(
    generation: Path, *, content: bool = False, threads: int | None = None
) -> str | None:
    """The first problem found in ``generation``, naming the file, or None: a file of
    ``FILES_LIST`` missing or of another size (a truncated DuckDB file or part), a Parquet
    file without its magic bytes, the list itself or ``sources.json`` unreadable; with
    ``content``, also a file whose bytes no longer have the SHA-256 recorded (what a build or a
    rollback checks before relying on a generation: reading every byte is too slow for every
    read). The published DuckDB file may be rewritten by a client that opens it read-write
    (and by the Dagster view assets): it counts as whole while DuckDB opens it. A list of the
    first layout records sizes only; a generation without one is checked for its sources."""
    try:
        _, recorded = recorded_files(generation)
    except FileNotFoundError:
        recorded = {}
    except (OSError, ValueError) as error:
        return f"{generation / FILES_LIST}: unreadable ({error})"
    digests = _content_digests(generation, recorded, threads) if content else {}
    for rel, entry in recorded.items():
        path = generation / rel
        size = entry["size"]
        try:
            found = path.stat().st_size
        except OSError:
            return f"{path}: missing"
        digest = digests.get(rel)
        if rel == DUCKDB_FILE:
            # Recorded by its size (older lists: and its digest). With ``content``, a file of
            # the same size must still start as a DuckDB file, or it is opened to see: a warm
            # build checks the base, and importing DuckDB to open it took ~0.15 s of 0.36 s.
            if "sha256" in entry:
                moved = found != size or (digest is not None and digest != entry["sha256"])
            else:
                moved = found != size or (content and not _has_duckdb_header(path))
            if moved and not _opens_as_duckdb(path):
                return f"{path}: {found:,} bytes, {size:,} when it was published, unreadable"
            continue
        if found != size:
            return f"{path}: {found:,} bytes, {size:,} when it was published"
        if isinstance(digest, OSError):
            return f"{path}: unreadable ({digest.strerror or digest})"
        if digest is not None:
            if digest != entry["sha256"]:
                return f"{path}: its bytes changed since it was published (SHA-256 differs)"
        elif rel.endswith(".parquet"):
            try:
                problem = _parquet_framing_problem(path, found)
            except OSError as error:
                return f"{path}: unreadable ({error.strerror or error})"
            if problem is not None:
                return problem
    if (generation / SOURCES_FILE).exists():
        try:
            generation_sources(generation)
        except ValueError as error:
            return str(error)
    return None


SNAPSHOT_FILE = "snapshot_id"  # the snapshot the generation's own build produced
SOURCES_FILE = "sources.json"  # every source of the generation (GenerationSource)


@dataclass(frozen=True)
class GenerationSource:
    """One source as a generation holds it (one entry of its sources.json)."""

    source: str  # the name: `tracehouse build --source-name`, by default derived from uri
    uri: str  # folder or hf:// URI as given, without the @revision of a Hub source
    key: str  # folder name of its files under each per-source table (hex, path-safe)
    snapshot_id: str
    snapshot_number: int
    revision: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "uri": self.uri,
            "key": self.key,
            "snapshot_id": self.snapshot_id,
            "snapshot_number": self.snapshot_number,
            "revision": self.revision,
        }

    @classmethod
    def from_json(cls, entry: dict[str, object]) -> GenerationSource:
        return cls(
            str(entry["source"]),
            str(entry["uri"]),
            str(entry["key"]),
            str(entry["snapshot_id"]),
            int(entry["snapshot_number"]),  # type: ignore[arg-type]
            None if entry.get("revision") is None else str(entry["revision"]),
        )


def source_key(name: str) -> str:
    """The folder name of a source's files: path-safe whatever the name holds."""
    import hashlib

    return hashlib.sha256(name.encode()).hexdigest()[:16]


def generation_sources(generation: Path) -> list[GenerationSource]:
    """The sources of a generation, by name."""
    import json

    path = generation / SOURCES_FILE
    try:
        entries = json.loads(path.read_bytes())
        found = [GenerationSource.from_json(e) for e in entries]
    except FileNotFoundError:
        raise WarehouseMissing(
            f"{generation} was built by an older tracehouse (no {SOURCES_FILE}); rebuild it "
            "with `tracehouse build`"
        ) from None
    except (ValueError, TypeError, KeyError, AttributeError, OSError) as error:
        raise ValueError(f"{path}: not a list of sources ({type(error).__name__})") from None
    return sorted(found, key=lambda s: s.source)


def holds_sources(generation: Path) -> bool:
    """False for a generation an older tracehouse built (one source, no sources.json): a build
    starts afresh beside it instead of reading its layout."""
    return (generation / SOURCES_FILE).exists()


def write_generation_sources(generation: Path, sources: list[GenerationSource]) -> None:
    import json

    ordered = sorted(sources, key=lambda s: s.source)
    text = json.dumps([s.to_json() for s in ordered], indent=1, sort_keys=True) + "\n"
    (generation / SOURCES_FILE).write_text(text)


def table_files(generation: Path, table: str, key: str | None = None) -> list[Path]:
    """The Parquet files holding one table of a generation (with ``key``, one source's)."""
    path = generation / f"{table}.parquet"
    if key is not None:
        path = path / key
    if path.is_dir():
        return sorted(path.rglob("*.parquet"))
    return [] if key is not None else [path]


def table_row_count(generation: Path, table: str) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(path).num_rows for path in table_files(generation, table))


def table_view_sql(generation: Path, table: str, column_names: list[str] | None = None) -> str:
    """The SELECT a view of ``table`` runs: its files, columns in schema order (``column_names``
    when the caller has them already, else from ``schemas``). A per-source table is the UNION
    ALL of each source's files, with that source's name and snapshot as constants."""
    if table not in schemas.PER_SOURCE_TABLES:
        return files_select_sql(table, table_files(generation, table), None, column_names)
    return " UNION ALL ".join(
        files_select_sql(table, table_files(generation, table, source.key), source, column_names)
        for source in generation_sources(generation)
    )


def files_select_sql(
    table: str,
    files: list[Path],
    source: GenerationSource | None,
    column_names: list[str] | None = None,
) -> str:
    """The rows of some of ``table``'s files as its view shows them: columns in schema order,
    and for a per-source table (``source``) that source's name and snapshot as constants."""
    if column_names is None:
        column_names = schemas.TABLES[table].column_names
    columns = []
    for name in column_names:
        if source is not None and name == "source":
            columns.append(f'{sql_literal(source.source)} AS "source"')
        elif source is not None and name == "snapshot_id":
            columns.append(f'{sql_literal(source.snapshot_id)} AS "snapshot_id"')
        else:
            columns.append(f'"{name}"')
    # History files accumulate over builds of every tracehouse version: a column added later
    # reads as null in the older files (each folder holds one empty file of the current schema,
    # so the column always exists).
    options = ", union_by_name = true" if table in schemas.HISTORY_TABLES else ""
    # Names and paths are our own (schemas.py, the generation folder); the source name and
    # snapshot id are quoted literals.
    return f"SELECT {', '.join(columns)} FROM read_parquet({_file_list(files)}{options})"  # noqa: S608


def _file_list(paths: list[Path]) -> str:
    return "[" + ", ".join(sql_literal(path) for path in paths) + "]"


def write_sorted_table(
    generation: Path,
    table: str,
    target: Path,
    config: dict[str, str | bool | int | float | list[str]] | None = None,
    limits: contextlib.AbstractContextManager[object] | None = None,
) -> None:
    """A table stored as parts, as one Parquet file in the table's order: the same bytes for
    the same rows however the parts were cut (what an export copies and Iceberg publishes).
    ``config`` adds DuckDB settings (a memory and spill limit) and ``limits`` is entered around
    the sort (a reader's resource limits)."""
    import duckdb

    connection = duckdb.connect(
        config={"preserve_insertion_order": True, "threads": 1, **(config or {})}
    )
    try:
        with limits if limits is not None else contextlib.nullcontext():
            connection.sql(
                f"SELECT * FROM ({table_view_sql(generation, table)}) s "  # noqa: S608  (own names)
                f"ORDER BY {schemas.TABLE_ORDER[table]}"
            ).write_parquet(str(target), compression="zstd")
    except duckdb.IOException as error:
        # DuckDB says why in JSON naming the temporary file; the OS error it carries is the
        # reason (a full disk, the file size limit), and replace_atomically names the file.
        found = re.search(r'"errno":\s*"([0-9]+)"', str(error))
        if found is None:
            raise
        code = int(found.group(1))
        raise OSError(code, os.strerror(code)) from error
    finally:
        connection.close()


def read_table(generation: Path, table: str) -> pa.Table:
    """One table of a generation as Arrow, exactly as its view shows it, in table order."""
    import duckdb

    # source_snapshots has no sort order: its rows keep the order they were appended in.
    order = schemas.TABLE_ORDER.get(table)
    connection = duckdb.connect(config={"threads": 1, "preserve_insertion_order": True})
    try:
        return connection.sql(
            f"SELECT * FROM ({table_view_sql(generation, table)}) s "  # noqa: S608  (own names)
            + (f"ORDER BY {order}" if order else "")
        ).to_arrow_table()
    finally:
        connection.close()


def generation_tables(generation: Path) -> list[str]:
    """The tables a generation holds (those whose files exist), in schema order."""
    return [name for name in schemas.TABLES if (generation / f"{name}.parquet").exists()]


def create_table_views(
    connection: duckdb.DuckDBPyConnection,
    generation: Path,
    *,
    temporary: bool = False,
    only: Collection[str] | None = None,
) -> None:
    """One view per table of the generation (tables whose files exist); with ``only``, just
    those tables' views again (a build that wrote one table since it last created them: each
    view lists its files and DuckDB reads their footers to bind it, ~3 ms a table).

    Temporary views (a reader's) take their columns from the views the build stored in the
    generation's DuckDB file, through DuckDB's catalog: a read command needs no Arrow import."""
    if temporary:
        stored = _stored_view_columns(connection)
        tables = [t for t in stored if (generation / f"{t}.parquet").exists()]
    else:
        stored = {name: table.column_names for name, table in schemas.TABLES.items()}
        tables = generation_tables(generation)
    if only is not None:
        tables = [t for t in tables if t in only]
    kind = "TEMP VIEW" if temporary else "VIEW"
    for table in tables:
        view = table_view_sql(generation, table, stored[table])
        connection.execute(f"CREATE OR REPLACE {kind} {table} AS {view}")


TABLE_VIEW_COLUMNS_SQL = """
SELECT table_name, list(column_name ORDER BY column_index) AS columns
FROM duckdb_columns()
WHERE database_name = current_database() AND NOT internal
  AND table_name IN (SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary)
GROUP BY table_name
"""


def _stored_view_columns(connection: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    # The SQL views (sql/) are listed too; no table file has their names, so they are skipped.
    rows = connection.execute(TABLE_VIEW_COLUMNS_SQL).fetchall()
    return {name: list(columns) for name, columns in rows}


def sql_literal(path: Path | str) -> str:
    """A file path as an SQL string literal. Views cannot take bound parameters, so the one
    value formatted into DDL is a path we chose, with its quotes doubled."""
    return "'" + str(path).replace("'", "''") + "'"


QUERY_SPILL_DIR = "query_tmp"  # below cache/: one folder per connection


def query_spill_dir(warehouse: Warehouse, generation: Path) -> Path:
    """A folder for the spill files of this process's readers of ``generation``: under
    ``cache/``, never inside a published generation (DuckDB's default for a database file is a
    folder beside it). One per process and generation, because every connection of a process to
    one DuckDB file must be opened with the same configuration. DuckDB creates it when it first
    spills and removes it on close."""
    parent = warehouse.cache / QUERY_SPILL_DIR
    with contextlib.suppress(OSError):  # a reader without write access spills nowhere
        parent.mkdir(parents=True, exist_ok=True)
    return parent / f"{os.getpid()}-{generation.name}"


_SPILL_FOLDER_NAME = re.compile(r"([1-9][0-9]*)-[^/]+")  # query_spill_dir's <pid>-<generation>


def sweep_dead_spill_folders(warehouse: Warehouse) -> list[Path]:
    """Remove the spill folders a reader left when it died without closing (killed: DuckDB
    removes its folder only on close), and return them. A folder is removed only when its name
    is query_spill_dir's ``<pid>-<generation>``, it is a real folder (not a link) and no process
    with that pid is alive: a live process's folder, even another user's, is left alone. Readers
    of one warehouse are assumed to share the machine (pids of another machine or PID namespace
    cannot be checked)."""
    parent = warehouse.cache / QUERY_SPILL_DIR
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    removed = []
    for entry in entries:
        match = _SPILL_FOLDER_NAME.fullmatch(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        if _process_alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):  # another reader may be sweeping it too
            shutil.rmtree(entry.path)
            removed.append(Path(entry.path))
    return removed


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # it exists (another user's), or the pid cannot be asked about: keep it
    return True


# Attempts to open the current generation: a build can publish a newer one and remove this
# one between our reading `current` and DuckDB's taking its lock (keep_generations=1).
OPEN_ATTEMPTS = 5


def _open_reader(
    warehouse: Warehouse,
    config_of: Callable[[Path], dict[str, str | bool | int | float | list[str]]],
) -> tuple[duckdb.DuckDBPyConnection, Path]:
    import duckdb

    attempt = 0
    while True:
        generation = warehouse.require_current()
        reader = generation / READER_DUCKDB_FILE
        if not reader.exists():  # built by an older tracehouse: views in the published file
            reader = generation / DUCKDB_FILE
        try:
            connection = duckdb.connect(str(reader), read_only=True, config=config_of(generation))
        except duckdb.IOException:
            # Removed by a build (or being removed: it holds the lock) since we read `current`.
            attempt += 1
            if attempt == OPEN_ATTEMPTS or warehouse.current_generation() == generation:
                raise
            continue
        return connection, generation


def connect_read_only(
    warehouse: Warehouse,
    *,
    memory_limit_mb: int | None = None,
    spill_limit_mb: int | None = None,
    block_pool_mb: int | None = None,
) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the current generation, through its reader file.

    The published ``tracehouse.duckdb`` is not opened, so a client holding it (read-write, as
    DuckDB and DBeaver open a file by default) blocks no read; the connection's lock on the
    reader file keeps the generation on disk for as long as it stays open, across any number of
    builds. External access stays limited to the generation's own Parquet files, and the
    configuration is locked, so a query can neither write, nor read or write other files (nor
    lift its memory limit). What does not fit in ``memory_limit_mb`` spills to
    ``query_spill_dir``, at most ``spill_limit_mb`` of it (DuckDB's own limit is 90 % of the
    free disk); the spill folders of readers that died are removed first.

    ``block_pool_mb`` keeps that much of DuckDB's block memory in a pool it does not hand back
    to the system while the connection is open. A batch reader that runs at its memory limit
    (the report) needs it: there DuckDB evicts on almost every allocation and returns the freed
    memory each time (jemalloc's arenas purged, glibc's heap trimmed), and taking the pages back
    cost the 1,000,000-run report ~2.7 million page faults.
    """
    sweep_dead_spill_folders(warehouse)

    def config_of(generation: Path) -> dict[str, str | bool | int | float | list[str]]:
        config: dict[str, str | bool | int | float | list[str]] = {
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "temp_directory": str(query_spill_dir(warehouse, generation)),
        }
        if memory_limit_mb is not None:
            config["memory_limit"] = f"{memory_limit_mb}MiB"
        if block_pool_mb is not None:
            config["block_allocator_memory"] = f"{block_pool_mb}MiB"
        return config

    connection, generation = _open_reader(warehouse, config_of)
    interrupts.watch_connection(connection)  # Ctrl-C cancels a long query
    # Temporary views over this folder's files shadow the stored ones, whose absolute paths
    # would break once the warehouse folder is moved or restored elsewhere.
    create_table_views(connection, generation, temporary=True)
    # A second connection to the same file in this process shares the first one's database,
    # already confined to this same generation folder and locked: nothing left to set.
    if not connection.execute("SELECT current_setting('lock_configuration')").fetchone()[0]:  # type: ignore[index]
        connection.execute("SET allowed_directories = $dirs", {"dirs": [str(generation) + "/"]})
        if spill_limit_mb is not None:  # a setting, not part of the configuration compared
            connection.execute(f"SET max_temp_directory_size = '{int(spill_limit_mb)}MiB'")
        connection.execute("SET enable_external_access = false")
        connection.execute("SET lock_configuration = true")
    return connection


def discard_reusable_cache(warehouse: Warehouse) -> None:
    """Forget every part and parse result the cache holds, so a repair (or a rebuild of an
    older schema version) re-reads the source instead of reusing anything derived before (the
    cache holds copies: the generations keep their own files)."""
    warehouse.manifest_path.unlink(missing_ok=True)
    for folder in (warehouse.staging, warehouse.parts):
        shutil.rmtree(folder, ignore_errors=True)
    for pickle_file in warehouse.cache.glob("context-*.pickle"):
        pickle_file.unlink(missing_ok=True)
