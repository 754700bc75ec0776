"""The one Dagster resource: where the warehouse lives and what it is built from.

``WarehouseResource`` holds no settings logic of its own. Every field left unset (the default)
is read by ``pipelines.settings.load_settings`` from the ``TRACEHOUSE_*`` environment variables,
exactly as the ``tracehouse`` command reads them; a field set in code or in run config wins, like
a command-line flag. So the CLI and the assets build the same warehouse from the same settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from pipelines.settings import Settings, load_settings
from pipelines.warehouse import Warehouse

if TYPE_CHECKING:
    import duckdb


class WarehouseResource(dg.ConfigurableResource):
    """Settings of one tracehouse warehouse; unset fields come from ``TRACEHOUSE_*``."""

    warehouse: str | None = Field(
        default=None, description="Warehouse folder (TRACEHOUSE_WAREHOUSE; default ./warehouse)."
    )
    source: str | None = Field(
        default=None,
        description="Dataset folder or hf://datasets/<org>/<name>[@<revision>] URI "
        "(TRACEHOUSE_SOURCE; default data/demo).",
    )
    revision: str | None = Field(
        default=None,
        description="40-hex dataset revision for a local folder without git (TRACEHOUSE_REVISION).",
    )
    baselines_file: str | None = Field(
        default=None, description="Leaderboard baseline map JSON (TRACEHOUSE_BASELINES_FILE)."
    )
    workers: int | None = Field(
        default=None, description="Parser worker processes (TRACEHOUSE_WORKERS)."
    )
    lock_timeout_s: float | None = Field(
        default=None,
        description="Seconds to wait for another build of the same warehouse "
        "(TRACEHOUSE_LOCK_TIMEOUT_S).",
    )
    include_blobs: bool | None = Field(
        default=None, description="Also mirror blob/ from the Hub (TRACEHOUSE_INCLUDE_BLOBS)."
    )
    hub_cache: str | None = Field(
        default=None, description="Hub download cache folder (TRACEHOUSE_HUB_CACHE)."
    )
    regression_min_history: int | None = Field(
        default=None,
        description="Earlier results a regression is judged against, at least "
        "(TRACEHOUSE_REGRESSION_MIN_HISTORY; default 2).",
    )
    regression_min_change: float | None = Field(
        default=None,
        description="Relative slowdown against their mean, at least "
        "(TRACEHOUSE_REGRESSION_MIN_CHANGE; default 0.10).",
    )
    regression_z_threshold: float | None = Field(
        default=None,
        description="z-score against their distribution, at least "
        "(TRACEHOUSE_REGRESSION_Z_THRESHOLD; default 5).",
    )

    def settings(self) -> Settings:
        """The typed settings: fields set here first, then the environment, then defaults."""
        return load_settings(
            warehouse=_path(self.warehouse),
            source=self.source,
            revision=self.revision,
            baselines_file=_path(self.baselines_file),
            workers=self.workers,
            lock_timeout_s=self.lock_timeout_s,
            include_blobs=self.include_blobs,
            hub_cache=_path(self.hub_cache),
            regression_min_history=self.regression_min_history,
            regression_min_change=self.regression_min_change,
            regression_z_threshold=self.regression_z_threshold,
        )

    def warehouse_folder(self) -> Warehouse:
        return Warehouse(self.settings().warehouse)

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection to the current generation (regression limits from these
        settings), closed on exit."""
        from pipelines.queries import connect

        connection = connect(self.settings())
        try:
            yield connection
        finally:
            connection.close()


def _path(text: str | None) -> Path | None:
    return Path(text) if text else None
