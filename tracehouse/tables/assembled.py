"""The tables a build assembles over every source: the snapshot history, the ranking, the
baseline map it was given, and run_history's appearances and disappearances of runs.
"""

from __future__ import annotations

from tracehouse.tables.declare import (
    I64,
    SOURCE_COLUMNS,
    SOURCE_NAME,
    STRINGS,
    UTC_MS,
    B,
    S,
    Table,
)
from tracehouse.tables.declare import column as _c

SOURCE_SNAPSHOTS = Table(
    "source_snapshots",
    "Which source revision each warehouse state came from: every snapshot of every source, in build order.",
    ("source", "snapshot_number"),
    (
        _c(
            "snapshot_id",
            S,
            "sha256 of (source, resolved sha, file list digest); a source that returns to an "
            "earlier state has that snapshot again, under a new snapshot_number.",
            False,
        ),
        _c(
            "source",
            S,
            "Name of the source (`tracehouse build --source-name`, by default derived from the URI).",
            False,
        ),
        _c(
            "uri",
            S,
            "The source's location: the resolved folder, or hf://datasets/<repo> (revision in requested_revision / resolved_sha).",
            False,
        ),
        _c(
            "snapshot_number",
            I64,
            "1 for the first snapshot of the source, then one more per build that read a new state of it.",
            False,
        ),
        _c("requested_revision", S, "Revision asked for (branch, tag, sha); null for a folder."),
        _c(
            "resolved_sha",
            S,
            "Commit sha the build read; the folder's git HEAD or null for a folder.",
        ),
        _c("built_at", UTC_MS, "When the build that recorded this snapshot ran.", False),
        _c("files", I64, "Files read.", False),
        _c("bytes", I64, "Bytes of those files.", False),
        _c(
            "file_list_digest",
            S,
            "sha256 over the sorted (path, size, content sha256) list.",
            False,
        ),
        _c(
            "importer_version",
            S,
            "The tracehouse importer that built the snapshot (`tracehouse-importer/N`, bumped when parsing or normalisation changes).",
            False,
        ),
    ),
    shrink_exempt=True,
)

RUN_RANKINGS = Table(
    "run_rankings",
    "Ranking-v1 per run: eligibility with reasons, cohort size and dense rank within its comparison key.",
    ("run_id",),
    (
        _c("run_id", S, "Key into runs.", False),
        _c("eligible", B, "True when the run may rank.", False),
        _c(
            "ineligible_reasons",
            STRINGS,
            "Reason codes, in KernelIndex order, when not eligible.",
            False,
        ),
        _c("cohort_size", I64, "Distinct eligible runs sharing the comparison key."),
        _c("rank", I64, "Dense rank by latency_ns within the cohort; equal latencies tie."),
    ),
    parted="ranking_bucket",
    order="run_id",
    computed=True,
    iceberg_mart=True,
    holds_results=True,
)


BASELINE_MAP = Table(
    "baseline_map",
    "The web leaderboard's baseline name map given to the build (--baselines): one row per (definition, key).",
    ("definition", "device"),
    (
        _c("definition", S, "Definition name as the map's key.", False),
        _c("device", S, "`default`, or the exact device string this entry applies to.", False),
        _c("solution", S, "The baseline solution named for it.", False),
        _c("position", I64, "Order of the key inside the definition's entry (0-based).", False),
    ),
    order="definition, position",
    source_independent=True,
)

# run_history is stored as two append-only tables per source, so that a new snapshot costs what
# changed: a row in run_appearances when a run appears (or comes back), a row in
# run_disappearances when a later snapshot of its source no longer holds it. The view
# sql/marts/run_history.sql pairs them into snapshot ranges.
HISTORY_FACTS = (
    _c("run_id", S, "Key into runs while the run is current.", False),
    _c(
        "comparison_key",
        S,
        "Comparison key of the run in this range (a change of key starts a new range).",
    ),
    _c("eligible", B, "May rank (sql/rank/run_rankings.sql) in this range.", False),
)

RUN_APPEARANCES = Table(
    "run_appearances",
    "One row per run and snapshot in which it appeared: the first snapshot of a run_history range, with the facts leader changes need.",
    ("source", "run_id", "first_snapshot_number"),
    (
        *HISTORY_FACTS,
        _c(
            "first_snapshot_number",
            I64,
            "source_snapshots.snapshot_number of the first snapshot of the range.",
            False,
        ),
        _c("definition", S, "Definition name."),
        _c("solution", S, "Solution name."),
        _c(
            "workload_uuid",
            S,
            "The run's workload.uuid as written (null for older records without one).",
        ),
        _c(
            "hardware",
            S,
            "Normalized hardware product (null in ranges recorded before it was kept).",
        ),
        _c("status", S, "Status as recorded."),
        _c("latency_ns", I64, "Latency in ns (null when the run has none)."),
        _c("observed_at", UTC_MS, "When the run was measured (UTC)."),
        _c("run_digest", S, "KernelIndex run digest in the first snapshot of the range."),
        *SOURCE_COLUMNS,
        SOURCE_NAME,
    ),
    per_source=True,
    history=True,
    order="source, run_id, first_snapshot_number",
)

RUN_DISAPPEARANCES = Table(
    "run_disappearances",
    "One row per run_history range that ended: the first snapshot of its source that no longer held the run.",
    ("source", "run_id", "first_snapshot_number"),
    (
        *HISTORY_FACTS,
        _c(
            "first_snapshot_number",
            I64,
            "The range's first snapshot (key into run_appearances with run_id).",
            False,
        ),
        _c(
            "absent_snapshot_number",
            I64,
            "The first snapshot of the source without the run.",
            False,
        ),
        SOURCE_NAME,
    ),
    per_source=True,
    history=True,
    order="source, run_id, first_snapshot_number",
)
