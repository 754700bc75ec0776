"""Staging: what ingest workers write, one set of parts per group of files, and finalize
assembles into the tables (tracehouse/tables/ingested.py).
"""

from __future__ import annotations

from tracehouse.tables.declare import I64, B, Column, S, Table, stored_table
from tracehouse.tables.ingested import ENVIRONMENTS, RUNS, WORKLOADS

# Columns resolved only when all files are known (finalize): they depend on solutions, the
# dataset revision or other files, so staging parts stay valid when those change.
RESOLVED_RUN_COLUMNS = frozenset(
    {"snapshot_id", "author", "implementation_digest", "run_digest", "comparison_key"}
)
# Columns that exist only while staging.
STAGING_RUN_COLUMNS = (
    Column("record_index", I64, "Position of the object inside its line.", False),
    Column("source_offset", I64, "Byte offset of the line in the file.", False),
    Column(
        "identity_complete",
        B,
        "KernelIndex reads this line and accepts it, given that its solution resolves.",
        False,
    ),
    Column("has_timing", B, "The run has a performance block.", False),
    Column(
        "run_body_template",
        S,
        "Canonical BenchmarkRun envelope with placeholders for the implementation and workload digests.",
    ),
)
STAGING_RUNS = Table(
    "staging_runs",
    "runs rows of one file before global resolution",
    ("run_id",),
    tuple(c for c in stored_table(RUNS).columns if c.name not in RESOLVED_RUN_COLUMNS)
    + STAGING_RUN_COLUMNS,
)


def _staged(table: Table, description: str, extra: Column) -> Table:
    """``table`` as its files store it, with one column that only staging has."""
    stored = stored_table(table)
    return Table(f"staging_{table.name}", description, stored.key, (*stored.columns, extra))


STAGING_WORKLOADS = _staged(
    WORKLOADS,
    "workload rows of one file",
    Column("record_index", I64, "Position inside the line.", False),
)
# An environment row is the same wherever it is seen; staging notes the file that saw it, so a
# group whose other files changed can carry this file's rows over without re-parsing it
# (ingest/worker.py carry_rows). Finalize stores the declared columns only.
STAGING_ENVIRONMENTS = _staged(
    ENVIRONMENTS,
    "environment rows of one file",
    Column("source_file", S, "The file whose lines used this environment.", False),
)
