"""The benchmark harness runs end to end on a tiny dataset, as real processes, and records
complete results: every leg, issue 9's checks with their rules and values, the scaling table,
and CPU time of processes a leg's own process never waits for. Nothing asserts on speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench.checks import SCALING_PEAK_MAX_RATIO
from bench.measure import is_child_subreaper, measure
from bench.run import (
    BENCH_REVISION,
    FLOOR_PROBE,
    LEGS,
    READER_LEGS,
    FileChange,
    flashinfer_bench_available,
    main,
)

ROOT = Path(__file__).resolve().parents[2]
BASE_LINES = 300
LARGE_LINES = 4 * BASE_LINES  # stands for both "4x" and "1,000,000 lines" here
CHECKS = [
    "cold build vs DuckDB read_json (target)",
    "cold build vs DuckDB read_json (must)",
    "cold build vs lean_loop.py floor (target)",
    "cold build vs lean_loop.py floor (must)",
    "cold build vs Polars read",
    "cold build vs TraceSet.from_path",
    "build after one file changed",
    "cold build, 10% odd lines vs clean (target)",
    "cold build, 10% odd lines vs clean (must)",
    "warm build, no change",
    "build peak RSS",
    "build peak RSS at 4x vs 1x",
    f"build peak RSS at {LARGE_LINES:,} lines vs 1x",
    f"cold build at {LARGE_LINES:,} lines",
]


def _harness(base: Path, lines: int, *extra: str) -> str:
    """`python -m bench.run` as a process, as `make bench` runs it; returns its stdout."""
    command = [
        sys.executable,
        "-m",
        "bench.run",
        "--lines",
        str(lines),
        "--repeat",
        "1",
        "--data-root",
        str(base / "data"),
        "--out",
        str(base / "out"),
        "--scaling-base-lines",
        str(BASE_LINES),
        "--scaling-large-lines",
        str(LARGE_LINES),
        *extra,
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _report(base: Path, lines: int) -> dict[str, Any]:
    return json.loads((base / "out" / f"bench_{lines}.json").read_text())


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench")


@pytest.fixture(scope="module")
def full_run(base: Path) -> str:
    """Every leg once at the 1x size (minutes of builds: its tests are marked integration)."""
    return _harness(base, BASE_LINES)


@pytest.fixture(scope="module")
def scaled_run(base: Path, full_run: str) -> str:
    """A cold build at 4x, after the 1x run: its report compares the two sizes."""
    return _harness(base, LARGE_LINES, "--only", "cold")


@pytest.mark.integration
def test_results_json_has_every_leg_and_field(base: Path, full_run: str) -> None:
    report = _report(base, BASE_LINES)
    assert (base / "out" / f"bench_{BASE_LINES}.md").read_text().startswith("# Benchmark")
    assert report["benchmark"] == "tracehouse issue 9"
    assert report["parameters"]["repeat"] == 1 and report["parameters"]["only"] == list(LEGS)
    machine = report["machine"]
    for key in ("cpu_model", "logical_cpus", "ram_gib", "python", "packages", "git_commit"):
        assert machine[key], key
    assert {"duckdb", "orjson", "polars", "pyarrow", "flashinfer-bench"} <= set(machine["packages"])
    dataset = report["dataset"]
    assert dataset["trace_lines"] > 0 and dataset["reused"] is False
    assert list(report["legs"]) == list(LEGS)
    traceset = report["legs"]["traceset"]
    if not flashinfer_bench_available():
        assert traceset["skipped"] == "skipped: flashinfer-bench not installed"
        assert traceset["runs"] == 0
    # Builds are timed with a dataset revision, so every digest is computed.
    for name in ("cold", "warm", "changed", "odd"):
        command = report["legs"][name]["command"]
        assert command[command.index("--revision") + 1] == BENCH_REVISION, name
    floor = report["legs"]["floor"]
    if FLOOR_PROBE.is_file():  # ../shared beside the checkout: the probe runs as it is
        assert floor["command"][1] == str(FLOOR_PROBE) and floor["ok"], floor["samples"]
    else:
        assert floor["skipped"] == f"skipped: {FLOOR_PROBE} not found"
    for name, leg in report["legs"].items():
        if leg["skipped"]:
            continue
        assert leg["ok"] and leg["runs"] == 1, (name, leg["samples"])
        for key in ("wall_s", "cpu_s", "peak_rss_mib", "peak_tree_rss_mib"):
            assert leg["median"][key] > 0, (name, key)
        sample = leg["samples"][0]
        assert sample["subreaper"] is True, name
        # CPU is the leg process's own rusage plus that of the descendants the harness reaped.
        assert sample["cpu_s"] == pytest.approx(sample["own_cpu_s"] + sample["descendants_cpu_s"])
        assert sample["peak_tree_rss_mib"] >= sample["peak_rss_mib"]
        wall = leg["median"]["wall_s"]
        for reference in ("duckdb", "polars", "cold") + (
            ("floor",) if FLOOR_PROBE.is_file() else ()
        ):
            expected = wall / report["legs"][reference]["median"]["wall_s"]
            assert leg[f"ratio_to_{reference}"] == pytest.approx(expected), (name, reference)
        if name in READER_LEGS:  # every reader loaded exactly the lines the generator wrote
            assert leg["child_result"] == {"rows": dataset["trace_lines"]}, name


@pytest.mark.integration
def test_every_check_has_its_rule_and_value(base: Path, full_run: str) -> None:
    report = _report(base, BASE_LINES)
    checks = {c["check"]: c for c in report["checks"]}
    assert list(checks) == CHECKS
    legs = report["legs"]

    def wall(name: str) -> float:
        return legs[name]["median"]["wall_s"]

    expected = {
        "cold build vs DuckDB read_json (target)": (wall("cold") / wall("duckdb"), 1.0),
        "cold build vs DuckDB read_json (must)": (wall("cold") / wall("duckdb"), 1.5),
        "build after one file changed": (wall("changed") / wall("cold"), 0.10),
        "warm build, no change": (wall("warm") / wall("cold"), 0.02),
        "cold build, 10% odd lines vs clean (target)": (wall("odd") / wall("cold"), 1.2),
        "cold build, 10% odd lines vs clean (must)": (wall("odd") / wall("cold"), 1.5),
    }
    if FLOOR_PROBE.is_file():
        expected["cold build vs lean_loop.py floor (target)"] = (wall("cold") / wall("floor"), 1.6)
        expected["cold build vs lean_loop.py floor (must)"] = (wall("cold") / wall("floor"), 2.5)
    else:
        for name in ("target", "must"):
            assert checks[f"cold build vs lean_loop.py floor ({name})"]["status"] == "SKIP"
    for name, (value, limit) in expected.items():
        assert checks[name]["value"] == pytest.approx(value), name
        assert checks[name]["status"] == ("PASS" if value <= limit else "FAIL"), name
    assert checks["cold build vs DuckDB read_json (target)"]["rule"] == "cold <= 1 x duckdb"
    assert checks["cold build vs DuckDB read_json (must)"]["rule"] == "cold <= 1.5 x duckdb"
    assert checks["cold build vs lean_loop.py floor (must)"]["rule"] == "cold <= 2.5 x floor"
    assert checks["build after one file changed"]["rule"] == "changed <= 10% of cold"
    assert checks["warm build, no change"]["rule"] == "warm <= 2% of cold"
    polars = checks["cold build vs Polars read"]
    assert polars["status"] == "INFO"
    assert polars["value"] == pytest.approx(wall("cold") / wall("polars"))
    traceset = checks["cold build vs TraceSet.from_path"]
    assert traceset["rule"] == "traceset / cold >= 10"
    if not flashinfer_bench_available():
        assert traceset["status"] == "SKIP" and traceset["value"] is None
        assert "flashinfer-bench not installed" in traceset["note"]
    # The RSS target is checked on the process-tree peak over every build run.
    peak = checks["build peak RSS"]
    tree_peaks = [
        s["peak_tree_rss_mib"] for n in ("cold", "warm", "changed") for s in legs[n]["samples"]
    ]
    assert peak["value"] == max(tree_peaks) and peak["unit"] == "MiB"
    assert "process-tree RSS" in peak["rule"] and "600 MiB" in peak["rule"]
    assert peak["status"] == ("PASS" if peak["value"] <= 600 else "FAIL")
    assert "largest single process" in peak["note"]
    # Only one size in the results folder yet: the scaling checks say which result is missing.
    for name in CHECKS[11:]:
        assert checks[name]["status"] == "SKIP", name
        assert f"bench_{LARGE_LINES}.json" in checks[name]["note"], name
    assert [row["lines"] for row in report["scaling"]["rows"]] == [BASE_LINES]


@pytest.mark.integration
def test_every_ratio_and_check_is_printed(base: Path, full_run: str) -> None:
    report = _report(base, BASE_LINES)
    assert "x DuckDB" in full_run and "x Polars" in full_run and "x cold" in full_run
    printed = full_run.split("acceptance checks (issue 9):", 1)[1].splitlines()
    for check in report["checks"]:
        line = next((line for line in printed if check["check"] in line), None)
        assert line is not None, check["check"]
        assert check["status"] in line and check["rule"] in line
        if check["value"] is not None and check["unit"] == "x":
            assert f"{check['value']:.3f}" in line
    assert "machine: " in full_run and "python " in full_run


@pytest.mark.integration
def test_scaling_compares_sizes_in_the_results_folder(base: Path, scaled_run: str) -> None:
    small, large = _report(base, BASE_LINES), _report(base, LARGE_LINES)
    assert list(large["legs"]) == ["cold"]
    rows = {row["lines"]: row for row in large["scaling"]["rows"]}
    assert list(rows) == [BASE_LINES, LARGE_LINES]
    assert rows[BASE_LINES]["origin"] == f"bench_{BASE_LINES}.json"
    assert rows[LARGE_LINES]["origin"] == "this run"
    small_peak = max(
        s["peak_tree_rss_mib"]
        for n in ("cold", "warm", "changed")
        for s in small["legs"][n]["samples"]
    )
    large_peak = large["legs"]["cold"]["samples"][0]["peak_tree_rss_mib"]
    assert rows[BASE_LINES]["build_peak_tree_rss_mib"] == small_peak
    assert rows[LARGE_LINES]["peak_vs_1x"] == pytest.approx(large_peak / small_peak)
    checks = {c["check"]: c for c in large["checks"]}
    for name in ("build peak RSS at 4x vs 1x", f"build peak RSS at {LARGE_LINES:,} lines vs 1x"):
        check = checks[name]
        assert check["value"] == pytest.approx(large_peak / small_peak), name
        assert check["status"] == (
            "PASS" if check["value"] <= SCALING_PEAK_MAX_RATIO else "FAIL"
        ), name
    timed = checks[f"cold build at {LARGE_LINES:,} lines"]
    assert timed["value"] == large["legs"]["cold"]["median"]["wall_s"] and timed["unit"] == "s"
    assert timed["status"] == ("PASS" if timed["value"] <= 30 else "FAIL")
    # Checks that need legs this run did not select say so rather than guess.
    assert checks["warm build, no change"]["status"] == "SKIP"
    assert "warm not run" in checks["warm build, no change"]["note"]
    markdown = (base / "out" / f"bench_{LARGE_LINES}.md").read_text()
    assert "## Scaling" in markdown
    assert f"| {BASE_LINES:,} |" in markdown and f"| {LARGE_LINES:,} |" in markdown
    assert "scaling (latest result of each size):" in scaled_run


BURN_IN_A_FORKSERVER_WORKER = """
import multiprocessing
import time


def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


if __name__ == "__main__":
    worker = multiprocessing.get_context("forkserver").Process(target=burn, args=(0.3,))
    worker.start()
    worker.join()
"""


def test_cpu_of_a_forkserver_worker_is_counted(tmp_path: Path) -> None:
    script = tmp_path / "burn.py"
    script.write_text(BURN_IN_A_FORKSERVER_WORKER)
    subreaper_before = is_child_subreaper()
    sample = measure([sys.executable, str(script)])
    assert sample.returncode == 0, sample.stderr_tail
    assert sample.subreaper is True
    # os.wait4 of the script alone misses the worker: the script never reaps its forkserver.
    assert sample.own_cpu_s < 0.3
    assert sample.reaped_descendants >= 1 and sample.killed_stragglers == 0
    assert sample.descendants_cpu_s >= 0.3
    assert sample.cpu_s >= 0.3 + sample.own_cpu_s - 1e-6
    assert is_child_subreaper() == subreaper_before  # the flag is restored after the leg


LEAVE_A_DAEMON_BEHIND = """
import subprocess
import sys

daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(daemon.pid, flush=True)
"""


def test_a_descendant_outliving_the_leg_is_killed_and_reaped(tmp_path: Path) -> None:
    script = tmp_path / "daemon.py"
    script.write_text(LEAVE_A_DAEMON_BEHIND)
    started = time.monotonic()
    sample = measure([sys.executable, str(script)], straggler_grace_s=0.3)
    assert time.monotonic() - started < 20
    assert sample.returncode == 0, sample.stderr_tail
    daemon = int(sample.stdout_tail.strip())
    assert sample.killed_stragglers == 1 and sample.reaped_descendants == 1
    assert sample.linger_s >= 0.3
    assert not Path(f"/proc/{daemon}").exists()  # killed and reaped: not even a zombie


@pytest.mark.integration
def test_polars_glob_scan_cannot_take_the_bench_files(base: Path, full_run: str) -> None:
    """Why the polars leg reads each file on its own (see bench.run's docstring)."""
    import polars as pl

    with pytest.raises(pl.exceptions.PolarsError):
        pl.scan_ndjson(
            base / "data" / str(BASE_LINES) / "traces" / "**" / "*.jsonl",
            infer_schema_length=None,
        ).collect()
    assert _report(base, BASE_LINES)["legs"]["polars"]["ok"]


@pytest.mark.integration
def test_second_run_reuses_the_dataset(base: Path, full_run: str) -> None:
    out = base / "out-reuse"
    assert (
        main(
            [
                "--lines",
                str(BASE_LINES),
                "--repeat",
                "1",
                "--only",
                "orjson",
                "--data-root",
                str(base / "data"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads((out / f"bench_{BASE_LINES}.json").read_text())
    assert report["dataset"]["reused"] is True
    assert list(report["legs"]) == ["orjson"]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--only", "nope"], "--only"),
        (["--repeat", "0"], "--repeat"),
        (["--lines", "x"], "--lines"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(
    tmp_path: Path, arguments: list[str], named: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--data-root", str(tmp_path), *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and named in done.stderr, done.stderr
    assert not any(tmp_path.iterdir())  # nothing generated


def test_measure_reports_a_failing_child() -> None:
    sample = measure([sys.executable, "-c", "import sys; print('x'); sys.exit(3)"])
    assert sample.returncode == 3 and sample.wall_s > 0 and sample.peak_rss_mib > 0
    assert sample.stdout_tail.strip() == "x"


@pytest.mark.integration
def test_file_change_is_undone_exactly(base: Path, full_run: str) -> None:
    source = base / "data" / str(BASE_LINES)
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


@pytest.mark.integration
def test_storage_growth_of_a_revision_is_measured(base: Path, full_run: str) -> None:
    """bench/storage.py: two revisions differing in one trace file, with one and with three
    generations kept; the retained growth is run_history's rows, the file's share the yardstick."""
    storage = _report(base, BASE_LINES)["storage"]
    assert [entry["keep_generations"] for entry in storage] == [1, 3]
    retained, kept = storage
    for entry in storage:
        assert entry["warehouse_after"]["total"] > 0 and entry["file_share_bytes"] > 0
        assert entry["history_growth_bytes"] > 0  # the appended re-run opened a range
    # With one generation kept a revision costs what changed; with three, the generations
    # before keep their own (re-resolved) runs parts for rollback.
    assert retained["growth_bytes"] < kept["growth_bytes"]
    assert "warehouse growth when a new revision changes one trace file" in full_run


@pytest.mark.integration
def test_warehouse_size_after_the_cold_build_is_reported(base: Path, full_run: str) -> None:
    """Issue 29: the size of what the warehouse keeps, per trace line against the warehouse
    before logs, references and sources were kept (bench/storage.py BEFORE_LOSSLESS)."""
    size = _report(base, BASE_LINES)["warehouse_size"]
    assert size["total"] > size["tracehouse_duckdb"] > 0
    assert size["ratio_to_before"] == size["bytes_per_trace_line"] / (
        size["before_lossless"]["bytes"] / size["before_lossless"]["trace_lines"]
    )
    assert "warehouse size after the cold build" in full_run


@pytest.mark.integration
def test_odd_corpus_holds_one_odd_line_in_ten_and_builds(base: Path, full_run: str) -> None:
    """The odd leg's corpus differs from the clean one in one trace line of ten, in the shapes
    bench/odd_corpus.py names; its build imports every odd line but the unstorable latencies,
    which are its only rejects."""
    import duckdb

    clean, odd = base / "data" / str(BASE_LINES), base / "data" / f"{BASE_LINES}-odd"
    changed = unstorable = total = 0
    for path in sorted((clean / "traces").rglob("*.jsonl")):
        clean_lines = path.read_bytes().splitlines()
        odd_lines = (odd / path.relative_to(clean)).read_bytes().splitlines()
        assert len(clean_lines) == len(odd_lines), path
        total += len(clean_lines)
        for number, (before, after) in enumerate(zip(clean_lines, odd_lines, strict=True)):
            if before != after:
                assert number % 10 == 5, (path, number)
                changed += 1
                unstorable += b'"latency_ms":1e-7' in after
    assert changed >= total // 10 - 10 and unstorable > 0
    warehouse = base / "data" / f"warehouse-{BASE_LINES}-odd" / "tracehouse.duckdb"
    connection = duckdb.connect(str(warehouse), read_only=True)
    ((runs,),) = connection.execute("SELECT count(*) FROM runs").fetchall()
    reasons = connection.execute("SELECT reason, count(*) FROM rejects GROUP BY 1").fetchall()
    assert runs == total - unstorable
    assert sum(count for _, count in reasons) == unstorable, reasons
