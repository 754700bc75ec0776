"""The Python API: the warehouse from a notebook or a script, read-only.

::

    import tracehouse
    con = tracehouse.connect("wh")            # a folder, or "s3://bucket/prefix" with catalog=
    con.sql("SELECT * FROM leaderboard LIMIT 5").pl()
    runs = tracehouse.table("runs", "wh")     # a Polars DataFrame
    top = tracehouse.sql("SELECT * FROM run_summary WHERE rank = 1", "wh", arrow=True)

``connect`` returns the connection ``tracehouse query`` uses: every table and view of the
current generation, read-only (no writes, no files outside the generation), kept valid across
later builds for as long as it stays open (the generation stays on disk until it closes).
Without ``warehouse`` the settings decide, as for every command (``TRACEHOUSE_WAREHOUSE``,
default ``./warehouse``); an object-store warehouse is read through its local replica of what
the catalog published, as the read commands read it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal, overload

if TYPE_CHECKING:
    import duckdb
    import polars as pl
    import pyarrow as pa

    from tracehouse.settings import Settings

WarehouseLocation = str | os.PathLike[str]  # a folder, or an s3:// URI


def _settings(
    warehouse: WarehouseLocation | None, catalog: str | None, as_of: str | None
) -> Settings:
    from tracehouse.publish.iceberg.replica import reading_settings
    from tracehouse.settings import load_settings

    settings = load_settings(
        origin="field",
        warehouse=None if warehouse is None else os.fspath(warehouse),
        catalog=catalog,
        as_of=as_of,
    )
    return reading_settings(settings)


def connect(
    warehouse: WarehouseLocation | None = None,
    *,
    catalog: str | None = None,
    as_of: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """A read-only DuckDB connection over every table and view of the warehouse.

    ``catalog`` is the Iceberg catalog of an ``s3://`` warehouse (else ``TRACEHOUSE_CATALOG``);
    ``as_of`` reads the state the catalog published at that time (``--as-of``'s values)."""
    from tracehouse.serve.queries import connect as connect_settings

    return connect_settings(_settings(warehouse, catalog, as_of))


def names(connection: duckdb.DuckDBPyConnection) -> list[str]:
    """Every table and view a connection of ``connect`` shows, by name."""
    rows = connection.execute(
        "SELECT DISTINCT view_name FROM duckdb_views() WHERE NOT internal "
        "UNION SELECT DISTINCT table_name FROM duckdb_tables() WHERE NOT internal ORDER BY 1"
    ).fetchall()
    return [name for (name,) in rows]


@overload
def table(
    name: str,
    warehouse: WarehouseLocation | None = None,
    *,
    arrow: Literal[False] = False,
    catalog: str | None = None,
    as_of: str | None = None,
) -> pl.DataFrame: ...
@overload
def table(
    name: str,
    warehouse: WarehouseLocation | None = None,
    *,
    arrow: Literal[True],
    catalog: str | None = None,
    as_of: str | None = None,
) -> pa.Table: ...
def table(
    name: str,
    warehouse: WarehouseLocation | None = None,
    *,
    arrow: bool = False,
    catalog: str | None = None,
    as_of: str | None = None,
) -> pl.DataFrame | pa.Table:
    """Every row of one table or view, as a Polars DataFrame (``arrow=True``: a pyarrow Table);
    an unknown name is a ``LookupError`` listing the known ones."""
    connection = connect(warehouse, catalog=catalog, as_of=as_of)
    try:
        known = names(connection)
        if name not in known:
            raise LookupError(
                f"no table or view {name!r} in the warehouse; known: {', '.join(known)}"
            )
        relation = connection.table(name)
        return relation.to_arrow_table() if arrow else relation.pl()
    finally:
        connection.close()


@overload
def sql(
    query: str,
    warehouse: WarehouseLocation | None = None,
    parameters: dict[str, Any] | list[Any] | None = None,
    *,
    arrow: Literal[False] = False,
    catalog: str | None = None,
    as_of: str | None = None,
) -> pl.DataFrame: ...
@overload
def sql(
    query: str,
    warehouse: WarehouseLocation | None = None,
    parameters: dict[str, Any] | list[Any] | None = None,
    *,
    arrow: Literal[True],
    catalog: str | None = None,
    as_of: str | None = None,
) -> pa.Table: ...
def sql(
    query: str,
    warehouse: WarehouseLocation | None = None,
    parameters: dict[str, Any] | list[Any] | None = None,
    *,
    arrow: bool = False,
    catalog: str | None = None,
    as_of: str | None = None,
) -> pl.DataFrame | pa.Table:
    """The result of one SELECT (``$name`` or ``?`` parameters bound from ``parameters``), as
    a Polars DataFrame (``arrow=True``: a pyarrow Table). Only SELECT and EXPLAIN run, judged
    by DuckDB's parser as for ``tracehouse query``."""
    from tracehouse.warehouse import check_read_only

    connection = connect(warehouse, catalog=catalog, as_of=as_of)
    try:
        check_read_only(connection, query)
        relation = connection.sql(query, params=parameters)
        return relation.to_arrow_table() if arrow else relation.pl()
    finally:
        connection.close()
