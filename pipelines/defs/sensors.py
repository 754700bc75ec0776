"""The one hand-written sensor: keep a partition for every source.

Dagster has no primitive that derives dynamic partition keys from outside the code location
(automation conditions decide *when* to materialize known partitions, never which partitions
exist), and reading the sources at import would make the asset graph depend on the process
environment. So this sensor, on every tick, adds a partition of ``tracehouse_sources`` for
each source that has none yet: the configured ones (TRACEHOUSE_SOURCES, or TRACEHOUSE_SOURCE
under its name) and the ones the warehouse holds (e.g. a fork built with ``tracehouse
build``). It launches no runs (the automation conditions do), so it starts running.
"""

from __future__ import annotations

import dagster as dg

from pipelines.defs.resources import WarehouseResource
from pipelines.defs.sources import SOURCES, source_uris
from tracehouse.settings import SettingsError


@dg.sensor(
    name="source_partitions_sensor",
    minimum_interval_seconds=60,
    description="Add a tracehouse_sources partition for every configured or held source.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def source_partitions_sensor(
    context: dg.SensorEvaluationContext, warehouse: WarehouseResource
) -> dg.SensorResult | dg.SkipReason:
    try:
        uris = source_uris(warehouse.settings())
    except SettingsError as bad:
        return dg.SkipReason(str(bad))
    known = set(context.instance.get_dynamic_partitions(SOURCES.name or ""))
    new = sorted(set(uris) - known)
    if not new:
        return dg.SkipReason(
            f"every source has its partition ({', '.join(sorted(uris)) or 'none'})"
        )
    return dg.SensorResult(
        dynamic_partitions_requests=[SOURCES.build_add_request(new)],
    )
