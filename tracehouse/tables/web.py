"""FlashInfer-Bench's web leaderboard, as the web site computes it (web_*). What each figure
means: docs/metrics.md.
"""

from __future__ import annotations

from tracehouse.tables.declare import (
    View,
)
from tracehouse.tables.declare import view_column as _v
from tracehouse.tables.flashinfer import (
    BASELINE_MAP_COLUMN,
    LIST_ORDER,
    SCOPE_SOURCE,
    THRESHOLD_P,
    UI_HIDDEN,
    WEB_AUTHOR,
    WEB_HARDWARE,
    WEB_PRESET,
)

WEB_DEFINITIONS_VIEW = View(
    "web_definitions",
    "The definitions FlashInfer-Bench's web leaderboard lists, per source scope, in its order.",
    (
        SCOPE_SOURCE,
        _v("definition", "Definition name."),
        _v("op_type", "Its operation type."),
        _v("web_order", "Its position on the site: names by JavaScript localeCompare (ICU)."),
    ),
    key=("source", "definition"),
)

WEB_SOLUTIONS_VIEW = View(
    "web_solutions",
    "Each web definition's solution list: solutions/<author>/<type>/<definition>/*.json whose "
    "`definition` field names it, in the loader's order.",
    (
        SCOPE_SOURCE,
        _v("definition", "Definition name."),
        _v("solution", "Solution name."),
        WEB_AUTHOR,
        LIST_ORDER,
    ),
    key=("source", "definition", "solution"),
)

WEB_TRACES_VIEW = View(
    "web_traces",
    "The trace lines FlashInfer-Bench's web app reads for each definition, per source scope, in "
    "its order.",
    (
        SCOPE_SOURCE,
        _v("definition", "Definition the line names (and whose trace file it is in)."),
        _v("solution", "Solution name."),
        _v("workload_group", "Workload uuid; '' when missing or empty."),
        _v("has_evaluation", 'False for an `"evaluation": null` line.'),
        _v("status", "Evaluation status as written."),
        _v("latency_ms", "Latency in ms, only when it is a JSON number."),
        _v(
            "device",
            "environment.device, else environment.hardware, else 'unknown' (exact strings).",
        ),
        _v("trace_order", "The line's position in the web's reading order."),
    ),
)

WEB_HARDWARE_SCOPES_VIEW = View(
    "web_hardware_scopes",
    "Hardware scopes of the web figures, per source scope: `all` and each device string.",
    (
        SCOPE_SOURCE,
        WEB_HARDWARE,
        _v(
            "same_lines_as",
            "The scope whose evaluated lines this one holds: for `all`, the source's one device "
            "when every evaluated line ran on it (figures over evaluated lines are computed once "
            "and given to both); otherwise the scope itself.",
        ),
    ),
    key=("source", "hardware"),
)

WEB_SCOPED_TRACES_VIEW = View(
    "web_scoped_traces",
    "web_traces once per hardware scope they belong to (a line without an evaluation is in "
    "scope `all` only).",
    (WEB_HARDWARE, *WEB_TRACES_VIEW.columns),
)

WEB_BASELINE_MAPS_VIEW = View(
    "web_baseline_maps",
    "The baseline name maps the web figures are computed with, per source scope: "
    "{definition: {default, <device>}} as rows.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP_COLUMN,
        _v("definition", "Definition the entry is for."),
        _v("device", "The device string the entry is for, or `default`."),
        _v("solution", "The baseline solution name the entry gives."),
        _v("position", "Order of the entry inside the definition's map (0-based)."),
    ),
    key=("source", "baseline_map", "definition", "device"),
)

WEB_MAP_NAMES_VIEW = View(
    "web_map_names",
    "Which baseline maps exist: `author_baseline` always, `baselines_file` when the build was "
    "given --baselines.",
    (_v("baseline_map", "A baseline map's name."),),
    key=("baseline_map",),
)

WEB_BASELINE_NAMES_VIEW = View(
    "web_baseline_names",
    "Per map and definition, every solution name the map gives: such a solution gets no curve "
    "or score of its own on the site.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP_COLUMN,
        _v("definition", "Definition name."),
        _v("solution", "A solution the map names for it (default or device entry)."),
    ),
    key=("source", "baseline_map", "definition", "solution"),
)

WEB_GROUPS_VIEW = View(
    "web_groups",
    "The web's workload groups per source scope, map, hardware scope and definition, with the "
    "baseline each group is compared against.",
    (
        BASELINE_MAP_COLUMN,
        SCOPE_SOURCE,
        WEB_HARDWARE,
        _v("definition", "Definition name."),
        _v("workload_group", "The group: a workload uuid ('' when missing)."),
        _v("first_order", "trace_order of the group's first evaluated line."),
        _v("group_device", "Device of the group's first line, which picks the baseline name."),
        _v(
            "baseline_solution",
            "The baseline name the map gives for that device, else its default.",
        ),
        _v(
            "baseline_entry",
            "Which map entry gave it: `device:<device>` or `default`; null when none.",
        ),
        _v(
            "baseline_first_latency_ms",
            "Latency of the baseline's first line in the group, whatever its status (fast_p uses it).",
        ),
        _v(
            "baseline_min_latency_ms",
            "The baseline's minimum PASSED latency > 0 in the group (the score uses it).",
        ),
        _v("usable", "True when baseline_first_latency_ms is a number > 0; fast_p skips others."),
    ),
    key=("source", "baseline_map", "hardware", "definition", "workload_group"),
)

WEB_CANDIDATES_VIEW = View(
    "web_candidates",
    "Per map: the solutions that get their own web curve and score (those the map does not "
    "name for their definition).",
    (
        SCOPE_SOURCE,
        BASELINE_MAP_COLUMN,
        _v("definition", "Definition name."),
        _v("solution", "Solution name."),
        WEB_AUTHOR,
        LIST_ORDER,
        _v("is_baseline", "True when the map names this solution for the definition."),
        UI_HIDDEN,
    ),
    key=("source", "baseline_map", "definition", "solution"),
)

WEB_SOLUTION_GROUPS_VIEW = View(
    "web_solution_groups",
    "Each solution's evaluated web lines of one workload group reduced once, per source scope, "
    "hardware scope and definition: what the ratio entries and the scores start from.",
    (
        SCOPE_SOURCE,
        WEB_HARDWARE,
        _v("definition", "Definition name."),
        _v("workload_group", "The workload group."),
        _v("solution", "Solution name."),
        _v(
            "last_passing_latency_ms",
            "Latency of its last PASSED line with a latency > 0 (in the web's line order); "
            "null when none.",
        ),
        _v("min_passing_latency_ms", "Smallest latency of its PASSED lines with a latency > 0."),
        _v("passed", "True when it has a PASSED line with latency > 0 in the group."),
        _v("failed", "True when one of its lines in the group is not PASSED."),
    ),
    key=("source", "hardware", "definition", "workload_group", "solution"),
)

WEB_RATIO_ENTRIES_VIEW = View(
    "web_ratio_entries",
    "The web's per-group ratio entries behind fast_p and coverage: one per usable group and "
    "solution of the definition's list other than the group's baseline.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP_COLUMN,
        WEB_HARDWARE,
        _v("definition", "Definition name."),
        _v("workload_group", "The workload group."),
        _v("first_order", "The group's first_order (web_groups)."),
        _v("baseline_solution", "The group's baseline."),
        _v("solution", "The solution the entry is for."),
        WEB_AUTHOR,
        _v(
            "ratio",
            "Baseline first latency / the solution's latency on its LAST PASSED line with a "
            "latency > 0; 0 when it never passed.",
        ),
        _v(
            "max_passing_ratio",
            "The largest ratio over all its passing lines (the web's maxRatio).",
        ),
        _v("passed", "True when the solution has a PASSED line with latency > 0 in the group."),
    ),
    key=("source", "baseline_map", "hardware", "definition", "workload_group", "solution"),
)

# web_definition_stats is web_definition_scopes with the curve grid's end before its last column.
_DEFINITION_SCOPE_COLUMNS = (
    SCOPE_SOURCE,
    BASELINE_MAP_COLUMN,
    WEB_HARDWARE,
    _v("definition", "Definition name."),
    _v("web_order", "Its position on the site (web_definitions)."),
    _v("n_workloads", "nWorkloads: its usable groups."),
)
_ON_LEADERBOARD = _v(
    "on_leaderboard", "True when the leaderboard includes it (≥ 1 solution and ≥ 1 line)."
)
_DEFINITION_SCOPE_KEY = ("source", "baseline_map", "hardware", "definition")

WEB_DEFINITION_SCOPES_VIEW = View(
    "web_definition_scopes",
    "Per map, hardware scope and web definition: its usable groups and whether the "
    "leaderboard includes it (web_definition_stats without the curve grid's end).",
    (*_DEFINITION_SCOPE_COLUMNS, _ON_LEADERBOARD),
    key=_DEFINITION_SCOPE_KEY,
)

WEB_DEFINITION_STATS_VIEW = View(
    "web_definition_stats",
    "Per map, hardware scope and web definition: its usable groups, curve grid end and whether "
    "the leaderboard includes it.",
    (
        *_DEFINITION_SCOPE_COLUMNS,
        _v("max_ratio", "maxRatio: the end of its curve grid, at least 1."),
        _ON_LEADERBOARD,
    ),
    key=_DEFINITION_SCOPE_KEY,
)

WEB_LEVEL = _v(
    "level",
    "`solution` (one definition's solution), `author_definition` (an author's candidates of "
    "one definition pooled) or `author_all` (of every leaderboard definition).",
)

WEB_FAST_P_VIEW = View(
    "web_fast_p",
    "The web leaderboard's fast_p curves at each threshold of fast_p_thresholds, per map and "
    "hardware scope, at three levels.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP_COLUMN,
        WEB_HARDWARE,
        WEB_LEVEL,
        _v("definition", "Definition name; `*` at level author_all."),
        _v("solution", "Solution name at level solution; null at the author levels."),
        _v("author", "Author of the solution(s)."),
        THRESHOLD_P,
        WEB_PRESET,
        _v("n_ratios", "Ratio entries pooled."),
        _v("n_at_least_p", "Of those, entries with ratio >= p."),
        _v("fraction", "n_at_least_p / n_ratios, exact; null without entries."),
        _v(
            "web_sample_p",
            "The grid point the site reads for p: its curve is sampled, so a ratio equal to p "
            "can be missed.",
        ),
        _v("web_percent", "The percentage the site shows at p (read at web_sample_p)."),
        _v("n_workloads", "Usable groups of the definitions pooled (nWorkloads)."),
        _v("max_ratio", "The curve grid's end (maxRatio)."),
        UI_HIDDEN,
    ),
    key=("source", "baseline_map", "hardware", "level", "definition", "solution", "author", "p"),
)

WEB_COVERAGE_VIEW = View(
    "web_coverage",
    "The web leaderboard's coverage, per map and hardware scope, for one definition "
    "(author_definition) and over every leaderboard definition (author_all).",
    (
        SCOPE_SOURCE,
        BASELINE_MAP_COLUMN,
        WEB_HARDWARE,
        _v("level", "`author_definition` or `author_all`."),
        _v("definition", "Definition name; `*` at level author_all."),
        _v("author", "The author."),
        _v("attempted", "The author's ratio entries (failures are attempts)."),
        _v("total", "Σ over definitions of nWorkloads × the author's candidate solutions there."),
        _v("percent", "attempted / total × 100 (0 when total = 0)."),
        _v("comparison_count", "attempted, under the site's name."),
        _v("total_comparisons", "total, under the site's name."),
        _v("total_workloads", "Usable groups of the definitions counted."),
        UI_HIDDEN,
    ),
    key=("source", "baseline_map", "hardware", "level", "definition", "author"),
)

WEB_SOLUTION_SCORES_VIEW = View(
    "web_solution_scores",
    "The web leaderboard's per-solution score (computeSolutionScore), per map and hardware "
    "scope, for every solution of a web definition.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP_COLUMN,
        WEB_HARDWARE,
        _v("definition", "Definition name."),
        _v("solution", "Solution name."),
        WEB_AUTHOR,
        _v("is_baseline", "True when the map names this solution for the definition."),
        LIST_ORDER,
        UI_HIDDEN,
        _v("outcome", "`score`, or `null` when the site computes none (see reason)."),
        _v("reason", "For `null`: is_baseline or no_comparable_workload; null for a score."),
        _v(
            "avg_speedup",
            "Mean over attempted groups of baseline minimum PASSED latency / the solution's; "
            "NaN as on the site when a ratio is; 0.0 on any failure.",
        ),
        _v("success_rate", "1.0 when every line of the solution passed, else 0.0."),
        _v("win_rate", "Share of compared groups with ratio > 1 (0.0 on any failure)."),
        _v("workloads", "Groups compared."),
    ),
    key=("source", "baseline_map", "hardware", "definition", "solution"),
)

WEB_AUTHOR_RANKINGS_VIEW = View(
    "web_author_rankings",
    "The web leaderboard's author ranking (computeAuthorRankings), per map and hardware scope, "
    "over the leaderboard's definitions.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP_COLUMN,
        WEB_HARDWARE,
        _v(
            "rank", "The author's place: avg_speedup descending (NaN first), ties by localeCompare."
        ),
        _v("author", "The author ranked."),
        _v(
            "avg_speedup",
            "Mean in definition order of the author's best solution's avg_speedup per definition.",
        ),
        _v("success_rate", "The same mean of those solutions' success_rate."),
        _v("win_rate", "The same mean of those solutions' win_rate."),
        _v("workloads", "Sum of those solutions' compared groups."),
        _v("definitions", "Definitions the author has a score on."),
        _v("best_solutions", "JSON object {definition: the author's best solution there}."),
        UI_HIDDEN,
    ),
    key=("source", "baseline_map", "hardware", "rank"),
)

WEB_CORRECTNESS_SUMMARY_VIEW = View(
    "web_correctness_summary",
    "The web's correctness summary per hardware scope: status buckets per solution, per author "
    "and in total.",
    (
        SCOPE_SOURCE,
        WEB_HARDWARE,
        _v("level", "`solution`, `author` (sums over leaderboard definitions) or `totals`."),
        _v("definition", "Definition name at level solution; `*` at levels author and totals."),
        _v("solution", "Solution name at level solution; else null."),
        _v("author", "The author (`unknown` if none); null at level totals."),
        _v("total", 'Web trace lines counted, duplicates and `"evaluation": null` included.'),
        _v("passed", "Lines with status PASSED."),
        _v("incorrect", "Lines with INCORRECT_SHAPE, INCORRECT_NUMERICAL or INCORRECT_DTYPE."),
        _v("runtime_error", "Lines with RUNTIME_ERROR, COMPILE_ERROR or TIMEOUT."),
        _v("other", "Any other line, including one without an evaluation."),
    ),
    key=("source", "hardware", "level", "definition", "solution", "author"),
)

WEB_BUCKETS_VIEW = View(
    "web_buckets",
    "The kernel page's faster / slower / incorrect buckets, per map, hardware scope and "
    "threshold p, for each solution other than the page's baseline.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP_COLUMN,
        WEB_HARDWARE,
        _v("definition", "Definition name."),
        _v(
            "baseline_solution",
            "The page's baseline: the map's default, else its first device entry.",
        ),
        _v("solution", "Solution name."),
        WEB_AUTHOR,
        THRESHOLD_P,
        WEB_PRESET,
        _v("faster", "Groups where baseline / solution first-line latency >= p."),
        _v("slower", "Groups with a ratio below p."),
        _v(
            "slower_no_ratio",
            "Groups counted slower because a latency is missing (or the solution's is 0).",
        ),
        _v("incorrect", "Groups whose first solution line is not PASSED."),
    ),
    key=("source", "baseline_map", "hardware", "definition", "solution", "p"),
)
