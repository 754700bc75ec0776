"""The warehouse folder: generations, the atomic switch between them, the build lock, and
read-only access.

Layout::

    <warehouse>/
      current -> generations/<id>          the one complete state readers see (symlink)
      tracehouse.duckdb -> current/tracehouse.duckdb
      generations/<id>/<table>.parquet      one folder per completed build; the large tables
                                            (PARTED_TABLES) are folders of part files there,
                                            hard links into cache/parts/, not copies
      generations/<id>/snapshot_id          the snapshot the generation shows
      generations/<id>/tracehouse.duckdb    views over that folder's Parquet files and sql/
      cache/                                staging parts, resolved table parts and the build
                                            manifest (reusable)
      .build.lock                           held by the running build

A build writes a new generation folder beside the current one and only then swaps the
``current`` symlink with one ``rename`` (atomic on POSIX). A crash at any moment leaves either
the previous generation or, on a first build, nothing at all behind ``current``; leftovers are
removed by the next build.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines import interrupts
from pipelines.files import symlink_atomically
from pipelines.settings import Settings

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

DUCKDB_FILE = "tracehouse.duckdb"
DUCKDB_SPILL_DIR = "duckdb_tmp"  # finalize's DuckDB temp_directory, below cache/
# Completed generations kept by default (the current one included): readers still using the
# one before, and `tracehouse rollback` targets. The setting is keep_generations.
KEEP_GENERATIONS: int = Settings.keep_generations
COMPLETE_MARKER = ".complete"


class WarehouseBusy(RuntimeError):
    """Another build holds the warehouse lock."""


class WarehouseMissing(FileNotFoundError):
    """No completed build exists in the folder."""


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

    def require_current(self) -> Path:
        folder = self.current_generation()
        if folder is None:
            raise WarehouseMissing(
                f"no warehouse at {self.root}: run `tracehouse build --source DATASET "
                f"--warehouse {self.root}` first"
            )
        return folder

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

    def publish(self, generation: Path) -> None:
        """Make ``generation`` the current state in one atomic rename, then tidy up."""
        _fsync_tree(generation)
        with interrupts.deferred():  # Ctrl-C now would leave the user guessing: finish first
            symlink_atomically(self.current, os.path.relpath(generation, self.root))
            interrupts.note_published(generation.name)
            _fsync_dir(self.root)
        if not self.duckdb_path.is_symlink():
            with contextlib.suppress(FileNotFoundError):
                self.duckdb_path.unlink()
            symlink_atomically(self.duckdb_path, f"current/{DUCKDB_FILE}")
        self.remove_stale_generations()

    def remove_stale_generations(self) -> None:
        """Drop unfinished generations and all but the newest completed ones, and whatever
        temporary files a killed build left (only ever called while holding the build lock)."""
        self._remove_temporary_files()
        if not self.generations.exists():
            return
        current = self.current_generation()
        folders = sorted(self.generations.iterdir(), key=lambda p: p.name)
        completed = [p for p in folders if p == current or (p / COMPLETE_MARKER).exists()]
        keep = set(completed[-self.keep_generations :])
        if current is not None:
            keep.add(current)
        for folder in folders:
            if folder not in keep:
                shutil.rmtree(folder, ignore_errors=True)

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

    def rollback(self, generation: Path) -> None:
        """Make an earlier completed generation current again, atomically (under the lock)."""
        with interrupts.deferred():
            symlink_atomically(self.current, os.path.relpath(generation, self.root))
            interrupts.note_published(generation.name)
            _fsync_dir(self.root)

    def _remove_temporary_files(self) -> None:
        # Every file a build writes is first written as `.<name>.<pid>.tmp` and then renamed;
        # a build killed in between leaves the temporary file (e.g. cache/.context.pickle.<pid>.tmp),
        # and DuckDB leaves its spill files in cache/duckdb_tmp.
        for folder in (self.root, self.cache, self.staging):
            for leftover in folder.glob(".*.tmp"):
                with contextlib.suppress(OSError):
                    leftover.unlink()
        shutil.rmtree(self.cache / DUCKDB_SPILL_DIR, ignore_errors=True)

    @contextlib.contextmanager
    def build_lock(self, timeout_s: float) -> Iterator[None]:
        """Exclusive lock for one build; a second build waits up to ``timeout_s`` then refuses."""
        self.root.mkdir(parents=True, exist_ok=True)
        handle = (self.root / ".build.lock").open("a+")
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(folder: Path) -> None:
    for path in folder.iterdir():
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _fsync_dir(folder)


# Tables stored as a folder of parts (cache/parts/<table>/), so that a build re-writes only
# the parts whose inputs changed: one part per (source, group of source files) for runs,
# correctness, rejects and trace_lines (a build of one source writes none of another's), one
# per ranking bucket (sql/ranking_inputs.sql) for run_rankings, which spans every source. Their
# rows are in no particular order across parts; exports sort them.
PARTED_TABLES = ("runs", "correctness", "rejects", "trace_lines", "run_rankings")
SNAPSHOT_FILE = "snapshot_id"  # the snapshot the generation's own build produced
SOURCES_FILE = "sources.json"  # every source of the generation (GenerationSource)

# Names of per-source tables: the generation holds <table>.parquet/<source key>/*.parquet.
PER_SOURCE_TABLES = (
    "definitions",
    "implementations",
    "workloads",
    "environments",
    "runs",
    "correctness",
    "rejects",
    "trace_lines",
    "ingest_paths",
    "run_appearances",
    "run_disappearances",
)
# Per-source tables that keep every build's files (run_history's events), not only the latest.
HISTORY_TABLES = ("run_appearances", "run_disappearances")
# Columns of per-source tables the views add from sources.json (schemas.VIEW_ADDED_COLUMNS):
# stored in the parts they would change every part on every build.
VIEW_ADDED_COLUMNS = ("source", "snapshot_id")


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

    try:
        entries = json.loads((generation / SOURCES_FILE).read_text())
    except FileNotFoundError:
        raise WarehouseMissing(
            f"{generation} was built by an older tracehouse (no {SOURCES_FILE}); rebuild it "
            "with `tracehouse build`"
        ) from None
    return sorted((GenerationSource.from_json(e) for e in entries), key=lambda s: s.source)


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
    if column_names is None:
        from pipelines import schemas

        column_names = schemas.TABLES[table].column_names
    if table not in PER_SOURCE_TABLES:
        files = _file_list(table_files(generation, table))
        columns = ", ".join(f'"{name}"' for name in column_names)
        return f"SELECT {columns} FROM read_parquet({files})"  # noqa: S608  (own names)
    selects = []
    for source in generation_sources(generation):
        columns = []
        for name in column_names:
            if name == "source":
                columns.append(f'{sql_literal(source.source)} AS "source"')
            elif name == "snapshot_id":
                columns.append(f'{sql_literal(source.snapshot_id)} AS "snapshot_id"')
            else:
                columns.append(f'"{name}"')
        files = _file_list(table_files(generation, table, source.key))
        # History files accumulate over builds of every tracehouse version: a column added
        # later reads as null in the older files (each folder holds one empty file of the
        # current schema, so the column always exists).
        options = ", union_by_name = true" if table in HISTORY_TABLES else ""
        # Names and paths are our own (schemas.py, the generation folder); the source name and
        # snapshot id are quoted literals.
        selects.append(f"SELECT {', '.join(columns)} FROM read_parquet({files}{options})")  # noqa: S608
    return " UNION ALL ".join(selects)


def _file_list(paths: list[Path]) -> str:
    return "[" + ", ".join(sql_literal(path) for path in paths) + "]"


def read_table(generation: Path, table: str) -> pa.Table:
    """One table of a generation as Arrow, exactly as its view shows it, in table order."""
    import duckdb

    from pipelines import schemas

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


def create_table_views(
    connection: duckdb.DuckDBPyConnection, generation: Path, *, temporary: bool = False
) -> None:
    """One view per table of the generation (tables whose files exist).

    Temporary views (a reader's) take their columns from the views the build stored in the
    generation's DuckDB file, through DuckDB's catalog: a read command needs no Arrow import."""
    if temporary:
        stored = _stored_view_columns(connection)
        tables = [t for t in stored if (generation / f"{t}.parquet").exists()]
    else:
        from pipelines import schemas

        stored = {name: table.column_names for name, table in schemas.TABLES.items()}
        tables = [t for t in schemas.TABLES if (generation / f"{t}.parquet").exists()]
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
    from pipelines.sql_files import VIEW_ORDER

    rows = connection.execute(TABLE_VIEW_COLUMNS_SQL).fetchall()
    return {name: list(columns) for name, columns in rows if name not in VIEW_ORDER}


def sql_literal(path: Path | str) -> str:
    """A file path as an SQL string literal. Views cannot take bound parameters, so the one
    value formatted into DDL is a path we chose, with its quotes doubled."""
    return "'" + str(path).replace("'", "''") + "'"


def connect_read_only(warehouse: Warehouse) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the current generation's DuckDB file.

    External access stays limited to the generation's own Parquet files, and the configuration
    is locked, so a query can neither write, nor read or write other files.
    """
    import duckdb

    generation = warehouse.require_current()
    connection = duckdb.connect(
        str(generation / DUCKDB_FILE),
        read_only=True,
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False},
    )
    interrupts.watch_connection(connection)  # Ctrl-C cancels a long query
    # Temporary views over this folder's files shadow the stored ones, whose absolute paths
    # would break once the warehouse folder is moved or restored elsewhere.
    create_table_views(connection, generation, temporary=True)
    connection.execute("SET allowed_directories = $dirs", {"dirs": [str(generation) + "/"]})
    connection.execute("SET enable_external_access = false")
    connection.execute("SET lock_configuration = true")
    return connection


READ_ONLY_STATEMENTS = frozenset({"SELECT", "EXPLAIN"})


class ReadOnlyViolation(PermissionError):
    """A statement that would change something, refused before it runs."""


def check_read_only(connection: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse anything but SELECT/EXPLAIN, judged by DuckDB's own parser (not by string tests).

    ``EXPLAIN ANALYZE`` runs the statement it explains, so it is allowed only around a SELECT:
    ``EXPLAIN ANALYZE COPY ... TO '<generation>/runs.parquet'`` would otherwise overwrite the
    warehouse (the generation folder is the one place the connection may touch files).
    """
    statements = connection.extract_statements(sql)
    if not statements:
        raise ReadOnlyViolation("refused: the SQL is empty; give one SELECT statement")
    for statement in statements:
        kind = statement.type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise ReadOnlyViolation(
                f"refused: {_first_keyword(statement.query, kind)} statements are not allowed; "
                "`tracehouse query` is read-only (only SELECT and EXPLAIN run). Rebuild the "
                "warehouse with `tracehouse build`."
            )
        if kind == "EXPLAIN":
            _check_explain(connection, statement.query)
    if len(statements) > 1:
        raise ReadOnlyViolation(
            f"refused: {len(statements)} statements given; `tracehouse query` runs exactly one "
            "statement at a time (only the last result would show)"
        )


def _words(sql: str) -> list[tuple[int, str]]:
    """(position, text) of each token of ``sql`` except comments, by DuckDB's tokenizer."""
    import duckdb

    tokens = duckdb.tokenize(sql)
    words = []
    for i, (position, kind) in enumerate(tokens):
        if kind == duckdb.token_type.comment:
            continue
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        words.append((position, sql[position:end].strip()))
    return words


def _first_keyword(sql: str, fallback: str) -> str:
    # DuckDB files INSTALL under LOAD and RESET under SET; name what the user typed.
    words = _words(sql)
    word = words[0][1].upper() if words else ""
    return word if word.isalpha() else fallback


def _check_explain(connection: duckdb.DuckDBPyConnection, sql: str) -> None:
    words = _words(sql)
    analyze = False
    i = 1  # words[0] is EXPLAIN
    while i < len(words):
        word = words[i][1].upper().strip('"')
        if word in ("ANALYZE", "ANALYSE"):
            analyze = True
            i += 1
            continue
        if word != "(":
            break
        depth, j, group = 0, i, []
        for j in range(i, len(words)):
            token = words[j][1]
            depth += token.count("(") - token.count(")")
            group.append(token.upper().strip('"'))
            if depth <= 0:
                break
        if j + 1 >= len(words):  # the parenthesis is the explained statement itself
            break
        analyze = analyze or "ANALYZE" in group or "ANALYSE" in group
        i = j + 1
    if not analyze:
        return  # plain EXPLAIN only plans the statement, it never runs it
    inner = sql[words[i][0] :] if i < len(words) else ""
    try:
        kinds = [s.type.name for s in connection.extract_statements(inner)] if inner else []
    except Exception:  # anything DuckDB cannot parse here is refused
        kinds = []
    if not kinds or any(kind != "SELECT" for kind in kinds):
        raise ReadOnlyViolation(
            "refused: EXPLAIN ANALYZE runs the statement it explains, and only "
            "EXPLAIN ANALYZE SELECT is allowed; `tracehouse query` is read-only."
        )


def describe_generation(folder: Path, current: bool) -> dict[str, object]:
    """One line of `tracehouse generations`: when it was built, from what, how many runs."""
    import pyarrow.parquet as pq

    snapshot: dict[str, object] = {}
    try:
        history = pq.read_table(folder / "source_snapshots.parquet").to_pylist()
        snapshot = history[-1] if history else {}  # the build's own snapshot is appended last
        runs: object = table_row_count(folder, "runs")
    except OSError:
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
