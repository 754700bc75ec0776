"""The warehouse end to end: every sample layout, the golden corpus, determinism, incrementality."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from tests.conftest import GOLDEN_REVISION, build, run_cli
from tests.fixtures.shared_data import GOLDEN_DIR, SAMPLES_DIR, requires_shared
from tracehouse.ingest.plan import file_group
from tracehouse.schemas import TABLES
from tracehouse.serve.export import SNAPSHOT_FOLDER
from tracehouse.warehouse import Warehouse, read_table, table_files, table_row_count

# Counted independently of the importer (plain json.loads over every file, README of the
# samples): definitions and solutions by file, workloads as distinct (definition, uuid or
# axes), runs as lines whose `evaluation` is a non-empty object, rejects as lines naming a
# definition the folder does not have.
SAMPLE_COUNTS = {
    "ffi_example_flat_layout": dict(
        definitions=1,
        implementations=1,
        workloads=43,
        environments=0,
        runs=0,
        correctness=0,
        rejects=0,
        lines=43,
    ),
    "hf_v0_snapshot_2025-08": dict(
        definitions=10,
        implementations=8,
        workloads=344,
        environments=1,
        runs=301,
        correctness=301,
        rejects=51,
        lines=524,
    ),
    "hf_v3_layout": dict(
        definitions=11,
        implementations=8,
        workloads=371,
        environments=1,
        runs=242,
        correctness=68,
        rejects=0,
        lines=462,
    ),
    "intel_sycl_fork_2026-09": dict(
        definitions=2,
        implementations=0,
        workloads=4,
        environments=1,
        runs=8,
        correctness=4,
        rejects=0,
        lines=12,
    ),
    "legacy_2025-07_handwritten_example": dict(
        definitions=0,
        implementations=0,
        workloads=0,
        environments=0,
        runs=0,
        correctness=0,
        rejects=3,
        lines=3,
    ),
    "legacy_2025-08_repo_dataset": dict(
        definitions=3,
        implementations=3,
        workloads=47,
        environments=1,
        runs=4,
        correctness=4,
        rejects=0,
        lines=51,
    ),
    # web_baseline_config holds only baselines.json: not a dataset, refused
    # (tests/test_user_safety.py).
}


def table_rows(warehouse: Path, table: str) -> list[dict]:
    rows = read_table(Warehouse(warehouse).require_current(), table).to_pylist()
    if table == "source_snapshots":
        for row in rows:
            row.pop("built_at")
    return rows


def count(warehouse: Path, table: str) -> int:
    return table_row_count(Warehouse(warehouse).require_current(), table)


@pytest.mark.slow
@requires_shared
@pytest.mark.parametrize("folder", sorted(SAMPLE_COUNTS))
def test_every_sample_layout_builds_with_exact_counts(folder: str, tmp_path: Path) -> None:
    expected = SAMPLE_COUNTS[folder]
    build = ["build", "--source", str(SAMPLES_DIR / folder), "--warehouse", str(tmp_path / "w")]
    if expected["runs"] == 0 and expected["rejects"] > 0:
        # every record rejected: refused in one line (issue 19), published only when asked
        refused = run_cli(*build)
        assert refused.returncode == 2 and "no run imported" in refused.stderr, refused.stderr
        build.append("--allow-shrink")
    result = run_cli(*build)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    for table in (
        "definitions",
        "implementations",
        "workloads",
        "environments",
        "runs",
        "correctness",
        "rejects",
    ):
        assert count(tmp_path / "w", table) == expected[table], table
    # every record is imported or rejected: trace and workload lines, nothing lost
    rejects = table_rows(tmp_path / "w", "rejects")
    assert all(r["reason"] and r["file"] for r in rejects)
    line_rejects = [r for r in rejects if r["line"] is not None]
    connection = duckdb.connect()
    imported = connection.execute(
        "SELECT (SELECT count(*) FROM read_parquet($runs)) + 0",
        {
            "runs": [
                str(p) for p in table_files(Warehouse(tmp_path / "w").require_current(), "runs")
            ]
        },
    ).fetchone()[0]
    workload_lines = expected["lines"] - expected["runs"] - len(line_rejects)
    assert imported + workload_lines + len(line_rejects) == expected["lines"]


@requires_shared
def test_golden_runs_match_kernelindex_keys_and_ranks(golden_warehouse: Path) -> None:
    with (GOLDEN_DIR / "expected.csv").open() as handle:
        expected = list(csv.DictReader(handle))
    assert count(golden_warehouse, "runs") == len(expected) == 1490
    connection = duckdb.connect(str(golden_warehouse / "tracehouse.duckdb"), read_only=True)
    ours = connection.execute(
        """SELECT definition, solution, workload_uuid,
                  strftime(observed_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS observed_at,
                  operation_digest, workload_digest, environment_digest, protocol_digest,
                  correctness_key, comparison_key, latency_ns, status, ki_status, rank, cohort_size
           FROM run_summary ORDER BY source_file, source_line"""
    ).fetchall()
    columns = [
        "definition",
        "solution",
        "workload_uuid",
        "observed_at",
        "operation_digest",
        "workload_digest",
        "environment_key",
        "protocol_key",
        "correctness_key",
        "comparison_key",
        "latency_ns",
        "status",
        "ki_status",
        "rank",
        "cohort_size",
    ]
    ours_by_pair: dict[tuple, list[dict]] = {}
    for row in ours:
        record = dict(zip(columns, ["" if v is None else str(v) for v in row], strict=True))
        ours_by_pair.setdefault(
            (record["definition"], record["solution"], record["workload_uuid"]), []
        ).append(record)
    mismatches = []
    for exp in expected:
        candidates = ours_by_pair.get(
            (exp["definition"], exp["solution"], exp["workload_uuid"]), []
        )
        match = next((c for c in candidates if c["observed_at"] == exp["observed_at"]), None)
        if match is None:
            mismatches.append((exp["ki_run_id"], "unmatched"))
            continue
        candidates.remove(match)
        for column in columns[3:]:
            if match[column] != exp[column]:
                mismatches.append((exp["ki_run_id"], column, match[column], exp[column]))
    assert mismatches == []


@pytest.mark.slow
@requires_shared
def test_seed_record_matches_the_identity_document(golden_warehouse: Path) -> None:
    external_id = "trace/flashinfer_wrapper_ea3787/892d1b8f-f6fe-40ad-aa3f-b6d391753bd3"
    text = run_cli("record", external_id, "--warehouse", str(golden_warehouse))
    assert text.returncode == 0, text.stderr
    for fact in (
        "68,857 ns (68.9 µs)",
        "3958.47× reference",
        "sha256:04ea3f7140e33a224bf6eb0850cd25eac0ff008365448e7b65534897eebd1d6d",
        "sha256:e8dda69a",
        "sha256:f4292a8b",
        "sha256:7d44d206",
        "rank 1 of 1",
        "evidence level         reported",
        "max absolute error 0.03125",
        "max relative error 24207.900390625",
        "result passed",
    ):
        assert fact in text.stdout, fact
    first = run_cli("record", external_id, "--json", "--warehouse", str(golden_warehouse))
    second = run_cli("record", external_id, "--json", "--warehouse", str(golden_warehouse))
    assert first.stdout == second.stdout  # byte-stable
    ours = json.loads(first.stdout)
    document = (GOLDEN_DIR.parent.parent / "docs" / "kernelindex-identity.md").read_text()
    block = (
        document.split("### 12.3 The stored record", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    )
    published = json.loads(block)
    assert ours["protocol"] == published["protocol"]
    assert ours["environment"] == published["environment"]
    # The corpus carries only a placeholder for this solution's source (golden README), so its
    # implementation digest cannot be KernelIndex's; every other member must be identical.
    ours_run = json.loads(json.dumps(ours["run"]))
    ours_run["spec"]["implementationDigest"] = published["run"]["spec"]["implementationDigest"]
    assert ours_run == published["run"]


@pytest.mark.slow
@requires_shared
def test_building_twice_gives_identical_tables_and_exports(
    golden_warehouse: Path, tmp_path: Path
) -> None:
    """The first build is the session's golden warehouse (built with the same arguments)."""
    source = GOLDEN_DIR / "dataset"
    build(source, tmp_path / "b", revision=GOLDEN_REVISION, workers=1)
    for table in TABLES:
        assert table_rows(golden_warehouse, table) == table_rows(tmp_path / "b", table), table
    assert (
        run_cli(
            "export", "--snapshot", str(tmp_path / "e1"), "--warehouse", str(golden_warehouse)
        ).returncode
        == 0
    )
    assert (
        run_cli(
            "export", "--snapshot", str(tmp_path / "e2"), "--warehouse", str(golden_warehouse)
        ).returncode
        == 0
    )
    names = sorted(p.name for p in (tmp_path / "e1").iterdir())
    assert names == sorted(
        [*(f"{t}.parquet" for t in TABLES), "manifest.json", SNAPSHOT_FOLDER.marker]
    )
    for name in names:
        assert (tmp_path / "e1" / name).read_bytes() == (tmp_path / "e2" / name).read_bytes(), name
    manifest = json.loads((tmp_path / "e1" / "manifest.json").read_text())
    assert manifest["tables"]["runs"]["rows"] == 1490


def ranking_parts(warehouse: Path) -> set[str]:
    """The run_rankings parts the published generation links to (one per ranking bucket)."""
    return {
        path.name.split("-")[0]
        for path in (warehouse / "current" / "run_rankings.parquet").glob("*.parquet")
    }


@pytest.mark.slow
@requires_shared
def test_incremental_build_reparses_only_the_changed_file_and_equals_a_full_build(
    tmp_path: Path,
) -> None:
    source = tmp_path / "dataset"
    shutil.copytree(GOLDEN_DIR / "dataset", source)
    first = build(source, tmp_path / "w", revision=GOLDEN_REVISION)
    assert first.files_parsed == 100
    unchanged = build(source, tmp_path / "w", revision=GOLDEN_REVISION)
    assert unchanged.up_to_date
    trace_file = source / "traces/baseline/rmsnorm/fused_add_rmsnorm_h2048.jsonl"
    lines = trace_file.read_text().splitlines(keepends=True)
    trace_file.write_text("".join(lines[:-1]))  # drop the last run
    before = ranking_parts(tmp_path / "w")
    incremental = build(source, tmp_path / "w", revision=GOLDEN_REVISION)
    # Its group: the files of its definition (every author's), and any other definition's
    # whose name falls in the same one of the FILE_GROUPS.
    rel = trace_file.relative_to(source).as_posix()
    group = [
        path
        for path in source.rglob("*.jsonl")
        if file_group(path.relative_to(source).as_posix()) == file_group(rel)
    ]
    assert 1 < len(group) < 10 and {p.name for p in group} >= {trace_file.name}
    # The group's other files keep their rows from its previous parts: one file is parsed.
    assert (incremental.files_parsed, incremental.files_reused) == (1, 99)
    # One definition changed: one ranking bucket re-ranked, every other part linked as it was.
    after = ranking_parts(tmp_path / "w")
    assert len(before) == len(after) > 10
    assert len(after - before) == 1 and len(before - after) == 1
    build(source, tmp_path / "scratch", revision=GOLDEN_REVISION)
    for table in TABLES:
        ours, scratch = table_rows(tmp_path / "w", table), table_rows(tmp_path / "scratch", table)
        if table == "source_snapshots":  # the incremental warehouse also keeps its history
            assert len(ours) == 2 and ours[-1]["snapshot_number"] == 2
            assert [{**ours[-1], "snapshot_number": 1}] == scratch
        elif table == "run_disappearances":  # the run dropped from the file ends its range
            assert [(r["first_snapshot_number"], r["absent_snapshot_number"]) for r in ours] == [
                (1, 2)
            ]
            assert scratch == []
        elif table == "run_appearances":  # every run appeared with the first snapshot
            assert {r["first_snapshot_number"] for r in ours} == {1}
            assert len(ours) == len(scratch) + 1
        else:
            assert ours == scratch, table
    assert count(tmp_path / "w", "runs") == 1489


@pytest.mark.slow
@requires_shared
def test_query_runs_from_a_second_process_and_refuses_writes(golden_warehouse: Path) -> None:
    result = run_cli(
        "query",
        "SELECT count(*) AS n FROM run_summary",
        "--format",
        "csv",
        "--warehouse",
        str(golden_warehouse),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["n", "1490"]
    result = run_cli(
        "query",
        "SELECT status FROM runs WHERE status = 'PASSED' LIMIT 1",
        "--format",
        "json",
        env={"TRACEHOUSE_WAREHOUSE": str(golden_warehouse)},
    )
    assert json.loads(result.stdout) == [{"status": "PASSED"}]
    refused = run_cli("query", "DROP TABLE runs", "--warehouse", str(golden_warehouse))
    assert refused.returncode == 2
    assert "read-only" in refused.stderr and "Traceback" not in refused.stderr
    assert count(golden_warehouse, "runs") == 1490


@requires_shared
def test_run_summary_has_the_documented_columns(golden_warehouse: Path) -> None:
    connection = duckdb.connect(str(golden_warehouse / "tracehouse.duckdb"), read_only=True)
    columns = [row[0] for row in connection.execute("DESCRIBE run_summary").fetchall()]
    for name in (
        "definition",
        "op_type",
        "solution",
        "author",
        "workload_uuid",
        "status",
        "latency_ns",
        "observed_at",
        "hardware",
        "comparison_key",
        "cohort_size",
        "rank",
        "source_file",
        "source_line",
    ):
        assert name in columns


@pytest.mark.slow
@requires_shared
def test_leaderboard_and_kernelindex_export(golden_warehouse: Path, tmp_path: Path) -> None:
    board = run_cli(
        "leaderboard", "gemm_n4096_k4096", "--format", "json", "--warehouse", str(golden_warehouse)
    )
    assert board.returncode == 0, board.stderr
    rows = json.loads(board.stdout)
    baseline = next(r for r in rows if r["solution"] == "torch_matmul_0d13df")
    # the baseline is the unit the others are read in: 1.000x, on every workload it passed
    assert (
        baseline["is_baseline"]
        and baseline["geomean_speedup"] == 1.0
        and baseline["speedup_reason"] is None
        and baseline["passed"] == "43/43"
    )
    out = tmp_path / "gemm.json"
    exported = run_cli(
        "export",
        "--kernelindex",
        "gemm_n4096_k4096",
        str(out),
        "--warehouse",
        str(golden_warehouse),
    )
    assert exported.returncode == 0, exported.stderr
    document = json.loads(out.read_text())
    assert document["definition"] == "gemm_n4096_k4096" and len(document["runs"]) == 86
    ranked = [r for r in document["runs"] if r["rank"] is not None]
    assert all(
        r["manifest"]["run"]["kind"] == "BenchmarkRun" and r["cohortSize"] >= r["rank"]
        for r in ranked
    )


@pytest.mark.slow
@requires_shared
def test_files_written_in_small_chunks_give_the_same_tables(
    golden_warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against the golden warehouse, built in whole chunks."""
    from tracehouse.ingest import group

    source = GOLDEN_DIR / "dataset"
    monkeypatch.setattr(group, "CHUNK_ROWS", 7)  # read when the build makes its tasks
    monkeypatch.setattr(group, "FILE_HOLD_ROWS", 0)  # (so is this: chunks within a file too)
    build(source, tmp_path / "chunked", revision=GOLDEN_REVISION)
    staged_keys = (tmp_path / "chunked" / "cache" / "staging").glob("*.run_keys.*.parquet")
    # each chunk is a row group of its group's one run keys part (a parted table's part, runs
    # among them, gathers its chunks into row groups of ~16 MB: worker.PART_ROW_GROUP_BYTES)
    assert any(pq.ParquetFile(path).num_row_groups > 3 for path in staged_keys)
    for table in TABLES:
        assert table_rows(golden_warehouse, table) == table_rows(tmp_path / "chunked", table), table


@pytest.mark.slow
@requires_shared
def test_a_bare_nan_line_costs_the_file_its_kernelindex_identity_but_no_rows(
    tmp_path: Path,
) -> None:
    source = tmp_path / "dataset"
    shutil.copytree(GOLDEN_DIR / "dataset", source)
    trace_file = source / "traces/baseline/rmsnorm/fused_add_rmsnorm_h2048.jsonl"
    lines = trace_file.read_text().splitlines()
    record = json.loads(lines[0])
    record["evaluation"]["correctness"]["max_relative_error"] = float("nan")
    lines.append(json.dumps(record))  # Python writes a bare NaN token, as old harnesses did
    trace_file.write_text("\n".join(lines) + "\n")
    build(source, tmp_path / "w", revision=GOLDEN_REVISION)
    rows = [
        r
        for r in table_rows(tmp_path / "w", "runs")
        if r["source_file"].endswith("fused_add_rmsnorm_h2048.jsonl")
    ]
    assert len(rows) == len(lines)
    assert {r["identity_error"] for r in rows} == {"file_not_strict_json"}
    assert all(r["comparison_key"] is not None for r in rows)  # keys are still computed
    others = [r for r in table_rows(tmp_path / "w", "runs") if r not in rows]
    assert {r["identity_error"] for r in others} == {None}


@pytest.mark.slow
def test_every_stored_run_digest_is_reproduced_from_the_warehouse_columns(tmp_path: Path) -> None:
    """The record command rebuilds run manifests from columns; for every run the rebuilt spec
    must hash to the digest the build spliced from identity's canonical template."""
    from tracehouse.demo import generate_dataset
    from tracehouse.kernelindex import manifest_digest
    from tracehouse.serve.export import run_rows, run_spec_from_row
    from tracehouse.settings import load_settings

    generate_dataset(
        tmp_path / "demo",
        seed=11,
        definitions=6,
        workloads_per_definition=4,
        solutions_per_definition=4,
    )
    build(tmp_path / "demo", tmp_path / "w", revision="ab" * 20)
    rows = run_rows(
        load_settings(environ={}, warehouse=tmp_path / "w"), "r.run_digest IS NOT NULL", {}
    )
    assert len(rows) > 100
    statuses = set()
    for row in rows:
        spec = run_spec_from_row(row)
        assert spec is not None and manifest_digest("BenchmarkRun", spec) == row["run_digest"], row[
            "run_id"
        ]
        statuses.add(row["status"])
    assert {"PASSED", "INCORRECT_NUMERICAL", "COMPILE_ERROR"} <= statuses


@requires_shared
def test_sql_eligibility_agrees_with_kernelindex_per_line_rule(golden_warehouse: Path) -> None:
    """sql/rank/run_rankings.sql decides eligibility for the warehouse; on runs with a complete
    identity it must say exactly what kernelindex.eligibility_reasons (KernelIndex §11.1) says."""
    from tracehouse.kernelindex import eligibility_reasons

    connection = duckdb.connect(str(golden_warehouse / "tracehouse.duckdb"), read_only=True)
    rows = connection.execute(
        "SELECT r.ki_status, r.latency_ns IS NOT NULL, k.ineligible_reasons FROM runs r "
        "JOIN run_rankings k USING (run_id) WHERE r.comparison_key IS NOT NULL"
    ).fetchall()
    assert len(rows) == 1490
    for ki_status, has_timing, reasons in rows:
        assert list(reasons) == eligibility_reasons(ki_status, has_timing)


@pytest.mark.slow
@requires_shared
def test_the_duckdb_command_opens_the_warehouse_file(golden_warehouse: Path) -> None:
    """`duckdb <warehouse>/tracehouse.duckdb` (the duckdb-cli package) answers ad-hoc SQL."""
    import subprocess
    import sys

    binary = Path(sys.executable).parent / "duckdb"
    if not binary.exists():
        pytest.skip("the duckdb command (duckdb-cli) is not installed in this environment")
    result = subprocess.run(
        [
            str(binary),
            "-readonly",
            "-csv",
            str(golden_warehouse / "tracehouse.duckdb"),
            "-c",
            "SELECT count(*) AS n, count(rank) AS ranked FROM run_summary",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["n,ranked", "1490,1414"]
