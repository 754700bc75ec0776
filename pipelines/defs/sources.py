"""Sources as Dagster partitions: one partition of ``tracehouse_sources`` per source name.

The partitions are dynamic because the set of sources is data, not code: the configured ones
(``TRACEHOUSE_SOURCES``, or ``TRACEHOUSE_SOURCE`` under its name) and the ones the warehouse
already holds (its ``sources.json``, e.g. a fork built with ``tracehouse build``). Nothing is
read at import, so the asset graph is the same in every process; the source observation and
``source_partitions_sensor`` register what they find.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from tracehouse.settings import Settings, parse_sources

if TYPE_CHECKING:
    from dagster import DagsterInstance

SOURCES = dg.DynamicPartitionsDefinition(name="tracehouse_sources")


def configured_sources(settings: Settings) -> dict[str, str]:
    """The sources the settings name, by name (a single source under its warehouse name)."""
    from tracehouse.fetch.resolve import source_identity

    if settings.sources:
        return parse_sources(settings.sources)
    if settings.source is None:
        return {}
    name, _ = source_identity(settings.source, settings.source_name)
    return {name: settings.source}


def held_sources(settings: Settings) -> dict[str, str]:
    """The sources the warehouse's current generation holds, by name (none yet: empty)."""
    from tracehouse.warehouse import Warehouse, WarehouseMissing, generation_sources

    if settings.object_store is not None:  # held sources are in the catalog, read by builds
        return {}
    current = Warehouse(settings.warehouse).current_generation()
    if current is None:
        return {}
    try:
        return {s.source: s.uri for s in generation_sources(current)}
    except WarehouseMissing:  # built by an older tracehouse: the next build starts afresh
        return {}


def source_uris(settings: Settings) -> dict[str, str]:
    """Every source a partition may stand for: the held ones, then the configured ones (which
    win: a configured URI may carry an @revision)."""
    return {**held_sources(settings), **configured_sources(settings)}


def register_sources(instance: DagsterInstance, settings: Settings) -> dict[str, str]:
    """Add a partition for every source that has none yet; the sources by name."""
    uris = source_uris(settings)
    missing = sorted(set(uris) - set(instance.get_dynamic_partitions(SOURCES.name or "")))
    if missing:
        instance.add_dynamic_partitions(SOURCES.name or "", missing)
    return uris
