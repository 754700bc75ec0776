"""Names both the table schemas (``schemas``) and the warehouse layout (``warehouse``) read.

A module of its own, importing nothing, so neither of the two imports the other for them.
"""

# Names of per-source tables: the generation holds <table>.parquet/<source key>/*.parquet.
PER_SOURCE_TABLES = (
    "definitions",
    "implementations",
    "workloads",
    "environments",
    "runs",
    "correctness",
    "rejects",
    "trace_lines",
    "run_appearances",
    "run_disappearances",
)
# Columns of per-source tables the views add from sources.json (schemas.VIEW_ADDED_COLUMNS):
# stored in the parts they would change every part on every build.
VIEW_ADDED_COLUMNS = ("source", "snapshot_id")
