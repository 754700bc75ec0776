"""The Dagster layer, in tiers (as in project-dagster-university):

1. definitions load (also through `dg check defs` / `dg list defs`, the dg project); asset
   keys match a committed snapshot; prefix, stage groups, kinds, metadata, partitions, jobs,
   automation conditions, sensors;
2. the checks called as plain functions on a real warehouse, good and deliberately corrupted;
3. ``dg.materialize`` into a temporary warehouse with a Dagster instance: what is recorded is
   what happened (checks from the build's own evaluation, data versions, a refused build
   publishes and materializes nothing), and staleness is true (an unchanged run leaves every
   asset fresh, a new importer version makes the tables stale, building source A leaves B's
   partition alone); the automation conditions evaluated by Dagster;
4. the source-partitions sensor evaluated by Dagster, and an hf:// source observed against
   the FakeHub server.

Tiers 2-4 build real warehouses and are marked ``integration``.
"""

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest
from dagster._core.definitions.data_version import StaleStatus
from dagster._core.definitions.observe import observe
from dagster._utils.test.data_versions import get_stale_status_resolver

from pipelines.definitions import defs
from pipelines.defs import assets, checks
from pipelines.defs.fanout import PARSED_GROUPS
from pipelines.defs.naming import asset_key
from pipelines.defs.resources import WarehouseResource
from pipelines.defs.schedules import build_warehouse_job, tracehouse_automation
from pipelines.defs.sensors import source_partitions_sensor
from pipelines.defs.sources import SOURCES
from tests.fixtures.hub_server import FakeHub
from tests.fixtures.shared_data import SAMPLES_DIR, requires_shared
from tracehouse import schemas
from tracehouse.assemble.invariants import RANKING_INVARIANTS, RUN_INVARIANTS
from tracehouse.build import build_warehouse, read_checks
from tracehouse.demo import generate_dataset
from tracehouse.schemas import IMPORTER_VERSION
from tracehouse.serve.record_page import RECORD_FOLDER
from tracehouse.settings import SETTINGS
from tracehouse.warehouse import (
    PER_SOURCE_TABLES,
    Warehouse,
    connect_read_only,
    read_table,
    record_generation_files,
    table_files,
)

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).parent / "__snapshots__" / "asset_keys.txt"
REVISION = "0123456789abcdef0123456789abcdef01234567"
REPO = "flashinfer-ai/flashinfer-trace"
HUB_URI = f"hf://datasets/{REPO}"
VIEWS = {"run_summary", "leaderboard", "record_events", "latency_history", "regressions"}
REPORT = "report"
SOURCE_ASSET = "source_dataset"
WIDE_TABLES = set(schemas.TABLES) - set(PER_SOURCE_TABLES)
STAGES = {"source", "tables", "views", "report"}

# (asset, check name, blocking): what the build evaluates before publishing (blocking), then
# the identity samples recomputed from the published tables.
BUILD_CHECKS = {
    ("runs", "unique_run_ids", True),
    ("runs", "run_status_matrix", True),
    ("runs", "passed_latency_finite_positive", True),
    ("runs", "runs_resolve_references", True),
    ("runs", "comparison_key_single_digests", True),
    ("run_rankings", "one_cohort_size_per_comparison_key", True),
    ("runs", "tables_shrink_within_limit", True),
    ("runs", "fact_tables_not_empty", True),
}
EXPECTED_CHECKS = BUILD_CHECKS | {
    ("environments", "environment_digests_recompute", False),
    ("definitions", "operation_digests_recompute", False),
    ("regressions", "no_new_regressions", False),
}


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see only the TRACEHOUSE_* / Hub variables they set themselves."""
    for name in list(os.environ):
        if name.startswith("TRACEHOUSE_") or name in {
            "HF_ENDPOINT",
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
        }:
            monkeypatch.delenv(name)


def name(key: dg.AssetKey) -> str:
    """The asset's name under the tracehouse/ prefix."""
    assert key.path[0] == "tracehouse" and len(key.path) == 2, key
    return key.path[-1]


def graph(tables: dg.AssetsDefinition = assets.warehouse_tables) -> list[Any]:
    """Every asset and asset check a build runs (the source observation included)."""
    return [
        assets.source_dataset,
        tables,
        assets.warehouse_views,
        assets.report,
        *checks.asset_checks,
    ]


def resource(
    warehouse: Path, source: Path | str, revision: str | None = REVISION, **more: Any
) -> WarehouseResource:
    return WarehouseResource(
        warehouse=str(warehouse), source=str(source), revision=revision, workers=2, **more
    )


# --------------------------------------------------------------------------------------------
# Tier 1: definitions


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs)
    repository = defs.get_repository_def()
    assert repository.get_job("build_warehouse_job") is not None


def _dg(*arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    environment.update(VIRTUAL_ENV=str(Path(sys.executable).parents[1]), NO_COLOR="1")
    return subprocess.run(
        [str(Path(sys.executable).with_name("dg")), *arguments],
        capture_output=True,
        text=True,
        env=environment,
        cwd=ROOT,
        timeout=300,
    )


@pytest.mark.slow
def test_dg_check_defs_accepts_the_project() -> None:
    checked = _dg("check", "defs")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "All definitions loaded successfully." in checked.stdout
    assert "Warning" not in checked.stdout + checked.stderr


@pytest.mark.slow
def test_dg_list_defs_lists_the_code_location() -> None:
    import json

    listed = _dg("list", "defs", "--json")
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)
    keys = {entry["asset_key"] for entry in found["assets"]}
    assert keys == {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {entry["group_name"] for entry in found["assets"]} == STAGES
    sensors = {entry["name"] for entry in found["sensors"]}
    assert sensors == {"tracehouse_automation", "source_partitions_sensor"}


def test_workspace_yaml_loads_the_same_location_as_the_dg_project() -> None:
    import tomllib

    import yaml

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dg"]["project"]
    (location,) = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    assert location["python_module"] == {
        "module_name": project["code_location_target_module"],
        "location_name": project["code_location_name"],
    }


def test_asset_keys_match_snapshot() -> None:
    keys = sorted(key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys())
    text = "".join(f"{key}\n" for key in keys)
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text(), (
        "asset keys changed; rerun with UPDATE_SNAPSHOTS=1 if intended"
    )
    assert {key.removeprefix("tracehouse/") for key in keys} == set(schemas.TABLES) | VIEWS | {
        REPORT,
        SOURCE_ASSET,
        PARSED_GROUPS,
    }
    assert all(key.startswith("tracehouse/") for key in keys)


def test_groups_are_the_stages_in_order() -> None:
    asset_graph = defs.resolve_asset_graph()
    group = {name(key): asset_graph.get(key).group_name for key in asset_graph.get_all_asset_keys()}
    assert group[SOURCE_ASSET] == "source"
    assert {group[table] for table in [*schemas.TABLES, PARSED_GROUPS]} == {"tables"}
    assert {group[view] for view in VIEWS} == {"views"}
    assert group[REPORT] == "report"
    # Every edge goes forwards through the stages (or stays within one).
    order = ["source", "tables", "views", "report"]
    for key in asset_graph.get_all_asset_keys():
        for parent in asset_graph.get(key).parent_keys:
            assert order.index(group[name(parent)]) <= order.index(group[name(key)]), (key, parent)


def test_asset_checks_and_which_block() -> None:
    asset_graph = defs.resolve_asset_graph()
    specs = [asset_graph.get_check_spec(key) for key in asset_graph.asset_check_keys]
    graph_checks = {(name(spec.asset_key), spec.name, spec.blocking) for spec in specs}
    assert graph_checks == EXPECTED_CHECKS
    for spec in specs:  # a check that cannot run on its own says so
        says_why = "runs with a build, not on its own" in (spec.description or "")
        assert says_why is spec.blocking, spec.name


def test_table_specs_come_from_schemas() -> None:
    specs = {name(spec.key): spec for spec in assets.warehouse_tables.specs}
    assert set(specs) == set(schemas.TABLES)
    for table_name, table in schemas.TABLES.items():
        spec = specs[table_name]
        assert spec.description == table.doc.replace("<", "`<").replace(">", ">`")
        assert spec.group_name == "tables"
        assert spec.code_version == IMPORTER_VERSION
        assert set(spec.kinds) == {"parquet", "duckdb"}
        assert spec.metadata["dagster/table_name"] == f"tracehouse.main.{table_name}"
        column_schema = spec.metadata["dagster/column_schema"]
        assert [c.name for c in column_schema.columns] == table.column_names
        assert [c.constraints.nullable for c in column_schema.columns] == [
            c.nullable for c in table.columns
        ]
        per_source = table_name in PER_SOURCE_TABLES
        assert (spec.partitions_def == SOURCES) is per_source, table_name
        deps = {name(dep.asset_key) for dep in spec.deps}
        if per_source:
            assert deps == {SOURCE_ASSET}
            assert spec.automation_condition is not None
        else:  # downstream of the per-source tables, never of the source itself
            assert deps <= set(PER_SOURCE_TABLES), table_name
    assert {name(dep.asset_key) for dep in specs["run_rankings"].deps} >= {"runs"}


def test_a_catalog_adds_the_iceberg_kind(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRACEHOUSE_CATALOG", f"sqlite:///{tmp_path}/catalog.db")
    assert assets.storage_kinds() == {"parquet", "duckdb", "iceberg"}
    monkeypatch.delenv("TRACEHOUSE_CATALOG")
    assert assets.storage_kinds() == {"parquet", "duckdb"}


def test_descriptions_render_as_markdown() -> None:
    """No <placeholder> outside code, where Dagster's Markdown would take it for a tag."""
    import re

    asset_graph = defs.resolve_asset_graph()
    texts = [asset_graph.get(key).description or "" for key in asset_graph.get_all_asset_keys()]
    texts += [
        asset_graph.get_check_spec(key).description or "" for key in asset_graph.asset_check_keys
    ]
    for text in texts:
        outside_code = re.sub(r"`[^`]*`", "", text)
        assert not re.search(r"<[\w./ -]+>", outside_code), text
    report = asset_graph.get(asset_key(REPORT)).description or ""
    assert "`report/`" in report


def test_views_wait_for_the_blocking_checks_and_document_their_columns() -> None:
    asset_graph = defs.resolve_asset_graph()
    blocking = {
        name(spec.asset_key)
        for spec in (asset_graph.get_check_spec(key) for key in asset_graph.asset_check_keys)
        if spec.blocking
    }
    assert blocking == {"runs", "run_rankings"}

    def ancestors(key: dg.AssetKey) -> set[str]:
        found: set[str] = set()
        for parent in asset_graph.get(key).parent_keys:
            found |= {name(parent), *ancestors(parent)}
        return found

    # Every view reads tables of the one build step, which fails (so nothing downstream runs)
    # when any blocking check fails: test_a_refused_build_publishes_and_materializes_nothing.
    assert blocking <= {name(key) for key in assets.warehouse_tables.keys}
    built_by_the_step = {name(key) for key in assets.warehouse_tables.keys}
    for view in VIEWS:
        upstream = ancestors(asset_key(view))
        assert upstream & built_by_the_step, (view, upstream)
        assert all(column.doc for column in schemas.VIEWS[view].columns)
        node = asset_graph.get(asset_key(view))
        assert node.group_name == "views" and node.code_version == assets.views_code_version()


def test_automation_is_declared_on_the_assets() -> None:
    asset_graph = defs.resolve_asset_graph()
    conditions = {
        name(key): asset_graph.get(key).automation_condition
        for key in asset_graph.get_all_asset_keys()
    }
    source = conditions[SOURCE_ASSET]
    assert source is not None and assets.OBSERVE_CRON in str(source.get_label() or source)
    for asset in [*PER_SOURCE_TABLES, *VIEWS, REPORT]:
        condition = conditions[asset]
        assert condition is not None and condition.get_label() == "eager", asset
    for mart in assets.MARTS:
        assert asset_graph.get(asset_key(mart)).freshness_policy == assets.MART_FRESHNESS


def test_the_automation_sensor_and_the_docs_page_that_starts_it() -> None:
    assert tracehouse_automation.default_status == dg.DefaultSensorStatus.STOPPED
    # It launches no runs itself: it only keeps a partition per source.
    assert source_partitions_sensor.default_status == dg.DefaultSensorStatus.RUNNING
    readme = (ROOT / "docs" / "dagster.md").read_text()
    assert "dagster sensor start tracehouse_automation -w workspace.yaml" in readme
    assert "Dagster has no primitive" in (
        sys.modules[source_partitions_sensor.__module__].__doc__ or ""
    )


def test_the_resource_declares_no_setting_of_its_own() -> None:
    fields = WarehouseResource.model_fields
    assert set(fields) == {spec.name for spec in SETTINGS}
    for spec in SETTINGS:
        assert spec.metadata["doc"] in (fields[spec.name].description or ""), spec.name


def test_resource_reads_tracehouse_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TRACEHOUSE_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.setenv("TRACEHOUSE_SOURCE", HUB_URI)
    monkeypatch.setenv("TRACEHOUSE_REVISION", REVISION)
    monkeypatch.setenv("TRACEHOUSE_WORKERS", "3")
    settings = WarehouseResource().settings()
    assert (settings.warehouse, settings.source, settings.revision, settings.workers) == (
        tmp_path / "wh",
        HUB_URI,
        REVISION,
        3,
    )
    # A field set on the resource (code or run config) wins over the environment, like a flag.
    assert WarehouseResource(source="data/other").settings().source == "data/other"


@pytest.mark.slow
def test_the_asset_graph_does_not_depend_on_the_environment(tmp_path: Path) -> None:
    """Sources are dynamic partitions: the code location reads no source at import."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    script = (
        "from pipelines.definitions import defs; g = defs.resolve_asset_graph(); "
        "print(sorted((k.to_user_string(), repr(g.get(k).partitions_def)) "
        "for k in g.get_all_asset_keys()))"
    )

    def graph_in(**extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env={**environment, **extra},
            cwd=ROOT,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert graph_in() == graph_in(TRACEHOUSE_SOURCES=f"a={tmp_path};b={tmp_path}")


def test_job_targets_the_whole_graph() -> None:
    job = defs.resolve_job_def("build_warehouse_job")
    asset_graph = defs.resolve_asset_graph()
    # Everything but the partitions the fanned-out ingest jobs report (nothing runs them).
    assert job.asset_layer.executable_asset_keys == asset_graph.get_all_asset_keys() - {
        asset_key(PARSED_GROUPS)
    }
    assert job.asset_layer.asset_graph.asset_check_keys == asset_graph.asset_check_keys
    assert build_warehouse_job.name == "build_warehouse_job"


# --------------------------------------------------------------------------------------------
# Tier 2: the checks as plain functions


@pytest.fixture(scope="session")
def demo_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo") / "dataset"
    generate_dataset(root, seed=7)
    return root


def _built(source: Path, warehouse: Path, revision: str) -> Path:
    build_warehouse(resource(warehouse, source, revision).settings())
    return warehouse


@pytest.fixture(scope="session")
def demo_warehouse(demo_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built(demo_source, tmp_path_factory.mktemp("demo_wh") / "warehouse", REVISION)


# golden_warehouse is the session's one (tests/conftest.py): the same build, made once.


# The checks that read the tables (the publish guards compare table counts instead).
TABLE_CHECKS = [
    *(c for c in checks.BUILD_CHECKS if c.evaluate in (*RUN_INVARIANTS, *RANKING_INVARIANTS)),
    *checks.STEP_CHECKS,
]


def evaluate_all(warehouse: Path) -> dict[str, tuple[bool, dict[str, Any]]]:
    connection = connect_read_only(Warehouse(warehouse))
    try:
        return {c.name: c.evaluate(connection) for c in TABLE_CHECKS}
    finally:
        connection.close()


@pytest.mark.integration
@pytest.mark.parametrize("which", ["demo_warehouse", "golden_warehouse"])
def test_every_check_passes_on_a_real_warehouse(which: str, request: pytest.FixtureRequest) -> None:
    outcomes = evaluate_all(request.getfixturevalue(which))
    assert {name: ok for name, (ok, _) in outcomes.items()} == dict.fromkeys(outcomes, True), (
        outcomes
    )
    assert outcomes["operation_digests_recompute"][1]["definitions_recomputed"] > 0
    assert outcomes["environment_digests_recompute"][1]["environments_recomputed"] > 0
    assert outcomes["comparison_key_single_digests"][1]["comparison_keys"] > 0


def rewrite_table(warehouse: Path, table: str, select: str) -> None:
    """Replace one Parquet file of the current generation with ``select`` over its old rows
    (exposed as the view ``old``), keeping the column schema."""
    generation = Warehouse(warehouse).require_current()
    path = Warehouse(warehouse).table_path(table)
    files = table_files(path.parent, table)
    temporary = path.with_name(f".{table}.corrupt.parquet")
    connection = duckdb.connect()
    try:
        connection.read_parquet([str(f) for f in files]).create_view("old")
        connection.sql(select).write_parquet(str(temporary))
    finally:
        connection.close()
    if path.is_dir():  # a table stored per source: one corrupted file replaces the source's
        for part in files:
            part.unlink()
        path = files[0].parent / "corrupted.parquet"
    os.replace(temporary, path)
    # a corruption of content, not of files: the generation's file list says what is there now,
    # so the damage check lets the reads through and the asset checks have to catch it
    record_generation_files(generation)


CORRUPTIONS = {
    # A second copy of the first run: its run_id is no longer unique.
    "unique_run_ids": (
        "runs",
        "SELECT * FROM old UNION ALL (SELECT * FROM old ORDER BY run_id LIMIT 1)",
    ),
    # A PASSED run with a negative latency.
    "passed_latency_finite_positive": (
        "runs",
        "SELECT * REPLACE (CASE WHEN run_id = (SELECT min(run_id) FROM old WHERE status = 'PASSED') "
        "THEN -latency_ms ELSE latency_ms END AS latency_ms) FROM old",
    ),
    # An environment whose hardware string no longer matches its stored digests.
    "environment_digests_recompute": (
        "environments",
        "SELECT * REPLACE (hardware_raw || ' (edited)' AS hardware_raw) FROM old",
    ),
}


@pytest.fixture
def demo_copy(demo_warehouse: Path, tmp_path: Path) -> Path:
    """A copy of the demo warehouse to corrupt. A copy reads its own files: ``current`` is a
    relative link and read connections make their views over the folder they open (a rebuild
    per corruption cost a demo build each)."""
    copy = tmp_path / "warehouse"
    shutil.copytree(demo_warehouse, copy, symlinks=True)
    return copy


@pytest.mark.integration
@pytest.mark.parametrize("failing", sorted(CORRUPTIONS))
def test_a_corrupted_warehouse_fails_its_check(failing: str, demo_copy: Path) -> None:
    table, select = CORRUPTIONS[failing]
    rewrite_table(demo_copy, table, select)
    outcomes = evaluate_all(demo_copy)
    assert {name for name, (ok, _) in outcomes.items() if not ok} == {failing}
    metadata = outcomes[failing][1]
    if failing == "unique_run_ids":
        assert metadata["duplicated_run_ids"] == 1
        assert metadata["rows_involved"] == 2
        first = read_table(Warehouse(demo_copy).require_current(), "runs").column("run_id")
        assert metadata["sample_run_ids"] == [min(first.to_pylist())]


# --------------------------------------------------------------------------------------------
# Tier 3: the whole graph with dg.materialize and a Dagster instance


def _materialized(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    """Metadata of each materialized asset, by asset name."""
    return {
        name(event.materialization.asset_key): event.materialization.metadata
        for event in result.get_asset_materialization_events()
    }


def _data_versions(result: dg.ExecuteInProcessResult) -> dict[str, str | None]:
    return {
        name(e.materialization.asset_key): e.materialization.tags.get("dagster/data_version")
        for e in result.get_asset_materialization_events()
    }


def build_in_dagster(
    instance: dg.DagsterInstance,
    warehouse: WarehouseResource,
    partition: str,
    tables: dg.AssetsDefinition = assets.warehouse_tables,
    **options: Any,
) -> dg.ExecuteInProcessResult:
    """What a run of build_warehouse_job does: observe the sources, then build one."""
    observed = observe(
        [assets.source_dataset], instance=instance, resources={"warehouse": warehouse}
    )
    assert observed.success
    return dg.materialize(
        graph(tables),
        instance=instance,
        resources={"warehouse": warehouse},
        partition_key=partition,
        selection=dg.AssetSelection.all(),
        **options,
    )


def not_fresh(
    instance: dg.DagsterInstance, partitions: list[str], tables: dg.AssetsDefinition
) -> dict[tuple[str, str | None], list[str]]:
    """Every asset (and partition) Dagster does not consider fresh, with why."""
    selected = graph(tables)
    resolver = get_stale_status_resolver(instance, selected[:4])
    found: dict[tuple[str, str | None], list[str]] = {}
    for key in dg.AssetSelection.all().resolve(selected[:4]):
        for partition in partitions if name(key) in PER_SOURCE_TABLES else [None]:
            if resolver.get_status(key, partition) != StaleStatus.FRESH:
                causes = resolver.get_stale_causes(key, partition)
                found[(name(key), partition)] = [cause.reason for cause in causes]
    return found


@pytest.mark.integration
def test_materialize_everything_into_a_temporary_warehouse(
    demo_source: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    instance = dg.DagsterInstance.ephemeral()
    result = build_in_dagster(instance, resource(warehouse, demo_source), "dataset")
    assert result.success
    assert instance.get_dynamic_partitions(SOURCES.name or "") == ["dataset"]
    evaluations = result.get_asset_check_evaluations()
    assert {(name(e.asset_key), e.check_name, e.blocking) for e in evaluations} == EXPECTED_CHECKS
    assert all(e.passed for e in evaluations)

    materialized = _materialized(result)
    assert set(materialized) == set(schemas.TABLES) | VIEWS | {REPORT}
    partitions = {
        name(e.materialization.asset_key): e.materialization.partition
        for e in result.get_asset_materialization_events()
    }
    assert {table for table, p in partitions.items() if p == "dataset"} == set(PER_SOURCE_TABLES)
    report_index = Path(str(materialized[REPORT]["path"].value))
    assert report_index == warehouse / "report" / "index.html" and report_index.is_file()
    record_pages = list(report_index.parent.glob(f"pages-*/{RECORD_FOLDER}/*.html"))
    assert record_pages  # the runs the report's tables name
    assert (
        materialized[REPORT]["pages"].value
        # the overview, a page per definition, the what-changed page of the one source, and
        # a record page per run a table names
        == 1 + materialized["definitions"]["dagster/row_count"].value + 1 + len(record_pages)
    )
    overview = str(materialized[REPORT]["overview_top_rows"].value)
    assert overview.startswith("| definition | hardware | solution |") and overview.count("\n") >= 3
    generation = Warehouse(warehouse).require_current()
    for table in schemas.TABLES:
        uri = str(materialized[table]["dagster/uri"].value)
        assert uri.startswith(generation.as_uri() + f"/{table}.parquet"), uri
    connection = connect_read_only(Warehouse(warehouse))
    try:
        for table in [*schemas.TABLES, *VIEWS]:
            ((count,),) = connection.table(table).aggregate("count(*)").fetchall()
            assert materialized[table]["dagster/row_count"].value == count, table
        for view in VIEWS:  # the documented columns are the view's, typed as the tables are
            arrow = connection.table(view).limit(0).to_arrow_table().schema
            columns = materialized[view]["dagster/column_schema"].value.columns
            assert [(c.name, c.type) for c in columns] == [(f.name, str(f.type)) for f in arrow]
            assert [c.name for c in columns] == [c.name for c in schemas.VIEWS[view].columns]
            assert all(c.description for c in columns), view
        ((sha,),) = connection.execute("SELECT resolved_sha FROM source_snapshots").fetchall()
    finally:
        connection.close()
    assert materialized["runs"]["dagster/row_count"].value > 1000
    assert sha == REVISION
    types = {c.type for c in materialized["run_summary"]["dagster/column_schema"].value.columns}
    assert "VARCHAR" not in types and "string" in types  # one vocabulary: Arrow's
    preview = materialized["leaderboard"]["top_10_by_geomean_speedup"].value
    assert preview.startswith("| definition | hardware | solution |")
    assert preview.count("\n") >= 3
    # The check results are what the build evaluated before publishing, stored with it.
    stored = read_checks(generation)
    for evaluation in evaluations:
        if (name(evaluation.asset_key), evaluation.check_name, True) in BUILD_CHECKS:
            assert stored[evaluation.check_name][0] is evaluation.passed
    assert not_fresh(instance, ["dataset"], assets.warehouse_tables) == {}

    # A second run finds the source unchanged: nothing is built or published, the tables are
    # recorded again with the data versions they had, and nothing is stale afterwards.
    again = build_in_dagster(instance, resource(warehouse, demo_source), "dataset")
    assert again.success
    assert _data_versions(again) == _data_versions(result)
    assert all(
        materialized["rebuilt"].value is False
        for table, materialized in _materialized(again).items()
        if table in schemas.TABLES
    )
    reported = {e.check_name: e for e in again.get_asset_check_evaluations()}
    assert all(e.passed for e in reported.values())
    assert {reported[check].metadata["generation"].value for _, check, _ in BUILD_CHECKS} == {
        generation.name
    }
    assert Warehouse(warehouse).require_current() == generation
    assert not_fresh(instance, ["dataset"], assets.warehouse_tables) == {}

    # A new importer version: Dagster marks every table stale (its code version changed).
    next_importer = assets.make_warehouse_tables("tracehouse-importer/next")
    stale = not_fresh(instance, ["dataset"], next_importer)
    assert {table for table, _ in stale} == set(schemas.TABLES)
    assert all("has a new code version" in causes for causes in stale.values())


@pytest.mark.integration
def test_building_one_source_leaves_the_other_partition_recorded(tmp_path: Path) -> None:
    """Two sources, two partitions: building A records A's partition and the warehouse-wide
    tables; B's partition keeps its materialization, and is the only one a change of B's
    folder makes stale."""
    for folder, seed in (("a", 3), ("b", 4)):
        generate_dataset(
            tmp_path / folder,
            seed=seed,
            definitions=2,
            workloads_per_definition=2,
            solutions_per_definition=2,
        )
    warehouse = WarehouseResource(
        warehouse=str(tmp_path / "warehouse"),
        sources=f"a={tmp_path / 'a'};b={tmp_path / 'b'}",
        workers=1,  # no revision: a folder's data version is then a digest of its files
    )
    instance = dg.DagsterInstance.ephemeral()
    first_b = build_in_dagster(instance, warehouse, "b")
    built_a = build_in_dagster(instance, warehouse, "a")
    assert first_b.success and built_a.success
    assert sorted(instance.get_dynamic_partitions(SOURCES.name or "")) == ["a", "b"]
    partitions = {
        (name(e.materialization.asset_key), e.materialization.partition)
        for e in built_a.get_asset_materialization_events()
    }
    assert {p for table, p in partitions if table in PER_SOURCE_TABLES} == {"a"}
    assert {p for table, p in partitions if table in WIDE_TABLES} == {None}
    runs = asset_key("runs")
    b_record = instance.get_latest_materialization_event(runs)  # newest: a's
    assert b_record is not None and b_record.asset_materialization is not None
    assert b_record.asset_materialization.partition == "a"
    by_partition = instance.get_materialized_partitions(runs)
    assert by_partition == {"a", "b"}
    # Rankings span both sources: the warehouse-wide tables' version names both snapshots.
    generation = Warehouse(tmp_path / "warehouse").require_current()
    wide_versions = {
        version for table, version in _data_versions(built_a).items() if table in WIDE_TABLES
    }
    assert wide_versions == {assets.warehouse_version(generation)}
    assert not_fresh(instance, ["a", "b"], assets.warehouse_tables) == {}

    # B's folder changes: only B's partitions are stale, for the new source version.
    trace = next((tmp_path / "b" / "traces").rglob("*.jsonl"))
    trace.write_text(trace.read_text() + "\n")
    observe([assets.source_dataset], instance=instance, resources={"warehouse": warehouse})
    stale = not_fresh(instance, ["a", "b"], assets.warehouse_tables)
    assert {partition for _, partition in stale} == {"b"}
    assert {table for table, _ in stale} == set(PER_SOURCE_TABLES)


@pytest.mark.integration
def test_a_view_asset_recreates_its_view_in_the_published_file(
    demo_source: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    instance = dg.DagsterInstance.ephemeral()
    assert build_in_dagster(instance, resource(warehouse, demo_source), "dataset").success
    published = Warehouse(warehouse).require_current() / "tracehouse.duckdb"
    assert stat.S_IMODE(published.stat().st_mode) == 0o444  # read-only to clients
    published.chmod(0o644)  # damage it, as its owner could on purpose
    connection = duckdb.connect(str(published))
    try:
        connection.execute("DROP VIEW regressions")
        connection.execute("DROP VIEW leaderboard")
    finally:
        connection.close()
    # A query under way meanwhile, in a process of its own (as `tracehouse query` would be).
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=True); "
            "print('open', flush=True); sys.stdin.readline(); "
            "print(c.execute('SELECT count(*) FROM runs').fetchone()[0], flush=True)",
            str(published),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout is not None and reader.stdin is not None
    assert reader.stdout.readline() == "open\n"
    alone = dg.materialize(
        graph(),
        instance=instance,
        resources={"warehouse": resource(warehouse, demo_source)},
        # As the UI's "Materialize" on leaderboard selects: the views are recreated together.
        selection=dg.AssetSelection.assets(
            asset_key("leaderboard")
        ).required_multi_asset_neighbors(),
    )
    assert alone.success
    assert stat.S_IMODE(published.stat().st_mode) == 0o444  # the new file is sealed again
    # The reader neither blocked the recreation nor lost its file (it sees the old views).
    reader.stdin.write("go\n")
    reader.stdin.close()
    assert int(reader.stdout.readline()) > 0
    assert reader.wait(timeout=120) == 0
    assert {"leaderboard", "regressions"} <= set(_materialized(alone))
    connection = connect_read_only(Warehouse(warehouse))
    try:
        ((rows,),) = connection.execute("SELECT count(*) FROM leaderboard").fetchall()
        connection.execute("SELECT count(*) FROM regressions").fetchall()
    finally:
        connection.close()
    assert rows == _materialized(alone)["leaderboard"]["dagster/row_count"].value > 0

    # The identity checks are steps of their own: executed alone, as the UI's "Execute" does.
    step_checks = {
        dg.AssetCheckKey(asset_key(check.asset), check.name) for check in checks.STEP_CHECKS
    }
    executed = dg.materialize(
        graph(),
        instance=instance,
        resources={"warehouse": resource(warehouse, demo_source)},
        selection=dg.AssetSelection.checks(*step_checks),
    )
    assert executed.success and _materialized(executed) == {}
    evaluations = executed.get_asset_check_evaluations()
    assert {e.asset_check_key for e in evaluations} == step_checks
    assert all(e.passed for e in evaluations)


@pytest.mark.integration
def test_dagster_automation_builds_what_changed(demo_source: Path, tmp_path: Path) -> None:
    """The automation conditions, evaluated by Dagster: nothing before the source is observed;
    then the new source's partition (and with it every table); nothing once it is built; its
    partition again once its folder changes and the cron observation saw it.

    Every evaluation has its time pinned: the first ones a minute after a quarter-hour tick of
    OBSERVE_CRON, the last ones past the next tick. At the true time, a run that crossed a quarter
    hour saw the cron fire between two evaluations, and failed (issue 25)."""
    from datetime import UTC, datetime, timedelta

    source = tmp_path / "dataset"
    shutil.copytree(demo_source, source)
    # No revision: a folder's data version is then a digest of its files.
    warehouse = resource(tmp_path / "warehouse", source, revision=None)
    instance = dg.DagsterInstance.ephemeral()
    definitions = dg.Definitions(
        assets=graph()[:4], asset_checks=checks.asset_checks, resources={"warehouse": warehouse}
    )
    register = source_partitions_sensor(
        dg.build_sensor_context(instance=instance, resources={"warehouse": warehouse})
    )
    assert isinstance(register, dg.SensorResult)
    for request in register.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(
            request.partitions_def_name, list(request.partition_keys or [])
        )

    # A minute after the next tick (so after every event this test records), then a second
    # per evaluation: all before the tick after it, 15 minutes on.
    now = datetime.now(UTC)
    tick = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
    start = tick + timedelta(minutes=16)
    clock = iter(start + timedelta(seconds=n) for n in range(60))

    def requested(
        cursor: Any, at: datetime | None = None
    ) -> tuple[dict[str, set[str | None]], Any]:
        evaluated = dg.evaluate_automation_conditions(
            defs=definitions, instance=instance, cursor=cursor, evaluation_time=at or next(clock)
        )
        found = {
            name(key): set(evaluated.get_requested_partitions(key))
            for key in definitions.resolve_asset_graph().get_all_asset_keys()
            if evaluated.get_num_requested(key)
        }
        return found, evaluated.cursor

    before, cursor = requested(None)
    assert before == {}  # the source is not observed yet
    observe([assets.source_dataset], instance=instance, resources={"warehouse": warehouse})
    first, cursor = requested(cursor)
    # The source's partition, and the warehouse-wide tables its build writes in the same step.
    one_build = {
        **{table: {"dataset"} for table in PER_SOURCE_TABLES},
        **{table: {None} for table in WIDE_TABLES},
    }
    assert first == one_build
    assert build_in_dagster(instance, warehouse, "dataset").success
    settled, cursor = requested(cursor)
    assert SOURCE_ASSET not in settled and not set(settled) & set(schemas.TABLES)

    trace = next((source / "traces").rglob("*.jsonl"))
    trace.write_text(trace.read_text() + "\n")
    later = start + timedelta(minutes=15)  # past the next cron tick
    ticked, cursor = requested(cursor, later)
    assert ticked.get(SOURCE_ASSET) == {"dataset"}  # observe on the cron
    observe([assets.source_dataset], instance=instance, resources={"warehouse": warehouse})
    moved, _ = requested(cursor, later + timedelta(seconds=1))
    assert {table: p for table, p in moved.items() if table in schemas.TABLES} == one_build


@pytest.mark.integration
def test_a_refused_build_publishes_and_materializes_nothing(
    demo_source: Path, tmp_path: Path
) -> None:
    """A source that would empty the warehouse (its trace files gone): the blocking checks fail
    as the build evaluated them, no asset is materialized, the views do not run, the published
    generation stays. (Another folder would be another source, beside this one.)"""
    wrong = tmp_path / "dataset"
    shutil.copytree(demo_source, wrong)
    demo_copy = _built(wrong, tmp_path / "warehouse", REVISION)
    before = Warehouse(demo_copy).require_current()
    shutil.rmtree(wrong / "traces")
    (wrong / "traces").mkdir()
    instance = dg.DagsterInstance.ephemeral()
    result = build_in_dagster(instance, resource(demo_copy, wrong), "dataset", raise_on_error=False)
    assert not result.success
    assert _materialized(result) == {}
    failed = {e.check_name for e in result.get_asset_check_evaluations() if not e.passed}
    assert failed == {"tables_shrink_within_limit", "fact_tables_not_empty"}
    passed = {e.check_name for e in result.get_asset_check_evaluations() if e.passed}
    assert "unique_run_ids" in passed  # evaluated on the refused generation, and true
    assert Warehouse(demo_copy).require_current() == before
    assert [p.name for p in Warehouse(demo_copy).completed_generations()] == [before.name]


@pytest.mark.integration
def test_an_empty_first_build_is_not_published_from_dagster(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    (empty / "traces").mkdir(parents=True)
    (empty / "definitions").mkdir()
    warehouse = tmp_path / "warehouse"
    instance = dg.DagsterInstance.ephemeral()
    result = build_in_dagster(instance, resource(warehouse, empty), "empty", raise_on_error=False)
    assert not result.success
    failed = {e.check_name for e in result.get_asset_check_evaluations() if not e.passed}
    assert failed == {"fact_tables_not_empty"}
    assert _materialized(result) == {}
    assert Warehouse(warehouse).current_generation() is None


# --------------------------------------------------------------------------------------------
# Tier 4: the source-partitions sensor, and an hf:// source observed against FakeHub


def test_the_sensor_adds_a_partition_per_new_source(tmp_path: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    folders = {"a": tmp_path / "a", "b": tmp_path / "b"}
    configured = WarehouseResource(
        warehouse=str(tmp_path / "w"), sources=";".join(f"{k}={v}" for k, v in folders.items())
    )
    context = dg.build_sensor_context(instance=instance, resources={"warehouse": configured})
    result = source_partitions_sensor(context)
    assert isinstance(result, dg.SensorResult)
    (request,) = result.dynamic_partitions_requests or []
    assert isinstance(request, dg.AddDynamicPartitionsRequest)
    assert (request.partitions_def_name, list(request.partition_keys)) == (SOURCES.name, ["a", "b"])
    assert not result.run_requests  # the automation conditions launch the builds
    instance.add_dynamic_partitions(SOURCES.name or "", ["a", "b"])
    again = source_partitions_sensor(
        dg.build_sensor_context(instance=instance, resources={"warehouse": configured})
    )
    assert isinstance(again, dg.SkipReason)


@pytest.fixture
def fake_hub(demo_source: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    with FakeHub(repo_id=REPO) as hub:
        hub.commit(FakeHub.read_folder(demo_source))
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        yield hub


def test_an_hf_source_is_observed_at_its_commit(fake_hub: FakeHub, tmp_path: Path) -> None:
    """The observation's data version of a Hub source is the commit its revision resolves to;
    a new upstream commit is a new data version (what the automation builds on)."""
    instance = dg.DagsterInstance.ephemeral()
    warehouse = WarehouseResource(source=HUB_URI, warehouse=str(tmp_path / "w"))

    def observed_version() -> str | None:
        observe([assets.source_dataset], instance=instance, resources={"warehouse": warehouse})
        record = instance.get_latest_data_version_record(
            asset_key(SOURCE_ASSET), partition_key=REPO
        )
        assert record is not None and record.asset_observation is not None
        return record.asset_observation.tags.get("dagster/data_version")

    assert instance.get_dynamic_partitions(SOURCES.name or "") == []
    assert observed_version() == fake_hub.head()
    assert instance.get_dynamic_partitions(SOURCES.name or "") == [REPO]
    first = fake_hub.head()
    some_trace = next(path for path in fake_hub.files_at(first) if path.startswith("traces/"))
    second = fake_hub.commit({some_trace: fake_hub.files_at(first)[some_trace] + b"\n"})
    assert observed_version() == second != first


@pytest.mark.slow
@requires_shared
def test_environment_check_recomputes_ids_of_environments_with_extra_keys(tmp_path: Path) -> None:
    """The Intel fork's traces carry environment.hardware_id, which enters environment_id."""
    from pipelines.defs.checks import environment_digests_recompute
    from tests.conftest import build
    from tracehouse.warehouse import Warehouse, connect_read_only

    build(SAMPLES_DIR / "intel_sycl_fork_2026-09", tmp_path / "w")
    connection = connect_read_only(Warehouse(tmp_path / "w"))
    try:
        passed, metadata = environment_digests_recompute(connection)
    finally:
        connection.close()
    assert passed and metadata["environments_recomputed"] == 1, metadata


def test_a_failed_fanout_run_removes_its_group_partitions() -> None:
    """The fan-out's failure hook: the group partitions a run registered (kept in its run tag)
    go when one of its steps fails, as they go when its build ends."""
    from pipelines.defs import fanout

    groups = fanout.INGEST_GROUPS.name or ""

    @dg.op(out=dg.Out(dg.Nothing))
    def plan(context: dg.OpExecutionContext) -> None:
        context.instance.add_dynamic_partitions(groups, ["group-01", "group-02"])
        context.instance.add_run_tags(context.run_id, {fanout.GROUPS_TAG: "group-01,group-02"})

    @dg.op(ins={"planned": dg.In(dg.Nothing)})
    def parse(context: dg.OpExecutionContext) -> None:
        assert context.instance.get_dynamic_partitions(groups) == ["group-01", "group-02"]
        raise RuntimeError("a parse step fails")

    @dg.job(hooks={fanout.release_group_partitions})
    def failing() -> None:
        parse(planned=plan())

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(groups, ["group-99"])  # another run's
    result = failing.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    assert instance.get_dynamic_partitions(groups) == ["group-99"]
