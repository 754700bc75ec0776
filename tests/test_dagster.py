"""The Dagster layer, in tiers (as in project-dagster-university):

1. definitions load; asset keys match a committed snapshot; specs, resource, job, schedule;
2. the checks called as plain functions on a real warehouse, good and deliberately corrupted;
3. ``dg.materialize`` of the whole graph (assets + checks) into a temporary warehouse: what is
   recorded is what happened (checks from the build's own evaluation, nothing materialized when
   nothing changed, data versions, a refused build publishes and materializes nothing);
4. the Hub sensor evaluated by Dagster against the FakeHub server, and the run it requests.

Tiers 2-4 build real warehouses and are marked ``integration``.
"""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from pipelines import schemas
from pipelines.build import build_warehouse, read_checks
from pipelines.definitions import defs
from pipelines.defs import assets, checks
from pipelines.defs.fanout import PARSED_GROUPS
from pipelines.defs.resources import WarehouseResource
from pipelines.defs.schedules import build_warehouse_job, daily_warehouse_build
from pipelines.defs.sensors import hub_revision_sensor
from pipelines.demo import generate_dataset
from pipelines.invariants import RANKING_INVARIANTS, RUN_INVARIANTS
from pipelines.settings import SETTINGS
from pipelines.warehouse import Warehouse, connect_read_only, read_table, table_files
from tests.hub_server import FakeHub
from tests.shared_data import GOLDEN_DIR, SAMPLES_DIR, SHARED, requires_shared

SNAPSHOT = Path(__file__).parent / "__snapshots__" / "asset_keys.txt"
REVISION = "0123456789abcdef0123456789abcdef01234567"
GOLDEN_REVISION = "da915083d4c7c5e61aa3005e3d17ae488e0fc71c"
REPO = "flashinfer-ai/flashinfer-trace"
HUB_URI = f"hf://datasets/{REPO}"
VIEWS = {"run_summary", "leaderboard", "record_events", "latency_history", "regressions"}
REPORT = "report"
SOURCE_ASSET = "source_dataset"

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


def graph() -> list[Any]:
    """Every asset and asset check of the code location."""
    return [*dg.load_assets_from_modules([assets]), *checks.asset_checks]


def resource(
    warehouse: Path, source: Path | str, revision: str | None = REVISION
) -> WarehouseResource:
    return WarehouseResource(
        warehouse=str(warehouse), source=str(source), revision=revision, workers=2
    )


# --------------------------------------------------------------------------------------------
# Tier 1: definitions


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs)
    repository = defs.get_repository_def()
    assert repository.get_job("build_warehouse_job") is not None


def test_asset_keys_match_snapshot() -> None:
    keys = sorted(key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys())
    text = "".join(f"{key}\n" for key in keys)
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text(), (
        "asset keys changed; rerun with UPDATE_SNAPSHOTS=1 if intended"
    )
    assert set(keys) == set(schemas.TABLES) | VIEWS | {REPORT, SOURCE_ASSET, PARSED_GROUPS}


def test_asset_checks_and_which_block() -> None:
    asset_graph = defs.resolve_asset_graph()
    specs = [asset_graph.get_check_spec(key) for key in asset_graph.asset_check_keys]
    graph_checks = {(spec.asset_key.to_user_string(), spec.name, spec.blocking) for spec in specs}
    assert graph_checks == EXPECTED_CHECKS


def test_table_specs_come_from_schemas() -> None:
    specs = {spec.key.to_user_string(): spec for spec in assets.warehouse_tables.specs}
    assert set(specs) == set(schemas.TABLES)
    for name, table in schemas.TABLES.items():
        spec = specs[name]
        assert spec.description == table.doc
        assert spec.group_name == "warehouse"
        column_schema = spec.metadata["dagster/column_schema"]
        assert [c.name for c in column_schema.columns] == table.column_names
        assert [c.constraints.nullable for c in column_schema.columns] == [
            c.nullable for c in table.columns
        ]
    assert {dep.asset_key.to_user_string() for dep in specs["run_rankings"].deps} == {"runs"}
    for name in schemas.TABLES:
        if name != "run_rankings":
            assert [d.asset_key.to_user_string() for d in specs[name].deps] == [SOURCE_ASSET]


def test_views_wait_for_the_blocking_checks_and_document_their_columns() -> None:
    asset_graph = defs.resolve_asset_graph()
    blocking = {
        spec.asset_key.to_user_string()
        for spec in (asset_graph.get_check_spec(key) for key in asset_graph.asset_check_keys)
        if spec.blocking
    }
    assert blocking == {"runs", "run_rankings"}

    def ancestors(key: dg.AssetKey) -> set[str]:
        found: set[str] = set()
        for parent in asset_graph.get(key).parent_keys:
            found |= {parent.to_user_string(), *ancestors(parent)}
        return found

    for view in VIEWS:
        upstream = ancestors(dg.AssetKey(view))
        assert blocking <= upstream, (view, upstream)
        assert all(column.doc for column in schemas.VIEWS[view].columns)


def test_schedule_and_sensor_start_stopped_and_the_docs_say_how_to_start_them() -> None:
    assert daily_warehouse_build.default_status == dg.DefaultScheduleStatus.STOPPED
    assert hub_revision_sensor.default_status == dg.DefaultSensorStatus.STOPPED
    readme = (Path(__file__).resolve().parents[1] / "docs" / "dagster.md").read_text()
    assert "dagster schedule start daily_warehouse_build" in readme
    assert "dagster sensor start hub_revision_sensor" in readme


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


def test_job_schedule_and_sensor_target_the_whole_graph() -> None:
    job = defs.resolve_job_def("build_warehouse_job")
    asset_graph = defs.resolve_asset_graph()
    # Everything but the partitions the fanned-out ingest jobs report (nothing runs them).
    assert job.asset_layer.executable_asset_keys == asset_graph.get_all_asset_keys() - {
        dg.AssetKey(PARSED_GROUPS)
    }
    assert job.asset_layer.asset_graph.asset_check_keys == asset_graph.asset_check_keys
    assert daily_warehouse_build.cron_schedule == "0 3 * * *"
    assert daily_warehouse_build.execution_timezone == "UTC"
    assert daily_warehouse_build.job_name == build_warehouse_job.name
    assert hub_revision_sensor.job_name == build_warehouse_job.name


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


@pytest.fixture(scope="session")
def golden_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if SHARED is None:
        pytest.skip("../shared not found beside the checkout")
    return _built(
        GOLDEN_DIR / "dataset", tmp_path_factory.mktemp("golden_wh") / "warehouse", GOLDEN_REVISION
    )


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
def demo_copy(demo_source: Path, tmp_path: Path) -> Path:
    """A fresh warehouse to corrupt (generations hold absolute paths, so it is rebuilt, not copied)."""
    return _built(demo_source, tmp_path / "warehouse", REVISION)


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
# Tier 3: the whole graph with dg.materialize


def _materialized(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    """Metadata of each materialized asset, by asset key."""
    return {
        event.materialization.asset_key.to_user_string(): event.materialization.metadata
        for event in result.get_asset_materialization_events()
    }


@pytest.mark.integration
def test_materialize_everything_into_a_temporary_warehouse(
    demo_source: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    result = dg.materialize(graph(), resources={"warehouse": resource(warehouse, demo_source)})
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert {
        (e.asset_key.to_user_string(), e.check_name, e.blocking) for e in evaluations
    } == EXPECTED_CHECKS
    assert all(e.passed for e in evaluations)

    materialized = _materialized(result)
    assert set(materialized) == set(schemas.TABLES) | VIEWS | {REPORT}
    report_index = Path(str(materialized[REPORT]["path"].value))
    assert report_index == warehouse / "report" / "index.html" and report_index.is_file()
    assert (
        materialized[REPORT]["pages"].value
        # the overview, a page per definition, the what-changed page of the one source
        == 1 + materialized["definitions"]["dagster/row_count"].value + 1
    )
    overview = str(materialized[REPORT]["overview_top_rows"].value)
    assert overview.startswith("| definition | hardware | solution |") and overview.count("\n") >= 3
    connection = connect_read_only(Warehouse(warehouse))
    try:
        for name in [*schemas.TABLES, *VIEWS]:
            ((count,),) = connection.table(name).aggregate("count(*)").fetchall()
            assert materialized[name]["dagster/row_count"].value == count, name
        ((sha, snapshot_id),) = connection.execute(
            "SELECT resolved_sha, snapshot_id FROM source_snapshots"
        ).fetchall()
        for view in VIEWS:  # the documented columns are the view's columns, in order
            columns = [row[0] for row in connection.execute(f"DESCRIBE {view}").fetchall()]
            assert columns == [c.name for c in schemas.VIEWS[view].columns], view
    finally:
        connection.close()
    assert materialized["runs"]["dagster/row_count"].value > 1000
    assert sha == REVISION
    # Every materialization's data version is the build's snapshot id.
    versions = {
        e.materialization.asset_key.to_user_string(): e.materialization.tags.get(
            "dagster/data_version"
        )
        for e in result.get_asset_materialization_events()
    }
    assert set(versions.values()) == {snapshot_id}
    for view in VIEWS:
        columns = materialized[view]["dagster/column_schema"].value.columns
        assert [c.name for c in columns] == [c.name for c in schemas.VIEWS[view].columns]
        assert all(c.description for c in columns), view
    preview = materialized["leaderboard"]["top_10_by_geomean_speedup"].value
    assert preview.startswith("| definition | hardware | solution |")
    assert preview.count("\n") >= 3
    # The check results are what the build evaluated before publishing, stored with it.
    generation = Warehouse(warehouse).require_current()
    stored = read_checks(generation)
    for evaluation in evaluations:
        if (evaluation.asset_key.to_user_string(), evaluation.check_name, True) in BUILD_CHECKS:
            assert stored[evaluation.check_name][0] is evaluation.passed

    # A second run finds the source unchanged: nothing is materialized, the views do not run,
    # and the blocking checks report the outcomes recorded with the current generation.
    again = dg.materialize(graph(), resources={"warehouse": resource(warehouse, demo_source)})
    assert again.success
    assert _materialized(again) == {}
    reported = {e.check_name: e for e in again.get_asset_check_evaluations()}
    assert {(e.asset_key.to_user_string(), name, e.blocking) for name, e in reported.items()} == (
        BUILD_CHECKS
    )
    assert all(e.passed for e in reported.values())
    assert all(e.metadata["generation"].value == generation.name for e in reported.values())
    assert Warehouse(warehouse).require_current() == generation


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
    result = dg.materialize(
        graph(), resources={"warehouse": resource(demo_copy, wrong)}, raise_on_error=False
    )
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
    result = dg.materialize(
        graph(), resources={"warehouse": resource(warehouse, empty)}, raise_on_error=False
    )
    assert not result.success
    failed = {e.check_name for e in result.get_asset_check_evaluations() if not e.passed}
    assert failed == {"fact_tables_not_empty"}
    assert _materialized(result) == {}
    assert Warehouse(warehouse).current_generation() is None


# --------------------------------------------------------------------------------------------
# Tier 4: the Hub sensor against FakeHub


@pytest.fixture
def fake_hub(demo_source: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    with FakeHub(repo_id=REPO) as hub:
        hub.commit(FakeHub.read_folder(demo_source))
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        yield hub


def tick(cursor: str | None, source: str, warehouse: Path) -> Any:
    context = dg.build_sensor_context(
        cursor=cursor,
        resources={"warehouse": WarehouseResource(source=source, warehouse=str(warehouse))},
    )
    return hub_revision_sensor(context)


def test_sensor_requests_one_build_per_new_sha(fake_hub: FakeHub, tmp_path: Path) -> None:
    first_sha = fake_hub.head()
    first = tick(None, HUB_URI, tmp_path)
    assert isinstance(first, dg.SensorResult)
    assert [r.run_key for r in first.run_requests or []] == [first_sha]
    assert first.cursor == first_sha
    request = (first.run_requests or [])[0]
    assert request.run_config == {
        "resources": {"warehouse": {"config": {"source": f"{HUB_URI}@{first_sha}"}}}
    }

    unchanged = tick(first.cursor, HUB_URI, tmp_path)
    assert isinstance(unchanged, dg.SkipReason)
    assert first_sha in (unchanged.skip_message or "")

    some_trace = next(path for path in fake_hub.files_at(first_sha) if path.startswith("traces/"))
    second_sha = fake_hub.commit({some_trace: fake_hub.files_at(first_sha)[some_trace] + b"\n"})
    changed = tick(first.cursor, HUB_URI, tmp_path)
    assert isinstance(changed, dg.SensorResult)
    assert [r.run_key for r in changed.run_requests or []] == [second_sha]
    assert changed.cursor == second_sha
    assert isinstance(tick(changed.cursor, HUB_URI, tmp_path), dg.SkipReason)


def test_sensor_skips_a_local_folder_source(demo_source: Path, tmp_path: Path) -> None:
    result = tick(None, str(demo_source), tmp_path)
    assert isinstance(result, dg.SkipReason)
    assert "local folder" in (result.skip_message or "")


@pytest.mark.integration
def test_the_requested_run_builds_that_sha(
    fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sensor's RunRequest, run through the real job, records its sha in source_snapshots."""
    sha = fake_hub.head()
    monkeypatch.setenv("TRACEHOUSE_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.setenv("TRACEHOUSE_SOURCE", HUB_URI)
    context = dg.build_sensor_context(cursor=None, resources={"warehouse": WarehouseResource()})
    result = hub_revision_sensor(context)
    assert isinstance(result, dg.SensorResult)
    (request,) = result.run_requests or []
    # Upstream moves on between the tick and the run: the run still builds the sha it was for.
    fake_hub.commit({"traces/extra/late.jsonl": b""})

    instance = dg.DagsterInstance.ephemeral()
    run = defs.resolve_job_def("build_warehouse_job").execute_in_process(
        run_config=request.run_config, instance=instance
    )
    assert run.success
    # The Hub dataset was observed first; its data version is the sha the build read.
    (observation,) = [
        e.event_specific_data.asset_observation  # type: ignore[union-attr]
        for e in run.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    assert observation.asset_key.to_user_string() == SOURCE_ASSET
    assert observation.tags["dagster/data_version"] == sha
    connection = connect_read_only(Warehouse(tmp_path / "warehouse"))
    try:
        rows = connection.execute("SELECT uri, resolved_sha FROM source_snapshots").fetchall()
    finally:
        connection.close()
    assert rows == [(f"{HUB_URI}@{sha}", sha)]


@requires_shared
def test_environment_check_recomputes_ids_of_environments_with_extra_keys(tmp_path: Path) -> None:
    """The Intel fork's traces carry environment.hardware_id, which enters environment_id."""
    from pipelines.defs.checks import environment_digests_recompute
    from pipelines.warehouse import Warehouse, connect_read_only
    from tests.conftest import build

    build(SAMPLES_DIR / "intel_sycl_fork_2026-09", tmp_path / "w")
    connection = connect_read_only(Warehouse(tmp_path / "w"))
    try:
        passed, metadata = environment_digests_recompute(connection)
    finally:
        connection.close()
    assert passed and metadata["environments_recomputed"] == 1, metadata
