"""The regression limits a build stores beside the history it assembles.

Views cannot take bound parameters, so ``sql/marts/regressions.sql`` reads the limits
(``TRACEHOUSE_REGRESSION_*``) from a one-row relation, ``regression_thresholds``: the build
stores the build's settings in the DuckDB file (for a bare ``duckdb`` session), and every
``tracehouse`` connection replaces it with a temporary table of the settings in force when the
command runs (``tracehouse.serve.changes`` reads them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracehouse.settings import Settings
from tracehouse.sql_files import sql_text

if TYPE_CHECKING:
    import duckdb

THRESHOLDS_RELATION = "regression_thresholds"


@dataclass(frozen=True)
class RegressionThresholds:
    """The limits a result must pass to be flagged (sql/marts/regressions.sql states the method)."""

    min_history: int
    min_change: float
    z_threshold: float

    @classmethod
    def from_settings(cls, settings: Settings) -> RegressionThresholds:
        # Settings checks the ranges when it is created.
        return cls(
            settings.regression_min_history,
            settings.regression_min_change,
            settings.regression_z_threshold,
        )

    def describe(self) -> str:
        return (
            f"latency vs the mean of >= {self.min_history} earlier results: "
            f"change >= {self.min_change:.0%}, |z| >= {self.z_threshold:g}"
        )


# The statement that creates the relation, stored or temporary; its SELECT is in sql/.
CREATE_THRESHOLDS = {
    False: f"CREATE OR REPLACE TABLE {THRESHOLDS_RELATION} AS ",
    True: f"CREATE OR REPLACE TEMP TABLE {THRESHOLDS_RELATION} AS ",
}


def store_regression_thresholds(
    connection: duckdb.DuckDBPyConnection, settings: Settings, *, temporary: bool
) -> None:
    """Create (or replace) the ``regression_thresholds`` relation from ``settings``.

    ``temporary`` makes it a temporary table, which shadows the stored one on a read-only
    connection to the warehouse file.
    """
    thresholds = RegressionThresholds.from_settings(settings)
    connection.execute(
        CREATE_THRESHOLDS[temporary] + sql_text(THRESHOLDS_RELATION),
        {
            "min_history": thresholds.min_history,
            "min_change": thresholds.min_change,
            "z_threshold": thresholds.z_threshold,
        },
    )
