"""Issue 6, part 5: least privilege. `tracehouse query` can only read the published warehouse;
values from the data are only ever data; solution sources are never imported or executed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.hostile_corpus import (
    definition_object,
    run_cli,
    solution_object,
    trace_object,
)
from tracehouse.warehouse import Warehouse, connect_read_only

pytestmark = pytest.mark.integration

WEIRD_DEFINITION = "gemm'; DROP TABLE runs; --"
WEIRD_SOLUTION = '../../etc/passwd" OR 1=1 --'
WEIRD_AUTHOR = 'o\'brien "the" $(touch pwned) `id`'
WEIRD_FILE_STEM = 'it\'s "quoted"; DROP TABLE runs; --'


def _tree(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``folder``: (size, mtime, sha256), to prove nothing changed."""
    state = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            stat = path.stat()
            state[str(path.relative_to(folder))] = (
                stat.st_size,
                stat.st_mtime_ns,
                hashlib.sha256(data).hexdigest(),
            )
    return state


def _write_weird_dataset(root: Path, marker: Path) -> None:
    definition = definition_object(WEIRD_DEFINITION)
    (root / "definitions" / "gemm").mkdir(parents=True)
    (root / "definitions" / "gemm" / f"{WEIRD_FILE_STEM}.json").write_text(json.dumps(definition))
    # A solution whose every source would create the marker file if imported or executed.
    payload = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('executed')\n"
    solution = solution_object(
        name=WEIRD_SOLUTION, author=WEIRD_AUTHOR, definition=WEIRD_DEFINITION, content=payload
    )
    solution["sources"] += [
        {"path": "__init__.py", "content": payload},
        {"path": "setup.py", "content": payload},
        {"path": "conftest.py", "content": payload},
        {"path": "../../escape.py", "content": payload},
    ]
    solution["spec"]["build_commands"] = [f"touch {marker}"]
    baseline = solution_object(name="baseline_ref", author="baseline", definition=WEIRD_DEFINITION)
    folder = root / "solutions" / "o'brien" / "gemm" / WEIRD_FILE_STEM
    folder.mkdir(parents=True)
    (folder / f"{WEIRD_FILE_STEM}.json").write_text(json.dumps(solution))
    (folder / "baseline.json").write_text(json.dumps(baseline))
    traces = root / "traces" / "o'brien" / "gemm"
    traces.mkdir(parents=True)
    lines = []
    for i in range(4):
        for solution_name, latency in ((WEIRD_SOLUTION, 0.5), ("baseline_ref", 1.0)):
            value = trace_object(
                f"u-{i}", definition=WEIRD_DEFINITION, solution=solution_name, latency=latency
            )
            value["evaluation"]["environment"]["hardware"] = "NVIDIA B200'; DROP TABLE runs; --"
            value["evaluation"]["log"] = "../../etc/passwd\n'; DROP TABLE runs; --\n$(rm -rf /)"
            lines.append(json.dumps(value))
    (traces / f"{WEIRD_FILE_STEM}.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def weird(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("least-privilege")
    source, warehouse, marker = base / "dataset", base / "warehouse", base / "MARKER_EXECUTED"
    _write_weird_dataset(source, marker)
    before = _tree(base)
    result = run_cli(
        "build", "--source", str(source), "--warehouse", str(warehouse), "--workers", "1"
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return {
        "base": base,
        "source": source,
        "warehouse": warehouse,
        "marker": marker,
        "before": before,
    }


def _counts(warehouse: Path) -> dict[str, Any]:
    result = run_cli(
        "query",
        "SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM implementations) AS impl, "
        "(SELECT count(*) FROM definitions) AS defs",
        "--format",
        "json",
        "--warehouse",
        str(warehouse),
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)[0]


def test_weird_names_are_data(weird: dict[str, Any]) -> None:
    warehouse = weird["warehouse"]
    assert _counts(warehouse) == {"runs": 8, "impl": 2, "defs": 1}
    result = run_cli(
        "query",
        "SELECT DISTINCT definition, solution, source_file FROM runs ORDER BY 2",
        "--format",
        "json",
        "--warehouse",
        str(warehouse),
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {r["definition"] for r in rows} == {WEIRD_DEFINITION}
    assert {r["solution"] for r in rows} == {WEIRD_SOLUTION, "baseline_ref"}
    assert {r["source_file"] for r in rows} == {f"traces/o'brien/gemm/{WEIRD_FILE_STEM}.jsonl"}
    authors = run_cli(
        "query",
        "SELECT author FROM implementations ORDER BY 1",
        "--format",
        "json",
        "--warehouse",
        str(warehouse),
    )
    assert {r["author"] for r in json.loads(authors.stdout)} == {WEIRD_AUTHOR, "baseline"}


def test_leaderboard_of_a_weird_definition(weird: dict[str, Any]) -> None:
    result = run_cli(
        "leaderboard", WEIRD_DEFINITION, "--format", "json", "--warehouse", str(weird["warehouse"])
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert WEIRD_SOLUTION in {r["solution"] for r in rows}
    assert _counts(weird["warehouse"])["runs"] == 8  # the name did not drop anything


@pytest.mark.parametrize(
    "sql",
    [
        "DROP TABLE runs",
        "DROP VIEW runs",
        "DELETE FROM runs",
        "UPDATE runs SET latency_ms = 0",
        "CREATE TABLE evil AS SELECT 1",
        "INSERT INTO runs SELECT * FROM runs",
        "COPY runs TO '{outside}/copied.csv'",
        "COPY (SELECT 1) TO '{generation}/runs.parquet' (FORMAT parquet)",
        "COPY (SELECT 1) TO '{generation}/evil.csv'",
        "EXPLAIN ANALYZE COPY (SELECT 1) TO '{generation}/evil.csv'",
        "EXPLAIN (ANALYZE) COPY (SELECT 1) TO '{generation}/runs.parquet' (FORMAT parquet)",
        "EXPORT DATABASE '{outside}/export'",
        "ATTACH '{outside}/attached.duckdb' AS evil",
        "ATTACH '{generation}/attached.duckdb' AS evil",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "RESET enable_external_access",
        "SET lock_configuration = false",
        "PRAGMA enable_profiling",
        "CHECKPOINT",
        "CREATE SECRET evil (TYPE s3)",
        "SELECT 1; DROP TABLE runs",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM glob('/etc/*')",
        "SELECT * FROM read_text('{generation}/../../cache/manifest.json')",
        "SELECT * FROM read_parquet('{outside}/*.parquet')",
    ],
)
def test_query_cannot_write_or_escape(weird: dict[str, Any], sql: str) -> None:
    warehouse: Path = weird["warehouse"]
    generation = (warehouse / "current").resolve()
    outside = weird["base"]
    text = sql.format(generation=generation, outside=outside)
    before_warehouse = _tree(warehouse)
    before_outside = {p.name for p in outside.iterdir()}
    result = run_cli("query", text, "--warehouse", str(warehouse))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    message = result.stderr.lower()
    assert "tracehouse query:" in message
    assert any(word in message for word in ("refused", "permission", "disabled", "read-only")), (
        result.stderr
    )
    assert _tree(warehouse) == before_warehouse, "the warehouse changed"
    assert {p.name for p in outside.iterdir()} == before_outside, "a file appeared outside"
    connection = connect_read_only(Warehouse(warehouse))
    try:
        assert connection.execute("SELECT count(*) FROM runs").fetchone() == (8,)
    finally:
        connection.close()


def test_plain_explain_and_explain_analyze_select_still_work(weird: dict[str, Any]) -> None:
    warehouse = weird["warehouse"]
    for sql in ("EXPLAIN SELECT count(*) FROM runs", "EXPLAIN ANALYZE SELECT count(*) FROM runs"):
        result = run_cli("query", sql, "--warehouse", str(warehouse))
        assert result.returncode == 0, result.stderr


def test_nothing_written_outside_the_warehouse_and_sources_never_executed(
    weird: dict[str, Any], tmp_path: Path
) -> None:
    base: Path = weird["base"]
    warehouse: Path = weird["warehouse"]
    out = tmp_path / "exports"
    commands = [
        ("query", "SELECT * FROM implementations", "--warehouse", str(warehouse)),
        ("leaderboard", WEIRD_DEFINITION, "--warehouse", str(warehouse)),
        ("export", "--snapshot", str(out / "snapshot"), "--warehouse", str(warehouse)),
        (
            "export",
            "--kernelindex",
            WEIRD_DEFINITION,
            str(out / "ki.json"),
            "--warehouse",
            str(warehouse),
        ),
        ("build", "--source", str(weird["source"]), "--warehouse", str(warehouse), "--force"),
    ]
    for command in commands:
        result = run_cli(*command)
        assert result.returncode == 0, (command, result.stderr)
        assert "Traceback" not in result.stderr
    assert not weird["marker"].exists(), "a solution source was executed"
    assert not list(base.rglob("escape.py")) and not list(out.rglob("escape.py"))
    assert not (Path.cwd() / "pwned").exists() and not (base / "pwned").exists()
    outside_now = {k: v for k, v in _tree(base).items() if not k.startswith("warehouse/")}
    assert outside_now == weird["before"], "files outside the warehouse changed"
    # The solution's source text is stored as data, never as files that could be imported.
    assert not [p for p in warehouse.rglob("*.py")]


def test_moved_warehouse_still_answers(weird: dict[str, Any], tmp_path: Path) -> None:
    moved = tmp_path / "moved-warehouse"
    shutil.copytree(weird["warehouse"], moved, symlinks=True)
    assert _counts(moved) == {"runs": 8, "impl": 2, "defs": 1}


# Modules a Python process imports while it starts (multiprocessing's helpers import selectors,
# random and bisect): a file of that name in the working directory would run if that directory
# were on the workers' import path.
HOSTILE_MODULE_NAMES = ("bisect", "random", "selectors", "socket", "struct")


def _plant_hostile_modules(folder: Path, markers: Path) -> None:
    for name in HOSTILE_MODULE_NAMES:
        (folder / f"{name}.py").write_text(
            "import pathlib\n"
            f"pathlib.Path({str(markers / name)!r}).write_text('executed')\n"
            f"raise SystemExit('hostile {name} imported')\n"
        )


@pytest.mark.parametrize("where", ["working directory", "dataset folder"])
def test_python_files_in_the_working_directory_are_never_imported(
    tmp_path: Path, where: str
) -> None:
    """A build started from a folder holding ``selectors.py``, ``random.py``… (a dataset clone
    with scripts, a home directory) runs none of them: its parser workers and their fork server
    start with a safe import path. Run as a user does: the installed ``tracehouse`` script, with
    several workers so that the worker pool really starts."""
    from tracehouse.demo import generate_dataset

    dataset = tmp_path / "dataset"
    generate_dataset(dataset, seed=5, definitions=4, workloads_per_definition=3)
    markers = tmp_path / "markers"
    markers.mkdir()
    cwd = tmp_path / "elsewhere" if where == "working directory" else dataset
    cwd.mkdir(exist_ok=True)
    _plant_hostile_modules(cwd, markers)
    warehouse = tmp_path / "warehouse"
    script = Path(sys.executable).with_name("tracehouse")
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    environment.update({"TRACEHOUSE_WORKERS": "2", "PYTHONPATH": ""})
    completed = subprocess.run(
        [str(script), "build", "--source", str(dataset), "--warehouse", str(warehouse)],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    assert "hostile" not in completed.stderr and "Traceback" not in completed.stderr
    assert sorted(p.name for p in markers.iterdir()) == []
    from tracehouse.warehouse import read_table

    assert read_table(Warehouse(warehouse).require_current(), "runs").num_rows > 0
