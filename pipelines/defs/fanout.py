"""The build with its parse fanned out over a Dagster executor's workers.

``tracehouse build`` parses the source's file groups in its own process pool. These jobs run
the same build as Dagster steps, so the executor decides where the parsing happens: the
multiprocess executor spreads it over processes of one machine, the Dask executor over the
workers of a Dask cluster (and Dagster's Kubernetes or Celery executors would spread the same
steps over theirs). Nothing here schedules work itself.

* ``plan_ingest`` plans exactly as ``build_warehouse`` does (``ingest.plan.plan_ingest``: the same
  path-stable file groups, the same reuse of unchanged groups), registers every group it will
  parse as a partition of ``parsed_groups`` (dynamic partitions ``ingest_groups``, one per file
  group, e.g. ``group-07``), and deals the groups out to ``FANOUT_SLOTS`` parse steps, biggest
  first onto the least loaded slot.
* ``parse_slot_<i>`` parses its groups with ``ingest.plan.parse_task`` (``ingest_group``, as a build
  worker does) into a scratch folder of this run in the warehouse's cache, and reports a
  materialization of each group's partition. The slots are static steps rather than a
  ``DynamicOut`` mapping because the Dask executor plans every step up front and does not run
  mapped ones.
* ``assemble_tables`` runs after every slot and calls ``build_warehouse`` itself, under the
  build lock, with a ``parse`` that takes what the slots wrote to the shared store instead of
  parsing: whatever the build then plans and finds parsed under the same part key is moved
  into staging; anything else (a source that changed since the plan) is parsed there. So the tables,
  the invariants, the publish guards and the manifest are the CLI build's.

The plan goes from step to step through Dagster's IO manager (the default filesystem one under
``DAGSTER_HOME``). The parts and each group's ``GroupResult`` go through the warehouse folder
(``<warehouse>/cache/fanout/<run id>/``), the shared store the assembly reads every partition's
output from, so every worker must see it (one machine, or a shared mount). The folder is removed
once the build has published.

The Dask executor comes with the ``dask`` extra (``pip install 'tracehouse[dask]'``): Dask,
distributed and dagster-dask are some 230 MB only a cluster needs. Without it the Dask job is
still defined, so Dagster lists it, and a run of it fails in one line naming the extra.
"""

import os
import pickle
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dagster as dg

from pipelines.defs.assets import table_result
from pipelines.defs.naming import OWNERS, asset_key
from pipelines.defs.resources import WarehouseResource
from pipelines.defs.sources import SOURCES
from tracehouse import schemas
from tracehouse.build import build_warehouse
from tracehouse.fetch.resolve import ProgressFn
from tracehouse.files import replace_atomically
from tracehouse.ingest.plan import IngestTask, file_group, parse_task, plan_ingest, run_tasks
from tracehouse.schemas import PER_SOURCE_TABLES
from tracehouse.warehouse import Warehouse, generation_sources

FANOUT_SLOTS = 8  # parse steps per run: enough for 8 workers; each costs a step's start-up
INGEST_GROUPS = dg.DynamicPartitionsDefinition(name="ingest_groups")
PARSED_GROUPS = "parsed_groups"
SCRATCH_FOLDER = "fanout"  # under <warehouse>/cache, one folder per run
GROUPS_TAG = "tracehouse/ingest_groups"  # the run's group partitions, comma-separated

parsed_groups = dg.AssetSpec(
    asset_key(PARSED_GROUPS),
    partitions_def=INGEST_GROUPS,
    group_name="tables",
    owners=OWNERS,
    kinds={"parquet"},
    deps=[dg.AssetDep(asset_key("source_dataset"), partition_mapping=dg.AllPartitionMapping())],
    description="The staging parts of one file group (a partition per group, named after the "
    "path-stable group number the build assigns its files to), reported by the fanned-out "
    "ingest jobs as each parse step writes them. A run's group partitions are removed when "
    "its build has published (they name a run's work, not lasting data).",
)


def partition_key(task: IngestTask) -> str:
    return f"group-{file_group(task.first_file):02d}"


@dataclass(frozen=True)
class FanoutPlan:
    """Where this run's parse steps write, and the groups each slot parses."""

    scratch: str
    slots: tuple[tuple[IngestTask, ...], ...]

    @property
    def partition_keys(self) -> list[str]:
        """The ``parsed_groups`` partitions of this run's groups."""
        return sorted({partition_key(task) for slot in self.slots for task in slot})

    @property
    def context_file(self) -> Path:
        return Path(self.scratch) / "context.pickle"

    @property
    def staging(self) -> Path:
        return Path(self.scratch) / "staging"

    def result_file(self, task: IngestTask) -> Path:
        """Where the slot that parsed ``task`` leaves its ``GroupResult``."""
        return Path(self.scratch) / "results" / f"{task.part_key}.pickle"


def deal(tasks: list[IngestTask], slots: int) -> list[list[IngestTask]]:
    """Tasks dealt to ``slots`` lists, biggest first onto the least loaded (by bytes)."""
    dealt: list[list[IngestTask]] = [[] for _ in range(slots)]
    loads = [0] * slots
    for task in sorted(tasks, key=lambda t: -t.size):
        lightest = loads.index(min(loads))
        dealt[lightest].append(task)
        loads[lightest] += task.size
    return dealt


@dg.op(description="Plan the build's file groups and deal the ones to parse to the slots.")
def plan_ingest_op(context: dg.OpExecutionContext, warehouse: WarehouseResource) -> FanoutPlan:
    settings = warehouse.settings()
    plan = plan_ingest(settings)
    scratch = Warehouse(settings.warehouse).cache / SCRATCH_FOLDER / context.run_id
    scratch.mkdir(parents=True, exist_ok=True)
    staging = scratch / "staging"
    tasks = [replace(task, staging=str(staging)) for task in plan.tasks]
    fanout = FanoutPlan(str(scratch), tuple(tuple(s) for s in deal(tasks, FANOUT_SLOTS)))

    def write_context(temporary: Path) -> None:
        with temporary.open("wb") as handle:
            pickle.dump(plan.loaded.context, handle, protocol=pickle.HIGHEST_PROTOCOL)

    replace_atomically(fanout.context_file, write_context)
    if fanout.partition_keys:
        context.instance.add_dynamic_partitions(INGEST_GROUPS.name or "", fanout.partition_keys)
        # Kept on the run, so that a failed step can remove them (release_group_partitions).
        context.instance.add_run_tags(context.run_id, {GROUPS_TAG: ",".join(fanout.partition_keys)})
    context.log.info(
        f"{len(tasks)} file groups to parse over {FANOUT_SLOTS} slots, "
        f"{len(plan.file_entries) - sum(len(t.files) + t.grown_files for t in tasks)} files reused"
    )
    return fanout


# The dataset context, read once per worker process (a Dask worker runs many steps, in
# several threads when it has them: each reads the one it needs, keeping only the last).
_CONTEXTS: dict[str, Any] = {}


def _context(plan: FanoutPlan) -> Any:
    path = str(plan.context_file)
    context = _CONTEXTS.get(path)
    if context is None:
        with plan.context_file.open("rb") as handle:
            context = pickle.load(handle)
        _CONTEXTS.clear()
        _CONTEXTS[path] = context
    return context


def _parse_slot(slot: int) -> dg.OpDefinition:
    @dg.op(
        name=f"parse_slot_{slot}",
        description=f"Parse the file groups dealt to slot {slot} into this run's scratch parts.",
        out=dg.Out(dg.Nothing),
    )
    def parse_slot(context: dg.OpExecutionContext, plan: FanoutPlan) -> None:
        for task in plan.slots[slot]:
            result = parse_task(task, _context(plan))
            _write_result(plan.result_file(task), result)
            files = result.files.values()
            context.log_event(
                dg.AssetMaterialization(
                    asset_key=asset_key(PARSED_GROUPS),
                    partition=partition_key(task),
                    metadata={
                        "files": len(task.files),
                        "bytes": task.size,
                        "records": sum(f.records for f in files),
                        "runs": sum(f.runs for f in files),
                        "parts": sum(len(names) for names in result.parts.values()),
                        "worker_pid": os.getpid(),
                    },
                )
            )

    return parse_slot


def _write_result(path: Path, result: Any) -> None:
    def write(temporary: Path) -> None:
        with temporary.open("wb") as handle:
            pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)

    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, write)


def _read_result(path: Path) -> Any | None:
    try:
        with path.open("rb") as handle:
            return pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError):
        return None


class FanoutConfig(dg.Config):
    force: bool = False  # rebuild every table even when the source is unchanged


@dg.op(
    description="Build the warehouse as `tracehouse build` does, taking the groups the slots "
    "parsed from the shared store; report the tables it published.",
    # Only an ordering: each slot's output is in the store. (A fan-in of values would come
    # through the IO manager, and dagster-dask hands a fan-in input over empty.)
    ins={"plan": dg.In(), "parsed": dg.In(dg.Nothing)},
    out={},
)
def assemble_tables(
    context: dg.OpExecutionContext,
    config: FanoutConfig,
    warehouse: WarehouseResource,
    plan: FanoutPlan,
) -> Iterator[dg.AssetMaterialization]:
    settings = warehouse.settings()
    taken: list[int] = []

    def take_parsed(
        tasks: list[IngestTask], workers: int, progress: ProgressFn | None
    ) -> list[Any]:
        results: list[Any] = [None] * len(tasks)
        missing: list[int] = []
        for index, task in enumerate(tasks):
            result = _read_result(plan.result_file(task))
            names = [n for ns in result.parts.values() for n in ns] if result else []
            if result is None or not all((plan.staging / n).exists() for n in names):
                missing.append(index)
                continue
            Path(task.staging).mkdir(parents=True, exist_ok=True)
            for name in names:
                os.replace(plan.staging / name, Path(task.staging) / name)
            results[index] = result
        taken.append(len(tasks) - len(missing))
        if missing:
            # The source changed after the plan: parse those groups here, in this process
            # (a Dask worker may not start processes of its own).
            context.log.warning(f"{len(missing)} groups changed after the plan; parsing them")
            again = run_tasks([tasks[i] for i in missing], 1, progress)
            for index, result in zip(missing, again, strict=True):
                results[index] = result
        return results

    try:
        result = build_warehouse(settings, force=config.force, parse=take_parsed)
    finally:
        shutil.rmtree(plan.scratch, ignore_errors=True)
        _remove_group_partitions(context.instance, plan.partition_keys)
    context.log.info("\n".join(result.summary_lines()))
    if result.up_to_date:
        return
    context.log.info(f"groups taken from the slots: {sum(taken)}")
    generation = Warehouse(result.warehouse).require_current()
    (source,) = [
        s
        for s in generation_sources(generation)
        if result.source and s.source == result.source.name
    ]
    context.instance.add_dynamic_partitions(SOURCES.name or "", [source.source])
    for table in schemas.TABLES:
        recorded = table_result(
            settings, generation, source, table, {"generation": generation.name}
        )
        yield dg.AssetMaterialization(
            asset_key=recorded.asset_key or asset_key(table),
            partition=source.source if table in PER_SOURCE_TABLES else None,
            metadata=recorded.metadata,
            tags={"dagster/data_version": recorded.data_version.value}
            if recorded.data_version
            else None,
        )


def _remove_group_partitions(instance: dg.DagsterInstance, keys: list[str]) -> None:
    """A run's group partitions name its work, not lasting data: they end with the run."""
    for key in keys:
        instance.delete_dynamic_partition(INGEST_GROUPS.name or "", key)


@dg.failure_hook(name="release_group_partitions")
def release_group_partitions(context: dg.HookContext) -> None:
    """A failed step ends the run's build: remove the group partitions its plan registered."""
    run = context.instance.get_run_by_id(context.run_id)
    listed = run.tags.get(GROUPS_TAG, "") if run is not None else ""
    _remove_group_partitions(context.instance, [key for key in listed.split(",") if key])


@dg.graph(description="The warehouse build with its parse fanned out over the executor's workers.")
def fanout_ingest() -> None:
    plan = plan_ingest_op()
    assemble_tables(plan=plan, parsed=[_parse_slot(slot)(plan) for slot in range(FANOUT_SLOTS)])


_RESOURCES = {"warehouse": WarehouseResource()}

# Step processes start from a fork server that has imported the parser once (spawning a fresh
# interpreter per step costs seconds of imports each).
FORKSERVER = {
    "forkserver": {
        "preload_modules": [
            "pipelines.defs.fanout",
            "tracehouse.ingest.worker",
        ]
    }
}

# One machine: the parse steps in up to `max_concurrent` processes (run config
# execution.config.max_concurrent; Dagster's default is the number of CPUs).
fanout_ingest_job = fanout_ingest.to_job(
    name="fanout_ingest_job",
    executor_def=dg.multiprocess_executor,
    resource_defs=_RESOURCES,
    hooks={release_group_partitions},
    config={"execution": {"config": {"start_method": FORKSERVER}}},
)

DASK_EXTRA_MISSING = (
    "fanout_ingest_dask_job needs the dask extra (Dask, distributed, dagster-dask), which is "
    "not installed: pip install 'tracehouse[dask]' (in a checkout: uv sync --extra dask)"
)


class DaskExtraMissing(ImportError):
    """The Dask executor was asked for without the ``dask`` extra installed."""


def _dask_executor() -> dg.ExecutorDefinition:
    """dagster-dask's executor, or, without the extra, one that refuses in one line."""
    try:
        from dagster_dask import dask_executor
    except ImportError:

        @dg.executor(name="dask", config_schema=dg.Permissive())
        def dask_extra_missing(_context: dg.InitExecutorContext) -> dg.Executor:
            raise DaskExtraMissing(DASK_EXTRA_MISSING)

        return dask_extra_missing
    return dask_executor


# A Dask cluster: run config execution.config.cluster, e.g. {"existing": {"address":
# "tcp://127.0.0.1:8786"}} or {"local": {"n_workers": 4}} (dagster-dask's executor).
fanout_ingest_dask_job = fanout_ingest.to_job(
    name="fanout_ingest_dask_job",
    executor_def=_dask_executor(),
    resource_defs=_RESOURCES,
    hooks={release_group_partitions},
)

fanout_jobs = [fanout_ingest_job, fanout_ingest_dask_job]


# Module-level functions returning the jobs, for `dagster.reconstructable` (a job made by
# `to_job` is not reconstructable itself): `execute_job(reconstructable(multiprocess_job), ...)`.
def multiprocess_job() -> dg.JobDefinition:
    return fanout_ingest_job


def dask_job() -> dg.JobDefinition:
    return fanout_ingest_dask_job
