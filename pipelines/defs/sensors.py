"""Build when a Hub dataset moves: one run per new upstream commit of each hf:// source.

The sensor resolves every configured ``hf://`` source (TRACEHOUSE_SOURCES, one partition each,
or the one TRACEHOUSE_SOURCE) to its current commit sha and requests a run keyed by source and
sha (``run_key``), so Dagster never starts two builds for the same commit; the cursor holds the
last sha seen per source, so an unchanged revision is a skip. The run is pinned to the sha
(``hf://datasets/<org>/<name>@<sha>``), so it builds exactly the commit that triggered it, and
the builder records that sha in ``source_snapshots.resolved_sha``.
"""

import json

import dagster as dg

from pipelines.defs.assets import SOURCE_PARTITIONS
from pipelines.defs.resources import WarehouseResource
from pipelines.defs.schedules import build_warehouse_job
from pipelines.settings import parse_sources
from pipelines.sources.hub import HubDatasetRef, RetryPolicy, parse_hub_uri, resolve_revision


def _cursor(text: str | None) -> dict[str, str]:
    """Last sha seen per source name; a bare sha is the cursor of the one-source sensor."""
    if not text:
        return {}
    try:
        stored = json.loads(text)
    except ValueError:
        return {"": text}
    return stored if isinstance(stored, dict) else {}


@dg.sensor(
    name="hub_revision_sensor",
    job=build_warehouse_job,
    minimum_interval_seconds=15 * 60,
    description="Request a build when an hf:// source points at a new commit.",
    default_status=dg.DefaultSensorStatus.STOPPED,  # see schedules.py: turned on on purpose
)
def hub_revision_sensor(
    context: dg.SensorEvaluationContext, warehouse: WarehouseResource
) -> dg.SensorResult | dg.SkipReason:
    settings = warehouse.settings()
    partitioned = SOURCE_PARTITIONS is not None and bool(settings.sources)
    if partitioned:
        watched = parse_sources(settings.sources or "")
    elif settings.source is not None:
        watched = {"": settings.source}
    else:
        return dg.SkipReason("no source configured (TRACEHOUSE_SOURCE); nothing to watch")
    hub = {name: parse_hub_uri(uri) for name, uri in watched.items()}
    hub = {name: ref for name, ref in hub.items() if ref is not None}
    if not hub:
        listed = ", ".join(repr(uri) for uri in watched.values())
        return dg.SkipReason(
            f"source {listed} is a local folder, not an hf:// dataset; nothing to watch "
            "(the daily schedule rebuilds it)"
        )
    seen = _cursor(context.cursor)
    requests = []
    for name, reference in sorted(hub.items()):
        sha = resolve_revision(reference, retry=RetryPolicy.within(settings.hub_timeout_s))
        if seen.get(name) == sha:
            continue
        seen[name] = sha
        pinned = HubDatasetRef(reference.repo_id, sha).uri
        config = {"source": pinned, **({"source_name": name} if name else {})}
        requests.append(
            dg.RunRequest(
                run_key=f"{name}:{sha}" if name else sha,
                run_config={"resources": {"warehouse": {"config": config}}},
                tags={"tracehouse/source": reference.uri, "tracehouse/revision": sha},
                partition_key=name or None,
            )
        )
    if not requests:
        return dg.SkipReason(
            "; ".join(f"{ref.uri} is still at {seen[name]}" for name, ref in sorted(hub.items()))
        )
    cursor = seen[""] if list(seen) == [""] else json.dumps(seen, sort_keys=True)
    return dg.SensorResult(run_requests=requests, cursor=cursor)
