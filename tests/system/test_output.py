"""Issue 10, part 5: output that hides nothing, run as a user runs it (`tracehouse` processes).

On the golden corpus: `query` shows every column and every value in full (a vertical layout
when a row is too wide), says "N of M rows shown" when it stops early, refuses more than one
statement, and writes list columns as JSON text in CSV; the leaderboard fits 120 columns with
best latency and re-run spread, shows everything with ``--wide``, and marks a baseline only
under its own definition; `record` prints the human summary first and takes an id prefix; a
build without a revision says what that costs; `--version` answers; and read commands import
neither Polars, pyarrow nor Dagster (their start-up time is measured in bench/startup.py).
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GOLDEN_REVISION, run_cli
from tests.fixtures.shared_data import GOLDEN_DIR, requires_shared

pytestmark = [pytest.mark.integration, requires_shared]

SEED_RECORD = "trace/flashinfer_wrapper_ea3787/892d1b8f-f6fe-40ad-aa3f-b6d391753bd3"


@pytest.fixture(scope="module")
def plain_warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The golden corpus built as a user would, without --revision (the folder is no git
    clone), and the summary the build printed."""
    warehouse = tmp_path_factory.mktemp("plain") / "warehouse"
    result = run_cli(
        "build", "--source", str(GOLDEN_DIR / "dataset"), "--warehouse", str(warehouse)
    )
    assert result.returncode == 0, result.stderr
    return warehouse, result.stdout


def cli(warehouse: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = run_cli(*args, "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    return result


def test_query_shows_every_column_and_every_value(plain_warehouse: tuple[Path, str]) -> None:
    warehouse, _ = plain_warehouse
    sql = "SELECT * FROM run_summary ORDER BY run_id LIMIT 3"
    table = cli(warehouse, "query", sql).stdout
    rows = json.loads(cli(warehouse, "query", sql, "--format", "json").stdout)
    assert len(rows) == 3 and len(rows[0]) >= 40
    for column in rows[0]:  # every column is named ...
        assert re.search(rf"(?m)^{column}\s", table), column
    for row in rows:  # ... and every value is there in full
        for column, value in row.items():
            if isinstance(value, str) and value:
                assert value in table, (column, value)
    assert "-[ row 3 ]" in table  # too wide for 120 columns: one block per row
    assert table.rstrip().endswith("(3 rows)")


def test_query_says_how_many_rows_it_did_not_show(plain_warehouse: tuple[Path, str]) -> None:
    warehouse, _ = plain_warehouse
    shown = cli(warehouse, "query", "SELECT run_id FROM runs").stdout
    assert shown.rstrip().splitlines()[-1].startswith("200 of 1,490 rows shown")
    assert len(shown.splitlines()) == 2 + 200 + 1
    everything = cli(warehouse, "query", "SELECT run_id FROM runs", "--limit", "0").stdout
    assert len(everything.splitlines()) == 2 + 1490 + 1
    narrow = cli(warehouse, "query", "SELECT run_id, status FROM runs LIMIT 2").stdout
    assert narrow.splitlines()[0].split() == ["run_id", "status"]  # fits: a grid


def test_query_refuses_a_second_statement(plain_warehouse: tuple[Path, str]) -> None:
    warehouse, _ = plain_warehouse
    result = run_cli("query", "SELECT 1 AS a; SELECT 2 AS b", "--warehouse", str(warehouse))
    assert result.returncode == 2 and result.stdout == ""
    assert "2 statements given" in result.stderr


@pytest.mark.parametrize("view", ["run_summary", "definitions", "implementations", "run_rankings"])
def test_csv_and_json_write_list_columns_as_json(
    view: str, plain_warehouse: tuple[Path, str]
) -> None:
    warehouse, _ = plain_warehouse
    sql = f"SELECT * FROM {view} ORDER BY ALL"  # noqa: S608  (a view name of ours)
    table = list(
        csv.DictReader(io.StringIO(cli(warehouse, "query", sql, "--format", "csv").stdout))
    )
    rows = json.loads(cli(warehouse, "query", sql, "--format", "json").stdout)
    count_sql = f"SELECT count(*) AS n FROM {view}"  # noqa: S608
    count = int(cli(warehouse, "query", count_sql, "--format", "csv").stdout.splitlines()[1])
    assert len(table) == len(rows) == count > 0
    lists = [name for name, value in rows[0].items() if isinstance(value, list)]
    assert lists, f"{view} has list columns"
    for row_csv, row_json in zip(table, rows, strict=True):
        for name in lists:
            assert json.loads(row_csv[name]) == row_json[name]


def test_the_leaderboard_fits_80_columns_and_shows_latency(
    plain_warehouse: tuple[Path, str],
) -> None:
    warehouse, _ = plain_warehouse
    # the definition with the longest solution names
    longest_names = "SELECT definition FROM runs GROUP BY 1 ORDER BY max(length(solution)) DESC, 1"
    found = cli(warehouse, "query", longest_names, "--format", "json").stdout
    definition = json.loads(found)[0]["definition"]
    board = cli(warehouse, "leaderboard", definition).stdout
    lines = board.splitlines()
    assert max(len(line) for line in lines) <= 80, max(map(len, lines))
    assert lines[0].endswith(": baseline torch_matmul_0d13df") or "baseline" in lines[0]
    assert lines[1].split()[:4] == ["#", "solution", "geo×", "cov"]  # speed beside coverage
    assert " µs " in lines[1] and "note" in lines[1]
    wide = cli(warehouse, "leaderboard", definition, "--wide").stdout
    for column in ("latency_us", "rerun_spread", "runs_not_evaluated", "fib_reason"):
        assert column in wide.splitlines()[0], column
    names = json.loads(cli(warehouse, "leaderboard", definition, "--format", "json").stdout)
    longest = max((row["solution"] for row in names), key=len)
    assert longest in wide
    if len(longest) > 40:  # elided in the middle in the table (the heading names the baseline)
        table_rows = "\n".join(line for line in lines if line[:1].isdigit())
        assert longest not in table_rows and "…" in table_rows


def test_a_baseline_is_a_baseline_of_its_own_definition_only(
    plain_warehouse: tuple[Path, str],
) -> None:
    """torch_matmul_254647 is the baseline of gemm_n4096_k14336; its runs of gemm_n4096_k4096
    must not show it as that definition's baseline."""
    warehouse, _ = plain_warehouse
    rows = json.loads(cli(warehouse, "leaderboard", "gemm_n4096_k4096", "--format", "json").stdout)
    flags = {row["solution"]: row["is_baseline"] for row in rows}
    assert flags["torch_matmul_254647"] is False
    assert flags["torch_matmul_0d13df"] is True
    summary = json.loads(
        cli(
            warehouse,
            "query",
            "SELECT definition, bool_or(is_baseline) AS baseline FROM run_summary "
            "WHERE solution = 'torch_matmul_254647' GROUP BY 1 ORDER BY 1",
            "--format",
            "json",
        ).stdout
    )
    assert summary == [
        {"definition": "gemm_n4096_k14336", "baseline": True},
        {"definition": "gemm_n4096_k4096", "baseline": False},
    ]


def test_record_prints_the_summary_first_and_takes_a_prefix(
    plain_warehouse: tuple[Path, str],
) -> None:
    warehouse, _ = plain_warehouse
    # The README's example, on a folder that is not a git clone: it works and says why the
    # run digest is missing.
    text = cli(warehouse, "record", SEED_RECORD).stdout
    assert text.splitlines()[0].startswith("run ")
    assert "68,857 ns (68.9 µs)" in text
    assert "no KernelIndex manifest" in text and "--revision" in text
    run_id = re.search(r"(?m)^run id\s+([0-9a-f]{32})$", text)
    assert run_id is not None
    by_prefix = cli(warehouse, "record", run_id.group(1)[:8]).stdout
    assert by_prefix == text


def test_record_with_a_revision_ends_with_the_manifest(golden_warehouse: Path) -> None:
    text = cli(golden_warehouse, "record", SEED_RECORD).stdout
    first, manifest = text.split("manifest (`--json` prints only this):\n")
    assert first.startswith("run ")
    assert json.loads(manifest) == json.loads(
        cli(golden_warehouse, "record", SEED_RECORD, "--json").stdout
    )


def test_a_build_without_a_revision_says_what_is_missing(
    plain_warehouse: tuple[Path, str], tmp_path: Path
) -> None:
    _, summary = plain_warehouse
    # the note is wrapped to the terminal's width: read it as one paragraph
    words = " ".join(summary.split())
    assert words.count("no dataset revision") == 1
    assert "--revision" in words.partition("no dataset revision")[2]
    with_revision = run_cli(
        "build",
        "--source",
        str(GOLDEN_DIR / "dataset"),
        "--warehouse",
        str(tmp_path / "w"),
        "--revision",
        GOLDEN_REVISION,
    )
    assert with_revision.returncode == 0
    assert "no dataset revision" not in with_revision.stdout


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert re.fullmatch(r"tracehouse \S+ \(tracehouse-importer/\d+\)\n", result.stdout)


@pytest.mark.parametrize(
    "args",
    [
        ["query", "SELECT * FROM run_summary LIMIT 5"],
        ["query", "SELECT * FROM run_summary", "--format", "csv"],
        ["query", "SELECT * FROM runs", "--format", "json"],
        ["leaderboard", "gemm_n4096_k4096"],
        ["record", SEED_RECORD],
        ["tables"],
    ],
)
def test_read_commands_import_no_heavy_library(
    args: list[str], plain_warehouse: tuple[Path, str]
) -> None:
    """What keeps a read command's start-up short (timing is left to bench/startup.py)."""
    warehouse, _ = plain_warehouse
    extra = [] if args[0] == "tables" else ["--warehouse", str(warehouse)]
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tracehouse.cli", *args, *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    heavy = {"polars", "dagster", "pandas", "tqdm"}
    if args[0] != "tables":  # the column declarations are Arrow types; nothing else needs Arrow
        assert "duckdb" in imported
        heavy |= {"pyarrow", "numpy"}
    assert not imported & heavy, imported & heavy


def test_the_report_imports_neither_pandas_nor_polars(
    plain_warehouse: tuple[Path, str], tmp_path: Path
) -> None:
    """The report hands DuckDB its lists of runs and workloads as parameters: registering an
    Arrow table imports pandas, 0.3 s of every report."""
    warehouse, _ = plain_warehouse
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tracehouse.cli", "report"]
        + ["--out", str(tmp_path / "report"), "--warehouse", str(warehouse)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "report" / "index.html").is_file()
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "duckdb" in imported and "plotly" in imported
    assert not imported & {"pandas", "polars", "dagster"}, imported
