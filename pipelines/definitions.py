"""The single Dagster code location (workspace.yaml, ``dagster dev``)."""

import dagster as dg

from pipelines.defs import assets, checks, fanout, schedules, sensors
from pipelines.defs.resources import WarehouseResource

defs = dg.Definitions(
    assets=[*dg.load_assets_from_modules([assets]), fanout.parsed_groups],
    asset_checks=checks.asset_checks,
    jobs=[schedules.build_warehouse_job, *fanout.fanout_jobs],
    schedules=[schedules.daily_warehouse_build],
    sensors=[sensors.hub_revision_sensor],
    # Every setting comes from TRACEHOUSE_* (pipelines.settings), as for the CLI.
    resources={"warehouse": WarehouseResource()},
    # One build step that parallelizes itself, then sub-second checks and views: a process
    # per step would cost more than it saves. The fanout jobs name their own executors.
    executor=dg.in_process_executor,
)
