"""The benchmark harness runs end to end on a tiny dataset and records complete results.

Only the DuckDB and orjson legs run here (no `tracehouse build`); nothing asserts on timings.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from bench.run import FileChange, main, measure


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    base = tmp_path_factory.mktemp("bench")
    argv = [
        "--lines",
        "300",
        "--repeat",
        "1",
        "--only",
        "duckdb,orjson",
        "--data-root",
        str(base / "data"),
        "--out",
        str(base / "out"),
    ]
    assert main(argv) == 0
    return base, argv


def test_results_json_has_every_field(bench_run: tuple[Path, list[str]]) -> None:
    base, _ = bench_run
    report = json.loads((base / "out" / "bench_300.json").read_text())
    assert (base / "out" / "bench_300.md").read_text().startswith("# Benchmark")
    assert {"parameters", "machine", "dataset", "legs", "checks", "leaderboard"} <= set(report)
    assert report["parameters"]["only"] == ["duckdb", "orjson"]
    machine = report["machine"]
    for key in ("cpu_model", "logical_cpus", "ram_gib", "python", "packages"):
        assert machine[key], key
    assert {"duckdb", "orjson", "polars", "pyarrow"} <= set(machine["packages"])
    dataset = report["dataset"]
    assert dataset["trace_lines"] > 0 and dataset["reused"] is False
    assert set(report["legs"]) == {"duckdb", "orjson"}
    for name, leg in report["legs"].items():
        assert leg["ok"], (name, leg["samples"])
        assert leg["runs"] == 1 and leg["skipped"] is None
        for key in ("wall_s", "cpu_s", "peak_rss_mib"):
            assert leg["median"][key] > 0, (name, key)
        assert leg["ratio_to_duckdb"] is not None and leg["ratio_to_cold"] is None
        # Both readers loaded exactly the lines the generator wrote.
        assert leg["child_result"] == {"rows": dataset["trace_lines"]}
    checks = {c["check"]: c for c in report["checks"]}
    assert len(checks) == 5
    assert {c["status"] for c in checks.values()} == {"SKIP"}  # no build legs were selected


def test_second_run_reuses_the_dataset(bench_run: tuple[Path, list[str]]) -> None:
    base, argv = bench_run
    assert main([*argv, "--only", "orjson"]) == 0
    report = json.loads((base / "out" / "bench_300.json").read_text())
    assert report["dataset"]["reused"] is True
    assert list(report["legs"]) == ["orjson"]


def test_unknown_leg_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--lines", "10", "--only", "nope", "--data-root", str(tmp_path)])


def test_measure_reports_a_failing_child() -> None:
    sample = measure([sys.executable, "-c", "import sys; print('x'); sys.exit(3)"])
    assert sample.returncode == 3 and sample.wall_s > 0 and sample.peak_rss_mib > 0
    assert sample.stdout_tail.strip() == "x"


def test_file_change_is_undone_exactly(bench_run: tuple[Path, list[str]]) -> None:
    base, _ = bench_run
    source = base / "data" / "300"
    change = FileChange.prepare(source)
    before = change.path.read_bytes()
    mtime = os.stat(change.path).st_mtime_ns
    change.apply()
    after = change.path.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    assert b'"status":"PASSED"' in after[len(before) :]
    change.restore()
    assert change.path.read_bytes() == before
    assert os.stat(change.path).st_mtime_ns == mtime
