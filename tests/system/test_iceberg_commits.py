"""What one Iceberg commit of a build changes (issue 29, item 3): after one trace line changed,
a rebuild commits new data files only for the parts of the source that changed, each table in
one snapshot that holds the whole table; every data file is written with its field IDs; the
marts declare their required fields, sort order and field docs.

Real parts only: moto's S3 server on 127.0.0.1, a SQLite catalog file, the `tracehouse`
command for every build and read; the catalog is read back with pyiceberg itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from bench.object_store import local_s3_server
from tests.conftest import run_cli
from tracehouse import schemas
from tracehouse.demo import generate_dataset
from tracehouse.publish.iceberg.catalog import PROPERTY_PUBLICATION, PUBLICATIONS
from tracehouse.publish.iceberg.tables import (
    MARTS,
    PUBLISHED_TABLES,
    column_docs,
    required_columns,
    sort_terms,
)

BUCKET = "tracehouse-commits"
REVISION = "1" * 40
TABLES = (*PUBLISHED_TABLES, *(m for m in MARTS if m not in PUBLISHED_TABLES))

# (data files added, data files removed) by the rebuild's one snapshot of each table it commits,
# after one trace line's correctness figure changed. The line sits in one group of trace files:
# that group's part of runs, trace_lines and correctness is replaced; the run's id covers its
# figures, so it is a new run (one history delta each of appearances and disappearances);
# source_snapshots' partition of the source gains its new row; run_rankings and run_summary
# (one row per run, every source) are marts replaced whole; the publication row is appended.
# Every other table (definitions, ..., leaderboard, author_rankings) gets no snapshot at all.
EXPECTED_COMMITS = {
    "runs": (1, 1),
    "trace_lines": (1, 1),
    "correctness": (1, 1),
    "run_appearances": (1, 0),
    "run_disappearances": (1, 0),
    "source_snapshots": (1, 1),
    "run_rankings": (1, 1),
    "run_summary": (1, 1),
    PUBLICATIONS: (1, 0),
}


@dataclass
class Published:
    """The catalog after a build, a one-line change and a rebuild."""

    tables: dict[str, Any]  # name -> pyiceberg Table
    first: dict[str, set[int]]  # the Iceberg snapshot ids each table had after the first build
    counts: dict[str, dict[str, int]]  # publication id -> table -> rows tracehouse shows
    exports: tuple[dict[str, bytes], dict[str, bytes]]  # (read from s3, the staging's)


def _change_one_line(source: Path) -> None:
    """The first trace line with a correctness block gets another max_relative_error."""
    for path in sorted((source / "traces").rglob("*.jsonl")):
        lines = path.read_text().splitlines(keepends=True)
        for index, line in enumerate(lines):
            record = json.loads(line)
            correctness = (record.get("evaluation") or {}).get("correctness")
            if correctness and isinstance(correctness.get("max_relative_error"), float):
                correctness["max_relative_error"] = correctness["max_relative_error"] * 2 + 1
                lines[index] = json.dumps(record) + "\n"
                path.write_text("".join(lines))
                return
    raise AssertionError("no trace line with a correctness block")


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    from pyiceberg.catalog.sql import SqlCatalog

    tmp = tmp_path_factory.mktemp("commits")
    source = tmp / "demo"
    generate_dataset(
        source, seed=3, definitions=3, workloads_per_definition=3, solutions_per_definition=3
    )
    with local_s3_server(BUCKET) as s3:
        endpoint = s3["AWS_ENDPOINT_URL"]
        aws = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint,
        }
        env = {**aws, "TRACEHOUSE_STAGING": str(tmp / "staging")}
        reader = {**aws, "TRACEHOUSE_STAGING": str(tmp / "reader")}
        catalog_uri = f"sqlite:///{tmp / 'catalog.db'}"
        where = ("--warehouse", f"s3://{BUCKET}/wh", "--catalog", catalog_uri)
        catalog = SqlCatalog(
            "tracehouse",
            uri=catalog_uri,
            **{
                "s3.endpoint": endpoint,
                "s3.access-key-id": "testing",
                "s3.secret-access-key": "testing",
                "s3.region": "us-east-1",
            },
        )

        def build() -> None:
            args = ("build", "--source", str(source), "--revision", REVISION, *where)
            result = run_cli(*args, env=env)
            assert result.returncode == 0, result.stderr
            assert "Warning" not in result.stderr, result.stderr  # a build says nothing more

        def shown(*as_of: str) -> dict[str, int]:
            """Rows of every table as tracehouse reads the publication (one query)."""
            counts = ", ".join(f"(SELECT count(*) FROM {t}) AS {t}" for t in TABLES)  # noqa: S608
            result = run_cli(
                "query", f"SELECT {counts}", "--format", "json", *where, *as_of, env=reader
            )
            assert result.returncode == 0, result.stderr
            return json.loads(result.stdout)[0]

        def latest_publication() -> dict[str, Any]:
            rows = catalog.load_table(("tracehouse", PUBLICATIONS)).scan().to_arrow().to_pylist()
            return max(rows, key=lambda r: r["published_at"])

        build()
        first = {
            name: {s.snapshot_id for s in catalog.load_table(("tracehouse", name)).snapshots()}
            for name in (*TABLES, PUBLICATIONS)
        }
        before = latest_publication()
        counts = {before["publication_id"]: shown()}
        _change_one_line(source)
        build()
        after = latest_publication()
        counts[after["publication_id"]] = shown()
        # time travel to the first build still reads it whole
        assert shown("--as-of", before["snapshot_id"]) == counts[before["publication_id"]]
        remote, staged = tmp / "from-s3", tmp / "staged"
        assert run_cli("export", "--snapshot", str(remote), *where, env=reader).returncode == 0
        local = ("--warehouse", str(tmp / "staging"))
        assert run_cli("export", "--snapshot", str(staged), *local, env={}).returncode == 0
        exports = (
            {p.name: p.read_bytes() for p in sorted(remote.iterdir())},
            {p.name: p.read_bytes() for p in sorted(staged.iterdir())},
        )
        tables = {
            name: catalog.load_table(("tracehouse", name)) for name in (*TABLES, PUBLICATIONS)
        }
        yield Published(tables, first, counts, exports)


@pytest.mark.integration
@pytest.mark.slow
def test_a_rebuild_commits_only_the_changed_parts_in_one_snapshot(published: Published) -> None:
    committed = {}
    for name, table in published.tables.items():
        new = [s for s in table.snapshots() if s.snapshot_id not in published.first[name]]
        if not new:
            continue
        assert len(new) == 1, (name, [s.summary for s in new])  # one snapshot per commit
        summary = new[0].summary
        added, removed = (
            int(summary.get(k) or 0) for k in ("added-data-files", "deleted-data-files")
        )
        committed[name] = (added, removed)
        if name in ("runs", "trace_lines", "correctness"):  # one group's rows, not the source's
            assert int(summary["added-records"]) < int(summary["total-records"]) / 2, name
    assert committed == EXPECTED_COMMITS
    # the changed table's other parts are the very files of the first build
    runs = published.tables["runs"]
    assert int(runs.current_snapshot().summary["total-data-files"]) > 2


@pytest.mark.integration
@pytest.mark.slow
def test_every_snapshot_holds_the_whole_table(published: Published) -> None:
    """No snapshot a reader can travel to is a half-done commit: each holds exactly the rows
    tracehouse shows for the table at the build that made it."""
    for name in TABLES:
        table = published.tables[name]
        for snapshot in table.snapshots():
            publication = snapshot.summary.get(PROPERTY_PUBLICATION)
            expected = published.counts[publication][name]
            assert int(snapshot.summary["total-records"]) == expected, (name, snapshot.summary)
            rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().num_rows
            assert rows == expected, name


@pytest.mark.integration
@pytest.mark.slow
def test_reading_back_equals_the_build_after_a_partial_commit(published: Published) -> None:
    """The replica of a table whose parts come from two builds exports what the build that
    published it exports, byte for byte."""
    remote, staged = published.exports
    assert list(remote) == list(staged)
    assert [name for name in remote if remote[name] != staged[name]] == []


@pytest.mark.integration
@pytest.mark.slow
def test_pyiceberg_reads_field_ids_from_every_data_file(published: Published) -> None:
    from pyiceberg.io.pyarrow import pyarrow_to_schema

    for name, table in published.tables.items():
        schema = table.schema()
        files = [task.file.file_path for task in table.scan().plan_files()]
        assert files or table.scan().to_arrow().num_rows == 0, name
        for path in files:
            with table.io.new_input(path).open() as stream:
                arrow = pq.ParquetFile(stream).schema_arrow
            # pyiceberg's own reading of a file's IDs (it raises on a file without them)
            ids = {f.name: f.field_id for f in pyarrow_to_schema(arrow).fields}
            assert ids == {f.name: f.field_id for f in schema.fields if f.name in ids}, path
            for field in arrow:
                assert field.metadata and b"PARQUET:field_id" in field.metadata, (path, field)


@pytest.mark.integration
@pytest.mark.slow
def test_required_fields_sort_orders_and_docs_on_every_table(published: Published) -> None:
    from pyiceberg.table.sorting import NullOrder

    for name in TABLES:
        table = published.tables[name]
        schema = table.schema()
        required = {f.name for f in schema.fields if f.required}
        assert required == set(required_columns(name)) and required, name
        docs = {f.name: f.doc for f in schema.fields}
        assert docs == column_docs(name) and all(docs.values()), name
        sort = [
            (schema.find_column_name(f.source_id), f.null_order == NullOrder.NULLS_FIRST)
            for f in table.sort_order().fields
        ]
        assert sort == sort_terms(name), name
        assert sort or name == "source_snapshots", name  # its rows keep their append order
    # the marts are declared in schemas (their docs come from there)
    for mart in MARTS:
        assert mart in schemas.TABLES or mart in schemas.VIEWS


@pytest.mark.slow
def test_a_table_an_older_publisher_made_is_brought_up_to_date(tmp_path: Path) -> None:
    """A table made before (every field optional, a file without field IDs added as it was):
    the next commit of its partition declares the required fields and replaces that file with
    one written with field IDs, in one snapshot; another source's old file stays readable."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io.pyarrow import pyarrow_to_schema

    from tracehouse.publish.iceberg.commit import publish_table
    from tracehouse.publish.iceberg.tables import declared_schema

    catalog = SqlCatalog(
        "tracehouse", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=(tmp_path / "wh").as_uri()
    )
    catalog.create_namespace("tracehouse")
    old_schema = pa.schema([pa.field(f.name, f.type) for f in declared_schema("source_snapshots")])
    made = catalog.create_table(("tracehouse", "source_snapshots"), schema=old_schema)
    with made.update_spec() as spec:
        spec.add_identity("source")
    old_files = []
    for source in ("left", "right"):
        row = {f.name: None for f in old_schema}
        row.update(
            snapshot_id=f"{source}-1", source=source, uri=f"/data/{source}", snapshot_number=1,
            built_at=datetime(2026, 1, 1, tzinfo=UTC), files=1, bytes=2,
            file_list_digest="d", importer_version="v",
        )  # fmt: skip
        path = tmp_path / f"{source}.parquet"
        pq.write_table(pa.Table.from_pylist([row], schema=old_schema), path)
        old_files.append(path.as_uri())
    catalog.load_table(("tracehouse", "source_snapshots")).add_files(old_files)

    newer = tmp_path / "newer.parquet"
    rows = pq.read_table(tmp_path / "left.parquet").to_pylist()
    rows[0]["snapshot_id"] = "left-2"
    pq.write_table(pa.Table.from_pylist(rows, schema=old_schema), newer)
    publish_table(catalog, "source_snapshots", newer, "left", {})
    table = catalog.load_table(("tracehouse", "source_snapshots"))
    assert {f.name for f in table.schema().fields if f.required} == set(
        required_columns("source_snapshots")
    )
    assert len(table.snapshots()) == 2  # add_files, then the one commit
    files = {task.file.partition[0]: task.file.file_path for task in table.scan().plan_files()}
    with table.io.new_input(files["left"]).open() as stream:
        pyarrow_to_schema(pq.ParquetFile(stream).schema_arrow)  # raises without field IDs
    assert files["right"] == old_files[1]
    shown = sorted(table.scan().to_arrow().column("snapshot_id").to_pylist())
    assert shown == ["left-2", "right-1"]
    # the same rows again: no commit
    again = publish_table(catalog, "source_snapshots", newer, "left", {})
    assert again.unchanged and len(catalog.load_table(table.name()).snapshots()) == 2
