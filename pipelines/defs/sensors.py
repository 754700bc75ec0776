"""Build when the Hub dataset moves: one run per new upstream commit.

The sensor resolves the configured ``hf://`` source to its current commit sha and requests a
run keyed by that sha (``run_key``), so Dagster never starts two builds for the same commit; the
cursor holds the last sha seen, so an unchanged revision is a skip. The run is pinned to the sha
(``hf://datasets/<org>/<name>@<sha>``), so it builds exactly the commit that triggered it, and
the builder records that sha in ``source_snapshots.resolved_sha``.
"""

import dagster as dg

from pipelines.defs.resources import WarehouseResource
from pipelines.defs.schedules import build_warehouse_job
from pipelines.sources.hub import HubDatasetRef, RetryPolicy, parse_hub_uri, resolve_revision


@dg.sensor(
    name="hub_revision_sensor",
    job=build_warehouse_job,
    minimum_interval_seconds=15 * 60,
    description="Request a build when the hf:// source points at a new commit.",
    default_status=dg.DefaultSensorStatus.STOPPED,  # see schedules.py: turned on on purpose
)
def hub_revision_sensor(
    context: dg.SensorEvaluationContext, warehouse: WarehouseResource
) -> dg.SensorResult | dg.SkipReason:
    settings = warehouse.settings()
    source = settings.source
    if source is None:
        return dg.SkipReason("no source configured (TRACEHOUSE_SOURCE); nothing to watch")
    reference = parse_hub_uri(source)
    if reference is None:
        return dg.SkipReason(
            f"source {source!r} is a local folder, not an hf:// dataset; nothing to watch "
            "(the daily schedule rebuilds it)"
        )
    sha = resolve_revision(reference, retry=RetryPolicy.within(settings.hub_timeout_s))
    if sha == context.cursor:
        return dg.SkipReason(f"{reference.uri} is still at {sha}")
    pinned = HubDatasetRef(reference.repo_id, sha).uri
    run_request = dg.RunRequest(
        run_key=sha,
        run_config={"resources": {"warehouse": {"config": {"source": pinned}}}},
        tags={"tracehouse/source": reference.uri, "tracehouse/revision": sha},
    )
    return dg.SensorResult(run_requests=[run_request], cursor=sha)
