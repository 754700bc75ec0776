"""A generation's DuckDB files: the reader file (views over its Parquet files, for tracehouse's
own readers) and the published ``tracehouse.duckdb``, which stores every table in itself with
the views of ``sql/`` over them."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from tracehouse import schemas
from tracehouse.assemble.history import store_regression_thresholds
from tracehouse.settings import Settings
from tracehouse.sql_files import create_views
from tracehouse.warehouse import (
    DUCKDB_FILE,
    READER_DUCKDB_FILE,
    create_table_views,
    seal_published_file,
    sql_literal,
)

# The published file is bounded like the rest of finalize (DuckDB spills past it).
FINALIZE_MEMORY_LIMIT = "400MB"


# An older storage format, so the `duckdb` command (duckdb-cli, whose releases trail the
# Python package) can open the files too; v1.2.0 is the first that stores text with zstd, which
# the full logs, records and sources need (schemas.ZSTD_COLUMNS: 30 times smaller than FSST).
DUCKDB_FILE_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "storage_compatibility_version": "v1.2.0"
}


def write_duckdb_file(generation: Path, settings: Settings) -> None:
    """The generation's two DuckDB files: the reader file (views over its Parquet files, for
    tracehouse's own readers) and the published one, which stores every table in itself."""
    reader = generation / READER_DUCKDB_FILE
    connection = duckdb.connect(str(reader), config=DUCKDB_FILE_CONFIG)
    try:
        # One transaction: each DDL statement committed alone syncs the file (~5-20 ms each,
        # over a thousand statements with the comments).
        connection.execute("BEGIN TRANSACTION")
        create_table_views(connection, generation.resolve())
        create_sql_views(connection, settings)
        connection.execute("COMMIT")
        connection.execute("CHECKPOINT")
    finally:
        connection.close()
    _write_published_duckdb_file(generation, reader, settings)


def _write_published_duckdb_file(generation: Path, reader: Path, settings: Settings) -> None:
    """``tracehouse.duckdb`` with every table's rows in the file itself and the views of sql/
    over them: views over Parquet files would hold paths, which DuckDB resolves against the
    opening process's directory (a relative one) or which stop existing once the folder moves
    (an absolute one); no path survives being stored in a view. Column and table comments carry
    the documentation of ``schemas``, which DBeaver and ``duckdb_columns()`` show.

    It starts as a copy of the reader file, whose sql/ views are already created and
    commented (creating them binds each one, seconds for the whole chain); each table's view
    over its Parquet files is then replaced by a table holding the rows. A view is stored as its
    SQL and bound again when queried, so the views read the tables from then on."""
    path = generation / DUCKDB_FILE
    shutil.copyfile(reader, path)
    connection = duckdb.connect(
        str(path),
        # The copy of every table, full logs included, in one transaction: bounded like the
        # rest of finalize (DuckDB spills to the file's side), not by DuckDB's 80% of RAM.
        config={
            **DUCKDB_FILE_CONFIG,
            "threads": max(1, settings.workers),
            "memory_limit": FINALIZE_MEMORY_LIMIT,
        },
    )
    try:
        connection.execute(f"ATTACH {sql_literal(reader.resolve())} AS build (READ_ONLY)")
        connection.execute("BEGIN TRANSACTION")  # one commit, not one per statement
        for name, table in schemas.TABLES.items():
            if not (generation / f"{name}.parquet").exists():
                continue
            connection.execute(f"DROP VIEW main.{name}")  # own names
            _copy_table(connection, name)
            _comment(connection, "TABLE", name, table.doc)
            for column in table.columns:
                _comment(connection, "COLUMN", f'{name}."{column.name}"', column.doc)
        connection.execute("COMMIT")
        connection.execute("DETACH build")
        connection.execute("CHECKPOINT")
    finally:
        connection.close()
    seal_published_file(path)


def _copy_table(connection: duckdb.DuckDBPyConnection, name: str) -> None:
    """``build.main.<name>`` into the published file; its long text columns with zstd, which
    DuckDB never chooses by itself."""
    compressed = schemas.ZSTD_COLUMNS.get(name, ())
    if not compressed:
        connection.execute(f"CREATE TABLE main.{name} AS FROM build.main.{name}")
        return
    columns = connection.execute(f"DESCRIBE build.main.{name}").fetchall()
    # Names and types come from our own schema declarations (DESCRIBE of our own views).
    definitions = ", ".join(
        f'"{column}" {type_}' + (" USING COMPRESSION zstd" if column in compressed else "")
        for column, type_, *_ in columns
    )
    connection.execute(f"CREATE TABLE main.{name} ({definitions})")
    connection.execute(f"INSERT INTO main.{name} FROM build.main.{name}")


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
