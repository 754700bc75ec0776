"""Issue 6, part 1: a hostile dataset loses nothing and corrupts nothing.

Every valid record of ``hostile_corpus`` must be imported, every invalid one must be in
``rejects`` with its file, line and exact reason, blank lines are ignored, and imported +
rejected equals the non-blank records read (counted here from the bytes, independently of the
importer). The build runs as a subprocess, as a user runs it, and must not print a traceback.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.hostile_corpus import (
    BLANK,
    DEFINITION,
    OUTSIDE_SOLUTION,
    OUTSIDE_UUID,
    RUN,
    SOLUTION,
    WORKLOAD,
    Corpus,
    build,
    build_corpus,
    current_tables,
    run_cli,
)

pytestmark = pytest.mark.integration


class Built:
    def __init__(self, corpus: Corpus, warehouse: Path, stdout: str, stderr: str) -> None:
        self.corpus = corpus
        self.warehouse = warehouse
        self.stdout = stdout
        self.stderr = stderr
        self.tables = {name: table.to_pylist() for name, table in current_tables(warehouse).items()}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    base = tmp_path_factory.mktemp("hostile")
    corpus = build_corpus(base)
    warehouse = base / "warehouse"
    result = build(corpus.root, warehouse, "--workers", "2")
    assert result.returncode == 0, result.stderr
    return Built(corpus, warehouse, result.stdout, result.stderr)


def _count_records_from_bytes(corpus: Corpus) -> tuple[int, set[tuple[str, int]]]:
    """Non-blank lines of every text JSONL file, read here without the importer's code."""
    lines: set[tuple[str, int]] = set()
    for rel in corpus.jsonl_files:
        data = (corpus.root / rel).read_bytes()
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        for number, line in enumerate(data.split(b"\n"), start=1):
            if line.strip():
                lines.add((rel, number))
    return len(lines), lines


def test_build_succeeds_without_traceback(built: Built) -> None:
    assert "Traceback" not in built.stderr
    assert "Traceback" not in built.stdout
    assert "rejects by reason" in built.stdout


def test_every_valid_trace_is_a_run(built: Built) -> None:
    # runs has no record_index: objects sharing a line (`}{`) are told apart by workload uuid.
    runs = {
        (r["source_file"], r["source_line"], r["workload_uuid"]): r for r in built.tables["runs"]
    }
    assert len(runs) == len(built.tables["runs"])
    expected = [c for c in built.corpus.cases if c.fate == RUN]
    missing = [c.name for c in expected if (c.file, c.line, c.uuid) not in runs]
    assert not missing, f"valid traces not imported: {missing}"
    for case in expected:
        row = runs[(case.file, case.line, case.uuid)]
        for column, value in case.checks.items():
            assert row[column] == value, (case.name, column, row[column], value)
    assert len(runs) == len(expected), "runs holds rows no case declared"


def test_every_valid_workload_record_is_a_workload(built: Built) -> None:
    workloads = {(r["source_file"], r["source_line"]): r for r in built.tables["workloads"]}
    for case in built.corpus.cases:
        if case.fate == WORKLOAD:
            row = workloads.get((case.file, case.line))
            assert row is not None, case.name
            assert row["workload_uuid"] == case.uuid
            assert row["definition"] == DEFINITION


def test_every_invalid_record_is_rejected_with_exact_reason(built: Built) -> None:
    actual = Counter((r["file"], r["line"], r["reason"]) for r in built.tables["rejects"])
    expected = Counter(
        (c.file, c.line, c.fate) for c in built.corpus.cases if c.fate not in (RUN, WORKLOAD)
    )
    expected.update((f.file, f.line, f.reason) for f in built.corpus.file_rejects)
    names = {(c.file, c.line, c.fate): c.name for c in built.corpus.cases}
    names.update({(f.file, f.line, f.reason): f.name for f in built.corpus.file_rejects})
    missing = {names[k]: k for k in expected - actual}
    unexpected = dict(actual - expected)
    assert not missing and not unexpected, f"missing: {missing}\nunexpected: {unexpected}"
    jsonl = set(built.corpus.jsonl_files)
    for row in built.tables["rejects"]:
        assert row["message"], row
        if row["file"] in jsonl:  # a rejected line keeps the start of its text for diagnosis
            assert row["raw_prefix"] is not None and 0 < len(row["raw_prefix"]) <= 200, row


def test_blank_lines_are_ignored(built: Built) -> None:
    blank = {(c.file, c.line) for c in built.corpus.records if c.fate == BLANK}
    assert blank, "the corpus must contain blank lines"
    rejected = {(r["file"], r["line"]) for r in built.tables["rejects"]}
    imported = {(r["source_file"], r["source_line"]) for r in built.tables["runs"]}
    imported |= {(r["source_file"], r["source_line"]) for r in built.tables["workloads"]}
    assert not blank & (rejected | imported)


def test_imported_plus_rejected_equals_records_read(built: Built) -> None:
    corpus = built.corpus
    line_count, lines = _count_records_from_bytes(corpus)
    declared_lines = {(c.file, c.line) for c in corpus.cases if c.file in corpus.jsonl_files}
    assert lines == declared_lines, "the corpus declares exactly its non-blank lines"
    # A line may hold several objects (`}{`); those were declared per object.
    records = len([c for c in corpus.cases if c.file in corpus.jsonl_files])
    assert records == line_count + sum(1 for c in corpus.cases if c.index > 0)

    jsonl = set(corpus.jsonl_files)
    runs = [r for r in built.tables["runs"] if r["source_file"] in jsonl]
    run_lines = {(r["source_file"], r["source_line"]) for r in runs}
    workload_only = [
        r
        for r in built.tables["workloads"]
        if r["source_file"] in jsonl and (r["source_file"], r["source_line"]) not in run_lines
    ]
    line_rejects = [
        r for r in built.tables["rejects"] if r["file"] in jsonl and r["line"] is not None
    ]
    assert len(runs) + len(workload_only) + len(line_rejects) == records

    # The importer's own count agrees (records read = JSONL records + .json documents).
    json_documents = len(corpus.definitions) + len(corpus.solutions)
    json_documents += sum(
        1
        for f in corpus.file_rejects
        if f.file.endswith(".json") and f.reason != "symlink_outside_source"
    )
    assert f"records read {records + json_documents}" in built.stdout


def test_definitions_and_solutions(built: Built) -> None:
    assert sorted(r["definition"] for r in built.tables["definitions"]) == sorted(
        built.corpus.definitions
    )
    assert [r["solution"] for r in built.tables["implementations"]] == [SOLUTION]


def test_dangling_solution_is_kept_and_missing_definition_rejected(built: Built) -> None:
    ghost = [r for r in built.tables["runs"] if r["solution"] == "ghost_solution"]
    assert len(ghost) == 1 and ghost[0]["author"] is None
    assert not [r for r in built.tables["runs"] if r["definition"] == "no_such_definition"]


def test_nan_and_infinity_in_correctness_are_kept(built: Built) -> None:
    by_uuid = {r["workload_uuid"]: r["run_id"] for r in built.tables["runs"]}
    correctness = {r["run_id"]: r for r in built.tables["correctness"]}
    for case in built.corpus.cases:
        if case.name in ("correctness_nan_infinity_strings", "correctness_bare_nan_infinity"):
            row = correctness[by_uuid[case.uuid]]
            assert (row["max_relative_error"], row["max_relative_error_special"]) == (None, "NaN")
            assert (row["max_absolute_error"], row["max_absolute_error_special"]) == (
                None,
                "Infinity",
            )
        if case.name == "correctness_1e400":
            row = correctness[by_uuid[case.uuid]]
            assert row["max_relative_error_special"] == "Infinity"
            assert row["max_absolute_error"] == 0.5


def test_outside_symlink_is_not_followed(built: Built) -> None:
    text = json.dumps(built.tables, default=str)
    assert OUTSIDE_SOLUTION not in text
    assert OUTSIDE_UUID not in text
    assert "outside_definition" not in text
    outside_files = {p.name for p in built.corpus.outside.rglob("*")}
    assert outside_files == {"secret.jsonl", "definitions", "leak.json"}, "nothing written outside"


def test_rebuild_is_up_to_date_and_stable(built: Built) -> None:
    before = {name: rows for name, rows in built.tables.items() if name != "source_snapshots"}
    again = build(built.corpus.root, built.warehouse)
    assert again.returncode == 0 and "up to date" in again.stdout, again.stderr
    forced = build(built.corpus.root, built.warehouse, "--force", "--workers", "1")
    assert forced.returncode == 0, forced.stderr
    after = {
        name: t.to_pylist()
        for name, t in current_tables(built.warehouse).items()
        if name != "source_snapshots"
    }
    assert after == before


def test_cli_query_reports_rejects_by_reason(built: Built) -> None:
    result = run_cli(
        "query",
        "select reason, count(*) as n from rejects group by 1 order by 1",
        "--format",
        "json",
        "--warehouse",
        str(built.warehouse),
    )
    assert result.returncode == 0, result.stderr
    expected = Counter(r["reason"] for r in built.tables["rejects"])
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    assert {r["reason"]: r["n"] for r in rows} == dict(expected)
