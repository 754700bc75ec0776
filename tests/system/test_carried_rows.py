"""Issue 26, item 4: a changed file re-parses that file, not its whole group.

The files of one definition (every author's traces and its workloads file) are one group of
staging parts. When some of them change, the others keep their rows: they are carried over
from the group's previous parts (ingest/worker.py carry_rows), and only the changed files are
parsed. Each step below is checked against a build from scratch of the same files: every table
the same rows, whatever was carried, added or taken away.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import build
from tests.fixtures.hostile_corpus import (
    DEFINITION,
    definition_object,
    solution_object,
    trace_object,
    workload_record,
)
from tracehouse.assemble.invariants import read_checks
from tracehouse.ingest.manifest import read_manifest
from tracehouse.ingest.plan import file_group
from tracehouse.schemas import GROUP_PARTED_TABLES, TABLES
from tracehouse.warehouse import DUCKDB_FILE, Warehouse, read_table

pytestmark = pytest.mark.slow

REVISION = "c" * 40
# The history tables say how the warehouse got here, which a build from scratch cannot.
HISTORY = ("source_snapshots", "run_appearances", "run_disappearances")


def trace_lines(author: str, count: int, *, first: int = 0) -> list[str]:
    """``count`` runs of one author, each on its own hardware (its own environments row),
    some failing (correctness without latency), and a line that is refused."""
    lines = []
    for i in range(first, first + count):
        value = trace_object(f"{author}-{i}", latency=0.1 + i / 10, log=f"{author} step {i}\n")
        value["evaluation"]["environment"]["hardware"] = f"NVIDIA B200 ({author})"
        if i % 4 == 3:
            value = trace_object(f"{author}-{i}", status="INCORRECT_NUMERICAL")
        lines.append(json.dumps(value))
    lines.append('{"definition": "' + DEFINITION + '", "cut')
    return lines


def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def make_dataset(root: Path, authors: list[str]) -> None:
    (root / "definitions/gemm").mkdir(parents=True)
    (root / f"definitions/gemm/{DEFINITION}.json").write_text(json.dumps(definition_object()))
    solutions = root / "solutions/alice/gemm" / DEFINITION
    solutions.mkdir(parents=True)
    (solutions / "alice_gemm_v1.json").write_text(json.dumps(solution_object()))
    write_lines(
        root / f"workloads/gemm/{DEFINITION}.jsonl",
        [json.dumps(workload_record(f"w{i}")) for i in range(5)],
    )
    for author in authors:
        write_lines(root / f"traces/{author}/gemm/{DEFINITION}.jsonl", trace_lines(author, 12))


def tables(warehouse: Path) -> dict[str, list[dict]]:
    generation = Warehouse(warehouse).require_current()
    found = {}
    for table in TABLES:
        if table in HISTORY:
            continue
        rows = read_table(generation, table).to_pylist()
        found[table] = sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))
    return found


OPEN_RANGES_SQL = """
SELECT run_id, comparison_key, eligible FROM run_appearances AS a
WHERE NOT EXISTS (SELECT 1 FROM run_disappearances AS d
                  WHERE d.source = a.source AND d.run_id = a.run_id
                    AND d.first_snapshot_number = a.first_snapshot_number)
ORDER BY ALL
"""
PRESENT_RUNS_SQL = """
SELECT run_id, r.comparison_key, k.eligible FROM runs AS r JOIN run_rankings AS k USING (run_id)
ORDER BY ALL
"""


def assert_same_as_from_scratch(source: Path, warehouse: Path, scratch: Path) -> None:
    build(source, scratch, revision=REVISION)
    ours, theirs = tables(warehouse), tables(scratch)
    assert ours.keys() == theirs.keys()
    for table in ours:
        assert ours[table] == theirs[table], table
    # What a scratch build cannot say, run_history, is right when its open ranges are the runs
    # present, each with its comparison key and eligibility (whatever the build compared).
    connection = duckdb.connect(str(Warehouse(warehouse).require_current() / DUCKDB_FILE))
    try:
        ranges = connection.execute(OPEN_RANGES_SQL).fetchall()
        assert ranges == connection.execute(PRESENT_RUNS_SQL).fetchall()
    finally:
        connection.close()


def test_a_changed_file_is_parsed_alone_and_the_warehouse_equals_one_built_from_scratch(
    tmp_path: Path,
) -> None:
    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    make_dataset(source, ["alice", "bob", "carol", "dave"])
    files = sorted(p.relative_to(source).as_posix() for p in source.rglob("*.jsonl"))
    assert len({file_group(rel) for rel in files}) == 1  # one group: one definition's files
    first = build(source, warehouse, revision=REVISION)
    assert (first.files_parsed, first.files_reused) == (5, 0)

    # A line appended and a line rewritten in one file: that file alone is parsed.
    bob = source / f"traces/bob/gemm/{DEFINITION}.jsonl"
    lines = bob.read_text().splitlines()
    lines[0] = json.dumps(trace_object("bob-0", latency=9.5))
    write_lines(bob, [*lines, *trace_lines("bob", 2, first=40)])
    changed = build(source, warehouse, revision=REVISION)
    assert (changed.files_parsed, changed.files_reused) == (1, 4)
    assert_same_as_from_scratch(source, warehouse, tmp_path / "scratch-1")

    # A file taken away: nothing is parsed, the others' rows stay and its own go.
    (source / f"traces/carol/gemm/{DEFINITION}.jsonl").unlink()
    removed = build(source, warehouse, revision=REVISION)
    assert (removed.files_parsed, removed.files_reused) == (0, 4)
    assert_same_as_from_scratch(source, warehouse, tmp_path / "scratch-2")

    # A new file of the same definition: it alone is parsed.
    write_lines(source / f"traces/erin/gemm/{DEFINITION}.jsonl", trace_lines("erin", 6))
    added = build(source, warehouse, revision=REVISION)
    assert (added.files_parsed, added.files_reused) == (1, 4)
    assert_same_as_from_scratch(source, warehouse, tmp_path / "scratch-3")

    # A group part damaged on disk cannot be carried from: the whole group is parsed again.
    manifest = read_manifest(Warehouse(warehouse).manifest_path)
    (entry,) = [e for s in manifest.sources.values() for e in s.files.values()][:1]
    damaged = Warehouse(warehouse).staging / entry.parts["runs"][0]
    damaged.write_bytes(damaged.read_bytes()[:-20] + b"\0" * 20)
    write_lines(bob, trace_lines("bob", 3))
    repaired = build(source, warehouse, revision=REVISION)
    assert (repaired.files_parsed, repaired.files_reused) == (5, 0)
    assert_same_as_from_scratch(source, warehouse, tmp_path / "scratch-4")


def append_lines(path: Path, lines: list[str]) -> None:
    with path.open("a") as handle:
        handle.write("".join(f"{line}\n" for line in lines))


def test_a_file_that_only_grew_is_parsed_past_its_old_end(tmp_path: Path) -> None:
    """FlashInfer-Bench appends each re-run to its trace file: the file's old lines keep their
    rows and only the new ones are parsed, into the rows a parse of the whole file gives."""
    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    make_dataset(source, ["alice", "bob"])
    build(source, warehouse, revision=REVISION)
    bob = source / f"traces/bob/gemm/{DEFINITION}.jsonl"

    # Re-runs of workloads the file has (their workload and environment rows are not given
    # twice), a run on new hardware, a workload record, a refused line and a blank one.
    rerun = trace_object("bob-1", latency=0.7, log="bob again\n")
    rerun["evaluation"]["environment"]["hardware"] = "NVIDIA B200 (bob)"
    elsewhere = trace_object("bob-50", latency=0.3)
    elsewhere["evaluation"]["environment"]["hardware"] = "NVIDIA H200"
    append_lines(
        bob,
        [json.dumps(rerun), json.dumps(elsewhere), "", json.dumps(workload_record("bob-2")), "{"],
    )
    step = 0

    def build_and_compare() -> Any:
        """Build, and check the warehouse against one built from scratch."""
        nonlocal step
        step += 1
        result = build(source, warehouse, revision=REVISION)
        assert_same_as_from_scratch(source, warehouse, tmp_path / f"scratch-{step}")
        return result

    grown = build_and_compare()
    assert (grown.files_parsed, grown.files_grown, grown.files_reused) == (1, 1, 2)
    assert "files parsed 1 (1 only past the old end)" in "\n".join(grown.summary_lines())

    # Grown again, with a line KernelIndex's strict parser refuses (NaN): the whole file is
    # then unreadable for it, its old runs included, as a parse of the whole file says.
    append_lines(bob, [json.dumps(trace_object("bob-60", latency=float("nan")))])
    again = build_and_compare()
    assert (again.files_parsed, again.files_grown) == (1, 1)
    append_lines(bob, [json.dumps(trace_object("bob-61", latency=0.2))])
    assert build_and_compare().files_grown == 1

    # Old bytes changed as well as new ones added: the file is parsed whole.
    lines = bob.read_text().splitlines()
    lines[0] = json.dumps(trace_object("bob-0", latency=9.5))
    write_lines(bob, [*lines, json.dumps(trace_object("bob-62", latency=0.4))])
    rewritten = build_and_compare()
    assert (rewritten.files_parsed, rewritten.files_grown) == (1, 0)

    # A file whose last line has no line end (a line added without one is still read on):
    # what is added next continues that line, so the file is parsed whole, then read on from
    # its new end once it ends a line.
    bob.write_text(bob.read_text() + json.dumps(trace_object("bob-63", latency=0.5)))
    assert build_and_compare().files_grown == 1
    with bob.open("a") as handle:
        handle.write("\n" + json.dumps(trace_object("bob-64")) + "\n")
    continued = build_and_compare()
    assert (continued.files_parsed, continued.files_grown) == (1, 0)
    append_lines(bob, [json.dumps(trace_object("bob-65", latency=0.6))])
    assert build_and_compare().files_grown == 1


def group_parts(warehouse: Path) -> dict[str, list[str]]:
    """The staging parts of the (one) group of the dataset, as the manifest lists them."""
    manifest = read_manifest(Warehouse(warehouse).manifest_path)
    listed = {
        json.dumps(e.parts, sort_keys=True): e.parts
        for s in manifest.sources.values()
        for e in s.files.values()
    }
    assert len(listed) == 1  # every file of the group names the same parts
    (parts,) = listed.values()
    return parts


def resolved_files(warehouse: Path) -> dict[str, dict[str, tuple[int, int]]]:
    """Each group-parted table's files in the current generation, with their inodes."""
    generation = Warehouse(warehouse).require_current()
    found = {}
    for table in GROUP_PARTED_TABLES:
        files = (generation / f"{table}.parquet").glob("*/*-*.parquet")
        found[table] = {
            path.name: (path.stat().st_dev, path.stat().st_ino)
            for path in files
            if len(path.name.split("-")[0]) == 32  # a part's (not before-ingest.parquet)
        }
    return found


def test_appended_runs_add_a_part_and_the_group_keeps_its_old_ones(tmp_path: Path) -> None:
    """After an append, the group's previous parts stay as they are (their rows are not copied)
    and the new lines' rows are one more part; at KEPT_PARTS_MAX parts a table the rows are
    copied into one part again. A file taken away, or changed other than by growing, has rows
    in those parts that must go: then they are copied without them. Every step equals a build
    from scratch."""
    source, warehouse = tmp_path / "dataset", tmp_path / "warehouse"
    make_dataset(source, ["alice", "bob", "carol"])
    build(source, warehouse, revision=REVISION)
    first = read_checks(Warehouse(warehouse).require_current())
    assert first["unique_run_ids"][1]["checked"] == "every row"
    bob = source / f"traces/bob/gemm/{DEFINITION}.jsonl"
    step = 0

    def append_and_build(*lines: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        nonlocal step
        step += 1
        before = group_parts(warehouse)
        if lines:
            append_lines(bob, list(lines))
        result = build(source, warehouse, revision=REVISION)
        assert_same_as_from_scratch(source, warehouse, tmp_path / f"scratch-{step}")
        assert result.files_grown == (1 if lines else 0)
        return before, group_parts(warehouse)

    before, after = append_and_build(json.dumps(trace_object("bob-70", latency=0.25)))
    for table, names in before.items():  # the old parts first, then the new lines' rows
        assert after[table][: len(names)] == names, table
    assert len(after["runs"]) == len(before["runs"]) + 1

    # So are the resolved parts the generation holds, when the new lines change nothing that
    # resolution takes from outside the group (a re-run of a workload the dataset has): the
    # older ones are the files of the generation before, linked, and the new rows more files.
    resolved = resolved_files(warehouse)
    rerun = trace_object("bob-1", latency=0.7, log="bob again\n")
    rerun["evaluation"]["environment"]["hardware"] = "NVIDIA B200 (bob)"
    append_and_build(json.dumps(rerun))
    grown = resolved_files(warehouse)
    for table, files in grown.items():
        assert resolved[table].items() <= files.items(), table
    assert len(grown["runs"]) == len(resolved["runs"]) + 1
    # and the invariants check the one new run, the rest having passed when published
    checks = read_checks(Warehouse(warehouse).require_current())
    for name in ("unique_run_ids", "run_status_matrix", "one_cohort_size_per_comparison_key"):
        assert checks[name][0], name
        assert checks[name][1]["checked"] == "the rows this build changed (1 runs)", name

    # A new file of the group beside the grown one: its rows go into the new part too.
    write_lines(source / f"traces/erin/gemm/{DEFINITION}.jsonl", trace_lines("erin", 3))
    before, after = append_and_build(json.dumps(trace_object("bob-71", latency=0.35)))
    assert len(after["runs"]) == len(before["runs"]) + 1
    assert after["runs"][: len(before["runs"])] == before["runs"]

    # Appends until a table has KEPT_PARTS_MAX parts: the rows are then one part again.
    from tracehouse.ingest.plan import KEPT_PARTS_MAX

    while len(group_parts(warehouse)["runs"]) < KEPT_PARTS_MAX:
        append_and_build(json.dumps(trace_object(f"bob-{80 + step}", latency=0.1 + step / 10)))
    _, compacted = append_and_build(json.dumps(trace_object("bob-99", latency=0.45)))
    assert len(compacted["runs"]) == 1

    # Kept parts again, then a file taken away: its rows must leave the group's parts.
    append_and_build(json.dumps(trace_object("bob-100", latency=0.55)))
    assert len(group_parts(warehouse)["runs"]) == 2
    (source / f"traces/carol/gemm/{DEFINITION}.jsonl").unlink()
    _, after = append_and_build(json.dumps(trace_object("bob-101", latency=0.65)))
    assert len(after["runs"]) == 1
