"""A generation's DuckDB files: the reader file (views over its Parquet files, for tracehouse's
own readers) and the published ``tracehouse.duckdb``, which stores every table in itself with
the views of ``sql/`` over them."""

from __future__ import annotations

import contextlib
import enum
import hashlib
import os
import re
import shutil
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from tracehouse import schemas
from tracehouse.assemble.history import RegressionThresholds, store_regression_thresholds
from tracehouse.files import same_file
from tracehouse.schemas import IMPORTER_VERSION
from tracehouse.settings import Settings
from tracehouse.sql_files import create_views
from tracehouse.warehouse import (
    DUCKDB_FILE,
    READER_DUCKDB_FILE,
    GenerationSource,
    create_table_views,
    files_select_sql,
    generation_sources,
    generation_tables,
    schema_version,
    seal_published_file,
    sql_literal,
    table_files,
    table_view_sql,
)


@dataclass(frozen=True)
class BuildMemory:
    """What a build's DuckDB connections may use (DuckDB spills past it), from the setting
    ``build_memory_mb``: the assembly's connection and a published file written after it closed
    (``assembly``; at 1,000,000 lines finalize alone peaked at 606 MiB with 400 MB, history,
    ranks and the published file alike, and at 558 with 360, as fast: 40.1 s against 40.3; 320 MB
    cost 10% more time), the published file begun beside the assembly's connection
    (``advance``, ADVANCE_SHARE of it), the rest of that file once it is closed (``finish``,
    FINISH_SHARE), a published file written whole once it is closed (``whole``,
    WHOLE_SHARE), and the ranking on the assembly's connection (``ranking``, RANKING_SHARE)."""

    assembly: str
    advance: str
    finish: str
    whole: str
    ranking: str

    @classmethod
    def of(cls, settings: Settings) -> BuildMemory:
        mib = settings.build_memory_mb
        return cls(
            f"{mib}MiB",
            f"{round(mib * ADVANCE_SHARE)}MiB",
            f"{round(mib * FINISH_SHARE)}MiB",
            f"{round(mib * WHOLE_SHARE)}MiB",
            f"{round(mib * RANKING_SHARE)}MiB",
        )


# An older storage format, so the `duckdb` command (duckdb-cli, whose releases trail the
# Python package) can open the files too; v1.2.0 is the first that stores text with zstd, which
# the full logs, records and sources need (schemas.ZSTD_COLUMNS: 30 times smaller than FSST).
DUCKDB_FILE_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "storage_compatibility_version": "v1.2.0"
}


def write_duckdb_file(
    generation: Path,
    settings: Settings,
    base: Path | None = None,
    views: ViewsInAdvance | UpdateInAdvance | None = None,
) -> DuckdbFilesWrite:
    """The generation's two DuckDB files: the reader file (views over its Parquet files, for
    tracehouse's own readers) and the published one, which stores every table in itself.

    With ``base`` (the generation the build started from), both start as copies of its files
    when its views were written from the same inputs (``views_fingerprint``): the reader's
    table views are pointed at this generation's files, the sql/ views kept as they are (they
    read the table views by name), and only the published tables whose rows changed are
    changed (``_update_published_table``). Anything unexpected writes both files afresh.

    ``views`` is the sql/ views' file a build started beside its assembly (``ViewsInAdvance``);
    a full write starts from it when it was written for the generation's tables, and from the
    published file begun with it (``ViewsInAdvance.tables``). On a base, it is the update of
    the base's published file begun beside the assembly (``UpdateInAdvance``) instead."""
    fingerprint = views_fingerprint(generation, settings)
    (generation / VIEWS_FINGERPRINT_FILE).write_text(fingerprint + "\n")
    reader = generation / READER_DUCKDB_FILE
    update = views if isinstance(views, UpdateInAdvance) else None
    fresh = views if isinstance(views, ViewsInAdvance) else None
    if base is not None and _stored_fingerprint(base) == fingerprint:
        if fresh is not None:
            fresh.discard()
            fresh = None
        try:
            return _update_from_base(generation, base, BuildMemory.of(settings), update)
        except (duckdb.Error, OSError, ValueError, UnexpectedBase):
            # Whatever stopped it, the full write below needs neither partial file.
            if update is not None:
                update.discard()
            for path in (reader, generation / DUCKDB_FILE):
                _remove_database(path)
    elif update is not None:
        update.discard()
    prepared = fresh.result(generation_tables(generation)) if fresh is not None else None
    tables = fresh.tables if fresh is not None else None
    if tables is not None and prepared is None:
        tables.discard()  # copied into a file of other views: written again below
        tables = None
    _write_reader_file(generation, settings, prepared)
    if tables is not None:
        try:
            rest = [n for n in generation_tables(generation) if n not in tables.names]
            tables.finish(reader, rest)
            return DuckdbFilesWrite(reused_base=False, changed_tables={})
        except duckdb.InterruptException:
            raise
        except duckdb.Error:
            pass  # (out of its memory, say: discarded) written the usual way below
    _write_published_duckdb_file(generation, reader, BuildMemory.of(settings))
    return DuckdbFilesWrite(reused_base=False, changed_tables={})


@dataclass(frozen=True)
class DuckdbFilesWrite:
    """How ``write_duckdb_file`` wrote a generation's files: from the base's copies or afresh,
    and then what it did to each published table it changed (``TableChange``)."""

    reused_base: bool
    changed_tables: dict[str, str]


class UnexpectedBase(Exception):
    """The base generation's files are not what a build of this tracehouse leaves."""


# The fingerprint of what a generation's sql/ views and comments were written from.
VIEWS_FINGERPRINT_FILE = "views.fingerprint"


def views_fingerprint(generation: Path, settings: Settings) -> str:
    return _views_fingerprint(settings, generation_tables(generation))


def writes_views_afresh(base: Path | None, settings: Settings) -> bool:
    """Whether a build on ``base`` will write its generation's views afresh rather than from
    the base's files (``write_duckdb_file``), its generation holding every table."""
    return base is None or _stored_fingerprint(base) != _views_fingerprint(
        settings, list(schemas.TABLES)
    )


def _views_fingerprint(settings: Settings, tables: list[str]) -> str:
    """What the stored views, settings tables and comments of the DuckDB files depend on: the
    schema (table declarations and docs, every SQL file: ``schema_version``), the code that
    writes them, the regression thresholds they store, DuckDB's version and storage format,
    and which tables the generation holds."""
    here = Path(__file__).resolve()
    digest = hashlib.sha256()
    for part in (
        schema_version(),
        IMPORTER_VERSION,
        duckdb.__version__,
        repr(sorted(DUCKDB_FILE_CONFIG.items())),
        repr(RegressionThresholds.from_settings(settings)),
        repr(tables),
    ):
        digest.update(f"{part}\0".encode())
    for module in (here, here.parent / "history.py", here.parents[1] / "sql_files.py"):
        digest.update(module.read_bytes())
    return digest.hexdigest()


def _stored_fingerprint(generation: Path) -> str | None:
    try:
        return (generation / VIEWS_FINGERPRINT_FILE).read_text().strip()
    except OSError:
        return None


def _copy_database(source: Path, target: Path) -> None:
    if Path(f"{source}.wal").exists():  # a client wrote to it: the file alone is not whole
        raise UnexpectedBase(f"{source} has a write-ahead log")
    shutil.copyfile(source, target)


def _copy_to_disk(source: Path, target: Path) -> None:
    """``_copy_database``, then the copy written to disk. The first commit into the copy syncs
    it, and that sync wrote the whole copy (81 MB of the bench corpus's): ~0.15 s of a build
    after one changed file, at its end. Begun with finalize, it is done long before."""
    _copy_database(source, target)
    descriptor = os.open(target, os.O_RDONLY)
    try:
        os.fdatasync(descriptor)
    finally:
        os.close(descriptor)


def _remove_database(path: Path) -> None:
    for leftover in (path, Path(f"{path}.wal")):
        leftover.unlink(missing_ok=True)


def _write_reader_file(generation: Path, settings: Settings, views: Path | None = None) -> None:
    """The reader file: the sql/ views (``views``, a file ``write_views_file`` wrote for the
    generation's tables, or written now), and a view of each table over its Parquet files."""
    reader = generation / READER_DUCKDB_FILE
    if views is None:
        views = generation / VIEWS_FILE
        write_views_file(views, settings, generation_tables(generation))
    views.replace(reader)
    _point_table_views(reader, generation)


def _point_table_views(reader: Path, generation: Path, only: Collection[str] | None = None) -> None:
    """The reader file's view of each table (of ``only``), over the generation's Parquet files."""
    connection = duckdb.connect(str(reader), config=DUCKDB_FILE_CONFIG)
    try:
        connection.execute("BEGIN TRANSACTION")
        create_table_views(connection, generation.resolve(), only=only)
        connection.execute("COMMIT")
        connection.execute("CHECKPOINT")
    finally:
        connection.close()


# Where a generation's sql/ views are written before they become its reader file.
VIEWS_FILE = ".views.duckdb"


def write_views_file(
    path: Path,
    settings: Settings,
    tables: list[str],
    opened: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> None:
    """A DuckDB file of the sql/ views, their comments and the regression limits, created over
    empty stand-ins of ``tables`` (dropped again): what a reader file holds before the views of
    its tables. It reads no Parquet file, so a build can write it while it assembles the
    tables. ``opened`` is handed the connection first (to interrupt it)."""
    connection = duckdb.connect(str(path), config=DUCKDB_FILE_CONFIG)
    try:
        if opened is not None:
            opened(connection)
        # One transaction: each DDL statement committed alone syncs the file (~5-20 ms each,
        # over a thousand statements with the comments).
        connection.execute("BEGIN TRANSACTION")
        _create_stand_in_tables(connection, tables)
        create_sql_views(connection, settings)
        for name in tables:
            connection.execute(f"DROP TABLE main.{name}")  # own names
        connection.execute("COMMIT")
        connection.execute("CHECKPOINT")
    finally:
        connection.close()


def _create_stand_in_tables(connection: duckdb.DuckDBPyConnection, tables: list[str]) -> None:
    """An empty table for each of ``tables``, of its declared columns and types: those of its
    view over the Parquet files (tests/system/test_incremental_duckdb_files.py holds them
    equal), for the sql/ views to be created over.

    Creating a view binds it, through every view it reads down to the tables: over the Parquet
    files that reads their metadata again for each view of the chain (a second for sql/'s 47),
    over empty tables a third of that. A view is stored as its SQL and bound again when queried,
    with the same columns and types, so once the stand-ins give way to the table views, the
    sql/ views read the files."""
    for name in tables:
        empty = f"stand_in_{name}"
        connection.register(empty, schemas.TABLES[name].arrow_schema.empty_table())
        connection.execute(f"CREATE TABLE main.{name} AS SELECT * FROM {empty}")  # noqa: S608  (own names)
        connection.unregister(empty)


class ViewsInAdvance:
    """``write_views_file`` for a new generation, in a thread beside the assembly of its tables:
    binding the sql/ views took ~0.8 s of a cold build of the bench corpus, and assembling
    leaves a core idle much of its time. ``result`` hands the file over when it was written for
    the tables the generation ended up holding; ``discard`` stops the thread and drops it."""

    def __init__(self, generation: Path, settings: Settings) -> None:
        self.path = generation / VIEWS_FILE
        self.table_names = list(schemas.TABLES)  # a build's generation holds every table
        self._memory = BuildMemory.of(settings)
        # The published file begun from these views, once begun (begin_tables).
        self.tables: TablesInAdvance | None = None
        self._handed_over = False  # the file is the reader file's now (result)
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="views-in-advance")
        self._future = self._pool.submit(
            write_views_file, self.path, settings, self.table_names, self._opened
        )

    def _opened(self, connection: duckdb.DuckDBPyConnection) -> None:
        self._connection = connection

    def written(self) -> bool:
        """Whether the views file is written (waiting for the thread)."""
        try:
            self._future.result()
        except (duckdb.Error, OSError):
            return False
        return True

    def result(self, tables: list[str]) -> Path | None:
        """The views file, once written, when ``tables`` are those it was written for; else
        None, and the caller writes one."""
        written = self.written()
        self._pool.shutdown(wait=True)
        if written and tables == self.table_names:
            self._handed_over = True
            return self.path
        _remove_database(self.path)
        return None

    def begin_tables(self, generation: Path) -> None:
        """Begin the published file (``TablesInAdvance``) once the views are written: the tables
        whose rows are final, every one but the rankings and history."""
        if self.tables is None and self.written() and _fits_in_advance(generation):
            late = {*schemas.HISTORY_TABLES, schemas.RUN_RANKINGS.name}
            names = [name for name in generation_tables(generation) if name not in late]
            self.tables = TablesInAdvance(generation, self.path, names, self._memory)

    def discard(self) -> None:
        """Stop the thread (interrupting its statement) and remove what it wrote, the published
        file begun from it included."""
        if self.tables is not None:
            self.tables.discard()
        _interrupt_until_done(self._future, lambda: self._connection)
        self._pool.shutdown(wait=True)
        if not self._handed_over:
            _remove_database(self.path)


def _update_from_base(
    generation: Path, base: Path, memory: BuildMemory, update: UpdateInAdvance | None = None
) -> DuckdbFilesWrite:
    """Both files from copies of the base's (never the base's files themselves: they are
    read-only, and readers of the base may hold them); the published one from ``update`` when
    it was begun."""
    reader = generation / READER_DUCKDB_FILE
    if update is not None and update.begun:
        return update.finish(reader)
    _copy_database(base / READER_DUCKDB_FILE, reader)
    _point_table_views(reader, generation)
    path = generation / DUCKDB_FILE
    if update is None or not update.take_copy():
        _copy_database(base / DUCKDB_FILE, path)  # writable, as a new file is: sealed again last
    changed: dict[str, str] = {}
    with _writing_published_file(path, reader, memory.assembly) as connection:
        _check_same_catalog(connection)
        for name in generation_tables(generation):
            change = _update_published_table(connection, name, base, generation)
            if change is not TableChange.KEPT:
                changed[name] = change.value
    return DuckdbFilesWrite(reused_base=True, changed_tables=changed)


def _write_published_duckdb_file(generation: Path, reader: Path, memory: BuildMemory) -> None:
    """``tracehouse.duckdb`` with every table's rows in the file itself and the views of sql/
    over them: views over Parquet files would hold paths, which DuckDB resolves against the
    opening process's directory (a relative one) or which stop existing once the folder moves
    (an absolute one); no path survives being stored in a view. Column and table comments carry
    the documentation of ``schemas``, which DBeaver and ``duckdb_columns()`` show.

    It starts as a copy of the reader file, whose sql/ views are already created and
    commented (creating them binds each one, seconds for the whole chain); each table's view
    over its Parquet files is then replaced by a table holding the rows. A view is stored as its
    SQL and bound again when queried, so the views read the tables from then on.

    ``runs`` (its logs are most of the file) is copied by a second connection, in its own
    transaction, beside every other table: the copy is single-threaded (``_connect_published``),
    so the two take both cores (the bench corpus's file 2.1-2.6 s instead of 2.9-3.3 s; at
    1,000,000 runs 11.3 s instead of 16.1 s)."""
    path = generation / DUCKDB_FILE
    shutil.copyfile(reader, path)
    names = generation_tables(generation)
    beside = [name for name in names if name in TABLES_COPIED_BESIDE]
    with (
        _writing_published_file(path, reader, memory.whole) as connection,
        _beside(connection, _replace_views_by_tables, beside),
    ):
        _replace_views_by_tables(connection, [n for n in names if n not in beside])


# The published tables copied by a second connection beside the others (see above).
TABLES_COPIED_BESIDE = ("runs",)


def _replace_views_by_tables(connection: duckdb.DuckDBPyConnection, names: list[str]) -> None:
    for name in names:
        connection.execute(f"DROP VIEW main.{name}")  # own names
        _store_table(connection, name)


@contextmanager
def _beside(
    connection: duckdb.DuckDBPyConnection,
    work: Callable[[duckdb.DuckDBPyConnection, list[str]], None],
    names: list[str],
) -> Iterator[None]:
    """``work(cursor, names)`` in a thread, on a second connection to the same database, in a
    transaction of its own, while the block runs; its error is raised after the block's. An
    error in the block interrupts it, and the block never ends before the thread (the caller
    closes the database next)."""
    cursor = connection.cursor()

    def in_own_transaction() -> None:
        cursor.execute("BEGIN TRANSACTION")
        work(cursor, names)
        cursor.execute("COMMIT")

    pool = ThreadPoolExecutor(1, thread_name_prefix="published-file")
    try:
        future = pool.submit(in_own_transaction)
        try:
            yield
        except BaseException:
            # Until it stops: an interrupt that comes between two of its statements is lost.
            _interrupt_until_done(future, lambda: cursor)
            raise
        finally:
            pool.shutdown(wait=True)
        future.result()
    finally:
        cursor.close()


def _interrupt_until_done(
    future: Future[Any], connection: Callable[[], duckdb.DuckDBPyConnection | None]
) -> None:
    """Interrupt the statement a thread runs on ``connection()`` (None: not opened yet) until the
    thread is done: an interrupt that comes between two of its statements is lost, so it is
    sent again until the thread ends."""
    while not future.done():
        opened = connection()
        if opened is not None:
            with contextlib.suppress(duckdb.ConnectionException):  # closed meanwhile
                opened.interrupt()
        wait([future], timeout=0.05)


@contextmanager
def _writing_published_file(
    path: Path, reader: Path, memory_limit: str
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the published file ``path`` with the reader file attached as ``build``:
    what the block does on it is one transaction (one commit, not one per statement),
    checkpointed, and the file sealed once it is whole. An exception leaves the file unsealed
    and unchanged by the block."""
    connection = _connect_published(path, memory_limit)
    try:
        connection.execute(f"ATTACH {sql_literal(reader.resolve())} AS build (READ_ONLY)")
        connection.execute("BEGIN TRANSACTION")
        yield connection
        connection.execute("COMMIT")
        connection.execute("DETACH build")
        connection.execute("CHECKPOINT")
    finally:
        connection.close()
    seal_published_file(path)


def _connect_published(path: Path, memory_limit: str) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(
        str(path),
        # The copy of every table, full logs included: bounded like the rest of finalize
        # (DuckDB spills to the file's side), not by DuckDB's 80% of RAM. One thread a query:
        # the ordered insert of long compressed text gains nothing from a second one and pays
        # for it (the bench corpus's file: 3.0 s instead of 3.8-4.6 s, CPU alike); the second
        # core copies another table meanwhile (_write_published_duckdb_file).
        # A commit checkpoints into the file itself (a threshold of 0): the file is
        # checkpointed next anyway, and nobody reads it before it is sealed, so writing the
        # change to the write-ahead log first only doubles the writes (a build after one
        # changed file: commit and checkpoint 0.22-0.27 s, now 0.13-0.14 s).
        config={
            **DUCKDB_FILE_CONFIG,
            "threads": 1,
            "memory_limit": memory_limit,
            "checkpoint_threshold": "0b",
        },
    )


def _store_table(
    connection: duckdb.DuckDBPyConnection, name: str, source: str | None = None
) -> None:
    """``build.main.<name>`` (or the relation ``source``) stored as the published table, with
    its comments."""
    _copy_table(connection, name, source or f"build.main.{name}")
    table = schemas.TABLES[name]
    _comment(connection, "TABLE", name, table.doc)
    for column in table.columns:
        _comment(connection, "COLUMN", f'{name}."{column.name}"', column.doc)


def _copy_table(connection: duckdb.DuckDBPyConnection, name: str, source: str) -> None:
    """The relation ``source`` into the published file as table ``name``; its long text columns
    with zstd, which DuckDB never chooses by itself."""
    compressed = schemas.ZSTD_COLUMNS.get(name, ())
    if not compressed:
        connection.execute(f"CREATE TABLE main.{name} AS FROM {source}")
        return
    columns = connection.execute(f"DESCRIBE FROM {source}").fetchall()
    # Names and types come from our own schema declarations (DESCRIBE of our own views).
    definitions = ", ".join(
        f'"{column}" {type_}' + (" USING COMPRESSION zstd" if column in compressed else "")
        for column, type_, *_ in columns
    )
    connection.execute(f"CREATE TABLE main.{name} ({definitions})")
    connection.execute(f"INSERT INTO main.{name} FROM {source}")


def _comment(connection: duckdb.DuckDBPyConnection, kind: str, target: str, text: str) -> None:
    # COMMENT ON takes no bound parameter; the text is ours (schemas.py), quoted as a literal.
    connection.execute(f"COMMENT ON {kind} {target} IS {sql_literal(text)}")


def create_sql_views(connection: duckdb.DuckDBPyConnection, settings: Settings) -> None:
    """The SQL views (sql/, in dependency order) and the regression limits they read; every
    build writes them, and the Dagster view assets write them again into a published file."""
    store_regression_thresholds(connection, settings, temporary=False)
    create_views(connection)
    # Recreating a view drops its comments, so they are written with it, from schemas.
    documented = [("VIEW", view) for view in schemas.VIEWS.values()]
    documented += [("TABLE", table) for table in schemas.SETTING_TABLES.values()]
    for kind, relation in documented:
        _comment(connection, kind, relation.name, relation.doc)
        for column in relation.columns:
            _comment(connection, "COLUMN", f'{relation.name}."{column.name}"', column.doc)


# The relations of a DuckDB file and their columns, as the catalog stores them: a view's SQL,
# every comment, every column's type.
RELATIONS_SQL = """
SELECT view_name, 'VIEW', sql, comment FROM duckdb_views()
WHERE database_name = $database AND NOT internal
UNION ALL
SELECT table_name, 'TABLE', NULL, comment FROM duckdb_tables()
WHERE database_name = $database AND NOT internal
"""
COLUMNS_SQL = """
SELECT table_name, column_index, column_name, data_type, comment FROM duckdb_columns()
WHERE database_name = $database AND NOT internal
"""


# DuckDB prints the names of an EXCLUDE list in no fixed order (it holds them as a set): the
# same view reads differently from one opening of a file to the next.
EXCLUDE_LIST = re.compile(r"EXCLUDE \(([^()]*)\)")


def comparable_view_sql(sql: str | None) -> str | None:
    """A view's SQL as DuckDB prints it, its EXCLUDE lists in name order."""
    if sql is None:
        return None
    return EXCLUDE_LIST.sub(lambda m: f"EXCLUDE ({', '.join(sorted(m[1].split(', ')))})", sql)


def _check_same_catalog(connection: duckdb.DuckDBPyConnection) -> None:
    """The base's published file (``main``) holds what a full write from the new reader file
    (``build``) would: the same views and settings tables, its tables with the reader's columns
    and the comments of ``schemas``. The Dagster view assets rewrite the views of a published
    file, so its own catalog is compared, not the fingerprint of the build that wrote it."""

    docs: dict[tuple[str, ...], str] = {}
    for name, table in schemas.TABLES.items():
        docs[(name,)] = table.doc
        docs.update({(name, column.name): column.doc for column in table.columns})

    def published(row: tuple[Any, ...]) -> tuple[Any, ...]:
        # A table's view in the reader file becomes a table with its docs as comments.
        if row[0] not in schemas.TABLES:
            return row
        if len(row) == 4:
            return (row[0], "TABLE", None, docs[(row[0],)])
        return (*row[:4], docs[(row[0], row[2])])

    def listed(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        if rows and len(rows[0]) == 4:  # relations: (name, kind, sql, comment)
            rows = [
                (name, kind, comparable_view_sql(sql), comment) for name, kind, sql, comment in rows
            ]
        return sorted(rows, key=repr)

    row = connection.execute("SELECT current_database()").fetchone()
    own = str(row[0]) if row else ""
    for query in (RELATIONS_SQL, COLUMNS_SQL):
        found = listed(connection.execute(query, {"database": own}).fetchall())
        from_reader = connection.execute(query, {"database": "build"}).fetchall()
        if found != listed([published(row) for row in from_reader]):
            raise UnexpectedBase("the base's published file holds other relations or comments")
    for relation in schemas.SETTING_TABLES:
        rows = [
            connection.execute(f'FROM "{database}".main.{relation}').fetchall()
            for database in (own, "build")
        ]
        if rows[0] != rows[1]:
            raise UnexpectedBase(f"the base's published {relation} holds other settings")


class TableChange(enum.Enum):
    """What a build from the base's published file did to one of its tables."""

    KEPT = "kept"  # the same rows: the same files, for the same snapshots
    UPDATED = "updated"  # rows of the files that went deleted, of those that came inserted
    REWRITTEN = "rewritten"  # stored again from the reader file, as a full write does


@dataclass
class _Slice:
    """One source's files of a table (or all of a table's files, for a table that spans the
    warehouse), by their path inside the generation."""

    source: GenerationSource | None
    files: dict[str, Path]


def _slices(generation: Path, table: str) -> dict[str | None, _Slice]:
    def by_path(files: list[Path]) -> dict[str, Path]:
        return {path.relative_to(generation).as_posix(): path for path in files}

    if table not in schemas.PER_SOURCE_TABLES:
        return {None: _Slice(None, by_path(table_files(generation, table)))}
    return {
        source.key: _Slice(source, by_path(table_files(generation, table, source.key)))
        for source in generation_sources(generation)
    }


def _rows(files: Iterable[Path]) -> int:
    return sum(pq.read_metadata(path).num_rows for path in files)


def _update_published_table(
    connection: duckdb.DuckDBPyConnection,
    name: str,
    base: Path,
    generation: Path,
    stored_from: str | None = None,
) -> TableChange:
    """Change the copy of the base's table ``name`` into this generation's: keep it when every
    file is the same; else delete the rows of the files that went (by the table's key), set the
    new snapshot of each source that has one, insert the rows of the files that came.

    A full write stores the rows in the order of the generation's files (sources by name, each
    one's files by name). Deleting keeps the order of what stays and inserting appends, so the
    result is in that order when every file that came follows every file that stayed; a parted
    table's rows are in no order across parts (``schemas.Table.parted``), so it is updated
    either way. Any other table is stored again from the reader file (or the relation
    ``stored_from``)."""
    before, after = _slices(base, name), _slices(generation, name)
    went: list[tuple[_Slice, list[Path]]] = []
    came: list[tuple[_Slice, list[Path]]] = []
    restamped: list[GenerationSource] = []
    sequence: list[tuple[Path, bool]] = []  # the new generation's files: (file, came?)
    for key in sorted(before.keys() | after.keys(), key=lambda k: (k is not None, k or "")):
        old = before.get(key, _Slice(None, {}))
        new = after.get(key, _Slice(None, {}))
        if old.source and new.source and old.source.source != new.source.source:
            return _rewrite_table(connection, name, stored_from)
        gone = [p for rel, p in old.files.items() if not _kept(p, new.files.get(rel))]
        went.append((old, gone))
        added = {rel for rel, p in new.files.items() if not _kept(old.files.get(rel), p)}
        came.append((new, [new.files[rel] for rel in sorted(added)]))
        if (
            old.source
            and new.source
            and old.source.snapshot_id != new.source.snapshot_id
            and "snapshot_id" in schemas.TABLES[name].column_names
        ):
            restamped.append(new.source)
    for _, sliced in sorted(after.items(), key=lambda item: _source_order(item[1])):
        for rel in sorted(sliced.files):
            came_now = any(sliced.files[rel] in files for _, files in came)
            sequence.append((sliced.files[rel], came_now))
    if not restamped and not any(files for _, files in went + came):
        return TableChange.KEPT
    stored_key = schemas.STORED[name].key
    if any(files for _, files in went) and not stored_key:
        return _rewrite_table(connection, name, stored_from)
    if not schemas.TABLES[name].parted and not _appended_in_order(sequence):
        return _rewrite_table(connection, name, stored_from)
    for sliced, gone in went:
        if gone:
            _delete_rows(connection, name, sliced.source, gone, stored_key)
    for source in restamped:
        restamp = f'UPDATE main.{name} SET "snapshot_id" = {sql_literal(source.snapshot_id)} '  # noqa: S608
        restamp += f'WHERE "source" = {sql_literal(source.source)}'  # own names, literals
        connection.execute(restamp)
    for sliced, added in sorted(came, key=lambda item: _source_order(item[0])):
        if added:
            connection.execute(
                f"INSERT INTO main.{name} {files_select_sql(name, added, sliced.source)}"
            )
    return TableChange.UPDATED


def _kept(old: Path | None, new: Path | None) -> bool:
    return old is not None and new is not None and same_file(old, new)


def _source_order(sliced: _Slice) -> str:
    # The order table_view_sql takes the sources in (generation_sources sorts them by name).
    return sliced.source.source if sliced.source else ""


def _appended_in_order(sequence: list[tuple[Path, bool]]) -> bool:
    """Whether every file that came, with rows, follows every file that stayed with rows."""
    seen_new_rows = False
    for path, came in sequence:
        if not _rows([path]):
            continue
        if came:
            seen_new_rows = True
        elif seen_new_rows:
            return False
    return True


def _delete_rows(
    connection: duckdb.DuckDBPyConnection,
    name: str,
    source: GenerationSource | None,
    gone: list[Path],
    key: tuple[str, ...],
) -> None:
    """Delete the rows the files ``gone`` held, by the table's key; exactly that many rows, or
    the key did not tell them from rows that stay."""
    went = "SELECT DISTINCT " + ", ".join(f'"{column}"' for column in key)  # own names
    files = ", ".join(sql_literal(path) for path in gone)
    went += f" FROM read_parquet([{files}], union_by_name = true)"
    matches = [f'kept."{column}" IS NOT DISTINCT FROM went."{column}"' for column in key]
    if source is not None:
        matches.append(f'kept."source" = {sql_literal(source.source)}')
    deleted = connection.execute(
        f"DELETE FROM main.{name} AS kept USING ({went}) AS went WHERE {' AND '.join(matches)}"  # noqa: S608
    ).fetchone()
    if deleted is None or deleted[0] != _rows(gone):
        raise UnexpectedBase(f"{name}: its key does not tell the rows of the files that went")


def _rewrite_table(
    connection: duckdb.DuckDBPyConnection, name: str, source: str | None = None
) -> TableChange:
    connection.execute(f"DROP TABLE main.{name}")  # own names
    _store_table(connection, name, source)
    return TableChange.REWRITTEN


@contextmanager
def views_beside(
    generation: Path, base: Path | None, settings: Settings
) -> Iterator[ViewsInAdvance | UpdateInAdvance | None]:
    """The sql/ views of a new generation written in a thread while the block assembles its
    tables, when the build will write its views afresh (``writes_views_afresh``); None else.
    Should the block fail, the thread is stopped and its file removed before the error goes on
    (the failed generation's folder is removed next, and nothing may write into it then)."""
    views: ViewsInAdvance | UpdateInAdvance | None = None
    if writes_views_afresh(base, settings):
        views = ViewsInAdvance(generation, settings)
    elif base is not None:
        views = UpdateInAdvance(base, generation, BuildMemory.of(settings))
    try:
        yield views
    except BaseException:
        if views is not None:
            views.discard()
        raise


def _fits_in_advance(generation: Path) -> bool:
    """Whether the copy in advance is begun: only up to ADVANCE_MAX_RUNS runs, each row group
    of them small enough. Beside the assembly's connection, which grows with the runs it ranks
    and records, the copy took a 1,000,000-run build from 674 to 795 MiB (and no faster: 100 s
    against 104 s); and DuckDB reads a row group's column whole (a copy within
    BuildMemory.advance ran out of memory reading one of ~64 MiB, when a part was one row
    group)."""
    runs = 0
    for path in (generation / "runs.parquet").rglob("*.parquet"):
        metadata = pq.read_metadata(path)
        runs += metadata.num_rows
        for index in range(metadata.num_row_groups):
            if metadata.row_group(index).total_byte_size > ADVANCE_ROW_GROUP_BYTES:
                return False
    return runs <= ADVANCE_MAX_RUNS


# The largest runs row group (uncompressed) the copy in advance takes (workers write row groups
# of ~16 MB: ingest.worker.PART_ROW_GROUP_BYTES), and the most runs.
ADVANCE_ROW_GROUP_BYTES = 24 * 1024 * 1024
ADVANCE_MAX_RUNS = 400_000


# What the published file may use while the assembly's connection is still open beside it, as
# a share of the assembly's limit: the copies stream (row groups are written to the file as they
# fill), and the two together stay near one finalize connection's peak (the bench corpus's cold
# build: 562 MiB at 100 MB, 575 at 200, 766 at the assembly's 360; the process tree must stay
# under 600).
ADVANCE_SHARE = 128 / 360
# What it may use once the assembly's connection is closed, for the rest of the copy in advance
# and the last tables beside it. The whole limit was the cold build's peak (the bench corpus's
# finalize alone: 590 MiB, 518-533 at 256 MB of 360, as fast: 7.5-8.3 s both).
FINISH_SHARE = 256 / 360
# What a published file written whole may use (the assembly's connection is closed by then):
# past the bounds of the copy in advance (1,000,000 runs) it was the build's peak at the whole
# limit (582 MiB in the parent, beside its two copies) and 548 at 300 MiB for 1.2 s more of
# 14.7. At 256 MiB: 477, for ~0.5 s more of ~21 on a slower machine (a cold build of 1,000,000
# lines, history then its peak at 482).
WHOLE_SHARE = 256 / 343
# What the ranking may use of the assembly's limit (finalize._rank): a cold build ranks every
# run at once, and DuckDB fills what it is given. The ranking of 1,000,000 runs was the build's
# peak (549 MiB in the parent); at this share 462, as fast (3.9 s). Alone, with the parent's own
# ~130 MiB: ~390 MiB over it at the whole limit, ~300 at this share.
RANKING_SHARE = 256 / 343


class TablesInAdvance:
    """The published file of a generation whose views are written afresh, begun before its
    rankings and history: a copy of the views file (``ViewsInAdvance``) into which a thread
    copies the tables whose rows are final already (``names``: every table but the rankings
    and history), straight from their Parquet files, while the build ranks and checks; then
    ``finish`` copies the rest from the reader file, and with it each of ``names`` the thread
    has not begun yet, commits, checkpoints and seals it. The copies are the published write's
    longest step (``runs``, with its logs, ~2.5 s of a cold build of the bench corpus), and the
    ranking and history steps leave a core idle much of their time. One connection, each side
    in its own transaction (as ``_beside``)."""

    def __init__(
        self, generation: Path, views: Path, names: list[str], memory: BuildMemory
    ) -> None:
        self.path = generation / DUCKDB_FILE
        self.names = names
        self._memory = memory
        # The tables of ``names`` nobody has begun to copy: the thread takes them in order,
        # and ``finish`` takes those left when it comes. On a cold build of the bench corpus
        # the thread was still in ``runs`` then, and the main thread, its own tables copied,
        # waited 0.5 s while the thread copied correctness and trace_lines after it.
        self._not_begun = list(names)
        self._taking = threading.Lock()
        # Once whole (finish), the file is the generation's: a later failure (an interrupt
        # after the generation was published, say) must not remove it.
        self._finished = False
        shutil.copyfile(views, self.path)
        self._connection = _connect_published(self.path, memory.assembly)
        self._connection.execute(f"SET memory_limit = '{memory.advance}'")
        self._cursor = self._connection.cursor()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="published-file")
        self._future = self._pool.submit(self._copy, generation.resolve())

    def _take(self) -> str | None:
        """The next table nobody has begun to copy, now the caller's; None when none is left."""
        with self._taking:
            return self._not_begun.pop(0) if self._not_begun else None

    def _copy(self, generation: Path) -> None:
        self._cursor.execute("BEGIN TRANSACTION")
        while (name := self._take()) is not None:
            _store_table(self._cursor, name, f"({table_view_sql(generation, name)})")
        self._cursor.execute("COMMIT")

    def finish(self, reader: Path, rest: list[str]) -> None:
        """The tables ``rest`` from the reader file beside the thread, and those the thread has
        not begun; then the file whole: committed, checkpointed and sealed. A failure discards
        it."""
        connection = self._connection
        try:
            # The assembly's connection is closed now: the file may use more, though not all
            # it had (BuildMemory.finish).
            connection.execute(f"SET memory_limit = '{self._memory.finish}'")
            connection.execute(f"ATTACH {sql_literal(reader.resolve())} AS build (READ_ONLY)")
            connection.execute("BEGIN TRANSACTION")
            for name in rest:
                _store_table(connection, name)
            while (name := self._take()) is not None:
                _store_table(connection, name)  # the reader's view reads the same files
            connection.execute("COMMIT")
            self._future.result()
            connection.execute("DETACH build")
            connection.execute("CHECKPOINT")
        except BaseException:
            self.discard()
            raise
        self._close()
        self._finished = True
        seal_published_file(self.path)

    def _close(self) -> None:
        self._pool.shutdown(wait=True)
        self._cursor.close()
        self._connection.close()

    def discard(self) -> None:
        """Stop the thread (interrupting its statement), close the file and remove it; nothing
        once the file is whole."""
        if self._finished:
            return
        _interrupt_until_done(self._future, lambda: self._cursor)
        self._close()
        _remove_database(self.path)


class UpdateInAdvance:
    """The update of the base's published file (``_update_from_base``) begun before the build
    ranks: a copy of it into which a thread applies the change of every table whose rows are
    final already (``begin_tables``), committed (and so checkpointed) in the thread, while the
    build ranks, checks and records the history; ``finish`` changes the rest (rankings and
    history) once the reader file is whole, checks the catalog, checkpoints and seals. After one
    changed file of the bench corpus the update took 0.55 s at the end of the build, most of it
    the runs' delete and insert and their checkpoint. Where anything goes wrong the caller
    discards it and writes the files the usual way.

    The copy of the base's file is begun at once, in the thread, and written to disk there
    (``_copy_to_disk``): whether or not the update is begun, ``_update_from_base`` starts from
    that copy (``take_copy``)."""

    def __init__(self, base: Path, generation: Path, memory: BuildMemory) -> None:
        self.base = base
        self.path = generation / DUCKDB_FILE
        self._memory = memory
        self.names: list[str] = []
        self.changed: dict[str, str] = {}
        self._generation: Path | None = None
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._cursor: duckdb.DuckDBPyConnection | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="published-file")
        self._copy = self._pool.submit(_copy_to_disk, base / DUCKDB_FILE, self.path)
        self._future: Future[None] | None = None
        self._handed_over = False  # the copy is _update_from_base's (take_copy)
        self._finished = False

    @property
    def begun(self) -> bool:
        return self._future is not None

    def _copied(self) -> bool:
        """Whether the base's file was copied whole (waiting for the copy). A client may hold
        the base's file open and written (a write-ahead log), or it may be damaged: then there
        is no copy, and the end of the build meets the same case where it already falls back to
        a full write."""
        try:
            self._copy.result()
        except (OSError, UnexpectedBase):
            _remove_database(self.path)
            return False
        return True

    def take_copy(self) -> bool:
        """For an update not begun: whether the copy of the base's file is there for the caller
        to update (and now the caller's, which a discard leaves alone)."""
        assert not self.begun
        self._handed_over = self._copied()
        self._pool.shutdown(wait=True)  # nothing more runs in the thread
        return self._handed_over

    def begin_tables(self, generation: Path) -> None:
        """Begin on the tables whose rows are final (every one but the rankings and history),
        within the same bounds as the copy of a new published file (``_fits_in_advance``)."""
        if self.begun or self._finished or not _fits_in_advance(generation):
            return
        if not self._copied():
            return
        try:
            # writable, as a new file: sealed last
            connection = _connect_published(self.path, self._memory.assembly)
        except duckdb.Error:
            _remove_database(self.path)
            return
        late = {*schemas.HISTORY_TABLES, schemas.RUN_RANKINGS.name}
        self.names = [name for name in generation_tables(generation) if name not in late]
        self._generation = generation
        self._connection = connection
        self._connection.execute(f"SET memory_limit = '{self._memory.advance}'")
        self._cursor = self._connection.cursor()
        self._future = self._pool.submit(self._update, self._cursor, generation)

    def _update(self, cursor: duckdb.DuckDBPyConnection, generation: Path) -> None:
        cursor.execute("BEGIN TRANSACTION")
        for name in self.names:
            source = f"({table_view_sql(generation.resolve(), name)})"
            change = _update_published_table(cursor, name, self.base, generation, source)
            if change is not TableChange.KEPT:
                self.changed[name] = change.value
        cursor.execute("COMMIT")
        # The reader file too, but for the views of the tables still to come: the thread is
        # done long before the build ends, and pointing every view there took ~0.08 s.
        reader = generation / READER_DUCKDB_FILE
        _copy_database(self.base / READER_DUCKDB_FILE, reader)
        _point_table_views(reader, generation, only=self.names)

    def finish(self, reader: Path) -> DuckdbFilesWrite:
        """Once the thread is done: the reader file's views of the rest of the tables pointed at
        their files (the thread copied it and pointed the others), the rest of the tables
        from it, the catalog checked against it, then the file checkpointed and sealed. An
        error leaves both files to ``discard``."""
        assert self._connection is not None and self._future is not None
        assert self._generation is not None
        connection = self._connection
        self._future.result()
        late = [name for name in generation_tables(self._generation) if name not in self.names]
        _point_table_views(reader, self._generation, only=late)
        connection.execute(f"SET memory_limit = '{self._memory.assembly}'")
        connection.execute(f"ATTACH {sql_literal(reader.resolve())} AS build (READ_ONLY)")
        connection.execute("BEGIN TRANSACTION")
        _check_same_catalog(connection)
        for name in generation_tables(self._generation):
            if name in self.names:
                continue
            change = _update_published_table(connection, name, self.base, self._generation)
            if change is not TableChange.KEPT:
                self.changed[name] = change.value
        connection.execute("COMMIT")
        connection.execute("DETACH build")
        connection.execute("CHECKPOINT")
        self._close()
        self._finished = True
        seal_published_file(self._generation / DUCKDB_FILE)
        return DuckdbFilesWrite(reused_base=True, changed_tables=dict(self.changed))

    def _close(self) -> None:
        self._pool.shutdown(wait=True)
        for opened in (self._cursor, self._connection):
            if opened is not None:
                opened.close()

    def discard(self) -> None:
        """Stop the thread (interrupting its statement), close the file and remove what it
        wrote; nothing once the file is whole, or once the copy was handed over. Once only:
        the generation's files written afterwards, the usual way, are not its to remove."""
        if self._finished:
            return
        self._finished = True
        if self._future is not None:
            _interrupt_until_done(self._future, lambda: self._cursor)
        wait([self._copy])
        self._close()
        if not self._handed_over:
            _remove_database(self.path)
        if self._future is not None:  # the thread copied the reader file too
            _remove_database(self.path.with_name(READER_DUCKDB_FILE))
