"""A folder source's data version comes from its files, not only its revision (issue 28).

A dataset folder is often a git clone of the Hub dataset, or built with a pinned revision,
and ``flashinfer-bench run --local DATASET`` writes its traces into it while HEAD stays put.
The observation's data version is the revision combined with the fingerprint the build
compares to find its files unchanged (``build.file_fingerprints``), so an edited, added or
removed trace file makes the source and its dependents stale and the eager automation builds
it, as ``tracehouse build`` would; an unchanged folder keeps its version and stays FRESH.
"""

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.definitions.observe import observe

from pipelines.defs import assets, checks
from pipelines.defs.naming import asset_key
from pipelines.defs.resources import WarehouseResource
from tests.system.test_dagster import (
    SOURCE_ASSET,
    WIDE_TABLES,
    _no_ambient_settings,  # noqa: F401  (autouse: tests see only the settings they set)
    build_in_dagster,
    graph,
    name,
    not_fresh,
)
from tracehouse import schemas
from tracehouse.demo import generate_dataset
from tracehouse.warehouse import PER_SOURCE_TABLES

PINNED = "fedcba9876543210fedcba9876543210fedcba98"
PARTITION = "dataset"  # the folder's name: its source's default name


def git(folder: Path, *arguments: str) -> str:
    environment = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", "-C", str(folder), *arguments],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def committed_dataset(root: Path) -> str:
    """A small demo dataset committed into a fresh git repository at ``root``; its HEAD."""
    generate_dataset(
        root, seed=5, definitions=2, workloads_per_definition=2, solutions_per_definition=2
    )
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "dataset")
    return git(root, "rev-parse", "HEAD")


def edit_one_latency(root: Path) -> Path:
    """Change the first latency of the first trace file in place, keeping the file's size (so
    only its modification time tells the edit), as a benchmark rerun would; the file."""
    trace = next(iter(sorted((root / "traces").rglob("*.jsonl"))))
    lines = trace.read_text().splitlines(keepends=True)
    latency = json.loads(lines[0])["evaluation"]["performance"]["latency_ms"]
    old = f'"latency_ms":{json.dumps(latency)}'
    assert old in lines[0]
    number = old.split(":")[1]
    first = next(i for i, c in enumerate(number) if c in "123456789")
    bumped = str(int(number[first]) % 9 + 1)  # another nonzero digit: a different latency
    lines[0] = lines[0].replace(old, f'"latency_ms":{number[:first]}{bumped}{number[first + 1 :]}')
    trace.write_text("".join(lines))
    return trace


def observed_version(instance: dg.DagsterInstance, warehouse: WarehouseResource) -> str | None:
    assert observe(
        [assets.source_dataset], instance=instance, resources={"warehouse": warehouse}
    ).success
    record = instance.get_latest_data_version_record(
        asset_key(SOURCE_ASSET), partition_key=PARTITION
    )
    assert record is not None and record.asset_observation is not None
    return record.asset_observation.tags.get("dagster/data_version")


def test_a_pinned_folder_is_a_new_version_when_a_trace_file_changes(tmp_path: Path) -> None:
    """Under TRACEHOUSE_REVISION: the same version twice for an unchanged folder; a new one for
    an edited, an added and a removed trace file, each carrying the pinned revision."""
    root = tmp_path / PARTITION
    generate_dataset(
        root, seed=5, definitions=2, workloads_per_definition=2, solutions_per_definition=2
    )
    warehouse = WarehouseResource(warehouse=str(tmp_path / "w"), source=str(root), revision=PINNED)
    instance = dg.DagsterInstance.ephemeral()
    first = observed_version(instance, warehouse)
    assert first is not None and first.startswith(f"{PINNED}+files:")
    assert observed_version(instance, warehouse) == first  # unchanged: the same version

    trace = edit_one_latency(root)
    edited = observed_version(instance, warehouse)
    assert edited is not None and edited.startswith(PINNED) and edited != first
    added = trace.with_name("new_run.jsonl")
    added.write_text(trace.read_text().splitlines()[0] + "\n")
    with_new = observed_version(instance, warehouse)
    assert with_new not in {first, edited}
    added.unlink()
    assert observed_version(instance, warehouse) == edited  # the files are as they were


@pytest.mark.integration
@pytest.mark.slow
def test_an_edited_trace_in_a_git_clone_is_stale_and_rebuilt(tmp_path: Path) -> None:
    """A git clone whose HEAD does not move: observe, materialize, FRESH; edit one latency:
    the observation gives a new data version, the tables and what reads them are stale, the
    automation requests the build; after it, everything is FRESH again."""
    root = tmp_path / PARTITION
    head = committed_dataset(root)
    # No TRACEHOUSE_REVISION: the clone's HEAD is the revision (the test above pins one).
    warehouse = WarehouseResource(
        warehouse=str(tmp_path / "warehouse"), source=str(root), revision=None, workers=1
    )
    instance = dg.DagsterInstance.ephemeral()
    definitions = dg.Definitions(
        assets=graph()[:4], asset_checks=checks.asset_checks, resources={"warehouse": warehouse}
    )
    # Pinned evaluation times a minute past a quarter-hour tick of OBSERVE_CRON, a second
    # apart, so no cron tick falls between two evaluations (see test_dagster's automation test).
    now = datetime.now(UTC)
    tick = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
    clock = iter(tick + timedelta(minutes=16, seconds=n) for n in range(60))

    def requested(cursor: Any) -> tuple[dict[str, set[str | None]], Any]:
        evaluated = dg.evaluate_automation_conditions(
            defs=definitions, instance=instance, cursor=cursor, evaluation_time=next(clock)
        )
        found = {
            name(key): set(evaluated.get_requested_partitions(key))
            for key in definitions.resolve_asset_graph().get_all_asset_keys()
            if evaluated.get_num_requested(key)
        }
        return found, evaluated.cursor

    one_build = {
        **{table: {PARTITION} for table in PER_SOURCE_TABLES},
        **{table: {None} for table in WIDE_TABLES},
    }
    before, cursor = requested(None)  # eager acts on updates since the evaluation before
    assert before == {}  # not observed yet
    first = observed_version(instance, warehouse)
    assert first is not None and first.startswith(f"{head}+files:")
    asked, cursor = requested(cursor)
    assert {t: p for t, p in asked.items() if t in schemas.TABLES} == one_build
    assert build_in_dagster(instance, warehouse, PARTITION).success
    assert not_fresh(instance, [PARTITION], assets.warehouse_tables) == {}
    assert observed_version(instance, warehouse) == first  # unchanged folder: same version
    settled, cursor = requested(cursor)
    assert not set(settled) & set(schemas.TABLES)

    edit_one_latency(root)
    assert git(root, "rev-parse", "HEAD") == head  # HEAD did not move
    edited = observed_version(instance, warehouse)
    assert edited is not None and edited.startswith(f"{head}+files:") and edited != first
    # Dagster marks the source's partition of the tables stale (it computes no staleness
    # through the partitioned-to-unpartitioned edges; the automation below covers those).
    stale = not_fresh(instance, [PARTITION], assets.warehouse_tables)
    assert set(stale) == {(table, PARTITION) for table in PER_SOURCE_TABLES}
    assert all("has a new dependency data version" in causes for causes in stale.values())
    moved, cursor = requested(cursor)
    assert {t: p for t, p in moved.items() if t in schemas.TABLES} == one_build

    rebuilt = build_in_dagster(instance, warehouse, PARTITION)
    assert rebuilt.success
    assert all(
        event.materialization.metadata["rebuilt"].value is True
        for event in rebuilt.get_asset_materialization_events()
        if name(event.materialization.asset_key) in PER_SOURCE_TABLES
    )
    assert not_fresh(instance, [PARTITION], assets.warehouse_tables) == {}
    after, _ = requested(cursor)
    assert not set(after) & set(schemas.TABLES)
