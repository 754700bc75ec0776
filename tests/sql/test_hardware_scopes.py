"""A source whose evaluated lines all ran on one GPU has the same lines in hardware scope `all` as
in that GPU's scope, so the score views compute the figures once and give them to both
(``same_lines_as`` of fib_hardware_scopes and web_hardware_scopes). The rule on stand-in trace
lines, then the promise on a real build: every view reads the same rows as when every scope is
computed on its own."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import run_cli
from tests.fixtures.fib_golden import FIB_GOLDEN_DIR
from tests.fixtures.shared_data import requires_shared
from tracehouse.sql_files import sql_dir
from tracehouse.warehouse import Warehouse, connect_read_only

SCOPE_VIEWS = ("fib_hardware_scopes", "web_hardware_scopes")

# (source, has_evaluation, hardware, device) of each stand-in trace line
LINES = [
    ("one_gpu", True, "H100", None),
    ("one_gpu", True, "H100", ""),
    ("one_gpu", False, None, None),  # no evaluation: in `all` only, which scores never read
    ("two_gpus", True, "H100", None),
    ("two_gpus", True, "B200", None),
    ("unnamed_line", True, "H100", None),
    ("unnamed_line", True, None, None),  # in FIB's `all`, in no GPU's; the web says 'unknown'
    ("two_devices", True, "H100", "cuda:0"),
    ("two_devices", True, "H100", "cuda:1"),
]
SOURCES = ("one_gpu", "two_gpus", "unnamed_line", "two_devices", "no_lines")


def _scope_view_sql(name: str) -> str:
    return next(sql_dir().rglob(f"{name}.sql")).read_text()


def test_all_holds_the_lines_of_a_sources_one_gpu_and_no_other_scope_is_shared() -> None:
    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE fib_trace_lines (source VARCHAR, has_evaluation BOOLEAN, "
        "hardware VARCHAR, device VARCHAR)"
    )
    connection.executemany("INSERT INTO fib_trace_lines VALUES (?, ?, ?, ?)", LINES)
    connection.execute("CREATE TABLE fib_source_scopes (source VARCHAR)")
    connection.executemany("INSERT INTO fib_source_scopes VALUES (?)", [(s,) for s in SOURCES])

    def scopes(view: str) -> dict[tuple[str, str], str]:
        rows = connection.execute(
            f"SELECT source, hardware, same_lines_as FROM ({_scope_view_sql(view)})"  # noqa: S608
        ).fetchall()
        return {(source, hardware): same for source, hardware, same in rows}

    fib, web = scopes("fib_hardware_scopes"), scopes("web_hardware_scopes")
    # a GPU's scope holds its own lines; `all` holds a GPU's only where it says so
    assert all(
        same == hardware for (_, hardware), same in {**fib, **web}.items() if hardware != "all"
    )
    assert sorted(fib) == sorted(
        [(source, "all") for source in SOURCES]
        + [("one_gpu", "H100"), ("two_gpus", "H100"), ("two_gpus", "B200")]
        + [("unnamed_line", "H100"), ("two_devices", "H100")]
    )
    assert {source: fib[source, "all"] for source in SOURCES} == {
        "one_gpu": "H100",
        "two_gpus": "all",
        "unnamed_line": "all",
        "two_devices": "H100",  # FIB's scopes are hardware strings
        "no_lines": "all",
    }
    assert sorted(web) == sorted(
        [(source, "all") for source in SOURCES]
        + [("one_gpu", "H100"), ("two_gpus", "H100"), ("two_gpus", "B200")]
        + [("unnamed_line", "H100"), ("unnamed_line", "unknown")]
        + [("two_devices", "cuda:0"), ("two_devices", "cuda:1")]
    )
    assert {source: web[source, "all"] for source in SOURCES} == {
        "one_gpu": "H100",  # an empty device falls back to the hardware
        "two_gpus": "all",
        "unnamed_line": "all",
        "two_devices": "all",  # the web's scopes are devices
        "no_lines": "all",
    }


def _comparable(row: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else repr(v) for v in row)


@requires_shared
@pytest.mark.integration
def test_every_view_reads_as_if_each_scope_were_computed_on_its_own(tmp_path: Path) -> None:
    # FlashInfer-Bench's fixture_errors: one GPU, baselines, a web map, and the error cases
    source = FIB_GOLDEN_DIR / "fixtures" / "fixture_errors"
    warehouse = tmp_path / "w"
    built = run_cli(
        "build",
        "--source",
        str(source),
        "--baselines",
        str(source / "baselines.json"),
        "--warehouse",
        str(warehouse),
    )
    assert built.returncode == 0, built.stderr

    connection = connect_read_only(Warehouse(warehouse))
    try:
        views = [
            name
            for (name,) in connection.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary "
                "ORDER BY view_name"
            ).fetchall()
        ]
        for scope_view in SCOPE_VIEWS:
            shared = connection.execute(
                f"SELECT count(*) FROM {scope_view} "  # noqa: S608  (our view names)
                "WHERE hardware = 'all' AND same_lines_as <> 'all'"
            ).fetchone()
            assert shared == (1,), (
                f"{scope_view}: the build must share a scope, or this proves nothing"
            )

        def every_view() -> dict[str, list[tuple[str, ...]]]:
            return {
                view: sorted(map(_comparable, connection.execute(f'FROM "{view}"').fetchall()))
                for view in views
            }

        with_shared_scopes = every_view()
        for scope_view in SCOPE_VIEWS:  # a temporary table shadows the stored view
            connection.execute(
                f"CREATE TEMP TABLE {scope_view} AS "  # noqa: S608  (our view names)
                f"SELECT * REPLACE (hardware AS same_lines_as) FROM {scope_view}"
            )
        each_on_its_own = every_view()
    finally:
        connection.close()
    assert any(with_shared_scopes[view] for view in ("fib_solution_scores", "web_solution_scores"))
    compared = [view for view in views if view not in SCOPE_VIEWS]
    differing = [view for view in compared if with_shared_scopes[view] != each_on_its_own[view]]
    assert not differing
