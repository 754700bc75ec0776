"""The Iceberg catalog a warehouse publishes to: opening it for the warehouse's namespace,
where its tables' files live, the errors it answers with, and the publications table readers
choose their snapshots from (the commit point of every build).
"""

from __future__ import annotations

import contextlib
import json
import random
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tracehouse.settings import Settings, SettingsError
from tracehouse.storage import (
    REST_CATALOG_SCHEMES,
    file_io_properties,
    redact,
    uri_scheme,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table as IcebergTable


CATALOG_NAME = "tracehouse"  # pyiceberg's name for the catalog (SQL catalogs key rows by it)
PUBLICATIONS = "tracehouse_publications"
SOURCE_COLUMN = "source"  # tables with this column hold several sources (issue "sources")
# Summary properties every Iceberg snapshot of a build carries.
PROPERTY_SNAPSHOT = "tracehouse.snapshot-id"
PROPERTY_SOURCE = "tracehouse.source"
PROPERTY_REVISION = "tracehouse.revision"
PROPERTY_PUBLICATION = "tracehouse.publication-id"
COMMIT_ATTEMPTS = 20  # optimistic concurrency: tries per table before giving up

PUBLICATIONS_SCHEMA = pa.schema(
    [
        pa.field("publication_id", pa.string(), nullable=False),
        pa.field("published_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("snapshot_id", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("revision", pa.string()),
        pa.field("generation", pa.string()),
        # {table: [iceberg snapshot id, sequence number]} of this build's own commits
        pa.field("table_snapshots", pa.string(), nullable=False),
    ]
)


class PublishError(ConnectionError):
    """Committing to the catalog failed for good (after every retry): a one-line error."""


def catalog_errors() -> tuple[type[BaseException], ...]:
    """Errors a catalog or object store answers with that are about the user's setup (an
    unreachable or refusing catalog database, a REST catalog's refusal): one line, exit 2."""
    from pyiceberg.exceptions import RESTError
    from sqlalchemy.exc import DBAPIError

    return (RESTError, DBAPIError)


class WrongWarehouse(LookupError):
    """The catalog's tables live somewhere else than the warehouse named."""


def _check_location(table: IcebergTable, settings: Settings) -> None:
    """A namespace of the catalog serves one warehouse: its tables must live below the
    warehouse given (another warehouse takes another --namespace)."""
    expected = location(settings).rstrip("/") + "/"
    if not table.location().startswith(expected):
        where = table.location().rsplit(f"/{settings.namespace}/", 1)[0]
        raise WrongWarehouse(
            f"--catalog {redact(settings.catalog or '')} holds the warehouse at {where} in "
            f"namespace {settings.namespace!r}, not {expected.rstrip('/')}: give that "
            "--warehouse, or another --namespace for this one"
        )


def location(settings: Settings) -> str:
    """Where the Iceberg tables' files live."""
    if settings.object_store is not None:
        return settings.object_store.rstrip("/")
    return (settings.warehouse.resolve() / "iceberg").as_uri()


# The namespace each catalog opened for a warehouse holds its tables in (settings.namespace):
# one catalog serves several warehouses, each in a namespace of its own.
_NAMESPACES: weakref.WeakKeyDictionary[Catalog, str] = weakref.WeakKeyDictionary()


def open_catalog(settings: Settings) -> Catalog:
    """The catalog of ``settings.catalog`` (sqlite://, postgresql://, or an Iceberg REST URI),
    for the tables of the warehouse's namespace."""
    catalog = _open_catalog(settings)
    _NAMESPACES[catalog] = settings.namespace
    return catalog


def namespace_of(catalog: Catalog) -> str:
    return _NAMESPACES.get(catalog, Settings.namespace)


def _open_catalog(settings: Settings) -> Catalog:
    """The catalog of ``settings.catalog`` (sqlite://, postgresql://, or an Iceberg REST URI)."""
    uri = settings.catalog
    if uri is None:
        raise SettingsError("no catalog: pass --catalog or set TRACEHOUSE_CATALOG")
    properties = {"warehouse": location(settings)}
    if settings.object_store is not None:
        properties.update(file_io_properties())
    scheme = uri_scheme(uri)
    if scheme in REST_CATALOG_SCHEMES:
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(CATALOG_NAME, uri=uri, **properties)
    from pyiceberg.catalog.sql import SqlCatalog

    if scheme == "sqlite":
        folder = Path(uri.removeprefix("sqlite:///")).parent
        if not folder.is_dir():
            raise SettingsError(f"--catalog {uri}: folder {folder} does not exist")
    elif scheme == "postgresql":
        uri = "postgresql+psycopg2://" + uri.split("://", 1)[1]
    from sqlalchemy.exc import OperationalError

    for attempt in range(COMMIT_ATTEMPTS):
        try:
            return SqlCatalog(CATALOG_NAME, uri=uri, **properties)
        except OperationalError as error:
            # A new catalog database: the catalog creates its own tables, and a second writer
            # doing the same at that moment finds them there (or the database locked).
            if "already exists" not in str(error) and "database is locked" not in str(error):
                raise
            _backoff(attempt)
    return SqlCatalog(CATALOG_NAME, uri=uri, **properties)


def _lost_race(error: Exception) -> bool:
    """Another writer committed first (the catalog refused our base), or held a SQLite
    catalog's write lock longer than its busy timeout: try again from a fresh state."""
    from pyiceberg.exceptions import CommitFailedException
    from sqlalchemy.exc import OperationalError

    if isinstance(error, CommitFailedException):
        return True
    return isinstance(error, OperationalError) and "database is locked" in str(error)


def _backoff(attempt: int) -> None:
    time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.5))


def _ensure_namespace(catalog: Catalog) -> None:
    from pyiceberg.exceptions import NamespaceAlreadyExistsError
    from sqlalchemy.exc import IntegrityError

    # Two writers creating it at once: the loser's insert breaks the SQL catalog's unique key.
    with contextlib.suppress(NamespaceAlreadyExistsError, IntegrityError):
        catalog.create_namespace_if_not_exists(namespace_of(catalog))


def _publication_rows(publications: IcebergTable) -> list[dict[str, Any]]:
    rows = publications.scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: (r["published_at"], r["publication_id"]))


def publications(settings: Settings, catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """Every publication of the warehouse, oldest first."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    catalog = catalog or open_catalog(settings)
    try:
        table = catalog.load_table((namespace_of(catalog), PUBLICATIONS))
    except (NoSuchTableError, NoSuchNamespaceError):
        return []
    _check_location(table, settings)
    return _publication_rows(table)


def publication_lines(settings: Settings) -> list[dict[str, Any]]:
    """`tracehouse generations` of an object-store warehouse: its publications, newest last."""
    rows = publications(settings)
    if not rows:
        raise LookupError(f"no publication in catalog {redact(settings.catalog or '')}")
    return [
        {
            "publication": row["publication_id"],
            "current": "*" if i == len(rows) - 1 else "",
            "published_at": row["published_at"].strftime("%Y-%m-%d %H:%M:%S"),
            "source": row["source"],
            "revision": row["revision"],
            "snapshot_id": row["snapshot_id"],
        }
        for i, row in enumerate(rows)
    ]


def chosen_snapshots(
    rows: list[dict[str, Any]], as_of: str | None
) -> tuple[dict[str, Any], dict[str, int]]:
    """The publication a reader shows and, per table, the Iceberg snapshot to read: the
    newest (by sequence number) that this publication or an earlier one committed."""
    if not rows:
        raise LookupError("no publication")
    if as_of is None:
        cutoff = len(rows) - 1
    else:
        matches = [i for i, r in enumerate(rows) if as_of in (r["revision"], r["snapshot_id"])]
        if not matches:
            known = ", ".join(sorted({r["revision"] or r["snapshot_id"] for r in rows}))
            raise LookupError(
                f"--as-of {as_of}: no publication of that revision or snapshot id (published: {known})"
            )
        cutoff = matches[-1]
    best: dict[str, tuple[int, int]] = {}
    for row in rows[: cutoff + 1]:
        for table, (snapshot_id, sequence) in json.loads(row["table_snapshots"]).items():
            if table not in best or sequence > best[table][1]:
                best[table] = (snapshot_id, sequence)
    return rows[cutoff], {table: snapshot for table, (snapshot, _) in best.items()}
