"""FlashInfer-Bench's figures as its command-line tools compute them (fib_*, author_rankings,
win_at_p), and the columns the web site's figures share with them. What each figure means:
docs/metrics.md.
"""

from __future__ import annotations

from tracehouse.tables.declare import (
    View,
    same_as,
)
from tracehouse.tables.declare import view_column as _v
from tracehouse.tables.ingested import TRACE_LINES

# FlashInfer-Bench's figures (fib_*, web_*, author_rankings, win_at_p) and tracehouse's
# leaderboard building blocks. What each figure means: docs/metrics.md.
SCOPE_SOURCE = _v(
    "source",
    "Source scope of the figure: one source's name, or `(all sources)` for their union "
    "(fib_source_scopes).",
)
FIB_HARDWARE = _v(
    "hardware",
    "Hardware scope: `all` = FlashInfer-Bench's own figure, every GPU mixed; else one exact "
    "evaluation.environment.hardware string, the same rule on that GPU's trace lines only.",
)
WEB_HARDWARE = _v(
    "hardware",
    "Hardware scope: `all` = what the web site computes (every GPU of a definition together); "
    "else one device string (environment.device, else environment.hardware), that device's "
    "lines only.",
)
BASELINE_MAP_COLUMN = _v(
    "baseline_map",
    "The baseline name map the figure uses: `baselines_file` (the build's --baselines) or "
    "`author_baseline` (each definition's one solution of author `baseline`).",
)
RANKING_SCOPE = (
    _v(
        "scope_kind",
        "What the ranking scope is: `all` (every loaded definition), `op_type` or `definition`.",
    ),
    _v("scope", "The scope itself: `all`, the op_type, or the definition name."),
)
THRESHOLD_P = _v("p", "The threshold p (one of fast_p_thresholds).")
WEB_PRESET = _v("web_preset", "True when p is one of the web site's presets (0.7, 0.95, 1.0).")
UI_HIDDEN = _v(
    "ui_hidden",
    "True when the web leaderboard hides this author: it owns a solution the map names as a "
    "baseline for some definition.",
)
LIST_ORDER = _v(
    "list_order",
    "Position in the definition's web solution list (folder and file names, bytewise).",
)
WEB_AUTHOR = _v("author", "Author of the solution, from its solution file.")
SCORE_RATES = (
    _v(
        "avg_speedup",
        "Mean over compared workloads of baseline / solution minimum PASSED latency; 0.0 when the "
        "solution failed anywhere; null unless scored.",
    ),
    _v(
        "success_rate",
        "1.0 when every line of the solution passed, else 0.0; null unless scored.",
    ),
    _v(
        "win_rate",
        "Share of compared workloads where the ratio is > 1 (0.0 on any failure); null unless "
        "scored.",
    ),
    _v(
        "workloads", "Workloads compared (baseline passed, solution attempted); null unless scored."
    ),
)
FIB_OUTCOME = (
    _v("reason", "Why there is no figure (an error kind or a `none` reason); null with a figure."),
    _v("detail", "The message FlashInfer-Bench gives for that reason; null with a figure."),
)

FAST_P_THRESHOLDS_VIEW = View(
    "fast_p_thresholds",
    "The thresholds p the fast_p and bucket views are computed at: the web's presets and a grid "
    "from 0 to 2.",
    (_v("p", "A speedup threshold."), WEB_PRESET),
    key=("p",),
)

FIB_SOURCE_SCOPES_VIEW = View(
    "fib_source_scopes",
    "The source scopes of FlashInfer-Bench's figures: each source alone and, with several "
    "sources, their union `(all sources)`; one row per (scope, member source).",
    (
        _v("source", "The source scope: a source's name, or `(all sources)`."),
        _v("member_source", "A source whose data the scope is made of."),
        _v("is_union", "True for the `(all sources)` scope."),
    ),
    key=("source", "member_source"),
)

FIB_UNION_DEFINITIONS_VIEW = View(
    "fib_union_definitions",
    "Per definition name, whether the `(all sources)` scope includes it: only when every "
    "source holding it has the same operation digest.",
    (
        _v("definition", "Definition name."),
        _v("sources", "The sources holding a definition of that name, sorted."),
        _v("operation_digests", "Their distinct operation digests, sorted."),
        _v("in_union", "True when the union scope includes the definition."),
        _v(
            "reason",
            "Why it is left out: `operation_digest_missing` or `operation_digests_differ`; "
            "null when included.",
        ),
    ),
    key=("definition",),
)

FIB_DEFINITIONS_VIEW = View(
    "fib_definitions",
    "The definitions FlashInfer-Bench's Python TraceSet loads (every definitions/**/*.json), "
    "per source scope.",
    (
        SCOPE_SOURCE,
        _v("definition", "Definition name."),
        _v("op_type", "Its operation type (op_type field)."),
        _v("source_file", "Its definition file, relative to the source."),
        _v(
            "web_visible",
            "True when the web app reads it too: definitions/<folder>/<file>.json, one folder deep.",
        ),
    ),
    key=("source", "definition"),
)

FIB_SOLUTIONS_VIEW = View(
    "fib_solutions",
    "The solutions FlashInfer-Bench's Python TraceSet loads (every solutions/**/*.json), per "
    "source scope, with their load order.",
    (
        SCOPE_SOURCE,
        _v("solution", "Solution name."),
        _v("definition", "The definition its `definition` field names."),
        _v("author", "Its author field."),
        _v("source_file", "Its solution file, relative to the source."),
        _v(
            "load_order",
            "FlashInfer-Bench's load order (paths sorted by component), which decides its ties.",
        ),
        _v(
            "web_visible",
            "True when the web leaderboard lists it: solutions/<author>/<type>/<definition>/*.json.",
        ),
    ),
    key=("source", "solution"),
)

FIB_HARDWARE_SCOPES_VIEW = View(
    "fib_hardware_scopes",
    "The hardware scopes of FlashInfer-Bench's figures, per source scope: `all` and each exact "
    "hardware string.",
    (
        SCOPE_SOURCE,
        FIB_HARDWARE,
        _v(
            "same_lines_as",
            "The scope whose trace lines this one holds: for `all`, the source's one GPU when "
            "every evaluated line names it (its figures are computed once and given to both); "
            "otherwise the scope itself.",
        ),
    ),
    key=("source", "hardware"),
)

FIB_TRACE_LINES_VIEW = View(
    "fib_trace_lines",
    "trace_lines once per source scope they belong to; the union leaves out lines of a "
    "definition the sources disagree on.",
    (
        SCOPE_SOURCE,
        *same_as(
            TRACE_LINES,
            "source_file",
            "source_line",
            "record_index",
            "json_parse_ok",
            "definition",
            "solution",
            "workload_uuid",
            "has_evaluation",
            "status",
            "hardware",
            "device",
            "has_performance",
            "latency_ms",
            "latency_is_json_number",
            "speedup_factor",
            "max_absolute_error",
            "max_relative_error",
            "timestamp",
        ),
        _v("member_source", "The source the line came from."),
    ),
)

FIB_SCOPED_TRACES_VIEW = View(
    "fib_scoped_traces",
    "The trace lines FlashInfer-Bench's Python scorer reads (with a solution and an "
    "evaluation), per source scope, once per hardware scope they belong to.",
    (
        SCOPE_SOURCE,
        _v("scope_hardware", "The hardware scope the line is counted in (`all` or its GPU)."),
        _v("solution", "Solution name."),
        _v("definition", "Definition the line is filed under."),
        _v("workload_uuid", "Workload uuid as written."),
        _v("status", "Evaluation status as written."),
        _v("passed", "True when status is PASSED."),
        _v(
            "latency_ms",
            "Latency FlashInfer-Bench's model holds for the line (0.0 when a PASSED line's "
            "performance block has no latency).",
        ),
        _v(
            "invalid_performance",
            "True for a PASSED line with latency ≤ 0, which makes FlashInfer-Bench raise.",
        ),
    ),
)

FIB_SOLUTION_SCORES_VIEW = View(
    "fib_solution_scores",
    'FlashInfer-Bench\'s get_solution_score(S, "baseline") for every loaded solution, per '
    "source scope and hardware scope (docs/metrics.md).",
    (
        SCOPE_SOURCE,
        FIB_HARDWARE,
        _v("definition", "The definition the solution is filed under."),
        _v("solution", "Solution name."),
        _v("author", "Its author."),
        _v(
            "outcome",
            "`score` (a figure), `none` (FlashInfer-Bench returns None) or `error` (it raises).",
        ),
        _v(
            "reason",
            "For none/error: no_baseline, multiple_baselines, is_baseline, invalid_performance "
            "or no_comparable_workload; null for a score.",
        ),
        _v("detail", "FlashInfer-Bench's message for that reason; null for a score."),
        *SCORE_RATES,
        _v("definitions", "1 for a score (the definition it is over); null otherwise."),
        _v(
            "baseline_solution",
            "The definition's one solution of author `baseline`; null when there is none or "
            "several.",
        ),
        _v("load_order", "The solution's load order (fib_solutions), which breaks ties."),
    ),
    key=("source", "hardware", "solution"),
)

FIB_RANKING_SCOPES_VIEW = View(
    "fib_ranking_scopes",
    "The scopes of FlashInfer-Bench's rank_authors / summary: `all`, each op_type, each "
    "definition, per source scope; one row per (scope, definition in it).",
    (
        SCOPE_SOURCE,
        *RANKING_SCOPE,
        _v("definition", "A definition in the scope; null on the row that makes `all` exist."),
    ),
    key=("source", "scope_kind", "scope", "definition"),
)

AUTHOR_RANKINGS_VIEW = View(
    "author_rankings",
    "FlashInfer-Bench's author ranking (rank_authors, as `flashinfer-bench report summary` "
    "prints it), per source scope, hardware scope and ranking scope.",
    (
        SCOPE_SOURCE,
        FIB_HARDWARE,
        *RANKING_SCOPE,
        _v(
            "outcome",
            "`ranked` (one row per author), `empty` (no author has a score) or `error` (a "
            "solution in the scope makes FlashInfer-Bench raise: no ranking).",
        ),
        _v("reason", "For `error`: every error kind found in the scope; null otherwise."),
        _v("detail", "For `error`: the definitions that raise; null otherwise."),
        _v("rank", "The author's place: avg_speedup descending, then author in code point order."),
        _v("author", "The author ranked."),
        _v(
            "avg_speedup",
            "Unweighted mean, over the scope's definitions the author has a score on, of the "
            "author's best solution's avg_speedup there.",
        ),
        _v("success_rate", "The same mean of those best solutions' success_rate."),
        _v("win_rate", "The same mean of those best solutions' win_rate."),
        _v("workloads", "Sum of the compared workloads of those best solutions."),
        _v("definitions", "Definitions the author has a score on in the scope."),
        _v(
            "best_solutions",
            "JSON object {definition: the author's best-scoring solution there} (ties: first "
            "in load order).",
        ),
    ),
    key=("source", "hardware", "scope_kind", "scope", "rank"),
    iceberg_mart=True,
    never_null=("source", "hardware", "scope_kind", "scope", "outcome"),
)

FIB_SUMMARY_VIEW = View(
    "fib_summary",
    "FlashInfer-Bench's TraceSet.summary() (`flashinfer-bench report summary`), per source "
    "scope, hardware scope and ranking scope.",
    (
        SCOPE_SOURCE,
        FIB_HARDWARE,
        *RANKING_SCOPE,
        _v(
            "outcome",
            "`ok`, or `error` when the ranking raises (FlashInfer-Bench then gives no counts).",
        ),
        _v("reason", "For `error`: the error kinds (from author_rankings); null otherwise."),
        _v("detail", "For `error`: the definitions that raise; null otherwise."),
        _v(
            "total",
            "Trace lines loaded in the hardware scope, whatever the ranking scope; null on error.",
        ),
        _v("passed", "Of those, lines with an evaluation whose status is PASSED; null on error."),
        _v(
            "failed",
            'total - passed (an `"evaluation": null` line counts as failed); null on error.',
        ),
        _v("n_rankings", "Authors in the ranking; null on error."),
        _v("rankings", "The ranking as a list of {author, avg_speedup}, in rank order."),
    ),
    key=("source", "hardware", "scope_kind", "scope"),
)

FIB_BEST_TRACE_VIEW = View(
    "fib_best_trace",
    "FlashInfer-Bench's get_best_trace(definition) and len(filter_traces(definition)) at "
    "their default tolerances, per source scope and hardware scope.",
    (
        SCOPE_SOURCE,
        FIB_HARDWARE,
        _v("definition", "Definition name."),
        _v("outcome", "`trace` (a best trace exists) or `none` (no line qualifies)."),
        _v(
            "n_filter_traces",
            "PASSED lines of the definition within both error bounds (filter_traces' length).",
        ),
        _v("max_abs_error_bound", "The max_absolute_error bound applied (1e-2, the default)."),
        _v("max_rel_error_bound", "The max_relative_error bound applied (1e-2, the default)."),
        _v(
            "solution",
            "Solution of the best trace: the qualifying line with the largest speedup_factor.",
        ),
        _v("workload_uuid", "Workload uuid of the best trace."),
        _v("trace_hardware", "The best trace's evaluation.environment.hardware string."),
        _v("timestamp", "The best trace's evaluation timestamp as written."),
        _v("latency_ms", "The best trace's latency in ms."),
        _v(
            "speedup_factor",
            "Its speedup against the PyTorch reference as written (not against the baseline).",
        ),
        _v("max_absolute_error", "Its max_absolute_error."),
        _v("max_relative_error", "Its max_relative_error."),
        _v("source_file", "Trace file of the best trace, relative to its source."),
        _v("source_line", "Its line number (1-based) in that file."),
    ),
    key=("source", "hardware", "definition"),
)

WIN_AT_P_VIEW = View(
    "win_at_p",
    "FlashInfer-Bench's examples/win_at_p.py at each threshold of fast_p_thresholds, per "
    "source scope, for both of its author sources.",
    (
        SCOPE_SOURCE,
        _v(
            "author_source",
            "How authors are named: `name_prefix` (text before the first `_` of the solution "
            "name, the script's default) or `solution_json` (its --author-map from the "
            "solution files).",
        ),
        _v(
            "outcome",
            "`curve`, `empty` (no author besides the baselines), `no_input` (no trace file) or "
            '`error` (the script crashes on an `"evaluation": null` line).',
        ),
        _v("reason", "Why there is no curve; null for `curve`."),
        _v(
            "n_groups",
            "(definition, workload uuid) groups someone passed; null on error or no input.",
        ),
        _v("author", "The author the curve is of; null without a curve."),
        THRESHOLD_P,
        _v("n_total", "Groups the author attempted, other than those where it is the baseline."),
        _v("n_ratios", "Of those, groups where both latencies are > 0 (a ratio exists)."),
        _v("n_wins", "Groups with baseline / author latency strictly greater than p."),
        _v("win_ratio", "win@p = n_wins / n_total."),
    ),
    key=("source", "author_source", "author", "p"),
)
