"""The single Dagster code location, ``tracehouse``: the dg project's target
(``[tool.dg.project]`` in pyproject.toml; ``dg dev``, ``dg check defs``) and the module
workspace.yaml loads for ``dagster dev``."""

import warnings

import dagster as dg

# The beta APIs this location uses on purpose (the observable, partitioned source asset and
# a selection that includes it): known here, and a warning before every command's output
# would tell its user nothing. Any other beta or deprecation warning still shows.
for _beta in (
    r"Function `observable_source_asset` is currently in beta",
    r"Parameter `include_sources` of function `AssetSelection.all` is currently in beta",
    r"Class `DataVersionsByPartition` is currently in beta",
):
    warnings.filterwarnings("ignore", message=_beta, category=dg.BetaWarning)

from pipelines.defs import assets, checks, fanout, schedules, sensors  # noqa: E402
from pipelines.defs.resources import WarehouseResource  # noqa: E402

defs = dg.Definitions(
    assets=[
        assets.source_dataset,
        assets.warehouse_tables,
        assets.warehouse_views,
        assets.report,
        fanout.parsed_groups,
    ],
    asset_checks=checks.asset_checks,
    jobs=[schedules.build_warehouse_job, schedules.observe_sources_job, *fanout.fanout_jobs],
    sensors=[schedules.tracehouse_automation, sensors.source_partitions_sensor],
    # Every setting comes from TRACEHOUSE_* (pipelines.settings), as for the CLI.
    resources={"warehouse": WarehouseResource()},
    # One build step that parallelizes itself, then sub-second checks and views: a process
    # per step would cost more than it saves. The fanout jobs name their own executors.
    executor=dg.in_process_executor,
)
