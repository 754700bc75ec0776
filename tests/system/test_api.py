"""The Python API (tracehouse/api.py, issue 21): a notebook's `connect`, `table` and `sql` over a
folder warehouse and an s3:// one, run as a user's script in a process and directory of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.object_store import local_s3_server
from tests.conftest import run_cli
from tracehouse import schemas
from tracehouse.demo import generate_dataset
from tracehouse.sql_files import VIEW_ORDER

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
BUCKET = "tracehouse-api"

NOTEBOOK = """
import json, sys
import polars as pl
import pyarrow as pa
import tracehouse

where, catalog = sys.argv[1], (sys.argv[2] or None)
con = tracehouse.connect(where, catalog=catalog)
names = [n for (n,) in con.sql(
    "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall()]
runs = tracehouse.table("runs", where, catalog=catalog)
leaders = tracehouse.sql(
    "SELECT definition, count(*) AS n FROM leaderboard WHERE leaderboard_rank = $rank "
    "GROUP BY 1 ORDER BY 1", where, {"rank": 1}, catalog=catalog)
summary = tracehouse.table("run_summary", where, arrow=True, catalog=catalog)
refused = ""
try:
    tracehouse.sql("DELETE FROM runs", where, catalog=catalog)
except PermissionError as error:
    refused = str(error)
unknown = ""
try:
    tracehouse.table("no_such_table", where, catalog=catalog)
except LookupError as error:
    unknown = str(error)
print(json.dumps({
    "names": names,
    "runs": [isinstance(runs, pl.DataFrame), runs.height, runs.columns],
    "leaders": leaders.rows(),
    "summary": [isinstance(summary, pa.Table), summary.num_rows],
    "ranked": con.execute("SELECT count(*) FROM run_summary WHERE rank = 1").fetchone()[0],
    "refused": refused,
    "unknown": unknown,
    "version": tracehouse.__version__,
}))
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("api") / "demo"
    generate_dataset(root, seed=3, definitions=3, workloads_per_definition=3)
    return root


def _notebook(where: str, cwd: Path, catalog: str = "", env: dict[str, str] | None = None) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", NOTEBOOK, where, catalog],
        capture_output=True, text=True, cwd=cwd, timeout=300,
        env={**(env or {}), "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _query(sql: str, *args: str, env: dict[str, str] | None = None) -> list[dict]:
    result = run_cli("query", sql, "--format", "json", "--limit", "0", *args, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _check(answer: dict, expected: dict) -> None:
    assert set(VIEW_ORDER) | set(schemas.TABLES) <= set(answer["names"])
    assert answer["runs"] == [True, expected["runs"], schemas.TABLES["runs"].column_names]
    assert answer["leaders"] == expected["leaders"]
    assert answer["summary"] == [True, expected["runs"]]
    assert answer["ranked"] == expected["ranked"]
    assert answer["refused"].startswith("refused: DELETE statements are not allowed")
    assert answer["unknown"].startswith("no table or view 'no_such_table' in the warehouse")
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert answer["version"] == declared


def _expected(*where: str, env: dict[str, str] | None = None) -> dict:
    leaders = _query(
        "SELECT definition, count(*) AS n FROM leaderboard WHERE leaderboard_rank = 1 "
        "GROUP BY 1 ORDER BY 1",
        *where,
        env=env,
    )
    return {
        "runs": _query("SELECT count(*) AS n FROM runs", *where, env=env)[0]["n"],
        "ranked": _query("SELECT count(*) AS n FROM run_summary WHERE rank = 1", *where, env=env)[
            0
        ]["n"],
        "leaders": [[row["definition"], row["n"]] for row in leaders],
    }


def test_a_notebook_reads_a_folder_warehouse(demo: Path, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    built = run_cli("build", "--source", str(demo), "--warehouse", str(warehouse))
    assert built.returncode == 0, built.stderr
    expected = _expected("--warehouse", str(warehouse))
    assert expected["runs"] > 0 and expected["leaders"]
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _check(_notebook(str(warehouse), cwd=notebooks), expected)
    # without an argument the settings decide, as for every command
    answer = subprocess.run(
        [sys.executable, "-c", "import pipelines; print(tracehouse.connect()"
         ".execute('SELECT count(*) FROM runs').fetchone()[0])"],
        capture_output=True, text=True, cwd=notebooks, timeout=300,
        env={"PYTHONPATH": str(REPO), "TRACEHOUSE_WAREHOUSE": str(warehouse)},
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    assert int(answer.stdout) == expected["runs"]


@pytest.fixture(scope="module")
def s3_env() -> Iterator[dict[str, str]]:
    with local_s3_server(BUCKET) as environment:
        yield {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": environment["AWS_ENDPOINT_URL"],
        }


def test_a_notebook_reads_an_s3_warehouse(
    demo: Path, tmp_path: Path, s3_env: dict[str, str]
) -> None:
    where = f"s3://{BUCKET}/api"
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    env = {**s3_env, "TRACEHOUSE_STAGING": str(tmp_path / "staging")}
    built = run_cli(
        "build", "--source", str(demo), "--warehouse", where, "--catalog", catalog, env=env
    )
    assert built.returncode == 0, built.stderr
    expected = _expected("--warehouse", where, "--catalog", catalog, env=env)
    assert expected["runs"] > 0
    reader = tmp_path / "reader"
    reader.mkdir()
    _check(
        _notebook(
            where,
            cwd=reader,
            catalog=catalog,
            env={**env, "TRACEHOUSE_STAGING": str(tmp_path / "reader-staging")},
        ),  # fmt: skip
        expected,
    )
