"""The jobs, and when things run: declaratively, by the automation conditions on the assets.

* ``tracehouse/source_dataset`` is observed every 15 minutes (``OBSERVE_CRON``), which
  replaces the daily schedule and the hand-written Hub sensor: a new commit or changed files
  give its partition a new data version;
* a per-source partition whose source has a new data version is built (``eager``), which
  writes the warehouse-wide tables in the same step; the views and the report follow once the
  tables are updated and their blocking checks passed (``eager`` waits for missing or failed
  parents), and the marts carry freshness policies.

``tracehouse_automation`` is the sensor that evaluates those conditions. It starts stopped,
Dagster's default for anything that launches runs on its own: a fresh ``dagster dev`` should
not start building into a folder before someone has pointed TRACEHOUSE_SOURCE and
TRACEHOUSE_WAREHOUSE where they belong. The README says how to turn it on.
"""

from __future__ import annotations

import dagster as dg

from pipelines.defs.fanout import PARSED_GROUPS
from pipelines.defs.naming import asset_key

# One source's build (a partition): observe the sources, then the tables, their checks, the
# views and the report.
build_warehouse_job = dg.define_asset_job(
    name="build_warehouse_job",
    selection=dg.AssetSelection.all(include_sources=True)
    - dg.AssetSelection.assets(asset_key(PARSED_GROUPS)),
    description="Observe the sources, build one (the partition) into the warehouse, check it, "
    "recreate the views, write the report.",
)

# Observe every source (registering the configured ones as partitions).
observe_sources_job = dg.define_asset_job(
    name="observe_sources_job",
    selection=dg.AssetSelection.assets(asset_key("source_dataset")),
    description="Observe every source: its data version, and a partition for each new one.",
)

tracehouse_automation = dg.AutomationConditionSensorDefinition(
    "tracehouse_automation",
    target=dg.AssetSelection.all(include_sources=True),
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Evaluate the assets' automation conditions: observe the sources on a cron, "
    "build a source whose data version moved, then the views and the report.",
)
