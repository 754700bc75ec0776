"""The build job and when it runs: every day at 03:00 UTC (the sensor adds runs for new Hub
revisions in between).

Both start stopped, Dagster's default for anything that launches runs on its own: a fresh
`dagster dev` should not start building into a folder before someone has pointed
TRACEHOUSE_SOURCE and TRACEHOUSE_WAREHOUSE where they belong. The README says how to turn
them on (`dagster schedule start` / `dagster sensor start`, or the toggle in the UI).
"""

from __future__ import annotations

import dagster as dg

# The source observation, every table, every view and every check: a build is all or nothing.
# (`parsed_groups` is only reported by the fanned-out ingest jobs; it has nothing to run.)
build_warehouse_job = dg.define_asset_job(
    name="build_warehouse_job",
    selection=dg.AssetSelection.all(include_sources=True)
    - dg.AssetSelection.assets("parsed_groups"),
    description="Observe the source, build the warehouse from it, check it, refresh the views.",
)

daily_warehouse_build = dg.ScheduleDefinition(
    name="daily_warehouse_build",
    job=build_warehouse_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Rebuild daily; an unchanged source makes this a no-op build.",
)
