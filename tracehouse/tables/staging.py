"""Staging: what ingest workers write, one set of parts per group of files, and finalize
assembles into the tables (tracehouse/tables/ingested.py).
"""

from __future__ import annotations

from tracehouse.tables.declare import I64, B, Column, S, Table, stored_table
from tracehouse.tables.ingested import ENVIRONMENTS, RUNS, WORKLOADS

# What a worker knew when it completed a run, beside the run's row (ingest/resolution.py): the
# resolution inputs only the whole source fixes (the workload cache's first line, the files
# KernelIndex cannot read, the solutions) as it assumed them, and what recomputes the resolved
# columns when one of them turns out otherwise. Finalize reads these, not the runs' rows.
# The runs columns a run's keys repeat: where it came from, what it names, and the digests as
# its worker completed them (the line's own case, not yet the workload cache's).
_RUN_KEY_COLUMNS = (
    "run_id",
    "solution",
    "workload_key",
    "operation_digest",
    "workload_digest",
    "environment_digest",
    "correctness_key",
    "author",
    "implementation_digest",
    "source_file",
    "source_line",
)
STAGING_RUN_KEYS = Table(
    "run_keys",
    "what completed each run of one file, and what it assumed of the whole source",
    ("run_id",),
    (
        *(c for c in stored_table(RUNS).columns if c.name in _RUN_KEY_COLUMNS),
        Column("record_index", I64, "Position of the object inside its line.", False),
        Column(
            "identity_complete",
            B,
            "KernelIndex reads this line and accepts it, given that its solution resolves.",
            False,
        ),
        Column("line_identity_error", S, "Why KernelIndex refuses the line itself, else null."),
        Column("has_timing", B, "The run has a performance block.", False),
        Column(
            "run_body_template",
            S,
            "Canonical BenchmarkRun envelope with slots for the implementation and workload digests.",
        ),
        Column("solution_known", B, "The worker found the solution among the source's.", False),
        Column(
            "file_unreadable",
            B,
            "The worker took the file as one KernelIndex cannot read (a line before was not strict JSON).",
            False,
        ),
    ),
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
