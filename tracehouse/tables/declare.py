"""How a table or a view is declared: its columns, and what it is, as fields of one declaration.

Every list of tables the product needs (per-source, parted, historical, computed, published,
row orders, ...) is derived from these fields in ``tracehouse/schemas.py``; none is kept by
hand beside them (style rule 11).

Column types are Arrow types named without importing pyarrow: a read command consults the
declarations (which tables are per source, which keep history) and must not pay for Arrow.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pyarrow as pa

# How a parted table is cut into parts (cache/parts/<table>/), so that a build re-writes only
# the parts whose inputs changed: one part per (source, group of source files), or one per
# ranking bucket (sql/rank/ranking_inputs.sql) for a table that spans every source.
PartedBy = Literal["file_group", "ranking_bucket"]

# Columns of per-source tables the views add from sources.json: kept out of the parts, where
# they would change every part on every build.
VIEW_ADDED_COLUMNS = ("source", "snapshot_id")


@functools.cache
def _arrow_types() -> dict[str, pa.DataType]:
    import pyarrow as pa

    return {
        "string": pa.string(),
        "int64": pa.int64(),
        "double": pa.float64(),
        "bool": pa.bool_(),
        "timestamp[ms, tz=UTC]": pa.timestamp("ms", tz="UTC"),
        "list<item: string>": pa.list_(pa.string()),
        "list<item: struct<path: string, content: string>>": pa.list_(
            pa.struct([("path", pa.string()), ("content", pa.string())])
        ),
    }


@dataclass(frozen=True)
class ArrowType:
    """An Arrow type by the name pyarrow prints for it; ``arrow`` gives the type itself."""

    name: str

    @property
    def arrow(self) -> pa.DataType:
        return _arrow_types()[self.name]

    def __str__(self) -> str:
        return self.name


S = ArrowType("string")
I64 = ArrowType("int64")
F64 = ArrowType("double")
B = ArrowType("bool")
UTC_MS = ArrowType("timestamp[ms, tz=UTC]")
STRINGS = ArrowType("list<item: string>")
# A solution's source files: (path, content) in file order.
SOURCE_FILES = ArrowType("list<item: struct<path: string, content: string>>")


@dataclass(frozen=True)
class Column:
    name: str
    kind: ArrowType
    doc: str
    nullable: bool = True

    @property
    def type(self) -> pa.DataType:
        return self.kind.arrow


@dataclass(frozen=True)
class Table:
    """A stored table: its columns, and what it is (every field after ``columns``)."""

    name: str
    doc: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]
    # Its rows belong to one source: the generation holds <table>.parquet/<source key>/*.parquet
    # without the VIEW_ADDED_COLUMNS, which its view adds from sources.json.
    per_source: bool = False
    # Stored as a folder of parts, cut this way; rows are in no order across parts.
    parted: PartedBy | None = None
    # Keeps every build's files (run_history's events), not only the latest.
    history: bool = False
    # Row order of the table as written or exported (so two builds of the same data give
    # byte-identical files); None keeps the order rows were appended in.
    order: str | None = None
    # Ingest workers write it as staging parts, one set per group of files.
    staged: bool = False
    # Computed across every source: never published to Iceberg, each reader computes it over
    # the union of the sources the catalog holds.
    computed: bool = False
    # Published to Iceberg as a mart too, computed over every source of the latest publication.
    iceberg_mart: bool = False
    # Its rows are the dataset context's (the definition and solution files), not the trace
    # files': a build whose context did not change links the source's file from the base.
    from_context: bool = False
    # Its rows come from no source (a constant, the build's settings): removing a source keeps
    # its file as it is.
    source_independent: bool = False
    # The publish guard against shrinking tables leaves it alone (fewer rejects is good news,
    # the snapshot history only grows).
    shrink_exempt: bool = False
    # Holds the benchmark results themselves (the publish guards' fact tables).
    holds_results: bool = False
    # Long text kept whole: zstd in the published DuckDB file as in Parquet, where DuckDB's own
    # choice (FSST) keeps logs 30 times larger (issue 29).
    zstd_columns: tuple[str, ...] = ()

    @property
    def arrow_schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns])

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def column(name: str, kind: ArrowType, doc: str, nullable: bool = True) -> Column:
    return Column(name, kind, doc, nullable)


def stored_table(table: Table) -> Table:
    """``table`` as its files (and staging parts) hold it: without the columns views add."""
    if not table.per_source:
        return table
    return replace(
        table,
        key=tuple(k for k in table.key if k not in VIEW_ADDED_COLUMNS),
        columns=tuple(c for c in table.columns if c.name not in VIEW_ADDED_COLUMNS),
    )


# --------------------------------------------------------------------------------------------
# Views: the SELECTs in sql/, stored in tracehouse.duckdb. Their types come from DuckDB; each
# column's meaning is declared here, once (tests check the names against DESCRIBE).


@dataclass(frozen=True)
class ViewColumn:
    name: str
    doc: str


@dataclass(frozen=True)
class View:
    """A view (or a relation stored from the settings): its columns, and what it is."""

    name: str
    doc: str
    columns: tuple[ViewColumn, ...]
    # The columns that name one row (tests/test_many_sources.py checks that no view returns two
    # rows with the same key); () for a view without one.
    key: tuple[str, ...] = ()
    # Published to Iceberg as a mart, computed over every source of the latest publication, its
    # rows in the order of its key.
    iceberg_mart: bool = False
    # Columns that never hold null (Iceberg declares them required in a mart).
    never_null: tuple[str, ...] = ()
    # A view people read as a product: Dagster's freshness policy says when it is overdue.
    product: bool = False
    # Not a view: stored as a table from the settings at each build (the views read it).
    from_settings: bool = False

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def view_column(name: str, doc: str) -> ViewColumn:
    return ViewColumn(name, doc)


def same_as(table: Table, *names: str) -> tuple[ViewColumn, ...]:
    """Columns passed through unchanged from ``table``, with its documentation."""
    by_name = {c.name: c.doc for c in table.columns}
    return tuple(ViewColumn(name, by_name[name]) for name in names)


# Columns several declarations share.
SOURCE_COLUMNS = (
    column("source_file", S, "Dataset-relative path of the file the record came from.", False),
    column(
        "source_line", I64, "1-based line number in source_file (1 for a whole-file JSON).", False
    ),
)

# The source a row came from: the name `tracehouse build` gave it (`tracehouse sources`), and the
# snapshot of that source the row belongs to. Neither is stored in a source's table files: the
# table views add them from the generation's sources.json (tracehouse/warehouse.py), so a
# source's files are the same whatever else the warehouse holds.
SOURCE_NAME = column(
    "source",
    S,
    "Name of the source the row came from (`tracehouse sources`; key into source_snapshots.source).",
    False,
)
SNAPSHOT_OF_ROW = column(
    "snapshot_id",
    S,
    "Key into source_snapshots: the snapshot of the source that produced this row.",
    False,
)
