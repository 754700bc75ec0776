"""Parser workers: renewed by files parsed (ingest.plan.FILES_PER_WORKER), not by tasks; and
without pandas, which pyarrow would import on a worker's first list conversion. A `tracehouse
build` process also goes without numpy, which DuckDB and pyarrow would import."""

from __future__ import annotations

import subprocess
import sys

from tracehouse.ingest.plan import IngestTask, worker_batches


def _task(files: int) -> IngestTask:
    listing = tuple((f"/d/traces/a/{i}.jsonl", f"traces/a/{i}.jsonl") for i in range(files))
    return IngestTask(listing, "/staging", "key", files, 20_000)


def test_a_batch_holds_tasks_until_its_files_are_used_up() -> None:
    tasks = [_task(n) for n in (3, 3, 4, 1, 6, 2)]
    assert [list(b) for b in worker_batches(tasks, 10)] == [[0, 1, 2], [3, 4, 5]]


def test_a_task_larger_than_a_batch_is_a_batch_of_its_own() -> None:
    tasks = [_task(n) for n in (2, 25, 1)]
    assert [list(b) for b in worker_batches(tasks, 10)] == [[0], [1], [2]]


def test_many_small_tasks_and_one_big_source_of_few_files() -> None:
    # 200,000 one-line files in tasks of 500: 16 tasks a batch for two workers, as before;
    # a few hundred big files: one batch, one set of workers for the whole parse.
    small = [_task(500) for _ in range(40)]
    assert [len(b) for b in worker_batches(small, 2 * 4000)] == [16, 16, 8]
    big = [_task(6) for _ in range(64)]
    assert [len(b) for b in worker_batches(big, 2 * 4000)] == [64]
    assert list(worker_batches([], 10)) == []


def test_a_parser_worker_converts_lists_without_importing_pandas() -> None:
    script = (
        "import sys; from tracehouse.ingest import plan, worker; plan._start_worker(None);"
        "import pyarrow as pa; assert pa.array(['a', None]).to_pylist() == ['a', None];"
        "print('pandas' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


def test_a_build_that_parses_in_place_imports_neither_pandas_nor_numpy(tmp_path) -> None:
    # One worker: the build parses in the `tracehouse build` process itself, as a build of one
    # changed group does; its rows are still converted to Arrow, without pandas, and DuckDB and
    # pyarrow do their work without numpy. The warehouse is the one a process with both builds.
    from tests.conftest import build
    from tracehouse.demo import generate_dataset
    from tracehouse.warehouse import Warehouse

    dataset = tmp_path / "dataset"
    generate_dataset(dataset, definitions=2, workloads_per_definition=2, solutions_per_definition=2)
    script = (
        "import sys; from tracehouse import cli;"
        f"code = cli.main(['build', '--source', {str(dataset)!r}, '--warehouse',"
        f" {str(tmp_path / 'wh')!r}, '--workers', '1', '--revision', {'ef' * 20!r}]);"
        "print(code, 'pandas' in sys.modules, 'numpy' in sys.modules,"
        " 'pyarrow.compute' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # (nor pyarrow.compute, ~70 ms to import: run_history's timestamps are not cast with it)
    assert done.stdout.split()[-4:] == ["0", "False", "False", "False"]
    build(dataset, tmp_path / "with", workers=1, revision="ef" * 20)
    generations = [Warehouse(tmp_path / name).require_current() for name in ("wh", "with")]
    for table in ("runs", "run_rankings", "correctness"):
        files = [sorted((g / f"{table}.parquet").rglob("*.parquet")) for g in generations]
        assert [f.read_bytes() for f in files[0]] == [f.read_bytes() for f in files[1]], table


def test_a_build_that_finds_its_warehouse_up_to_date_loads_neither_duckdb_nor_pyarrow(
    tmp_path,
) -> None:
    # The warm build is a few tenths of a second; importing DuckDB was a quarter of it.
    from tracehouse.demo import generate_dataset

    dataset = tmp_path / "dataset"
    generate_dataset(dataset, definitions=2, workloads_per_definition=2, solutions_per_definition=2)
    build = ["build", "--source", str(dataset), "--warehouse", str(tmp_path / "wh")]
    script = (
        "import sys; from tracehouse import cli;"
        f"code = cli.main({build!r});"
        "print(code, 'duckdb' in sys.modules, 'pyarrow' in sys.modules)"
    )
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "up to date" in " ".join(again.stdout.split()), again.stdout
    assert again.stdout.split()[-3:] == ["0", "False", "False"], again.stdout


def test_the_files_of_one_definition_are_one_group_parsed_one_after_the_other(tmp_path) -> None:
    # Every author's traces of a definition and its workloads file: one task, the definition's
    # files side by side in it, so a worker derives the entities they share once.
    from tracehouse.demo import generate_dataset
    from tracehouse.ingest.plan import file_group, file_group_name, plan_ingest
    from tracehouse.settings import Settings

    dataset = tmp_path / "dataset"
    generate_dataset(dataset, definitions=3, workloads_per_definition=2, solutions_per_definition=3)
    plan = plan_ingest(Settings(warehouse=tmp_path / "wh", source=str(dataset)))
    files = sorted(p.relative_to(dataset).as_posix() for p in dataset.rglob("*.jsonl"))
    by_definition: dict[str, set[str]] = {}
    for rel in files:
        by_definition.setdefault(rel.rsplit("/", 1)[1], set()).add(rel)
    assert len(by_definition) == 3 and all(len(rels) >= 3 for rels in by_definition.values())
    for rels in by_definition.values():
        (task,) = [t for t in plan.tasks if rels & {rel for _, rel in t.files}]
        listed = [rel for _, rel in task.files]
        assert set(listed) >= rels
        names = [file_group_name(rel) for rel in listed]
        assert names == sorted(names)  # one definition's files in a row
    assert sorted(rel for t in plan.tasks for _, rel in t.files) == files
    # The layouts' suffixes after a definition's name, and a name without one.
    assert {
        file_group_name(rel)
        for rel in (
            "traces/gpt-5/gemm/gemm_n128.jsonl",
            "traces/gemm_n128.jsonl",
            "workloads/gemm/gemm_n128.jsonl",
            "traces/workloads/gemm/gemm_n128.workload.jsonl",
            "traces/gemm_n128_workloads.jsonl",
        )
    } == {"gemm_n128"}
    assert file_group("traces/a/x/gemm_n128.jsonl") == file_group("workloads/x/gemm_n128.jsonl")
    assert file_group_name("traces.jsonl") == "traces"


def test_a_group_is_cut_into_tasks_by_files_and_by_bytes() -> None:
    from tracehouse.fetch.local import SourceFile
    from tracehouse.ingest.plan import FILES_PER_TASK, _task_chunks

    def files(*sizes: int) -> list[SourceFile]:
        return [
            SourceFile(f"traces/a/{i}/x.jsonl", f"/d/traces/a/{i}/x.jsonl", "jsonl", size, 0, i)
            for i, size in enumerate(sizes)
        ]

    def cut(members: list[SourceFile], task_bytes: int) -> list[list[int]]:
        return [[f.size for f in chunk] for chunk in _task_chunks(members, task_bytes)]

    assert cut(files(4, 4, 4, 4), 8) == [[4, 4], [4, 4]]
    assert cut(files(3, 20, 3, 3), 8) == [[3], [20], [3, 3]]  # a bigger file alone, in order
    assert cut(files(1, 1), 100) == [[1, 1]]
    many = _task_chunks(files(*[1] * (FILES_PER_TASK + 1)), 10**9)
    assert [len(chunk) for chunk in many] == [FILES_PER_TASK, 1]
