"""Issue 26, item 2: complete rows at the line.

A worker writes each run complete (run id, run digest, comparison key, author, implementation
digest: ingest/resolution.py) with what it knows, and its part is the runs table's part as it
is. Finalize resolves again only the parts whose runs the worker completed on an assumption the
whole source does not bear out (sql/assemble/unresolved_parts.sql). Each way an assumption can
fail is built here and held to a build that resolves every part again, and to a build from
scratch where that is the same state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import build
from tests.fixtures.hostile_corpus import (
    DEFINITION,
    definition_object,
    solution_object,
    trace_object,
)
from tests.system.test_carried_rows import assert_same_as_from_scratch, tables, write_lines
from tracehouse.assemble import finalize, parts
from tracehouse.files import sha256_file
from tracehouse.warehouse import Warehouse, read_table

pytestmark = pytest.mark.slow

REVISION = "c" * 40
OTHER_DEFINITION = f"{DEFINITION}_wide"


def make_dataset(root: Path) -> None:
    """Two definitions, each with a solution and two authors' trace files."""
    for name in (DEFINITION, OTHER_DEFINITION):
        (root / "definitions/gemm").mkdir(parents=True, exist_ok=True)
        definition = definition_object(name)
        if name == OTHER_DEFINITION:
            definition["axes"]["N"]["value"] = 8  # another operation
        (root / f"definitions/gemm/{name}.json").write_text(json.dumps(definition))
        folder = root / "solutions/alice/gemm" / name
        folder.mkdir(parents=True)
        solution = solution_object(name=f"alice_{name}_v1", definition=name)
        (folder / f"alice_{name}_v1.json").write_text(json.dumps(solution))
        for author in ("alice", "bob"):
            lines = []
            for i in range(6):
                value = trace_object(
                    f"{name}-{author}-{i}",
                    definition=name,
                    solution=f"alice_{name}_v1",
                    latency=0.1 + i / 10,
                    log=f"{author} {i}\n",
                )
                lines.append(json.dumps(value))
            write_lines(root / f"traces/{author}/gemm/{name}.jsonl", lines)


@contextmanager
def unresolved_parts_seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[set[str]]]:
    """The run keys parts each build of the block found unresolved (file names)."""
    seen: list[set[str]] = []
    original = parts.write_group_parts

    def recording(connection: Any, *args: Any, **kwargs: Any) -> Any:
        found = connection.execute(parts.sql_text("assemble/unresolved_parts")).fetchall()
        seen.append({Path(name).name for (name,) in found})
        return original(connection, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(finalize, "write_group_parts", recording)
        yield seen


def build_resolving_everything(
    source: Path, warehouse: Path, monkeypatch: pytest.MonkeyPatch, **settings: Any
) -> None:
    """A build that resolves every runs part again, whatever its worker assumed."""
    original = parts.sql_text
    every_part = "SELECT DISTINCT filename FROM staged_run_keys"
    with monkeypatch.context() as patched:
        patched.setattr(
            parts,
            "sql_text",
            lambda name: every_part if name == "assemble/unresolved_parts" else original(name),
        )
        build(source, warehouse, **settings)


def assert_same_tables(ours: Path, theirs: Path) -> None:
    mine, other = tables(ours), tables(theirs)
    assert mine.keys() == other.keys()
    for table in mine:
        assert mine[table] == other[table], table


def runs_of(warehouse: Path) -> list[dict[str, Any]]:
    return read_table(Warehouse(warehouse).require_current(), "runs").to_pylist()


def test_a_consistent_source_publishes_the_parts_its_workers_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    make_dataset(source)
    with unresolved_parts_seen(monkeypatch) as seen:
        build(source, warehouse, revision=REVISION)
    assert seen == [set()]
    # Every runs file of the generation is a staging part byte for byte: nothing rewrote it.
    staged = {sha256_file(p) for p in Warehouse(warehouse).staging.glob("*.runs.*.parquet")}
    generation = Warehouse(warehouse).require_current()
    published = {sha256_file(p) for p in (generation / "runs.parquet").rglob("*.parquet")}
    assert staged and published == staged
    runs = runs_of(warehouse)
    assert len(runs) == 24
    assert all(run["run_digest"] and run["comparison_key"] for run in runs)
    assert {run["author"] for run in runs} == {"alice"}


def test_a_changed_solution_or_revision_resolves_the_parts_it_touches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace files are the same, so their staging parts are reused as they are; the
    implementation digests they were completed with are not the source's any more."""
    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    make_dataset(source)
    build(source, warehouse, revision=REVISION)
    before = {run["run_id"]: run["run_digest"] for run in runs_of(warehouse)}

    solution_file = source / f"solutions/alice/gemm/{DEFINITION}/alice_{DEFINITION}_v1.json"
    changed = solution_object(
        name=f"alice_{DEFINITION}_v1", definition=DEFINITION, content="def run(A, B, C): pass\n"
    )
    solution_file.write_text(json.dumps(changed))
    with unresolved_parts_seen(monkeypatch) as seen:
        result = build(source, warehouse, revision=REVISION)
    assert result.files_parsed == 0
    assert seen[0] and all(".run_keys." in name for name in seen[0])
    after = {run["run_id"]: run for run in runs_of(warehouse)}
    moved = {i for i in before if after[i]["run_digest"] != before[i]}
    assert moved == {i for i, run in after.items() if run["definition"] == DEFINITION}
    assert_same_as_from_scratch(source, warehouse, tmp_path / "scratch-solution")

    # A solution the runs name taken away: they are runs of an unknown solution now.
    solution_file.unlink()
    build(source, warehouse, revision=REVISION)
    unknown = [run for run in runs_of(warehouse) if run["definition"] == DEFINITION]
    assert {run["identity_error"] for run in unknown} == {"unknown_solution"}
    assert {run["run_digest"] for run in unknown} == {None}
    assert_same_as_from_scratch(source, warehouse, tmp_path / "scratch-unknown")

    # Another revision: every implementation digest, so every run digest, changes.
    with unresolved_parts_seen(monkeypatch) as seen:
        result = build(source, warehouse, revision="d" * 40)
    assert result.files_parsed == 0 and len(seen[0]) == 2
    build(source, tmp_path / "scratch-revision", revision="d" * 40)
    assert_same_tables(warehouse, tmp_path / "scratch-revision")


def test_a_file_found_not_strict_after_its_first_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bare NaN on a file's last line: KernelIndex reads none of the file. A worker completes
    the file's runs it has not written yet again; runs it wrote before (here: the file's old
    lines, kept from the build before, as the file only grew) are resolved again by finalize."""
    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    make_dataset(source)
    build(source, warehouse, revision=REVISION)
    bob = source / f"traces/bob/gemm/{DEFINITION}.jsonl"
    rel = f"traces/bob/gemm/{DEFINITION}.jsonl"
    lenient = json.dumps(trace_object("late", solution=f"alice_{DEFINITION}_v1", latency=0.3))
    lenient = lenient.replace('"latency_ms": 0.3', '"latency_ms": NaN')
    assert "NaN" in lenient
    write_lines(bob, [*bob.read_text().splitlines(), lenient])
    with unresolved_parts_seen(monkeypatch) as seen:
        grown = build(source, warehouse, revision=REVISION)
    assert grown.files_grown == 1 and len(seen[0]) == 1
    errors = {run["identity_error"] for run in runs_of(warehouse) if run["source_file"] == rel}
    assert "file_not_strict_json" in errors and None not in errors
    assert_same_as_from_scratch(source, warehouse, tmp_path / "scratch")

    # Parsed whole, the file's first lines are still gathered when the NaN comes.
    with unresolved_parts_seen(monkeypatch) as seen:
        build(source, tmp_path / "fresh", revision=REVISION)
    assert seen == [set()]
    build_resolving_everything(source, tmp_path / "resolved", monkeypatch, revision=REVISION)
    assert_same_tables(tmp_path / "fresh", tmp_path / "resolved")


def test_a_file_longer_than_a_chunk_is_held_until_it_is_found_not_strict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file KernelIndex reads holds its rows past a chunk (group.FILE_HOLD_ROWS) until it
    ends: a bare NaN on its last line finds them all in the worker, which completes them again,
    and finalize resolves no part. A file longer than that is written a chunk at a time, and
    finalize resolves the part with its early chunks again. Both give the same tables."""
    from tracehouse.ingest import group

    source = tmp_path / "dataset"
    make_dataset(source)
    bob = source / f"traces/bob/gemm/{DEFINITION}.jsonl"
    lenient = json.dumps(trace_object("late", solution=f"alice_{DEFINITION}_v1", latency=0.3))
    write_lines(bob, [*bob.read_text().splitlines(), lenient.replace("0.3", "NaN", 1)])
    monkeypatch.setattr(group, "CHUNK_ROWS", 2)  # the file's 7 runs: more than 3 chunks

    with unresolved_parts_seen(monkeypatch) as seen:
        build(source, tmp_path / "held", revision=REVISION, workers=2)
    assert seen == [set()]
    rel = f"traces/bob/gemm/{DEFINITION}.jsonl"
    errors = {r["identity_error"] for r in runs_of(tmp_path / "held") if r["source_file"] == rel}
    assert "file_not_strict_json" in errors and None not in errors  # (the NaN line: its own)

    monkeypatch.setattr(group, "FILE_HOLD_ROWS", 3)  # a chunk and 3 rows: less than the file
    with unresolved_parts_seen(monkeypatch) as seen:
        build(source, tmp_path / "chunked", revision=REVISION, workers=2)
    assert len(seen[0]) == 1
    assert_same_tables(tmp_path / "held", tmp_path / "chunked")
    build_resolving_everything(source, tmp_path / "resolved", monkeypatch, revision=REVISION)
    assert_same_tables(tmp_path / "held", tmp_path / "resolved")


def test_a_workload_key_whose_first_line_is_in_another_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KernelIndex's workload cache: the first accepted line of the whole import with a
    workload key fixes its case, even for a line of another definition in another file."""
    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    make_dataset(source)
    # bob's line of the other definition names a workload that alice's file of the first
    # definition (earlier in path order) names first.
    shared = trace_object(
        f"{DEFINITION}-alice-0",
        definition=OTHER_DEFINITION,
        solution=f"alice_{OTHER_DEFINITION}_v1",
        latency=0.9,
    )
    bob = source / f"traces/bob/gemm/{OTHER_DEFINITION}.jsonl"
    write_lines(bob, [*bob.read_text().splitlines(), json.dumps(shared)])
    with unresolved_parts_seen(monkeypatch) as seen:
        build(source, warehouse, revision=REVISION)
    assert len(seen[0]) == 1
    runs = runs_of(warehouse)
    first = next(
        r
        for r in runs
        if r["source_file"] == f"traces/alice/gemm/{DEFINITION}.jsonl" and r["source_line"] == 1
    )
    (taken,) = [
        r
        for r in runs
        if r["source_file"].endswith(f"{OTHER_DEFINITION}.jsonl") and r["source_line"] == 7
    ]
    assert taken["workload_digest"] == first["workload_digest"]
    assert taken["operation_digest"] == first["operation_digest"]
    build_resolving_everything(source, tmp_path / "resolved", monkeypatch, revision=REVISION)
    assert_same_tables(warehouse, tmp_path / "resolved")


def test_a_runs_part_is_resolved_row_group_by_row_group_beside_its_run_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runs part resolved again is read beside its run keys part, in their shared order, a
    row group and a batch of keys at a time (memory stays a row group's). Run keys in another
    order (never written so; here rewritten reversed) are looked up by id instead, and give
    the same part byte for byte."""
    import pyarrow.parquet as pq

    from tracehouse.ingest import group, worker

    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    make_dataset(source)
    # Row groups of two runs and batches of three keys: neither lines up with the other.
    monkeypatch.setattr(group, "CHUNK_ROWS", 2)
    monkeypatch.setattr(group, "FILE_HOLD_ROWS", 0)  # a file's chunks written as they fill
    monkeypatch.setattr(worker, "PART_ROW_GROUP_BYTES", 1)
    monkeypatch.setattr(parts, "RESOLVED_BATCH_ROWS", 3)
    build(source, warehouse, revision=REVISION, workers=1)
    staged = sorted(Warehouse(warehouse).staging.glob("*.runs.0.parquet"))
    assert staged and all(pq.ParquetFile(p).num_row_groups > 2 for p in staged)

    by_id: list[Path] = []
    write_resolved = parts._write_resolved

    def recording_write(staged: Path, *args: Any, **kwargs: Any) -> None:
        if kwargs["by_id"]:
            by_id.append(staged)
        write_resolved(staged, *args, **kwargs)

    monkeypatch.setattr(parts, "_write_resolved", recording_write)
    resolution = parts.SourceResolution({}, frozenset())  # every solution unknown now
    part = staged[0]
    in_order = tmp_path / "in-order.parquet"
    parts._resolve_runs_part(part, in_order, resolution, {})
    assert by_id == []
    resolved = pq.read_table(in_order)
    assert resolved.num_rows == pq.read_metadata(part).num_rows
    assert set(resolved.column("identity_error").to_pylist()) == {"unknown_solution"}

    reordered = tmp_path / "reordered"
    reordered.mkdir()
    copy = reordered / part.name
    copy.write_bytes(part.read_bytes())
    keys = pq.read_table(parts.run_keys_part(str(part)))
    pq.write_table(keys.take(list(reversed(range(keys.num_rows)))), parts.run_keys_part(str(copy)))
    by_key = tmp_path / "by-key.parquet"
    parts._resolve_runs_part(copy, by_key, resolution, {})
    assert by_id == [copy]
    assert by_key.read_bytes() == in_order.read_bytes()
