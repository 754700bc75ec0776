"""The published DuckDB file opens anywhere, and no opener locks another out (issue 21).

Everything runs as a user would: the real `tracehouse` command, the `duckdb` command of the
duckdb-cli package, and DuckDB connections held open in processes of their own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tracehouse.demo import generate_dataset

pytestmark = pytest.mark.integration

REVISIONS = [f"{n:040x}" for n in range(1, 7)]
DUCKDB_COMMAND = Path(sys.executable).parent / "duckdb"


@pytest.fixture(scope="module")
def demo_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("open-anywhere") / "demo"
    generate_dataset(root, seed=11, definitions=3, workloads_per_definition=3)
    return root


def _build(source: Path, warehouse: str | Path, revision: str, cwd: Path) -> None:
    result = run_cli(
        "build", "--source", str(source), "--warehouse", str(warehouse), "--revision", revision,
        cwd=cwd,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def _count(warehouse: Path | str, sql: str, cwd: Path) -> str:
    result = run_cli("query", sql, "--warehouse", str(warehouse), "--format", "csv", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[-1]


def _python_query(database: Path | str, sql: str, cwd: Path, *, read_only: bool = True) -> str:
    """A plain DuckDB client in a process of its own, in ``cwd``."""
    script = (
        "import duckdb, sys\n"
        f"c = duckdb.connect(sys.argv[1], read_only={read_only})\n"
        "print(c.execute(sys.argv[2]).fetchone()[0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(database), sql],
        capture_output=True, text=True, cwd=cwd, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _cli_query(database: Path | str, sql: str, cwd: Path) -> str:
    if not DUCKDB_COMMAND.exists():
        pytest.skip("the duckdb command (duckdb-cli) is not installed in this environment")
    result = subprocess.run(
        [str(DUCKDB_COMMAND), "-readonly", "-csv", "-noheader", str(database), "-c", sql],
        capture_output=True, text=True, cwd=cwd, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_duckdb_file_opens_from_any_directory_and_after_the_folder_moves(
    demo_source: Path, tmp_path: Path
) -> None:
    """A relative warehouse (the demo's) built in one directory, opened by the `duckdb` command
    and by Python from another, then moved with `mv` and opened again: every table and view
    answers, with the rows `tracehouse query` counts."""
    project = tmp_path / "project"
    project.mkdir()
    _build(demo_source, "wh", REVISIONS[0], cwd=project)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    expected_runs = _count(project / "wh", "SELECT count(*) FROM runs", cwd=elsewhere)
    assert int(expected_runs) > 0
    summary = "SELECT count(*) FROM run_summary WHERE rank IS NOT NULL"
    expected_ranked = _count(project / "wh", summary, cwd=project)
    assert int(expected_ranked) > 0

    database = project / "wh" / "tracehouse.duckdb"
    assert _cli_query(database, "SELECT count(*) FROM runs", cwd=elsewhere) == expected_runs
    assert _python_query(database, summary, cwd=elsewhere) == expected_ranked
    assert _cli_query(Path("../project/wh/tracehouse.duckdb"), summary, elsewhere) == (
        expected_ranked
    )

    moved = tmp_path / "moved" / "warehouse"
    moved.parent.mkdir()
    subprocess.run(["mv", str(project / "wh"), str(moved)], check=True)
    database = moved / "tracehouse.duckdb"
    assert _cli_query(database, "SELECT count(*) FROM runs", cwd=elsewhere) == expected_runs
    assert _python_query(database, summary, cwd=tmp_path) == expected_ranked
    # every table and view of the file answers, none holds a path
    tables = _python_query(
        database,
        "SELECT string_agg(table_name, ',') FROM duckdb_tables() WHERE NOT internal",
        cwd=elsewhere,
    ).split(",")
    views = _python_query(
        database,
        "SELECT string_agg(view_name, ',') FROM duckdb_views() WHERE NOT internal",
        cwd=elsewhere,
    ).split(",")
    assert "runs" in tables and "leaderboard" in views and "author_rankings" in views
    for name in [*tables, *views]:
        _python_query(database, f"SELECT count(*) FROM {name}", cwd=elsewhere)  # noqa: S608
    assert _count(moved, "SELECT count(*) FROM runs", cwd=elsewhere) == expected_runs
    # the documentation of schemas travels with the file
    comment = _python_query(
        database,
        "SELECT comment FROM duckdb_columns() WHERE table_name = 'runs' AND column_name = 'run_id'",
        cwd=elsewhere,
    )
    assert "unique per record" in comment


HOLDER = textwrap.dedent(
    """
    import json, sys
    import duckdb
    import tracehouse
    kind, target = sys.argv[1], sys.argv[2]
    if kind == "tracehouse":  # the Python API's connection (tracehouse query's own)
        connection = tracehouse.connect(target)
    else:
        connection = duckdb.connect(target, read_only=(kind == "ro"))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        try:
            value = connection.execute(line).fetchone()[0]
            print(json.dumps({"value": value}), flush=True)
        except Exception as error:
            print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
    """
)


class Holder:
    """A DuckDB connection held open in its own process, asked one query at a time."""

    def __init__(self, kind: str, target: Path, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, kind, str(target)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )  # fmt: skip
        assert self._reply() == {"ready": True}

    def _reply(self) -> dict[str, object]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the holder process ended"
        return json.loads(line)

    def ask(self, sql: str) -> object:
        assert self.process.stdin is not None
        self.process.stdin.write(sql.replace("\n", " ") + "\n")
        self.process.stdin.flush()
        reply = self._reply()
        assert "error" not in reply, reply["error"]
        return reply["value"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def test_connections_held_open_across_four_builds_block_nobody(
    demo_source: Path, tmp_path: Path
) -> None:
    """A read-write `duckdb.connect` of the published file (DuckDB's and DBeaver's default), a
    read-only one of the next generation's file, and tracehouse's own read-only connection,
    all held open while four builds publish and prune generations and `tracehouse query` runs
    beside a build: nobody is locked out, and every held connection keeps answering with the
    state it opened (its generation stays on disk until it closes)."""
    source = tmp_path / "source"
    shutil.copytree(demo_source, source)
    warehouse = tmp_path / "wh"
    _build(source, warehouse, REVISIONS[0], cwd=tmp_path)
    first = os.path.realpath(warehouse / "current")
    runs = int(_count(warehouse, "SELECT count(*) FROM runs", cwd=tmp_path))
    revision_sql = "SELECT max(resolved_sha) FROM source_snapshots"

    read_write = Holder("rw", warehouse / "tracehouse.duckdb", cwd=tmp_path)
    ours = Holder("tracehouse", warehouse, cwd=tmp_path)
    # the read-write holder may write into its own generation's file: nobody else reads it
    read_write.ask("CREATE TABLE my_notes AS SELECT 1 AS note")
    _build(source, warehouse, REVISIONS[1], cwd=tmp_path)
    read_only = Holder("ro", warehouse / "tracehouse.duckdb", cwd=tmp_path)
    assert read_only.ask(revision_sql) == REVISIONS[1]

    for revision in REVISIONS[2:5]:
        # a build and a `tracehouse query` at the same time, while the three are held open
        build = subprocess.Popen(
            [sys.executable, "-m", "tracehouse.cli", "build", "--source", str(source),
             "--warehouse", str(warehouse), "--revision", revision],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert int(_count(warehouse, "SELECT count(*) FROM runs", cwd=tmp_path)) == runs
        _, errors = build.communicate(timeout=600)
        assert build.returncode == 0, errors
        assert _count(warehouse, revision_sql, cwd=tmp_path) == revision
        assert read_write.ask("SELECT count(*) FROM runs") == runs
        assert read_write.ask(revision_sql) == REVISIONS[0]
        assert ours.ask(revision_sql) == REVISIONS[0]
        assert ours.ask("SELECT count(*) FROM run_summary") == runs
        assert read_only.ask(revision_sql) == REVISIONS[1]
    assert read_write.ask("SELECT count(*) FROM my_notes") == 1
    # four builds later the first generation is still there, for the connections using it
    assert Path(first).is_dir()

    read_write.close()
    ours.close()
    read_only.close()
    _build(source, warehouse, REVISIONS[5], cwd=tmp_path)
    # closed, the generations beyond keep_generations go with the next build
    assert not Path(first).exists()
    kept = sorted(p.name for p in (warehouse / "generations").iterdir())
    assert len(kept) == 3, kept
