"""The definitions and implementations of a source are the dataset context's rows, not the
trace files': a build whose definitions and solutions did not change links their files from the
generation it builds on instead of writing them again, and one whose context changed (or whose
base file was damaged) writes them afresh. Either way the tables read as a build from scratch."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import build
from tracehouse import schemas
from tracehouse.demo import generate_dataset
from tracehouse.warehouse import DUCKDB_FILE, Warehouse, generation_sources

pytestmark = pytest.mark.integration

REVISION = "cd" * 20


def _context_files(warehouse: Path) -> dict[str, Path]:
    """Each context table's file of the warehouse's one source, in its current generation."""
    generation = Warehouse(warehouse).require_current()
    (source,) = generation_sources(generation)
    files = {}
    for table in schemas.CONTEXT_TABLES:
        (path,) = (generation / f"{table}.parquet" / source.key).glob("*.parquet")
        files[table] = path
    return files


def _query(warehouse: Path, sql: str, *parameters: object) -> list[tuple[object, ...]]:
    generation = Warehouse(warehouse).require_current()
    connection = duckdb.connect(str(generation / DUCKDB_FILE), read_only=True)
    try:
        return connection.execute(sql, list(parameters)).fetchall()
    finally:
        connection.close()


def _rows(warehouse: Path, table: str) -> list[tuple[object, ...]]:
    # snapshot_id names the build: the rest of each row is what a scratch build gives
    columns = [c for c in schemas.TABLES[table].column_names if c != "snapshot_id"]
    listed = ", ".join(f'"{c}"' for c in columns)
    return _query(warehouse, f"SELECT {listed} FROM {table} ORDER BY ALL")  # noqa: S608


def _append_a_rerun(source: Path) -> None:
    trace = sorted((source / "traces").rglob("*.jsonl"))[0]
    first = trace.read_bytes().splitlines()[0]
    record = json.loads(first)
    record["evaluation"]["timestamp"] = "2026-12-31T23:59:59"
    with trace.open("ab") as handle:
        handle.write(json.dumps(record).encode() + b"\n")


def _same_inode(a: Path, b: Path) -> bool:
    return (a.stat().st_dev, a.stat().st_ino) == (b.stat().st_dev, b.stat().st_ino)


def _assert_as_from_scratch(source: Path, warehouse: Path, scratch: Path) -> None:
    build(source, scratch, revision=REVISION)
    for table in schemas.CONTEXT_TABLES:
        assert _rows(warehouse, table) == _rows(scratch, table), table


def test_an_unchanged_context_is_linked_and_a_changed_one_written_again(tmp_path: Path) -> None:
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=7, definitions=2, workloads_per_definition=2)
    build(source, warehouse, revision=REVISION)
    before = _context_files(warehouse)

    # A trace file changed: the context tables are the base's very files.
    _append_a_rerun(source)
    build(source, warehouse, revision=REVISION)
    after = _context_files(warehouse)
    assert before != {}
    for table in schemas.CONTEXT_TABLES:
        assert _same_inode(before[table], after[table]), table
    _assert_as_from_scratch(source, warehouse, tmp_path / "scratch-1")

    # A solution changed: its table is written again, with the new row.
    solution = sorted((source / "solutions").rglob("*.json"))[0]
    document = json.loads(solution.read_text())
    document["description"] = "rewritten by the test"
    solution.write_text(json.dumps(document, indent=2))
    build(source, warehouse, revision=REVISION)
    changed = _context_files(warehouse)
    implementations = schemas.IMPLEMENTATIONS.name
    assert changed[implementations].name != after[implementations].name
    assert not _same_inode(changed[implementations], after[implementations])
    described = "SELECT description FROM implementations WHERE solution = ?"
    assert _query(warehouse, described, document["name"]) == [("rewritten by the test",)]
    _assert_as_from_scratch(source, warehouse, tmp_path / "scratch-2")


def test_a_damaged_context_file_of_the_base_is_not_linked(tmp_path: Path) -> None:
    source, warehouse = tmp_path / "demo", tmp_path / "wh"
    generate_dataset(source, seed=8, definitions=2, workloads_per_definition=2)
    build(source, warehouse, revision=REVISION)
    damaged = _context_files(warehouse)[schemas.DEFINITIONS.name]
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes: only its digest tells
    damaged.write_bytes(bytes(data))

    _append_a_rerun(source)
    build(source, warehouse, revision=REVISION)
    rebuilt = _context_files(warehouse)[schemas.DEFINITIONS.name]
    assert not _same_inode(rebuilt, damaged)
    assert rebuilt.read_bytes() != bytes(data)
    _assert_as_from_scratch(source, warehouse, tmp_path / "scratch")
