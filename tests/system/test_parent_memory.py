"""What a build's parent process holds while its workers parse: the dataset context's
definition and implementation rows wait on disk (identify.context.staged_context_rows), and
come back whole for finalize; pyarrow and DuckDB are not loaded until the parse is over."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tracehouse import build
from tracehouse.build import build_warehouse
from tracehouse.demo import generate_dataset
from tracehouse.ingest.plan import IngestPlan, plan_files, run_tasks
from tracehouse.settings import load_settings
from tracehouse.warehouse import Warehouse

pytestmark = pytest.mark.integration


def test_the_context_rows_wait_on_disk_while_the_workers_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, root = tmp_path / "dataset", tmp_path / "warehouse"
    generate_dataset(source, seed=11, definitions=3, workloads_per_definition=2)
    settings = load_settings(environ={}, warehouse=root, source=str(source), workers=1)
    solutions = len(list((source / "solutions").rglob("*.json")))
    definitions = len(list((source / "definitions").rglob("*.json")))
    plans: list[IngestPlan] = []
    seen: list[tuple[bool, int, int]] = []

    def recording_plan_files(*args: Any, **kwargs: Any) -> IngestPlan:
        plans.append(plan_files(*args, **kwargs))
        return plans[-1]

    def parse(tasks: list[Any], workers: int, progress: Any) -> list[Any]:
        # The parse begins with the rows in the cache, not in the plan's lists.
        (loaded,) = (plan.loaded for plan in plans)
        seen.append(
            (
                Warehouse(root).context_rows.is_file(),
                len(loaded.definition_rows),
                len(loaded.implementation_rows),
            )
        )
        return run_tasks(tasks, workers, progress)

    monkeypatch.setattr(build, "plan_files", recording_plan_files)
    build_warehouse(settings, parse=parse)

    assert seen == [(True, 0, 0)]
    # The file is gone once finalize has read it, and every row reached its table.
    assert not Warehouse(root).context_rows.exists()
    with duckdb.connect(str(root / "tracehouse.duckdb"), read_only=True) as connection:
        ((implementations,),) = connection.execute(
            "SELECT count(*) FROM implementations"
        ).fetchall()
        ((stored_definitions,),) = connection.execute("SELECT count(*) FROM definitions").fetchall()
    assert (implementations, stored_definitions) == (solutions, definitions)


def test_a_build_that_fails_during_the_parse_leaves_no_copy_of_the_rows(tmp_path: Path) -> None:
    source, root = tmp_path / "dataset", tmp_path / "warehouse"
    generate_dataset(source, seed=12, definitions=2, workloads_per_definition=2)
    settings = load_settings(environ={}, warehouse=root, source=str(source), workers=1)
    build_warehouse(settings)
    # A second build with a file to parse (a line re-run and appended), whose parse fails.
    trace = min((source / "traces").rglob("*.jsonl"))
    with trace.open("ab") as handle:
        handle.write(trace.read_bytes().splitlines(keepends=True)[0])
    staged: list[bool] = []

    def failing_parse(tasks: list[Any], workers: int, progress: Any) -> list[Any]:
        staged.append(Warehouse(root).context_rows.is_file())
        raise OSError("the disk went away")

    with pytest.raises(OSError, match="the disk went away"):
        build_warehouse(settings, parse=failing_parse)
    assert staged == [True]
    assert (root / "tracehouse.duckdb").exists()  # the warehouse stays, without the copy
    assert not Warehouse(root).context_rows.exists()


# Run in a new interpreter (this one has every library loaded): a build whose parse records
# which of the heavy libraries its parent holds when the parse begins and once every group's
# result is back, and which allocator Arrow took in the parent for finalize.
LIBRARIES_AT_PARSE = textwrap.dedent(
    """
    import json
    import sys
    from tracehouse.build import build_warehouse
    from tracehouse.ingest.plan import run_tasks
    from tracehouse.settings import load_settings

    HEAVY = ("pyarrow", "duckdb", "polars", "numpy")
    seen = []

    def parse(tasks, workers, progress):
        seen.append(sorted(name for name in HEAVY if name in sys.modules))
        results = run_tasks(tasks, workers, progress)
        seen.append(sorted(name for name in HEAVY if name in sys.modules))
        seen.append(len(tasks))
        return results

    settings = load_settings(environ={}, warehouse=sys.argv[1], source=sys.argv[2], workers=2)
    build_warehouse(settings, parse=parse)
    import pyarrow
    seen.append(pyarrow.default_memory_pool().backend_name)
    print(json.dumps(seen))
    """
)


def test_the_parent_loads_no_pyarrow_or_duckdb_while_its_workers_parse(tmp_path: Path) -> None:
    """Loaded before the parse (finalize's imports, the plan's chunk sizes, the results'
    classes), pyarrow and DuckDB were ~95 MiB of the parent's resident size through the whole
    parse, beside the workers: at 1,000,000 lines the process tree's peak."""
    source, root = tmp_path / "dataset", tmp_path / "warehouse"
    generate_dataset(source, seed=13, definitions=3, workloads_per_definition=2)
    done = subprocess.run(
        [sys.executable, "-c", LIBRARIES_AT_PARSE, str(root), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    before, after, tasks, allocator = json.loads(done.stdout.strip().splitlines()[-1])
    assert tasks >= 2  # a pool of two workers, its results sent back to the parent
    assert (before, after) == ([], [])
    assert allocator == "system"  # not mimalloc, which kept finalize's pages
    with duckdb.connect(str(root / "tracehouse.duckdb"), read_only=True) as connection:
        ((runs,),) = connection.execute("SELECT count(*) FROM runs").fetchall()
    assert runs > 0
