"""Issue 16: `tracehouse query` runs within a memory and a time limit (settings), and spills
under `<warehouse>/cache/`, not inside the published generation. DuckDB's defaults let one
query grow to 7.7 GB in 20 s, spilling into the generation folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import one_error_line
from tests.fixtures.hostile_corpus import write_plain_dataset
from tests.system.test_cli_errors import tree_digest
from tracehouse.warehouse import Warehouse

pytestmark = pytest.mark.integration

# Sorting 20 million rows needs far more than 64 MiB: it can only finish by spilling.
SPILLING = (
    "SELECT count(*) AS n FROM (SELECT hash(range) AS h, range::VARCHAR AS s "
    "FROM range(20000000) ORDER BY h)"
)
ENDLESS = (
    "SELECT count(*) FROM range(1000000000) a, range(1000) b WHERE (a.range * b.range) % 7 = 3"
)


def query(warehouse: Path, sql: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", "query", sql, "--warehouse", str(warehouse),
         "--format", "csv"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("limits")
    write_plain_dataset(root / "dataset", "A", files=2, lines=10)
    built = subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", "build", "--source", str(root / "dataset"),
         "--warehouse", str(root / "w")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    return root / "w"


def test_query_settings_are_applied_and_spill_under_cache(warehouse: Path) -> None:
    result = query(
        warehouse,
        "SELECT current_setting('memory_limit') AS memory, current_setting('temp_directory') AS spill",
        TRACEHOUSE_QUERY_MEMORY_MB="300",
    )
    assert result.returncode == 0, result.stderr
    memory, spill = result.stdout.splitlines()[1].split(",")
    assert memory in ("300.0 MiB", "314.5 MB"), memory
    assert Path(spill).parent == warehouse.resolve() / "cache" / "query_tmp"


def test_the_default_memory_limit_is_well_under_the_machine(warehouse: Path) -> None:
    from tracehouse.settings import load_settings

    total_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 20
    assert load_settings({}).query_memory_mb <= min(4096, total_mb // 4 + 1)


def test_a_query_larger_than_memory_spills_and_leaves_the_generation_alone(
    warehouse: Path,
) -> None:
    generation = Warehouse(warehouse).require_current()
    before = tree_digest(generation)
    result = query(warehouse, SPILLING, TRACEHOUSE_QUERY_MEMORY_MB="64")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["n", "20000000"]
    assert tree_digest(generation) == before
    assert list((warehouse / "cache" / "query_tmp").iterdir()) == []  # DuckDB removed its files


def test_a_query_past_its_time_limit_is_stopped_in_one_line(warehouse: Path) -> None:
    result = query(warehouse, ENDLESS, TRACEHOUSE_QUERY_TIMEOUT_S="1")
    line = one_error_line(result)
    assert "the query ran longer than 1 s and was stopped" in line, line


def test_a_query_needing_more_memory_than_allowed_is_one_line(warehouse: Path) -> None:
    result = query(
        warehouse, "SELECT list(range) FROM range(50000000)", TRACEHOUSE_QUERY_MEMORY_MB="64"
    )
    line = one_error_line(result)
    assert "needs more than its 64 MiB of memory" in line, line
