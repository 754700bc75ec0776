"""What a build's parent process holds while its workers parse: the dataset context's
definition and implementation rows wait on disk (identify.context.store_context_rows), and
come back whole for finalize, or are handed to it as the cache holds them; pyarrow and DuckDB are not loaded until the parse is over."""

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
from tracehouse.identify import context as context_module
from tracehouse.ingest.plan import IngestPlan, plan_files, run_tasks
from tracehouse.settings import Settings, load_settings
from tracehouse.warehouse import Warehouse

pytestmark = pytest.mark.integration


def _context_counts(root: Path) -> tuple[int, int]:
    """The published implementations and definitions."""
    with duckdb.connect(str(root / "tracehouse.duckdb"), read_only=True) as connection:
        ((implementations,),) = connection.execute(
            "SELECT count(*) FROM implementations"
        ).fetchall()
        ((definitions,),) = connection.execute("SELECT count(*) FROM definitions").fetchall()
    return implementations, definitions


def _source_counts(source: Path) -> tuple[int, int]:
    """The source's solution and definition files."""
    return (
        len(list((source / "solutions").rglob("*.json"))),
        len(list((source / "definitions").rglob("*.json"))),
    )


def _built(tmp_path: Path, seed: int) -> tuple[Path, Path, Settings]:
    """A generated source, built once into a warehouse of one worker."""
    source, root = tmp_path / "dataset", tmp_path / "warehouse"
    generate_dataset(source, seed=seed, definitions=3, workloads_per_definition=2)
    settings = load_settings(environ={}, warehouse=root, source=str(source), workers=1)
    build_warehouse(settings)
    return source, root, settings


def _rerun_a_line(source: Path) -> None:
    """A trace file changed: its first line re-run and appended."""
    trace = min((source / "traces").rglob("*.jsonl"))
    with trace.open("ab") as handle:
        handle.write(trace.read_bytes().splitlines(keepends=True)[0])


def test_the_context_rows_wait_on_disk_while_the_workers_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, root = tmp_path / "dataset", tmp_path / "warehouse"
    generate_dataset(source, seed=11, definitions=3, workloads_per_definition=2)
    settings = load_settings(environ={}, warehouse=root, source=str(source), workers=1)
    plans: list[IngestPlan] = []
    seen: list[tuple[bool, int, int]] = []

    def recording_plan_files(*args: Any, **kwargs: Any) -> IngestPlan:
        plans.append(plan_files(*args, **kwargs))
        return plans[-1]

    def parse(tasks: list[Any], workers: int, progress: Any) -> list[Any]:
        # The parse begins with the rows in the cache, not in the plan's lists.
        (loaded,) = (plan.loaded for plan in plans)
        stored = loaded.stored_rows
        seen.append(
            (
                stored is not None and stored.path.parent == Warehouse(root).cache,
                len(loaded.definition_rows),
                len(loaded.implementation_rows),
            )
        )
        return run_tasks(tasks, workers, progress)

    monkeypatch.setattr(build, "plan_files", recording_plan_files)
    build_warehouse(settings, parse=parse)

    assert seen == [(True, 0, 0)]
    # Every row reached its table.
    assert _context_counts(root) == _source_counts(source)


def test_a_changed_build_takes_the_context_and_its_rows_as_they_are_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unpickling the rows and pickling them again for finalize was ~0.1 s of a build after
    one changed file of the bench corpus: the cache's file is handed over as it is."""
    source, root, settings = _built(tmp_path, seed=14)
    (rows_file,) = Warehouse(root).cache.glob("context-*.rows.pickle")
    written = rows_file.stat()

    def no_second_load(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the context was loaded again")

    monkeypatch.setattr(context_module, "load_context", no_second_load)
    _rerun_a_line(source)
    result = build_warehouse(settings)

    assert not result.up_to_date and result.files_parsed == 1
    again = rows_file.stat()
    assert (again.st_ino, again.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert _context_counts(root) == _source_counts(source)


def test_damaged_stored_rows_are_loaded_again(tmp_path: Path) -> None:
    source, root, settings = _built(tmp_path, seed=15)
    (rows_file,) = Warehouse(root).cache.glob("context-*.rows.pickle")
    whole = rows_file.read_bytes()
    rows_file.write_bytes(whole[: len(whole) // 2])  # cut short
    _rerun_a_line(source)

    result = build_warehouse(settings)

    assert result.files_parsed == 1
    assert rows_file.read_bytes() == whole  # derived again from the source's files
    assert _context_counts(root) == _source_counts(source)
    # A build whose solutions changed writes the context tables from the rows it stored.
    (first,) = sorted((source / "solutions").rglob("*.json"))[:1]
    solution = json.loads(first.read_text())
    solution["name"] += "_again"
    first.with_name("again.json").write_text(json.dumps(solution))
    build_warehouse(settings)
    assert _context_counts(root) == _source_counts(source)


def test_a_build_that_fails_during_the_parse_leaves_the_next_build_whole(tmp_path: Path) -> None:
    source, root, settings = _built(tmp_path, seed=12)
    _rerun_a_line(source)  # a file to parse, whose parse fails

    def failing_parse(tasks: list[Any], workers: int, progress: Any) -> list[Any]:
        raise OSError("the disk went away")

    with pytest.raises(OSError, match="the disk went away"):
        build_warehouse(settings, parse=failing_parse)
    assert (root / "tracehouse.duckdb").exists()  # the warehouse stays
    result = build_warehouse(settings)
    assert not result.up_to_date and result.files_parsed == 1
    assert _context_counts(root) == _source_counts(source)


# Run in a new interpreter (this one has every library loaded): a build whose parse records
# which of the heavy libraries its parent holds when the parse begins and once every group's
# result is back, and which allocator Arrow took in the parent for finalize.
LIBRARIES_AT_PARSE = textwrap.dedent(
    """
    import json
    import sys
    from tracehouse.build import build_warehouse
    from tracehouse.ingest.plan import run_tasks
    from tracehouse.settings import Settings, load_settings

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
