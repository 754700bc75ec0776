"""The warehouse's own views: runs summarised, the leaderboard and its building blocks, the
ranking's inputs, run history, latency verdicts, regressions, leader changes and record events.
"""

from __future__ import annotations

from tracehouse.tables.assembled import RUN_APPEARANCES, RUN_RANKINGS
from tracehouse.tables.declare import (
    View,
    same_as,
)
from tracehouse.tables.declare import view_column as _v
from tracehouse.tables.ingested import CORRECTNESS, ENVIRONMENTS, IMPLEMENTATIONS, RUNS

BASELINE_SOLUTIONS_VIEW = View(
    "baseline_solutions",
    "The baseline solution(s) of each definition, as decided at import.",
    same_as(IMPLEMENTATIONS, "definition", "solution", "author", "baseline_rule"),
    key=("definition", "solution"),
)

RUNS_REQUIRED = {c.name for c in RUNS.columns if not c.nullable}
RUN_SUMMARY_COLUMNS = (
    *same_as(RUNS, "definition"),
    _v("op_type", "Operation type of the definition."),
    *same_as(RUNS, "solution"),
    _v("author", "Author of the solution (from the run, else from its solution file)."),
    _v(
        "is_baseline",
        "True when the solution is the baseline of this run's definition (a baseline of "
        "another definition is not one here).",
    ),
    *same_as(
        RUNS,
        "workload_uuid",
        "workload_key",
        "status",
        "ki_status",
        "evaluated",
        "latency_ns",
        "latency_ms",
        "latency_special",
        "reference_latency_ms",
        "speedup_factor",
        "observed_at",
        "timestamp_raw",
        "hardware",
    ),
    *same_as(ENVIRONMENTS, "hardware_raw"),
    *same_as(RUNS, "comparison_key"),
    *same_as(RUN_RANKINGS, "eligible", "ineligible_reasons", "cohort_size", "rank"),
    *same_as(CORRECTNESS, "max_absolute_error", "max_relative_error"),
    *same_as(
        RUNS,
        "evidence_level",
        "external_id",
        "run_id",
        "run_digest",
        "operation_digest",
        "workload_digest",
        "environment_digest",
        "protocol_digest",
        "correctness_key",
        "implementation_digest",
        "identity_error",
        "snapshot_id",
        "source_file",
        "source_line",
        "source",
    ),
)
RUN_SUMMARY_VIEW = View(
    "run_summary",
    "One row per run with what, who, where, how fast and its rank.",
    RUN_SUMMARY_COLUMNS,
    key=("run_id",),
    iceberg_mart=True,
    product=True,
    # The columns taken as they are from a required column of runs (its other tables are
    # LEFT JOINed), with is_baseline (coalesced to false).
    never_null=(
        *(c.name for c in RUN_SUMMARY_COLUMNS if c.name in RUNS_REQUIRED),
        "is_baseline",
    ),
)

LEADERBOARD_VIEW = View(
    "leaderboard",
    "tracehouse's headline per (definition, hardware, solution): coverage and speed against the "
    "slice's baseline on workloads both passed, with FlashInfer-Bench's own GPU-mixed score beside "
    "it (sql/marts/leaderboard.sql).",
    (
        _v("definition", "Definition name."),
        _v("hardware", "Normalized hardware product."),
        _v("solution", "Solution name."),
        _v("author", "Author of the solution file; null when the file is missing."),
        _v(
            "is_baseline",
            "True when the solution's file marks it as the baseline of this definition.",
        ),
        _v("baseline_solution", "The baseline the speedups are against (leaderboard_baselines)."),
        _v("baseline_choice", "Which rule chose the baseline, and why when several matched."),
        _v("runs", "Runs of the solution in this slice, any status."),
        _v(
            "runs_not_evaluated",
            "Of those, records FlashInfer-Bench wrote without evaluating (runs.evaluated).",
        ),
        _v(
            "workloads_in_slice",
            "Distinct workloads any solution ran on this definition and hardware.",
        ),
        _v("workloads_attempted", "Distinct workloads the solution ran."),
        _v("workloads_passed", "Distinct workloads with at least one PASSED run."),
        _v("coverage", "workloads_passed / workloads_in_slice."),
        _v("workloads_compared", "Workloads both the solution and the baseline passed."),
        _v(
            "geomean_speedup",
            "Geometric mean of baseline / solution best PASSED latency over the compared "
            "workloads (1.0 for the baseline itself); null with speedup_reason.",
        ),
        _v("win_rate", "Share of compared workloads where the solution is strictly faster."),
        _v(
            "speedup_reason",
            "Why geomean_speedup is null: no_baseline, no_common_workload, baseline_not_passed.",
        ),
        _v(
            "latency_us_geomean",
            "Geometric mean over passed workloads of the median latency, in µs.",
        ),
        _v(
            "rerun_spread_median",
            "Median over re-run workloads of (max − min) / median latency: run-to-run spread.",
        ),
        _v(
            "sort_tier",
            "1 = passed every workload of the slice, 2 = more than half, 3 = half or fewer.",
        ),
        _v(
            "fib_all_gpus_avg_speedup",
            "FlashInfer-Bench's get_solution_score average speedup, every GPU mixed (null + fib_reason).",
        ),
        _v("fib_all_gpus_win_rate", "FlashInfer-Bench's win rate, every GPU mixed."),
        _v("fib_all_gpus_success_rate", "FlashInfer-Bench's success rate, every GPU mixed."),
        _v("fib_all_gpus_workloads", "Workloads FlashInfer-Bench's score counts, every GPU mixed."),
        _v("fib_reason", "Why FlashInfer-Bench gives no score (it raises or returns None)."),
        _v(
            "fib_scope",
            "The source scope of the fib_all_gpus_* figures: `(all sources)` when the union "
            "holds the solution, else the first source holding it.",
        ),
        _v(
            "speed_class",
            "1 = faster than the baseline, 2 = the baseline, 3 = not faster, 4 = not comparable.",
        ),
        _v(
            "leaderboard_rank",
            "Position in the slice: speed_class (nothing slower than the baseline above it), "
            "sort_tier, geomean_speedup descending, workloads_passed descending, latency, solution.",
        ),
    ),
    key=("definition", "hardware", "solution"),
    iceberg_mart=True,
    never_null=("definition", "hardware", "solution"),
    product=True,
)

# Where a result of latency_history comes from: the first snapshot that held it.
FIRST_SEEN_COLUMNS = (
    _v("source", "The source whose snapshot first held the result."),
    _v("first_snapshot_number", "That snapshot's number within its source."),
    _v("first_snapshot_id", "That snapshot (key into source_snapshots)."),
    _v(
        "first_seen_at",
        "When that snapshot was built; results are ordered by it, then observed_at.",
    ),
)

RECORD_EVENTS_VIEW = View(
    "record_events",
    "KernelIndex record history (§11.2): per comparison key, walking its eligible runs in "
    "observed_at order, the first run and every later run strictly faster than the best so far.",
    (
        _v("comparison_key", "The comparison group (KernelIndex comparison key)."),
        _v("at", 'When the run took the record: its observed_at (quote it as "at" in SQL).'),
        _v("cause", "Why the record changed: `new_run` (a faster run arrived)."),
        _v("policy", "Ranking policy that decides the record: `ranking-v1`."),
        _v("definition", "Definition of the new record holder."),
        _v("solution", "Solution of the new record holder."),
        _v("workload_uuid", "Workload uuid of the new record holder as written."),
        _v("hardware", "Normalized hardware product of the comparison group."),
        _v("observed_at", "observed_at of the new record holder (UTC, ms)."),
        _v("latency_ns", "Latency of the new record holder in integer nanoseconds."),
        _v("run_id", "The new record holder (key into runs)."),
        _v("previous_solution", "Solution of the holder it displaced; null for a first record."),
        _v("previous_observed_at", "observed_at of the displaced holder; null for a first record."),
        _v("previous_latency_ns", "Latency of the displaced holder; null for a first record."),
        _v("previous_run_id", "The displaced holder (key into runs); null for a first record."),
        _v(
            "speedup_over_previous",
            "previous_latency_ns / latency_ns (> 1); null for a first record.",
        ),
        _v("record_number", "1 for the group's first record, then 2, 3, ... in order."),
        _v("held_until", "When the next holder took the record; null while this run holds it."),
        _v("next_run_id", "The run that took the record next; null while this run holds it."),
        *FIRST_SEEN_COLUMNS,
    ),
)

LATENCY_HISTORY_VIEW = View(
    "latency_history",
    "Every distinct latency result (solution, comparison key, observed_at, latency) of an "
    "eligible run in any snapshot the warehouse has read, with the snapshot that first held it.",
    (
        _v("solution", "Solution name; null for runs without one (never judged)."),
        _v("comparison_key", "The comparison group of the result."),
        _v("run_id", "The run holding the result (the smallest run_id among identical ones)."),
        _v("definition", "Definition name."),
        _v("workload_uuid", "Workload uuid as written."),
        _v("hardware", "Normalized hardware product."),
        _v("observed_at", "When the benchmark ran (UTC, ms)."),
        _v("latency_ns", "Latency in integer nanoseconds."),
        *FIRST_SEEN_COLUMNS,
    ),
)

# A result of latency_history as latency_verdicts judges it.
JUDGED_COLUMNS = (
    _v("solution", "Solution name."),
    _v("definition", "Definition name."),
    _v("workload_uuid", "Workload uuid as written."),
    _v("hardware", "Normalized hardware product."),
    _v("comparison_key", "The comparison group of the result."),
    _v("run_id", "The result's run (key into run_history; into runs while current)."),
    _v("observed_at", "When the result was measured (UTC, ms)."),
    _v("latency_ns", "Its latency in integer nanoseconds."),
    _v("history_size", "Earlier results of the solution on the key it is judged against."),
    _v("history_mean_ns", "Mean latency of those earlier results, ns; null without any."),
    _v("history_stddev_ns", "Their sample standard deviation, ns; null for one result."),
    _v("history_best_ns", "Their best (lowest) latency, ns."),
    _v("relative_change", "latency_ns / history_mean_ns - 1 (0.25 = 25 % slower)."),
    _v(
        "z_score",
        "(latency_ns - history_mean_ns) / history_stddev_ns; +/-infinity for a rise/drop "
        "over a history without spread.",
    ),
    _v("previous_run_id", "The solution's result just before this one on the key."),
    _v("previous_latency_ns", "Latency of that previous result, ns."),
    _v("previous_observed_at", "When that previous result was measured."),
    *FIRST_SEEN_COLUMNS,
)
THRESHOLD_COLUMNS = (
    _v("min_history", "The min_history limit in force (TRACEHOUSE_REGRESSION_MIN_HISTORY)."),
    _v("min_change", "The min_change limit in force (TRACEHOUSE_REGRESSION_MIN_CHANGE)."),
    _v("z_threshold", "The z-score limit in force (TRACEHOUSE_REGRESSION_Z_THRESHOLD)."),
)

LATENCY_VERDICTS_VIEW = View(
    "latency_verdicts",
    "Every result of latency_history judged against the same solution's earlier results on "
    "the same comparison key (lookback z-score; limits in regression_thresholds).",
    (
        *JUDGED_COLUMNS,
        _v(
            "verdict",
            "`first result`, `history too short` (fewer than min_history earlier results), "
            "`regression`, `improvement` or `within noise`.",
        ),
        *THRESHOLD_COLUMNS,
    ),
)

REGRESSIONS_VIEW = View(
    "regressions",
    "Results significantly slower than the same solution's earlier results on the same "
    "comparison key: latency_verdicts' `regression` rows.",
    (*JUDGED_COLUMNS, *THRESHOLD_COLUMNS),
    product=True,
)

RUN_HISTORY_VIEW = View(
    "run_history",
    "One row per run and snapshot range of its source: the first and last snapshot in which it "
    "was present (with the same comparison key and eligibility).",
    (
        *same_as(RUN_APPEARANCES, "source", "run_id", "first_snapshot_number"),
        _v("first_snapshot_id", "The range's first snapshot (key into source_snapshots)."),
        _v(
            "last_snapshot_number",
            "The last snapshot of the source that held the run (its latest while current).",
        ),
        _v("last_snapshot_id", "The range's last snapshot (key into source_snapshots)."),
        _v("current", "True when the source's latest snapshot holds the run."),
        *same_as(
            RUN_APPEARANCES,
            "comparison_key",
            "eligible",
            "definition",
            "solution",
            "workload_uuid",
            "hardware",
            "status",
            "latency_ns",
            "observed_at",
            "run_digest",
            "source_file",
            "source_line",
        ),
    ),
)

LEADER_CHANGES_VIEW = View(
    "leader_changes",
    "One row per comparison key and warehouse state (a build) in which its rank-1 run changed.",
    (
        _v("comparison_key", "The comparison key."),
        _v("source", "The source whose build made the state."),
        _v("snapshot_id", "That build's snapshot (key into source_snapshots)."),
        _v("snapshot_number", "The snapshot's number within its source."),
        _v("changed_at", "When that build ran (source_snapshots.built_at)."),
        _v(
            "cause",
            "`first` (no leader before), `faster` (a strictly faster run), `withdrawn` (the "
            "leader's source dropped it), `tie` (an equal run observed earlier leads).",
        ),
        _v("previous_run_id", "The leader before (null for `first`)."),
        _v("previous_solution", "Its solution."),
        _v("previous_latency_ns", "Its latency in ns."),
        _v("run_id", "The new leader (null when no eligible run is left)."),
        _v("solution", "Its solution."),
        _v("latency_ns", "Its latency in ns."),
        _v("speedup_over_previous", "previous_latency_ns / latency_ns."),
    ),
)

SOURCE_SUMMARY_VIEW = View(
    "source_summary",
    "One row per source the warehouse holds: its current snapshot and counts (`tracehouse sources`).",
    (
        _v("source", "The source's name."),
        _v("uri", "The folder or hf:// dataset it stands for."),
        _v("revision", "The revision of its current snapshot (commit sha, else as requested)."),
        _v("snapshot_number", "Its current snapshot's number within the source."),
        _v("snapshot_id", "Its current snapshot (key into source_snapshots)."),
        _v("built_at", "When that snapshot was built."),
        _v("definitions", "Definitions it holds."),
        _v("solutions", "Solutions it holds."),
        _v("runs", "Runs it holds."),
        _v("eligible_runs", "Of which may rank."),
        _v("rejects", "Records and files of it that were not imported."),
    ),
    key=("source",),
)


SOLUTION_WORKLOAD_LATENCY_VIEW = View(
    "solution_workload_latency",
    "Per (definition, hardware, solution, workload): how often it ran and passed, and its "
    "latency in µs over the PASSED re-runs.",
    (
        _v("definition", "Definition name."),
        _v("hardware", "Normalized hardware product."),
        _v("solution", "Solution name."),
        _v("workload_key", "The workload (workload key)."),
        _v("workload_uuid", "Its workload uuid as written."),
        _v("runs", "Runs of it, any status."),
        _v("passed_runs", "Of those, PASSED runs."),
        _v("passed", "True with at least one PASSED run."),
        _v("best_latency_us", "Minimum PASSED latency, µs."),
        _v("median_latency_us", "Median PASSED latency, µs."),
        _v("worst_latency_us", "Maximum PASSED latency, µs."),
        _v("rerun_spread", "(max − min) / median PASSED latency; null with one passing run."),
    ),
    key=("definition", "hardware", "solution", "workload_key"),
)

LEADERBOARD_BASELINES_VIEW = View(
    "leaderboard_baselines",
    "tracehouse's baseline per (definition, hardware) for its leaderboard, and why it was chosen.",
    (
        _v("definition", "Definition name."),
        _v("hardware", "Normalized hardware product."),
        _v("baseline_solution", "The chosen baseline solution."),
        _v(
            "baseline_rule",
            "The rule that chose it: the --baselines map's device entry, its default, author "
            "`baseline`, or author `flashinfer`.",
        ),
        _v("candidates", "How many candidates the strongest rule present had."),
        _v("baseline_choice", "The rule in words, and why this one when several matched."),
    ),
    key=("definition", "hardware"),
)

LEADERBOARD_SPEEDUPS_VIEW = View(
    "leaderboard_speedups",
    "Per (definition, hardware, solution, workload the baseline passed): the speedup of their "
    "best PASSED latencies.",
    (
        _v("definition", "Definition name."),
        _v("hardware", "Normalized hardware product."),
        _v("solution", "Solution name."),
        _v("workload_key", "A workload the hardware's baseline passed."),
        _v("baseline_solution", "That baseline (leaderboard_baselines)."),
        _v(
            "speedup",
            "Baseline / solution best PASSED latency; null when the solution did not pass it.",
        ),
    ),
    key=("definition", "hardware", "solution", "workload_key"),
)

LEADERBOARD_FAST_P_VIEW = View(
    "leaderboard_fast_p",
    "tracehouse's own fast_p curve per (definition, hardware, solution), p from 0 to 3 in "
    "steps of 0.025.",
    (
        _v("definition", "Definition name."),
        _v("hardware", "Normalized hardware product."),
        _v("solution", "Solution name."),
        _v("p", "The speedup threshold."),
        _v(
            "fast_p",
            "Share of the workloads the baseline passed on which the solution passed with "
            "speedup >= p.",
        ),
    ),
    key=("definition", "hardware", "solution", "p"),
)

RANKING_INPUTS_VIEW = View(
    "ranking_inputs",
    "What sql/rank/run_rankings.sql reads of each run, and the bucket it is ranked in.",
    (
        *same_as(
            RUNS,
            "run_id",
            "comparison_key",
            "latency_ns",
            "run_digest",
            "line_digest",
            "ki_status",
            "status",
        ),
        _v(
            "ranking_bucket",
            "The slice of operation digests the run is ranked in (first two hex digits of the "
            "md5 of its operation digest); a build re-ranks only changed buckets.",
        ),
    ),
)

# Not a view: the limits the regression views read, stored as a table from the settings.
REGRESSION_THRESHOLDS_RELATION = View(
    "regression_thresholds",
    "The regression limits in force, from the settings (one row); latency_verdicts reads it.",
    THRESHOLD_COLUMNS,
    from_settings=True,
)
