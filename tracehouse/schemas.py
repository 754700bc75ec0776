"""Every warehouse table and view, and every list of them, derived from their declarations.

Each table is declared once, in ``tracehouse/tables/``: column names, Arrow types, nullability
and meaning, and what the table is (per source, parted, historical, computed, published, its
row order) as fields of its declaration (``tracehouse/tables/declare.py``). Writers build their
Arrow tables from these schemas (``arrow_schema``), so a frame with a missing, extra or
mistyped column fails where it is written, and docs/tables.md and the ``tracehouse tables``
output are generated from the same declarations. Every list of tables below is derived from
those fields; a test (tests/test_one_home.py) keeps the product free of hand-kept ones.

Importing this module imports no pyarrow (a read command consults it).
"""

from __future__ import annotations

import hashlib

from tracehouse.tables.assembled import (
    BASELINE_MAP,
    RUN_APPEARANCES,
    RUN_DISAPPEARANCES,
    RUN_RANKINGS,
    SOURCE_SNAPSHOTS,
)
from tracehouse.tables.declare import VIEW_ADDED_COLUMNS, Column, Table, View, stored_table
from tracehouse.tables.flashinfer import (
    AUTHOR_RANKINGS_VIEW,
    FAST_P_THRESHOLDS_VIEW,
    FIB_BEST_TRACE_VIEW,
    FIB_DEFINITIONS_VIEW,
    FIB_HARDWARE_SCOPES_VIEW,
    FIB_RANKING_SCOPES_VIEW,
    FIB_SCOPED_TRACES_VIEW,
    FIB_SOLUTION_SCORES_VIEW,
    FIB_SOLUTIONS_VIEW,
    FIB_SOURCE_SCOPES_VIEW,
    FIB_SUMMARY_VIEW,
    FIB_TRACE_LINES_VIEW,
    FIB_UNION_DEFINITIONS_VIEW,
    WIN_AT_P_VIEW,
)
from tracehouse.tables.ingested import (
    CORRECTNESS,
    DEFINITIONS,
    ENVIRONMENTS,
    IMPLEMENTATIONS,
    PROTOCOLS,
    REJECTS,
    RUNS,
    TRACE_LINES,
    WORKLOADS,
)
from tracehouse.tables.staging import (
    STAGING_ENVIRONMENTS,
    STAGING_RUN_KEYS,
    STAGING_WORKLOADS,
)
from tracehouse.tables.views import (
    BASELINE_SOLUTIONS_VIEW,
    LATENCY_HISTORY_VIEW,
    LATENCY_VERDICTS_VIEW,
    LEADER_CHANGES_VIEW,
    LEADERBOARD_BASELINES_VIEW,
    LEADERBOARD_FAST_P_VIEW,
    LEADERBOARD_SPEEDUPS_VIEW,
    LEADERBOARD_VIEW,
    RANKING_INPUTS_VIEW,
    RECORD_EVENTS_VIEW,
    REGRESSION_THRESHOLDS_RELATION,
    REGRESSIONS_VIEW,
    RUN_HISTORY_VIEW,
    RUN_SUMMARY_VIEW,
    SOLUTION_WORKLOAD_LATENCY_VIEW,
    SOURCE_SUMMARY_VIEW,
)
from tracehouse.tables.web import (
    WEB_AUTHOR_RANKINGS_VIEW,
    WEB_BASELINE_MAPS_VIEW,
    WEB_BASELINE_NAMES_VIEW,
    WEB_BUCKETS_VIEW,
    WEB_CANDIDATES_VIEW,
    WEB_CORRECTNESS_SUMMARY_VIEW,
    WEB_COVERAGE_VIEW,
    WEB_DEFINITION_SCOPES_VIEW,
    WEB_DEFINITION_STATS_VIEW,
    WEB_DEFINITIONS_VIEW,
    WEB_FAST_P_VIEW,
    WEB_GROUPS_VIEW,
    WEB_HARDWARE_SCOPES_VIEW,
    WEB_MAP_NAMES_VIEW,
    WEB_RATIO_ENTRIES_VIEW,
    WEB_SCOPED_TRACES_VIEW,
    WEB_SOLUTION_GROUPS_VIEW,
    WEB_SOLUTION_SCORES_VIEW,
    WEB_SOLUTIONS_VIEW,
    WEB_TRACES_VIEW,
)

__all__ = [
    "BASELINE_MAP",
    "IMPORTER_VERSION",
    "STAGING_FORMAT",
    "PROTOCOLS",
    "REJECTS",
    "RUN_RANKINGS",
    "SOURCE_SNAPSHOTS",
    "STAGING_RUN_KEYS",
    "STAGING_ENVIRONMENTS",
    "STAGING_WORKLOADS",
    "VIEW_ADDED_COLUMNS",
    "Column",
    "Table",
    "View",
]

# Bumped whenever parsing or normalisation changes, so cached staging parts are rebuilt.
IMPORTER_VERSION = "tracehouse-importer/4"

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        DEFINITIONS,
        IMPLEMENTATIONS,
        WORKLOADS,
        ENVIRONMENTS,
        PROTOCOLS,
        RUNS,
        CORRECTNESS,
        REJECTS,
        SOURCE_SNAPSHOTS,
        RUN_RANKINGS,
        TRACE_LINES,
        BASELINE_MAP,
        RUN_APPEARANCES,
        RUN_DISAPPEARANCES,
    )
}

# Every relation of tracehouse.duckdb that is not a table of TABLES, in the order sql/ runs
# them, and the settings they read (stored as tables at each build: from_settings).
_RELATIONS: tuple[View, ...] = (
    BASELINE_SOLUTIONS_VIEW,
    RUN_SUMMARY_VIEW,
    LEADERBOARD_VIEW,
    RECORD_EVENTS_VIEW,
    LATENCY_HISTORY_VIEW,
    LATENCY_VERDICTS_VIEW,
    REGRESSIONS_VIEW,
    RUN_HISTORY_VIEW,
    LEADER_CHANGES_VIEW,
    SOURCE_SUMMARY_VIEW,
    FAST_P_THRESHOLDS_VIEW,
    FIB_SOURCE_SCOPES_VIEW,
    FIB_UNION_DEFINITIONS_VIEW,
    FIB_DEFINITIONS_VIEW,
    FIB_SOLUTIONS_VIEW,
    FIB_HARDWARE_SCOPES_VIEW,
    FIB_TRACE_LINES_VIEW,
    FIB_SCOPED_TRACES_VIEW,
    FIB_SOLUTION_SCORES_VIEW,
    FIB_RANKING_SCOPES_VIEW,
    AUTHOR_RANKINGS_VIEW,
    FIB_SUMMARY_VIEW,
    FIB_BEST_TRACE_VIEW,
    WIN_AT_P_VIEW,
    WEB_DEFINITIONS_VIEW,
    WEB_SOLUTIONS_VIEW,
    WEB_TRACES_VIEW,
    WEB_HARDWARE_SCOPES_VIEW,
    WEB_SCOPED_TRACES_VIEW,
    WEB_BASELINE_MAPS_VIEW,
    WEB_MAP_NAMES_VIEW,
    WEB_BASELINE_NAMES_VIEW,
    WEB_GROUPS_VIEW,
    WEB_CANDIDATES_VIEW,
    WEB_SOLUTION_GROUPS_VIEW,
    WEB_RATIO_ENTRIES_VIEW,
    WEB_DEFINITION_SCOPES_VIEW,
    WEB_DEFINITION_STATS_VIEW,
    WEB_FAST_P_VIEW,
    WEB_COVERAGE_VIEW,
    WEB_SOLUTION_SCORES_VIEW,
    WEB_AUTHOR_RANKINGS_VIEW,
    WEB_CORRECTNESS_SUMMARY_VIEW,
    WEB_BUCKETS_VIEW,
    SOLUTION_WORKLOAD_LATENCY_VIEW,
    LEADERBOARD_BASELINES_VIEW,
    LEADERBOARD_SPEEDUPS_VIEW,
    LEADERBOARD_FAST_P_VIEW,
    RANKING_INPUTS_VIEW,
    REGRESSION_THRESHOLDS_RELATION,
)
VIEWS: dict[str, View] = {v.name: v for v in _RELATIONS if not v.from_settings}
# Relations of tracehouse.duckdb that are neither a table of TABLES nor a view: the
# settings the views read, stored as tables at each build.
SETTING_TABLES: dict[str, View] = {v.name: v for v in _RELATIONS if v.from_settings}


def _tables(has: str) -> tuple[str, ...]:
    return tuple(name for name, table in TABLES.items() if getattr(table, has))


# Tables whose rows belong to one source: their files store no `source` or `snapshot_id`
# (VIEW_ADDED_COLUMNS); their views add both. The others span the warehouse: protocols (a
# constant), source_snapshots (every snapshot), run_rankings (ranks span every source),
# baseline_map (from the build's settings).
PER_SOURCE_TABLES = _tables("per_source")
# Tables stored as a folder of parts (``Table.parted``).
PARTED_TABLES = _tables("parted")
# Parted tables stored as one part per (source, group of source files).
GROUP_PARTED_TABLES = tuple(n for n, t in TABLES.items() if t.parted == "file_group")
# Per-source tables that keep every build's files (run_history's events), not only the latest.
HISTORY_TABLES = _tables("history")
# Tables computed across every source (never published to Iceberg) and the ones published.
COMPUTED_TABLES = _tables("computed")
PUBLISHED_TABLES = tuple(name for name in TABLES if name not in COMPUTED_TABLES)
# Per-source tables whose rows are the dataset context's (definitions, solutions).
CONTEXT_TABLES = _tables("from_context")
# Tables whose rows come from no source: removing a source keeps their files.
SOURCE_INDEPENDENT_TABLES = _tables("source_independent")
# Tables the publish guard against shrinking leaves alone, and the benchmark results.
SHRINK_EXEMPT_TABLES = _tables("shrink_exempt")
RESULT_TABLES = _tables("holds_results")
# Row order of every table as written or exported (source_snapshots keeps append order).
TABLE_ORDER: dict[str, str] = {n: t.order for n, t in TABLES.items() if t.order is not None}
# Long text kept whole (zstd in the published DuckDB file as in Parquet).
ZSTD_COLUMNS: dict[str, tuple[str, ...]] = {
    name: table.zstd_columns for name, table in TABLES.items() if table.zstd_columns
}

# Every table as its files hold it (without the columns the views of per-source tables add).
STORED: dict[str, Table] = {name: stored_table(table) for name, table in TABLES.items()}
# The tables a worker writes as staging parts, one set per group of files: each parted table as
# its files store it (a worker's part of one is the table's part, unless finalize must resolve
# it), workloads and environments with a column only staging has, and the run keys that
# finalize resolves runs by (tracehouse/tables/staging.py).
_STAGING_SHAPES = {
    WORKLOADS.name: STAGING_WORKLOADS,
    ENVIRONMENTS.name: STAGING_ENVIRONMENTS,
}
STAGING_TABLES: dict[str, Table] = {
    **{
        name: _STAGING_SHAPES.get(name, STORED[name])
        for name, table in TABLES.items()
        if table.staged
    },
    STAGING_RUN_KEYS.name: STAGING_RUN_KEYS,
}
# The shape of every staging part: parts cached under another shape are parsed again (it keys
# the parts and the build state, ingest/plan.py). A staging shape is the cache's own business,
# so it changes neither IMPORTER_VERSION nor the snapshot ids derived from it.
# Declared columns, not Arrow schemas: importing this module must not load pyarrow.
STAGING_FORMAT = hashlib.sha256(
    repr(
        [
            (name, [(c.name, c.kind.name, c.nullable) for c in table.columns])
            for name, table in STAGING_TABLES.items()
        ]
    ).encode()
).hexdigest()[:16]
# Staged tables assembled from all of a source's staging parts at once (not parted by group).
WHOLE_SOURCE_STAGED_TABLES = tuple(
    n for n in STAGING_TABLES if n in TABLES and not TABLES[n].parted
)

# The key of each view: the columns that name one row (tests/system/test_many_sources.py checks that
# no view returns two rows with the same key). FlashInfer-Bench's figures are keyed by their
# source scope (`source`: a source, or the union `(all sources)`), then what they describe.
VIEW_KEYS: dict[str, tuple[str, ...]] = {name: v.key for name, v in VIEWS.items() if v.key}
# The product an Iceberg user queries: ranks and the main marts (Table/View.iceberg_mart).
ICEBERG_MARTS = (
    *(name for name, table in TABLES.items() if table.iceberg_mart),
    *(name for name, view in VIEWS.items() if view.iceberg_mart),
)
# The views people read as products (Dagster's freshness policy).
PRODUCT_VIEWS = tuple(name for name, view in VIEWS.items() if view.product)


def stored_columns(table: str) -> list[str]:
    """The columns of ``table`` its Parquet files hold."""
    return STORED[table].column_names


def slice_order(table: str) -> str:
    """TABLE_ORDER within one source's files (which store no `source` column)."""
    return ", ".join(term for term in TABLE_ORDER[table].split(", ") if term != "source")
