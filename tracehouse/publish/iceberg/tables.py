"""What each Iceberg table of a warehouse is: which tables are published (and which marts
beside them), each one's schema and required columns, row order (its sort order), column
docs and partitioning, as a table is created and as each commit brings it up to date.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tracehouse import schemas
from tracehouse.publish.iceberg.catalog import SOURCE_COLUMN, namespace_of

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table as IcebergTable


# Tables computed across every source: never published, each reader computes them over the
# union of the sources the catalog holds (a build sees only the sources of its own staging).
COMPUTED_TABLES = ("run_rankings",)
PUBLISHED_TABLES = tuple(t for t in schemas.TABLES if t not in COMPUTED_TABLES)
# The product an Iceberg user queries, computed after each publication over every source of the
# latest one (as a reader computes them) and each replaced whole: ranks and the main marts.
# tracehouse's own readers never read these back (they rank and run the views themselves).
MARTS = ("run_rankings", "run_summary", "leaderboard", "author_rankings")
# The order of a mart's rows (and its Iceberg sort order) where schemas.TABLE_ORDER has none:
# its key.
MART_ORDER = {
    "run_summary": "run_id",
    "leaderboard": ", ".join(schemas.VIEW_KEYS["leaderboard"]),
    "author_rankings": ", ".join(schemas.VIEW_KEYS["author_rankings"]),
}
# The columns of a mart that is a view which never hold null: its key's (author_rankings'
# rank is null on its `empty` and `error` rows), and run_summary's columns taken as they are
# from a required column of runs (its other tables are LEFT JOINed), with is_baseline
# (coalesced to false).
MART_REQUIRED = {
    "run_summary": (
        *(
            c
            for c in schemas.VIEWS["run_summary"].column_names
            if c in {col.name for col in schemas.TABLES["runs"].columns if not col.nullable}
        ),
        "is_baseline",
    ),
    "leaderboard": schemas.VIEW_KEYS["leaderboard"],
    "author_rankings": ("source", "hardware", "scope_kind", "scope", "outcome"),
}
# pyiceberg would retry a conflicting commit itself by re-basing the same delete and files on
# the new state; ours re-plans the whole replacement from a fresh table instead (so a build
# racing another build of the *same* source still removes that build's rows), so its own
# retries are off.
TABLE_PROPERTIES = {"commit.retry.num-retries": "0"}


def declared_schema(table: str, found: pa.Schema | None = None) -> pa.Schema:
    """The Arrow schema an Iceberg table is created with and kept at: ``schemas``' columns
    (for a table it declares) or those ``found`` in the rows (a mart), each required where
    tracehouse guarantees a value (``required_columns``)."""
    declared = schemas.TABLES.get(table)
    fields = list(declared.arrow_schema if declared is not None else found or pa.schema([]))
    required = set(required_columns(table))
    return pa.schema([f.with_nullable(f.name not in required) for f in fields])


def required_columns(table: str) -> tuple[str, ...]:
    """The columns of ``table`` that never hold null: as ``schemas`` declares them, or, for a
    mart that is a view, its key and the columns it passes through from a required column."""
    declared = schemas.TABLES.get(table)
    if declared is not None:
        return tuple(c.name for c in declared.columns if not c.nullable)
    return MART_REQUIRED.get(table, ())


def table_order(table: str) -> str | None:
    """The order of every data file of ``table`` (``schemas.TABLE_ORDER``, or a mart's key)."""
    return schemas.TABLE_ORDER.get(table) or MART_ORDER.get(table)


def _evolve_schema(transaction: Any, name: str, schema: pa.Schema) -> None:
    """Bring the table's schema, docs and sort order to what this build declares (each only
    where it differs: an unchanged table gets no schema change)."""
    with transaction.update_schema() as update:
        update.union_by_name(schema)  # a column added by a newer importer
    _require_columns(transaction, schema)
    _document_columns(transaction, name)
    if transaction.table_metadata.sort_order().is_unsorted:  # a table made before
        _declare_sort_order(transaction, name)


def _require_columns(transaction: Any, schema: pa.Schema) -> None:
    """Declare required the columns ``schema`` requires that a table made by an older
    publisher holds as optional (its rows hold no null there: the build's checks say so)."""
    current = transaction.table_metadata.schema()
    names = {field.name: field for field in current.fields}
    loose = [
        f.name for f in schema if not f.nullable and f.name in names and names[f.name].optional
    ]
    if not loose:
        return
    with transaction.update_schema(allow_incompatible_changes=True) as update:
        for column in loose:
            update.update_column(column, required=True)


def column_docs(table: str) -> dict[str, str]:
    """Each column's meaning, as ``schemas`` declares it (what `tracehouse tables` prints)."""
    declared = schemas.TABLES.get(table) or schemas.VIEWS.get(table)
    return {} if declared is None else {c.name: c.doc for c in declared.columns}


def sort_terms(table: str) -> list[tuple[str, bool]]:
    """(column, nulls first) of the order every file of ``table`` is written in
    (``schemas.TABLE_ORDER``, ascending; DuckDB puts nulls last unless told otherwise)."""
    order = table_order(table)
    if order is None:
        return []
    terms = [term.strip().split() for term in order.split(",")]
    return [(words[0], words[1:] == ["NULLS", "FIRST"]) for words in terms]


def _declare_sort_order(transaction: Any, table: str) -> None:
    """The table's sort order: how each of its data files is sorted, for engines that plan
    merges and range filters by it."""
    from pyiceberg.table.sorting import NullOrder
    from pyiceberg.transforms import IdentityTransform

    terms = sort_terms(table)
    if not terms:
        return
    with transaction.update_sort_order() as order:
        for column, nulls_first in terms:
            order.asc(
                column,
                IdentityTransform(),
                NullOrder.NULLS_FIRST if nulls_first else NullOrder.NULLS_LAST,
            )


def _document_columns(transaction: Any, table: str) -> None:
    """Give every column of the table its doc from ``schemas`` (in the commit's transaction,
    and only where one differs: an unchanged table gets no schema change), so an Iceberg user
    reading the catalog sees each field's meaning."""
    docs = column_docs(table)
    current = transaction.table_metadata.schema()
    stale = [
        (field.name, docs[field.name])
        for field in current.fields
        if field.name in docs and field.doc != docs[field.name]
    ]
    if not stale:
        return
    with transaction.update_schema() as update:
        for column, doc in stale:
            update.update_column(column, doc=doc)


def _load_or_create(
    catalog: Catalog, name: str, schema: pa.Schema, partition_by_source: bool
) -> IcebergTable:
    """The table, created on first use (another writer creating it at the same time is fine)."""
    from pyiceberg.exceptions import (
        CommitFailedException,
        NoSuchTableError,
        TableAlreadyExistsError,
    )

    identifier = (namespace_of(catalog), name)
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        pass
    # Each source its own partition (replacing one source's rows drops whole files), set in
    # the transaction that creates the table: no writer ever sees it unpartitioned.
    creation = catalog.create_table_transaction(
        identifier, schema=schema, properties=TABLE_PROPERTIES
    )
    if partition_by_source:
        with creation.update_spec() as spec:
            spec.add_identity(SOURCE_COLUMN)
    _declare_sort_order(creation, name)
    _document_columns(creation, name)
    # Another writer created it first: the catalog says so either way, by the kind of catalog.
    with contextlib.suppress(TableAlreadyExistsError, CommitFailedException):
        creation.commit_transaction()
    return catalog.load_table(identifier)
