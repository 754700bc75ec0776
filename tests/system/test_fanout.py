"""The fanned-out ingest (pipelines/defs/fanout.py) under Dagster's multiprocess executor and
dagster-dask's executor on a local Dask cluster of worker processes: each run's parse steps
really run in several processes, and the warehouse it publishes exports byte-identical to the
one `tracehouse build` publishes from the same source (apart from when it was built)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow.parquet as pq
import pytest

from pipelines.defs import fanout
from pipelines.defs.naming import asset_key
from tests.conftest import GOLDEN_REVISION, run_cli
from tests.fixtures.shared_data import GOLDEN_DIR, requires_shared
from tracehouse.ingest.group import CarriedFile
from tracehouse.ingest.plan import IngestTask, file_group

pytestmark = [requires_shared, pytest.mark.integration]

# Columns that describe the build rather than the data.
BUILD_DESCRIBING = {"source_snapshots": ("built_at",)}


def export(warehouse: Path, out: Path) -> Path:
    exported = run_cli("export", "--warehouse", str(warehouse), "--snapshot", str(out))
    assert exported.returncode == 0, exported.stderr
    return out


def assert_same_tables(expected: Path, actual: Path) -> None:
    names = sorted(p.name for p in expected.glob("*.parquet"))
    assert names and names == sorted(p.name for p in actual.glob("*.parquet"))
    for name in names:
        table = name.removesuffix(".parquet")
        if table in BUILD_DESCRIBING:
            dropped = list(BUILD_DESCRIBING[table])
            left = pq.read_table(expected / name).drop_columns(dropped)
            right = pq.read_table(actual / name).drop_columns(dropped)
            assert left.equals(right), table
        else:
            assert (expected / name).read_bytes() == (actual / name).read_bytes(), table


@pytest.fixture(scope="module")
def cli_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("cli")
    built = run_cli(
        "build",
        "--source",
        str(GOLDEN_DIR / "dataset"),
        "--warehouse",
        str(base / "warehouse"),
        "--revision",
        GOLDEN_REVISION,
    )
    assert built.returncode == 0, built.stderr
    return export(base / "warehouse", base / "export")


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    # Both executors need a persistent instance: steps in other processes report to it.
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        yield instance


def run_config(warehouse: Path, execution: dict[str, Any]) -> dict[str, Any]:
    settings = {
        "source": str(GOLDEN_DIR / "dataset"),
        "warehouse": str(warehouse),
        "revision": GOLDEN_REVISION,
    }
    return {"resources": {"warehouse": {"config": settings}}, "execution": {"config": execution}}


def parse_pids(result: dg.ExecuteJobResult) -> dict[str, int]:
    """The process that parsed each group partition, from the materializations it reported."""
    pids = {}
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        assert materialization is not None
        if materialization.asset_key == asset_key(fanout.PARSED_GROUPS):
            assert materialization.partition is not None
            pid = materialization.metadata["worker_pid"].value
            assert isinstance(pid, int)
            pids[materialization.partition] = pid
    return pids


def test_multiprocess_executor_builds_the_cli_tables(
    cli_export: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    execution = {"max_concurrent": 2, "start_method": fanout.FORKSERVER}
    result = dg.execute_job(
        dg.reconstructable(fanout.multiprocess_job),
        instance=instance,
        run_config=run_config(warehouse, execution),
    )
    assert result.success
    pids = parse_pids(result)
    # Every group the build has got its own partition for the run; they end with it.
    assert instance.get_dynamic_partitions(fanout.INGEST_GROUPS.name or "") == []
    tables = {
        (e.materialization.asset_key.path[-1], e.materialization.partition)
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key != asset_key(fanout.PARSED_GROUPS)
    }
    assert ("runs", "dataset") in tables and ("run_rankings", None) in tables
    assert len(pids) > fanout.FANOUT_SLOTS
    assert len(set(pids.values())) >= 2
    assert not (warehouse / "cache" / fanout.SCRATCH_FOLDER / result.run_id).exists()
    assert_same_tables(cli_export, export(warehouse, tmp_path / "export"))

    # Unchanged source: nothing to parse, nothing published again.
    again = dg.execute_job(
        dg.reconstructable(fanout.multiprocess_job),
        instance=instance,
        run_config=run_config(warehouse, execution),
    )
    assert again.success
    assert parse_pids(again) == {}
    assert not again.get_asset_materialization_events()


def test_dask_executor_on_a_local_cluster_builds_the_cli_tables(
    cli_export: Path, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    pytest.importorskip(
        "dagster_dask", reason="the dask extra is not installed (uv sync --extra dask)"
    )
    from distributed import Client, LocalCluster, get_task_stream

    warehouse = tmp_path / "warehouse"
    # Two workers on 127.0.0.1, no dashboard (None turns it off; the stubs want a str). They
    # are threads of this process (processes=False): a worker process would import Dagster and
    # the parser again, minutes on a busy machine; the steps going from process to process
    # through the shared store is what the multiprocess test above proves.
    options: dict[str, Any] = {"dashboard_address": None}
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        **options,
    )
    try:
        client = Client(cluster)
        stream = get_task_stream(client)  # every task the cluster runs meanwhile
        with client, stream:
            execution = {"cluster": {"existing": {"address": cluster.scheduler_address}}}
            result = dg.execute_job(
                dg.reconstructable(fanout.dask_job),
                instance=instance,
                run_config=run_config(warehouse, execution),
            )
        workers = set(cluster.scheduler_info["workers"])
    finally:
        cluster.close()
    assert result.success
    pids = parse_pids(result)
    assert len(pids) > fanout.FANOUT_SLOTS
    # Every step ran as a task of the cluster, the parse steps on both of its workers.
    ran_on = {task["key"]: task["worker"] for task in stream.data}
    parse_steps = {
        f"fanout_ingest_dask_job.parse_slot_{slot}" for slot in range(fanout.FANOUT_SLOTS)
    }
    assert parse_steps | {"fanout_ingest_dask_job.assemble_tables"} <= set(ran_on), sorted(ran_on)
    assert set(ran_on.values()) <= workers
    assert len({ran_on[key] for key in parse_steps}) == 2
    assert_same_tables(cli_export, export(warehouse, tmp_path / "export"))


def task(size: int) -> IngestTask:
    return IngestTask(((f"/d/traces/{size}.jsonl", f"traces/{size}.jsonl"),), "/s", "k", size, 1)


def test_deal_spreads_groups_by_size() -> None:
    tasks = [task(size) for size in (50, 40, 30, 20, 10, 10, 5)]
    dealt = fanout.deal(tasks, 3)
    assert sorted(t.size for slot in dealt for t in slot) == sorted(t.size for t in tasks)
    assert sorted(sum(t.size for t in slot) for slot in dealt) == [50, 55, 60]
    assert fanout.deal([], 2) == [[], []]


def test_a_task_that_only_carries_rows_is_in_its_files_group_partition() -> None:
    """A file taken from a group leaves a task that parses nothing and carries the rest of the
    group's rows: its partition is still its group's."""
    rel = "traces/alice/gemm/gemm_n4_k4.jsonl"
    carried = CarriedFile(f"/d/{rel}", rel, "0" * 64, 3, 3, 0, False)
    carrying = IngestTask(
        (), "/s", "k", 0, 1, "g", (carried,), (("runs", "/s/old.runs.0.parquet"),)
    )
    parsing = IngestTask(((f"/d/{rel}", rel),), "/s", "k", 1, 1)
    assert fanout.partition_key(carrying) == fanout.partition_key(parsing)
    assert fanout.partition_key(parsing) == f"group-{file_group(rel):02d}"
