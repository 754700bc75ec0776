"""The SQL files under ``sql/``: one SELECT each, named after the view or table it returns."""

from __future__ import annotations

from functools import cache
from pathlib import Path

# Views created in tracehouse.duckdb, in dependency order (run_rankings is materialized;
# regressions also reads the regression_thresholds table). schemas.VIEWS documents the ones
# people query by name, column by column.
VIEW_ORDER = (
    "ranking_inputs",
    "baseline_solutions",
    "run_summary",
    "fib_source_scopes",
    "fib_union_definitions",
    "fib_trace_lines",
    "fib_definitions",
    "fib_solutions",
    "fib_hardware_scopes",
    "fib_scoped_traces",
    "fib_solution_scores",
    "fib_ranking_scopes",
    "author_rankings",
    "fib_summary",
    "fib_best_trace",
    "web_definitions",
    "web_solutions",
    "web_traces",
    "web_hardware_scopes",
    "web_scoped_traces",
    "web_baseline_maps",
    "web_map_names",
    "web_baseline_names",
    "web_groups",
    "web_ratio_entries",
    "web_definition_stats",
    "web_candidates",
    "fast_p_thresholds",
    "web_fast_p",
    "web_coverage",
    "web_solution_scores",
    "web_author_rankings",
    "web_correctness_summary",
    "web_buckets",
    "win_at_p",
    "solution_workload_latency",
    "leaderboard_baselines",
    "leaderboard",
    "leaderboard_speedups",
    "leaderboard_fast_p",
    "run_history",
    "latency_history",
    "latency_verdicts",
    "regressions",
    "record_events",
    "leader_changes",
    "source_summary",
)


def sql_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "sql", here / "_sql"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("the sql/ folder is missing from this installation")


@cache
def sql_text(name: str) -> str:
    """The SELECT in ``sql/<name>.sql``, without a trailing semicolon."""
    text = (sql_dir() / f"{name}.sql").read_text()
    return text.strip().rstrip(";")
