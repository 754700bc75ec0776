"""The published form of a warehouse: one Apache Iceberg table per tracehouse table, in a
catalog, on object storage (or in ``<folder>/iceberg`` beside a local warehouse).

Writing. A build works in a local folder exactly as a folder warehouse does (staging parts,
generations, invariants, publish guards). Once its generation is complete, every table is
committed to Iceberg, one commit per table:

- the table's Parquet file is uploaded as it is (the bytes a local build wrote; tables stored as
  parts are first written as one sorted file, the bytes ``tracehouse export`` writes), then
- one transaction deletes the rows the build replaces and adds that file. Tables with a
  ``source`` column are partitioned by it and a build replaces only its own source's rows
  (the delete is ``source = <this source>``), so builds of different sources touch disjoint
  partitions; tables without one are replaced whole.
- A commit that loses the race against another writer (``CommitFailedException``) reloads the
  table and tries again, so two builds from two machines both land.

Every Iceberg snapshot carries the tracehouse snapshot id, source and revision in its summary
properties. After the last table, one row is appended to ``tracehouse_publications``: the
tracehouse snapshot, its revision, and the Iceberg snapshot each table got. That row is the
commit point of the whole build: readers only ever look at snapshots a publication names, so a
build killed half way through its tables changes nothing they see.

Reading. A reader picks the publication (the latest, or the latest of a revision or snapshot id
for time travel); for each table it takes, among the snapshots that publication and the earlier
ones name, the one with the highest sequence number (snapshots of a table form one line, so that
one holds every earlier published commit, whichever source made it). The data files of those
snapshots are downloaded as they are into a local replica folder laid out as a generation, and
the usual DuckDB views are created over it; so every read command works unchanged, and an
unchanged warehouse is not downloaded twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines import interrupts, schemas
from pipelines.files import replace_atomically, symlink_atomically
from pipelines.settings import Settings, SettingsError
from pipelines.storage import (
    REST_CATALOG_SCHEMES,
    file_io_properties,
    redact,
    uri_scheme,
)
from pipelines.warehouse import (
    COMPLETE_MARKER,
    DUCKDB_FILE,
    PARTED_TABLES,
    SNAPSHOT_FILE,
    Warehouse,
    WarehouseMissing,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.io import FileIO
    from pyiceberg.table import Table as IcebergTable

NAMESPACE = "tracehouse"
# A generation of several sources lists them here (name, uri, snapshot id, revision).
SOURCES_FILE = "sources.json"
PUBLICATIONS = "tracehouse_publications"
SOURCE_COLUMN = "source"  # tables with this column hold several sources (issue "sources")
# Summary properties every Iceberg snapshot of a build carries.
PROPERTY_SNAPSHOT = "tracehouse.snapshot-id"
PROPERTY_SOURCE = "tracehouse.source"
PROPERTY_REVISION = "tracehouse.revision"
PROPERTY_PUBLICATION = "tracehouse.publication-id"
COMMIT_ATTEMPTS = 20  # optimistic concurrency: tries per table before giving up
# pyiceberg would retry a conflicting commit itself by re-basing the same delete and files on
# the new state; ours re-plans the whole replacement from a fresh table instead (so a build
# racing another build of the *same* source still removes that build's rows), so its own
# retries are off.
TABLE_PROPERTIES = {"commit.retry.num-retries": "0"}
REPLICA_FOLDER = "replica"
KEEP_REPLICAS = 2

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


@dataclass(frozen=True)
class Published:
    publication_id: str
    snapshot_id: str
    tables: int
    retries: int
    skipped: bool = False
    unchanged: int = 0  # tables that already held exactly these rows

    def summary_line(self, settings: Settings) -> str:
        where = location(settings)
        catalog = redact(settings.catalog or "")
        if self.skipped:
            return f"  published: snapshot {self.snapshot_id} is already in {catalog} ({where})"
        return (
            f"  published {self.tables} Iceberg tables to {where} ({self.unchanged} unchanged; "
            f"catalog {catalog}, publication {self.publication_id}, {self.retries} commit retries)"
        )


def catalog_errors() -> tuple[type[BaseException], ...]:
    """Errors a catalog or object store answers with that are about the user's setup (an
    unreachable or refusing catalog database, a REST catalog's refusal): one line, exit 2."""
    from pyiceberg.exceptions import RESTError
    from sqlalchemy.exc import DBAPIError

    return (RESTError, DBAPIError)


class WrongWarehouse(LookupError):
    """The catalog's tables live somewhere else than the warehouse named."""


def _check_location(table: IcebergTable, settings: Settings) -> None:
    """One catalog may serve one warehouse: its tables must live below the warehouse given."""
    expected = location(settings).rstrip("/") + "/"
    if not table.location().startswith(expected):
        where = table.location().rsplit("/tracehouse/", 1)[0]
        raise WrongWarehouse(
            f"--catalog {redact(settings.catalog or '')} holds the warehouse at {where}, not "
            f"{expected.rstrip('/')}: give that --warehouse, or another catalog"
        )


def location(settings: Settings) -> str:
    """Where the Iceberg tables' files live."""
    if settings.object_store is not None:
        return settings.object_store.rstrip("/")
    return (settings.warehouse.resolve() / "iceberg").as_uri()


def open_catalog(settings: Settings) -> Catalog:
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

        return RestCatalog(NAMESPACE, uri=uri, **properties)
    from pyiceberg.catalog.sql import SqlCatalog

    if scheme == "sqlite":
        folder = Path(uri.removeprefix("sqlite:///")).parent
        if not folder.is_dir():
            raise SettingsError(f"--catalog {uri}: folder {folder} does not exist")
    elif scheme == "postgresql":
        uri = "postgresql+psycopg2://" + uri.split("://", 1)[1]
    return SqlCatalog(NAMESPACE, uri=uri, **properties)


# ---------------------------------------------------------------------------------------------
# writing


def publish_generation(
    settings: Settings, warehouse: Warehouse, *, source_uri: str | None = None, force: bool = False
) -> Published:
    """Commit every table of the current generation of ``warehouse`` to the catalog: the rows
    of the source built from ``source_uri`` in tables that hold several sources, the whole
    table otherwise."""
    generation = warehouse.require_current()
    snapshot = _build_snapshot(generation, source_uri)
    catalog = open_catalog(settings)
    with warnings.catch_warnings():
        # pyiceberg warns when a delete matches no rows (every first publish of a table)
        warnings.filterwarnings("ignore", "Delete operation did not match any records")
        _ensure_namespace(catalog)
        publications = _load_or_create(catalog, PUBLICATIONS, PUBLICATIONS_SCHEMA, False)
        _check_location(publications, settings)
        if not force and _already_published(publications, snapshot):
            return Published("", snapshot["snapshot_id"], 0, 0, skipped=True)
        publication_id = uuid.uuid4().hex
        properties = {
            PROPERTY_SNAPSHOT: snapshot["snapshot_id"],
            PROPERTY_SOURCE: snapshot["source"] or "",
            PROPERTY_REVISION: snapshot["revision"] or "",
            PROPERTY_PUBLICATION: publication_id,
        }
        io = catalog._load_file_io(location=location(settings))  # the catalog's own file IO
        work = warehouse.cache / "publish"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        committed: dict[str, list[int]] = {}
        retries = unchanged = 0
        try:
            for table in schemas.TABLES:
                local = _table_file(generation, table, work, snapshot["source"])
                outcome = publish_table(
                    catalog, io, settings, table, local, snapshot["source"], properties
                )
                committed[table] = [outcome.snapshot_id, outcome.sequence_number]
                retries += outcome.retries
                unchanged += outcome.unchanged
        finally:
            shutil.rmtree(work, ignore_errors=True)
        row = {
            "publication_id": publication_id,
            "published_at": datetime.now(UTC),
            "snapshot_id": snapshot["snapshot_id"],
            "source": snapshot["source"],
            "revision": snapshot["revision"],
            "generation": generation.name,
            "table_snapshots": json.dumps(committed, sort_keys=True),
        }
        # The commit point: Ctrl-C waits for this one short commit, so the interrupt line can
        # say for sure whether the build was published.
        with interrupts.deferred():
            retries += _append_with_retries(
                catalog, PUBLICATIONS, pa.Table.from_pylist([row], schema=PUBLICATIONS_SCHEMA)
            )
            if settings.object_store is not None:
                interrupts.note_published(generation.name)
    return Published(
        publication_id, snapshot["snapshot_id"], len(committed), retries, unchanged=unchanged
    )


def _build_snapshot(generation: Path, source_uri: str | None) -> dict[str, Any]:
    """The tracehouse snapshot of the build's source in a generation: its id, and the source's
    name and revision."""
    sources_file = generation / SOURCES_FILE
    if sources_file.exists():  # a warehouse of several sources: one entry each
        entries = json.loads(sources_file.read_text())
        given = source_uri.split("@", 1)[0] if source_uri else None
        own = [e for e in entries if e.get("uri") in (source_uri, given)]
        if not own and len(entries) == 1:
            own = entries
        if not own:
            raise LookupError(f"{sources_file} lists no source {source_uri!r}")
        return {
            "snapshot_id": own[0]["snapshot_id"],
            "source": own[0]["source"],
            "revision": own[0].get("revision"),
        }
    snapshot_id = (generation / SNAPSHOT_FILE).read_text().strip()
    history = pq.read_table(generation / "source_snapshots.parquet").to_pylist()
    own = next((r for r in reversed(history) if r.get("snapshot_id") == snapshot_id), {})
    return {
        "snapshot_id": snapshot_id,
        "source": own.get("source"),
        "revision": own.get("resolved_sha"),
    }


def _already_published(publications: IcebergTable, snapshot: dict[str, Any]) -> bool:
    """The latest publication of this source is this very snapshot (an up-to-date rebuild)."""
    rows = [r for r in _publication_rows(publications) if r["source"] == snapshot["source"]]
    return bool(rows) and rows[-1]["snapshot_id"] == snapshot["snapshot_id"]


def _table_file(generation: Path, table: str, work: Path, source: str | None) -> Path:
    """The one Parquet file to publish for ``table``: the generation's own file where there is
    one, else (tables stored as parts) the sorted file an export writes; only this build's
    source's rows when the table holds several sources."""
    from pipelines.export import _write_sorted as write_sorted_table  # export's exact bytes

    path = generation / f"{table}.parquet"
    if table in PARTED_TABLES or path.is_dir():
        path = work / f"{table}.parquet"
        write_sorted_table(generation, table, path)
    names = pq.read_schema(path).names
    if SOURCE_COLUMN in names and source is not None:
        rows = pq.read_table(path)
        mine = rows.filter(pc.field(SOURCE_COLUMN) == source)
        if mine.num_rows != rows.num_rows:
            path = work / f"{table}.{SOURCE_COLUMN}.parquet"
            pq.write_table(mine, path, compression="zstd")
    return path


@dataclass(frozen=True)
class TableCommit:
    snapshot_id: int
    sequence_number: int
    retries: int
    unchanged: bool  # the table already held exactly these rows: nothing was committed


def publish_table(
    catalog: Catalog,
    io: FileIO,
    settings: Settings,
    table: str,
    local: Path,
    source: str | None,
    properties: dict[str, str],
) -> TableCommit:
    """Upload one table's file (named by its content) and commit it: this source's rows of the
    Iceberg table (all rows, for a table without a ``source`` column) become the file's."""
    digest = _sha256(local)[:16]
    publication = properties.get(PROPERTY_PUBLICATION, "manual")
    target = f"{location(settings)}/data/{table}/{publication}-{digest}.parquet"
    schema = pq.read_schema(local)
    uploaded = False

    def upload() -> str:
        nonlocal uploaded
        if not uploaded:
            _upload(io, local, target)
            uploaded = True
        return target

    rows = pq.read_metadata(local).num_rows
    return _commit_table(catalog, io, table, schema, upload, digest, rows, source, properties)


def _live_files(table: IcebergTable, io: FileIO) -> list[str]:
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    return [
        entry.data_file.file_path
        for manifest in snapshot.manifests(io)
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)
    ]


def _commit_table(
    catalog: Catalog,
    io: FileIO,
    name: str,
    schema: pa.Schema,
    upload: Callable[[], str],
    digest: str,
    rows: int,
    source: str | None,
    properties: dict[str, str],
) -> TableCommit:
    """Replace this build's rows of one table with the uploaded file in one Iceberg commit,
    retried against a fresh table state when another writer committed first."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import AlwaysTrue, EqualTo

    by_source = SOURCE_COLUMN in schema.names and source is not None
    empty = rows == 0
    # (pyright reads EqualTo's pydantic fields as its constructor; (term, literal) is its API)
    replaced = (
        EqualTo(SOURCE_COLUMN, source)  # pyright: ignore[reportCallIssue]
        if by_source
        else AlwaysTrue()
    )
    for attempt in range(COMMIT_ATTEMPTS):
        table = _load_or_create(catalog, name, schema, SOURCE_COLUMN in schema.names)
        live = _live_files(table, io)
        # Files are named by their content (which holds the source column where there is
        # one): the same rows are already there, as a rebuild that changed no row finds.
        mine = [path for path in live if path.endswith(f"-{digest}.parquet")]
        current = table.current_snapshot()
        if current is not None and mine and (by_source or len(live) == 1):
            return TableCommit(current.snapshot_id, current.sequence_number or 0, attempt, True)
        try:
            transaction = table.transaction()
            with transaction.update_schema() as update:
                update.union_by_name(schema)  # a column added by a newer importer
            transaction.delete(replaced, snapshot_properties=properties)
            if not (by_source and empty):  # a source with no rows here: only the delete
                transaction.add_files([upload()], snapshot_properties=properties)
            committed = transaction.commit_transaction()
        except CommitFailedException:
            _backoff(attempt)
            continue
        current = committed.current_snapshot()
        assert current is not None
        return TableCommit(current.snapshot_id, current.sequence_number or 0, attempt, False)
    raise PublishError(
        f"could not commit table {name} after {COMMIT_ATTEMPTS} attempts: other writers kept "
        "changing it; run the build again"
    )


def _append_with_retries(catalog: Catalog, name: str, rows: pa.Table) -> int:
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(COMMIT_ATTEMPTS):
        try:
            catalog.load_table((NAMESPACE, name)).append(rows)
            return attempt
        except CommitFailedException:
            _backoff(attempt)
    raise PublishError(f"could not append to {name} after {COMMIT_ATTEMPTS} attempts")


def _backoff(attempt: int) -> None:
    time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.5))


def _ensure_namespace(catalog: Catalog) -> None:
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    with contextlib.suppress(NamespaceAlreadyExistsError):
        catalog.create_namespace_if_not_exists(NAMESPACE)


def _load_or_create(
    catalog: Catalog, name: str, schema: pa.Schema, partition_by_source: bool
) -> IcebergTable:
    """The table, created on first use (another writer creating it at the same time is fine)."""
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

    identifier = (NAMESPACE, name)
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        pass
    try:
        table = catalog.create_table(identifier, schema=schema, properties=TABLE_PROPERTIES)
    except TableAlreadyExistsError:
        return catalog.load_table(identifier)
    if partition_by_source:
        from pyiceberg.exceptions import CommitFailedException

        # Each source its own partition: replacing one source's rows drops whole files.
        with contextlib.suppress(CommitFailedException), table.update_spec() as spec:
            spec.add_identity(SOURCE_COLUMN)
        table = catalog.load_table(identifier)
    return table


def _upload(io: FileIO, local: Path, target: str) -> None:
    with local.open("rb") as source, io.new_output(target).create(overwrite=True) as sink:
        shutil.copyfileobj(source, sink, 1 << 20)


def _download(io: FileIO, source: str, local: Path) -> None:
    with io.new_input(source).open() as stream, local.open("wb") as sink:
        shutil.copyfileobj(stream, sink, 1 << 20)  # type: ignore[arg-type]


def _sha256(path: Path) -> str:
    from pipelines.files import sha256_file

    return sha256_file(path)


# ---------------------------------------------------------------------------------------------
# reading


def _publication_rows(publications: IcebergTable) -> list[dict[str, Any]]:
    rows = publications.scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: (r["published_at"], r["publication_id"]))


def publications(settings: Settings, catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """Every publication of the warehouse, oldest first."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    catalog = catalog or open_catalog(settings)
    try:
        table = catalog.load_table((NAMESPACE, PUBLICATIONS))
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


def reading_settings(settings: Settings) -> Settings:
    """Settings whose ``warehouse`` is a local replica of the published state, for read
    commands of an object-store warehouse (or any catalog warehouse read ``--as-of``)."""
    if settings.object_store is None and settings.as_of is None:
        return settings
    if settings.catalog is None:
        raise SettingsError(
            f"--as-of {settings.as_of}: time travel reads the Iceberg catalog; pass --catalog "
            "or set TRACEHOUSE_CATALOG"
        )
    catalog = open_catalog(settings)
    rows = publications(settings, catalog)
    if not rows:
        where = settings.object_store or str(settings.warehouse)
        raise WarehouseMissing(
            f"no warehouse published at {where} (catalog {redact(settings.catalog)}): run "
            "`tracehouse build` with the same --warehouse and --catalog first"
        )
    publication, snapshots = chosen_snapshots(rows, settings.as_of)
    replica = Warehouse(settings.warehouse / REPLICA_FOLDER)
    _materialize(settings, catalog, replica, publication, snapshots)
    return replace(settings, warehouse=replica.root)


def _materialize(
    settings: Settings,
    catalog: Catalog,
    replica: Warehouse,
    publication: dict[str, Any],
    snapshots: dict[str, int],
) -> None:
    """Download the chosen snapshots' files into a generation folder of ``replica`` (once per
    distinct state) and make it current."""
    from pipelines.transforms.finalize import _write_duckdb_file as write_duckdb_file

    key = json.dumps([publication["snapshot_id"], sorted(snapshots.items())])
    name = hashlib.sha256(key.encode()).hexdigest()[:16]
    folder = replica.generations / name
    if not (folder / COMPLETE_MARKER).exists():
        io = catalog._load_file_io(location=location(settings))

        def fill(temporary: Path) -> None:
            shutil.rmtree(temporary, ignore_errors=True)
            temporary.mkdir(parents=True)
            for table, snapshot_id in snapshots.items():
                if table in schemas.TABLES:
                    _download_table(catalog, io, table, snapshot_id, temporary)
            (temporary / SNAPSHOT_FILE).write_text(publication["snapshot_id"] + "\n")
            write_duckdb_file(temporary, settings)
            (temporary / COMPLETE_MARKER).write_text(publication["publication_id"] + "\n")

        try:
            replace_atomically(folder, fill)
        except OSError:  # another reader materialized the same state first
            if not (folder / COMPLETE_MARKER).exists():
                raise
    symlink_atomically(replica.current, os.path.relpath(folder, replica.root))
    _remove_old_replicas(replica, folder)


def _download_table(
    catalog: Catalog, io: FileIO, table: str, snapshot_id: int, folder: Path
) -> None:
    """The data files of one table snapshot as they are (one file: ``<table>.parquet``; several:
    a folder of them, as parted tables are stored); rewritten through Arrow only when the
    snapshot has delete files (which another engine may write)."""
    from pyiceberg.manifest import ManifestContent

    iceberg = catalog.load_table((NAMESPACE, table))
    snapshot = iceberg.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise LookupError(f"table {table} has no snapshot {snapshot_id} any more (expired?)")
    manifests = snapshot.manifests(io)
    target = folder / f"{table}.parquet"
    if any(m.content == ManifestContent.DELETES for m in manifests):
        arrow_schema = schemas.TABLES[table].arrow_schema
        rows = iceberg.scan(snapshot_id=snapshot_id).to_arrow()
        for spec in arrow_schema:
            if spec.name not in rows.column_names:  # a column this table never had
                rows = rows.append_column(spec, pa.nulls(rows.num_rows, spec.type))
        pq.write_table(rows.select(arrow_schema.names).cast(arrow_schema), target)
        return
    # Every live data file, empty ones included (a scan plans no task for a file of no rows).
    paths = sorted(
        entry.data_file.file_path
        for manifest in manifests
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)
    )
    if len(paths) == 1:
        _download(io, paths[0], target)
        return
    if not paths:  # every source's rows deleted: an empty table, not a missing one
        pq.write_table(schemas.TABLES[table].arrow_schema.empty_table(), target)
        return
    target.mkdir()
    for index, path in enumerate(paths):
        _download(io, path, target / f"{index:06d}.parquet")


def _remove_old_replicas(replica: Warehouse, current: Path) -> None:
    folders = sorted(
        (
            p
            for p in replica.generations.iterdir()
            if not p.name.startswith(".") and (p / COMPLETE_MARKER).exists()  # not in flight
        ),
        key=lambda p: p.stat().st_mtime,
    )
    keep = {current, *folders[-KEEP_REPLICAS:]}
    for folder in folders:
        if folder not in keep:
            shutil.rmtree(folder, ignore_errors=True)
    if not (replica.root / DUCKDB_FILE).is_symlink():
        symlink_atomically(replica.root / DUCKDB_FILE, f"current/{DUCKDB_FILE}")
