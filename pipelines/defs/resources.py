"""The one Dagster resource: where the warehouse lives and what it is built from.

Its config fields are generated from ``tracehouse.settings.Settings`` (the one declaration of
every setting, with its meaning), so nothing is declared twice. Every field left unset (the
default) is read by ``load_settings`` from the ``TRACEHOUSE_*`` environment variables, exactly
as the ``tracehouse`` command reads them; a field set in code or in run config wins, like a
command-line flag. So the CLI and the assets build the same warehouse from the same settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import Field, create_model

from tracehouse.settings import SETTINGS, Settings, describe, load_settings
from tracehouse.warehouse import Warehouse

if TYPE_CHECKING:
    import duckdb

# Config fields as Dagster shows them: paths are text; every field is optional (None = unset).
_CONFIG_TYPES: dict[type, Any] = {Path: str, str: str, int: int, float: float, bool: bool}

_CONFIG_FIELDS: dict[str, Any] = {
    spec.name: (
        _CONFIG_TYPES[spec.metadata["kind"]] | None,
        Field(default=None, description=describe(spec)),
    )
    for spec in SETTINGS
}
_SettingsConfig: Any = create_model(
    "WarehouseSettingsConfig", __base__=dg.ConfigurableResource, **_CONFIG_FIELDS
)


class WarehouseResource(_SettingsConfig):
    """Settings of one tracehouse warehouse; unset fields come from ``TRACEHOUSE_*``."""

    def settings(self) -> Settings:
        """The typed settings: fields set here first, then the environment, then defaults."""
        return load_settings(
            origin="field", **{spec.name: getattr(self, spec.name) for spec in SETTINGS}
        )

    def warehouse_folder(self) -> Warehouse:
        settings = self.settings()
        return Warehouse(settings.warehouse, settings.keep_generations)

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection to the current generation (regression limits from these
        settings), closed on exit."""
        from tracehouse.serve.queries import connect

        settings = self.settings()
        if settings.object_store is not None:  # read what the catalog published
            from tracehouse.publish.iceberg.replica import reading_settings

            settings = reading_settings(settings)
        connection = connect(settings)
        try:
            yield connection
        finally:
            connection.close()
