"""The build job and when it runs: every day at 03:00 UTC (the sensor adds runs for new Hub
revisions in between)."""

from __future__ import annotations

import dagster as dg

# Every table, every view and every check: a build is all or nothing.
build_warehouse_job = dg.define_asset_job(
    name="build_warehouse_job",
    selection=dg.AssetSelection.all(),
    description="Build the warehouse from the configured source, check it, refresh the views.",
)

daily_warehouse_build = dg.ScheduleDefinition(
    name="daily_warehouse_build",
    job=build_warehouse_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    description="Rebuild daily; an unchanged source makes this a no-op build.",
)
