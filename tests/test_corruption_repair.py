"""Issue 16: a damaged warehouse is detected by every read and repaired by the next build.

Each generation records its files and their sizes when it is published (files.json). A deleted
`runs` part made queries silently answer 1,404 of 1,490 runs while `build` said "up to date"; a
truncated DuckDB file failed every read while `build` said the same; a truncated part shared with
the cache or a garbage sources.json made even `build --force` fail for ever; a lost `current`
link made the next build a first build without the shrink guard. Every step here is the real
`tracehouse` command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pipelines.warehouse import Warehouse, source_key
from tests.conftest import files_outside, one_error_line
from tests.hostile_corpus import write_plain_dataset

pytestmark = pytest.mark.integration

COUNT_RUNS = "SELECT count(*) AS n FROM runs"


def tracehouse(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


def run_count(warehouse: Path) -> int:
    result = tracehouse("query", COUNT_RUNS, "--warehouse", str(warehouse), "--format", "csv")
    assert result.returncode == 0, result.stderr
    return int(result.stdout.splitlines()[1])


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path, int]:
    source = tmp_path / "dataset"
    write_plain_dataset(source, "A", files=4, lines=20)
    warehouse = tmp_path / "w"
    result = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    return source, warehouse, run_count(warehouse)


def _first_runs_part(generation: Path) -> Path:
    return sorted((generation / "runs.parquet").rglob("*.parquet"))[0]


def _delete_a_runs_part(generation: Path) -> Path:
    part = _first_runs_part(generation)
    part.unlink()
    return part


def _truncate_the_duckdb_file(generation: Path) -> Path:
    path = generation / "tracehouse.duckdb"
    os.truncate(path, 1000)
    return path


def _truncate_a_part_shared_with_the_cache(generation: Path) -> Path:
    part = _first_runs_part(generation)
    assert part.stat().st_nlink > 1  # the cache links the same file
    os.truncate(part, part.stat().st_size // 2)
    return part


def _garbage_sources(generation: Path) -> Path:
    path = generation / "sources.json"
    path.write_text("{garbage")
    return path


@pytest.mark.parametrize(
    "damage",
    [
        _delete_a_runs_part,
        _truncate_the_duckdb_file,
        _truncate_a_part_shared_with_the_cache,
        _garbage_sources,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
@pytest.mark.parametrize("force", [False, True], ids=["build", "build --force"])
def test_damage_is_detected_by_reads_and_repaired_by_the_next_build(
    built: tuple[Path, Path, int], damage: Callable[[Path], Path], force: bool, tmp_path: Path
) -> None:
    source, warehouse, runs = built
    damaged = damage(Warehouse(warehouse).require_current())
    outside = files_outside(tmp_path, warehouse)

    for read in (("query", COUNT_RUNS), ("leaderboard", "gemm_n4_k4")):
        result = tracehouse(*read, "--warehouse", str(warehouse))
        line = one_error_line(result)
        assert "is damaged" in line and str(damaged) in line and "tracehouse build" in line, line

    repaired = tracehouse(
        "build",
        "--source",
        str(source),
        "--warehouse",
        str(warehouse),
        *(["--force"] if force else []),
    )
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stderr == ""
    repair_lines = [line for line in repaired.stdout.splitlines() if "repaired:" in line]
    assert len(repair_lines) == 1 and str(damaged) in repair_lines[0], repaired.stdout
    assert run_count(warehouse) == runs
    again = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout
    assert files_outside(tmp_path, warehouse) == outside


def test_a_lost_current_link_keeps_the_shrink_guard(built: tuple[Path, Path, int]) -> None:
    source, warehouse, runs = built
    (warehouse / "current").unlink()
    for part in sorted((source / "traces").rglob("*.jsonl"))[1:]:  # three of four files gone
        part.unlink()
    refused = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    line = one_error_line(refused)
    assert "shrink" in line or "runs" in line, line
    assert Warehouse(warehouse).current_generation() is None  # nothing was published

    write_plain_dataset(source, "A", files=4, lines=20)
    rebuilt = tracehouse("build", "--source", str(source), "--warehouse", str(warehouse))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert f"repaired: {warehouse / 'current'}: missing" in rebuilt.stdout, rebuilt.stdout
    assert run_count(warehouse) == runs


def test_a_repair_never_drops_another_source_silently(tmp_path: Path) -> None:
    """With a damaged part of source B, rebuilding A on the last intact generation (which
    predates B) would publish a warehouse without B: refused in one line; building B repairs."""
    first, second = tmp_path / "a", tmp_path / "b"
    write_plain_dataset(first, "A", files=2, lines=10)
    write_plain_dataset(second, "B", files=2, lines=10)
    warehouse = tmp_path / "w"
    for folder, name in ((first, "A"), (second, "B")):
        result = tracehouse(
            "build", "--source", str(folder), "--source-name", name, "--warehouse", str(warehouse)
        )
        assert result.returncode == 0, result.stderr
    both = run_count(warehouse)
    current = Warehouse(warehouse).require_current()
    part = sorted((current / "runs.parquet" / source_key("B")).rglob("*.parquet"))[0]
    part.unlink()

    refused = tracehouse(
        "build", "--source", str(first), "--source-name", "A", "--warehouse", str(warehouse)
    )
    line = one_error_line(refused)
    assert str(part) in line and "'B'" in line and "cannot re-read" in line, line
    assert Warehouse(warehouse).current_generation() == current  # nothing was published

    repaired = tracehouse(
        "build", "--source", str(second), "--source-name", "B", "--warehouse", str(warehouse)
    )
    assert repaired.returncode == 0, repaired.stderr
    assert "repaired:" in repaired.stdout and str(part) in repaired.stdout
    assert run_count(warehouse) == both
