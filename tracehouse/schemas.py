"""Every warehouse table, declared once: column names, Arrow types, nullability and meaning.

Writers build their Arrow tables from these schemas (``arrow_schema``), so a frame with a
missing, extra or mistyped column fails where it is written, and the README glossary and the
``tracehouse tables`` output are generated from the same declarations.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from tracehouse.table_layout import PER_SOURCE_TABLES, VIEW_ADDED_COLUMNS

# Bumped whenever parsing or normalisation changes, so cached staging parts are rebuilt.
IMPORTER_VERSION = "tracehouse-importer/4"

UTC_MS = pa.timestamp("ms", tz="UTC")
STRINGS = pa.list_(pa.string())
# A solution's source files: (path, content) in file order.
SOURCE_FILES = pa.list_(pa.struct([("path", pa.string()), ("content", pa.string())]))


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]

    @property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns])

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def _c(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> Column:
    return Column(name, type_, doc, nullable)


S, I64, F64, B = pa.string(), pa.int64(), pa.float64(), pa.bool_()

SOURCE_COLUMNS = (
    _c("source_file", S, "Dataset-relative path of the file the record came from.", False),
    _c("source_line", I64, "1-based line number in source_file (1 for a whole-file JSON).", False),
)

# The source a row came from: the name `tracehouse build` gave it (`tracehouse sources`), and the
# snapshot of that source the row belongs to. Neither is stored in a source's table files: the
# table views add them from the generation's sources.json (tracehouse/warehouse.py), so a
# source's files are the same whatever else the warehouse holds.
SOURCE_NAME = _c(
    "source",
    S,
    "Name of the source the row came from (`tracehouse sources`; key into source_snapshots.source).",
    False,
)
SNAPSHOT_OF_ROW = _c(
    "snapshot_id",
    S,
    "Key into source_snapshots: the snapshot of the source that produced this row.",
    False,
)

DEFINITIONS = Table(
    "definitions",
    "One row per operation definition (definitions/**.json), keyed by its name.",
    ("source", "definition"),
    (
        _c("definition", S, "Definition name (the `name` field; unique).", False),
        _c("op_type", S, "Operation type; `type` in files before 2025-09-16."),
        _c("description", S, "Free-text description."),
        _c("tags", STRINGS, "Tags such as `model:deepseek-v3`, `status:verified`."),
        _c("axes_json", S, "Axes object as JSON, original order (const values, var axes).", False),
        _c(
            "inputs_json", S, "Inputs object as JSON; key order is the positional interface.", False
        ),
        _c("outputs_json", S, "Outputs object as JSON, interface order.", False),
        _c("constraints", STRINGS, "Constraint expressions."),
        _c("reference_bytes", I64, "UTF-8 length of the reference implementation source."),
        _c(
            "reference",
            S,
            "The reference implementation's Python source, in full; null when absent.",
        ),
        _c(
            "operation_digest",
            S,
            "KernelIndex OperationSpec digest (sha256:...); null when KernelIndex would refuse the definition.",
        ),
        _c("identity_error", S, "Why operation_digest is null (identity reason code), else null."),
        _c(
            "schema_variant",
            S,
            "`current`, or `legacy_type_key` when op_type came from `type`.",
            False,
        ),
        _c("path_op_type", S, "Folder between definitions/ and the file, for audit only."),
        _c("extra_json", S, "Unknown top-level keys, as JSON; null when none."),
        _c(
            "definition_json",
            S,
            "The whole definition object as written, as compact JSON in its own key order "
            "(`tracehouse export --flashinfer-trace` writes it back).",
            False,
        ),
        *SOURCE_COLUMNS,
        SOURCE_NAME,
    ),
)

IMPLEMENTATIONS = Table(
    "implementations",
    "One row per solution (solutions/**.json): who wrote it and how it is called. Source text stays out.",
    ("source", "solution"),
    (
        _c("solution", S, "Solution name (unique).", False),
        _c(
            "definition",
            S,
            "Definition the solution declares it implements (may not exist).",
            False,
        ),
        _c(
            "author",
            S,
            "Author field: a person, an agent, or `baseline` (`flashinfer` before 2026-04-12).",
        ),
        _c(
            "is_baseline",
            B,
            "True when the solution is its definition's baseline (see baseline_rule).",
            False,
        ),
        _c(
            "baseline_rule",
            S,
            "`author:baseline`, `author:flashinfer` or `baseline_map`; null for non-baselines.",
        ),
        _c(
            "language",
            S,
            "Build language, lower-cased (`python`, `triton`, `cuda`, `cpp`, `tilelang`, ...).",
        ),
        _c("language_raw", S, "Language as written (e.g. `Python`, `sycl`)."),
        _c("entry_point", S, "`file::function` entry point."),
        _c(
            "target_hardware",
            STRINGS,
            "Hardware the author targeted (a wish list, not where it ran).",
        ),
        _c("dependencies", STRINGS, "Declared dependencies (informational)."),
        _c("binding", S, "`tvm-ffi` or `torch` for cpp/cuda; null when absent."),
        _c(
            "destination_passing_style",
            B,
            "As written; null when the key is absent (pre 2025-12-24 files).",
        ),
        _c("description", S, "Free-text description of the solution; null when absent."),
        _c("source_files", I64, "Number of source files.", False),
        _c("source_bytes", I64, "Total UTF-8 bytes of all sources.", False),
        _c(
            "sources",
            SOURCE_FILES,
            "Every source file as written, in order: its `path` and full `content`.",
            False,
        ),
        _c(
            "sources_digest",
            S,
            "sha256 over the canonical list of (path, content digest) of every source.",
            False,
        ),
        _c(
            "implementation_digest",
            S,
            "KernelIndex ImplementationRevision digest; null without a dataset revision or definition.",
        ),
        _c("identity_error", S, "Why implementation_digest is null, else null."),
        _c("path_author", S, "Folder after solutions/, for audit only (may differ from author)."),
        _c("extra_json", S, "Unknown keys, as JSON; null when none."),
        _c(
            "spec_json",
            S,
            "The `spec` object (build spec) as written, as compact JSON; null when absent.",
        ),
        *SOURCE_COLUMNS,
        SOURCE_NAME,
    ),
)

WORKLOADS = Table(
    "workloads",
    "One row per (definition, workload_key): the concrete shapes and inputs, from workload files and traces.",
    ("source", "definition", "workload_key"),
    (
        _c("definition", S, "Definition name.", False),
        _c(
            "workload_key",
            S,
            "The uuid, or for uuid-less legacy workloads 12 hex chars of the sorted axes (KernelIndex §4.1).",
            False,
        ),
        _c("workload_uuid", S, "The uuid as written; null before Sep 2025."),
        _c("axes_json", S, "Axis values as JSON, original names and order.", False),
        _c("inputs_json", S, "Input descriptors as JSON (`format` renamed to `type`).", False),
        _c("tolerance_json", S, "Workload tolerance object as JSON, if any."),
        _c(
            "workload_digest",
            S,
            "KernelIndex WorkloadCase digest of this workload under its own definition.",
        ),
        _c("operation_digest", S, "Operation digest of the definition."),
        _c("correctness_key", S, "KernelIndex correctness key of the workload's tolerance."),
        _c("identity_error", S, "Why workload_digest is null, else null."),
        *SOURCE_COLUMNS,
        SOURCE_NAME,
    ),
)

ENVIRONMENTS = Table(
    "environments",
    "One row per distinct evaluation environment (hardware string + libs) seen in traces.",
    ("source", "environment_id"),
    (
        _c("environment_id", S, "sha256 of the canonical raw environment {hardware, libs}.", False),
        _c("hardware_raw", S, "Hardware string as written (`device` before 2025-09-03).", False),
        _c(
            "hardware_vendor",
            S,
            "Normalized vendor: nvidia, amd, intel, apple, cpu or unknown.",
            False,
        ),
        _c(
            "hardware_product",
            S,
            "Normalized product family, e.g. B200, H100, A800, ARC B580.",
            False,
        ),
        _c(
            "libs_json",
            S,
            "Library versions as JSON strings, as written (numbers stringified).",
            False,
        ),
        _c("torch_version", S, "libs.torch."),
        _c("cuda_version", S, "libs.cuda."),
        _c("triton_version", S, "libs.triton."),
        _c("extra_json", S, "Unknown environment keys (e.g. hardware_id), as JSON."),
        _c("environment_digest", S, "KernelIndex ExecutionEnvironment digest (= environment key)."),
        _c(
            "ki_hardware_architecture",
            S,
            "Architecture KernelIndex derives (`unknown` for torch device names).",
        ),
        _c("identity_error", S, "Why environment_digest is null, else null."),
        SOURCE_NAME,
    ),
)

PROTOCOLS = Table(
    "protocols",
    "Benchmark protocols. FlashInfer-Bench traces all use one constant protocol.",
    ("protocol_digest",),
    (
        _c("protocol_digest", S, "KernelIndex BenchmarkProtocol digest (= protocol key).", False),
        _c("name", S, "Protocol metadata name.", False),
        _c("title", S, "Protocol title.", False),
        _c("harness_name", S, "Harness that produced the measurements.", False),
        _c("timer", S, "How latency was timed.", False),
        _c("primary_statistic", S, "Statistic reported as the primary value.", False),
        _c("comparator", S, "Correctness comparator named by the protocol.", False),
        _c("spec_json", S, "The full protocol spec as canonical JSON.", False),
    ),
)

RUNS = Table(
    "runs",
    "One row per evaluated trace record (a benchmark result).",
    ("run_id",),
    (
        _c(
            "run_id",
            S,
            "sha256 (32 hex) of source file, line, record index and raw bytes; unique per record.",
            False,
        ),
        _c("definition", S, "Definition name.", False),
        _c("solution", S, "Solution name as written; null for an empty name."),
        _c("author", S, "Author of the solution when its file is known."),
        _c("workload_key", S, "Workload key (uuid, or axes hash for legacy rows).", False),
        _c("workload_uuid", S, "Workload uuid as written."),
        _c(
            "status",
            S,
            "Normalized status: PASSED, INCORRECT_NUMERICAL, INCORRECT_SHAPE, INCORRECT_DTYPE, INCORRECT (legacy), RUNTIME_ERROR, COMPILE_ERROR, TIMEOUT, REWARD_HACK, INVALID_REFERENCE.",
            False,
        ),
        _c("status_raw", S, "Status as written.", False),
        _c(
            "evaluated",
            B,
            "False for records FlashInfer-Bench wrote without running the solution (its "
            "`Solution skipped after N failures` COMPILE_ERROR entries); true otherwise.",
            False,
        ),
        _c(
            "ki_status",
            S,
            "KernelIndex status (lower case) or null when KernelIndex rejects the status.",
        ),
        _c("latency_ms", F64, "Mean latency in milliseconds as written (PASSED only)."),
        _c(
            "latency_ns",
            I64,
            "latency_ms in integer nanoseconds, rounded half up (KernelIndex §9.4).",
        ),
        _c(
            "latency_special",
            S,
            "`NaN`, `Infinity`, `-Infinity` or `absent` when a PASSED run's latency_ms is not a "
            "finite number: the run is kept, never ranked (MISSING_PRIMARY_METRIC); null otherwise.",
        ),
        _c(
            "reference_latency_ms",
            F64,
            "Latency of the definition's PyTorch reference in ms; 0 = not measured.",
        ),
        _c(
            "speedup_factor",
            F64,
            "reference_latency_ms / latency_ms as written (vs the reference, not the baseline).",
        ),
        _c(
            "timestamp_raw",
            S,
            "evaluation.timestamp as written (naive local time in current files; any text kept).",
            False,
        ),
        _c(
            "observed_at",
            UTC_MS,
            "timestamp_raw as KernelIndex reads it (zone-less taken as UTC, truncated to ms); for "
            "text that is not an ISO date-time, midnight UTC of a bare date or the instant of "
            "epoch seconds/milliseconds (identity_error `bad_timestamp`), else null.",
        ),
        _c("environment_id", S, "Key into environments.", False),
        _c("hardware", S, "Normalized hardware product (environments.hardware_product).", False),
        _c("operation_digest", S, "The workload's operation digest (KernelIndex)."),
        _c(
            "workload_digest",
            S,
            "KernelIndex workload digest (first trace line with this workload key wins, §2.4).",
        ),
        _c("environment_digest", S, "KernelIndex environment key."),
        _c("protocol_digest", S, "KernelIndex protocol key."),
        _c("correctness_key", S, "KernelIndex correctness key."),
        _c("comparison_key", S, "KernelIndex comparison key: which runs may be compared (§10)."),
        _c("implementation_digest", S, "KernelIndex implementation digest of the solution."),
        _c("run_digest", S, "KernelIndex BenchmarkRun digest; null without implementation digest."),
        _c(
            "line_digest",
            S,
            "sha256 of the record's JSON bytes; identical re-appended lines share it.",
            False,
        ),
        _c(
            "evidence_level",
            S,
            "KernelIndex evidence level: reproducible (non-empty log) or reported.",
        ),
        _c(
            "external_id",
            S,
            "KernelIndex external id trace/<solution>/<workload key> (not unique).",
        ),
        _c(
            "identity_error",
            S,
            "Reason code when KernelIndex gives this record no identity; null otherwise.",
        ),
        _c(
            "kernelindex_scope",
            B,
            "True when KernelIndex's importer would read this file (traces/<author>/.../<definition>.jsonl).",
            False,
        ),
        _c("log_bytes", I64, "UTF-8 length of evaluation.log (0 when absent).", False),
        _c("log_truncated", B, "True when the harness truncated the log at 5 MiB.", False),
        _c("log_digest", S, "sha256 of the log text; null when empty."),
        _c(
            "log_excerpt",
            S,
            "For failed runs, the first log line that mentions an error (at most 300 chars).",
        ),
        _c(
            "log",
            S,
            "evaluation.log in full, as written (`error` in files before 2025-10-11); null when "
            "empty. zstd-compressed in the Parquet files; log_excerpt is the line to display.",
        ),
        _c(
            "schema_variant",
            S,
            "Comma-separated legacy features seen (e.g. `device_key,log_file`); `current` otherwise.",
            False,
        ),
        _c("extra_json", S, "Unknown keys of the record, as JSON."),
        _c(
            "path_author",
            S,
            "Folder after traces/ when the layout has an author level, for audit only.",
        ),
        _c(
            "snapshot_id",
            S,
            "Key into source_snapshots: the source revision this row came from.",
            False,
        ),
        *SOURCE_COLUMNS,
        SOURCE_NAME,
    ),
)

CORRECTNESS = Table(
    "correctness",
    "Per run with a correctness block: error bounds and tolerances.",
    ("run_id",),
    (
        _c("run_id", S, "Key into runs.", False),
        _c(
            "max_absolute_error",
            F64,
            "Max absolute error; null when NaN, Infinity or absent (see *_special).",
        ),
        _c(
            "max_absolute_error_special",
            S,
            "`NaN`, `Infinity` or `absent` when max_absolute_error is null.",
        ),
        _c("max_relative_error", F64, "Max relative error (unbounded: abs/(|ref|+1e-8))."),
        _c(
            "max_relative_error_special",
            S,
            "`NaN`, `Infinity` or `absent` when max_relative_error is null.",
        ),
        _c("matched_ratio", F64, "Share of matching elements (low-bit evaluator), when reported."),
        _c(
            "comparator",
            S,
            "Comparator KernelIndex records for the run (`sol_execbench_eval`).",
            False,
        ),
        _c("tolerance_max_atol", F64, "Workload tolerance max_atol, when given."),
        _c("tolerance_max_rtol", F64, "Workload tolerance max_rtol, when given."),
        _c("extra_json", S, "correctness.extra and other keys, as JSON."),
        SOURCE_NAME,
        SNAPSHOT_OF_ROW,
    ),
)

REJECTS = Table(
    "rejects",
    "Every record or file that could not be imported, with the reason.",
    ("source", "file", "line"),
    (
        _c("file", S, "Dataset-relative path.", False),
        _c("line", I64, "1-based line number; null for whole-file problems."),
        _c("reason", S, "Reason code from REJECT_REASONS.", False),
        _c("message", S, "Human-readable detail.", False),
        _c("raw_prefix", S, "The first 200 characters of the raw text (invalid UTF-8 replaced)."),
        _c(
            "raw",
            S,
            "The whole record as read, for a JSON record the build refused (zstd in Parquet); "
            "null for text that is not JSON and for whole-file problems.",
        ),
        SOURCE_NAME,
        SNAPSHOT_OF_ROW,
    ),
)

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
)

TRACE_LINES = Table(
    "trace_lines",
    "One row per traces/**/*.jsonl line FlashInfer-Bench reads as a trace (it has a solution or an evaluation), imported as a run or not: the fields its own leaderboard metrics read.",
    ("source_file", "source_line", "record_index"),
    (
        _c("source_file", S, "Dataset-relative path of the trace file.", False),
        _c("source_line", I64, "1-based line number.", False),
        _c(
            "record_index",
            I64,
            "Position inside the line (>0 for `}{`-concatenated objects).",
            False,
        ),
        _c(
            "json_parse_ok",
            B,
            "JavaScript's JSON.parse accepts the line (no bare NaN/Infinity, one object); the web leaderboard drops it otherwise.",
            False,
        ),
        _c("definition", S, "The `definition` field as written."),
        _c("solution", S, "The `solution` field; null when absent or empty."),
        _c("workload_uuid", S, "workload.uuid as written."),
        _c("has_evaluation", B, 'False for an `"evaluation": null` line.', False),
        _c("status", S, "evaluation.status as written."),
        _c("hardware", S, "evaluation.environment.hardware as written."),
        _c("device", S, "evaluation.environment.device as written (the web reads it first)."),
        _c("has_performance", B, "evaluation.performance is an object.", False),
        _c(
            "latency_ms",
            F64,
            "performance.latency_ms as FlashInfer-Bench's models read it (0, negative and infinite kept; NaN as null).",
        ),
        _c(
            "latency_is_json_number",
            B,
            'latency_ms is a JSON number (the web ignores strings such as "Infinity").',
            False,
        ),
        _c(
            "speedup_factor",
            F64,
            "performance.speedup_factor (vs the PyTorch reference; NaN as null).",
        ),
        _c(
            "max_absolute_error",
            F64,
            "correctness.max_absolute_error (infinity kept, NaN as null).",
        ),
        _c(
            "max_relative_error",
            F64,
            "correctness.max_relative_error (infinity kept, NaN as null).",
        ),
        _c("timestamp", S, "evaluation.timestamp as written."),
        SOURCE_NAME,
        SNAPSHOT_OF_ROW,
    ),
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
)

# run_history is stored as two append-only tables per source, so that a new snapshot costs what
# changed: a row in run_appearances when a run appears (or comes back), a row in
# run_disappearances when a later snapshot of its source no longer holds it. The view
# sql/run_history.sql pairs them into snapshot ranges.
HISTORY_FACTS = (
    _c("run_id", S, "Key into runs while the run is current.", False),
    _c(
        "comparison_key",
        S,
        "Comparison key of the run in this range (a change of key starts a new range).",
    ),
    _c("eligible", B, "May rank (sql/run_rankings.sql) in this range.", False),
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
)

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

# Long text kept whole (issue 29): zstd in the published DuckDB file as in Parquet, where
# DuckDB's own choice (FSST) keeps logs 30 times larger.
ZSTD_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("log",),
    "rejects": ("raw",),
    "definitions": ("reference", "definition_json"),
}

# Tables whose rows belong to one source (PER_SOURCE_TABLES, declared in tracehouse/warehouse.py
# with the layout): their files store no `source` or `snapshot_id` (VIEW_ADDED_COLUMNS); their
# views add both. The others span the warehouse: protocols (a constant), source_snapshots (every
# snapshot), run_rankings (ranks span every source), baseline_map (from the build's settings).


def stored_columns(table: str) -> list[str]:
    """The columns of ``table`` its Parquet files hold."""
    names = TABLES[table].column_names
    if table not in PER_SOURCE_TABLES:
        return names
    return [name for name in names if name not in VIEW_ADDED_COLUMNS]


def stored_table(table: Table) -> Table:
    """``table`` as its files (and staging parts) hold it: without the columns views add."""
    if table.name not in PER_SOURCE_TABLES:
        return table
    return Table(
        table.name,
        table.doc,
        tuple(k for k in table.key if k not in VIEW_ADDED_COLUMNS),
        tuple(c for c in table.columns if c.name not in VIEW_ADDED_COLUMNS),
    )


# Staging: what ingest workers write and the finalize step assembles into the tables above.
# Columns resolved only when all files are known (finalize): they depend on solutions, the
# dataset revision or other files, so staging parts stay valid when those change.
RESOLVED_RUN_COLUMNS = frozenset(
    {"snapshot_id", "author", "implementation_digest", "run_digest", "comparison_key"}
)
# Columns that exist only while staging.
STAGING_RUN_COLUMNS = (
    Column("record_index", pa.int64(), "Position of the object inside its line.", False),
    Column("source_offset", pa.int64(), "Byte offset of the line in the file.", False),
    Column(
        "identity_complete",
        pa.bool_(),
        "KernelIndex reads this line and accepts it, given that its solution resolves.",
        False,
    ),
    Column("has_timing", pa.bool_(), "The run has a performance block.", False),
    Column(
        "run_body_template",
        pa.string(),
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
STAGING_WORKLOADS = Table(
    "staging_workloads",
    "workload rows of one file",
    stored_table(WORKLOADS).key,
    stored_table(WORKLOADS).columns
    + (Column("record_index", pa.int64(), "Position inside the line.", False),),
)

# The tables a worker writes as staging parts, one set per group of files (without the
# columns the views of per-source tables add).
STAGING_TABLES: dict[str, Table] = {
    "runs": STAGING_RUNS,
    "correctness": stored_table(CORRECTNESS),
    "workloads": STAGING_WORKLOADS,
    "environments": stored_table(ENVIRONMENTS),
    "rejects": stored_table(REJECTS),
    "trace_lines": stored_table(TRACE_LINES),
}


# Row order of every table as written or exported, so two builds of the same data give
# byte-identical files.
TABLE_ORDER = {
    "definitions": "definition, source",
    "implementations": "solution, source",
    "workloads": "definition, workload_key, source",
    "environments": "environment_id, source",
    "protocols": "protocol_digest",
    "runs": "source_file, source_line, run_id",
    "correctness": "run_id",
    "rejects": "file, line NULLS FIRST, reason, message, raw_prefix NULLS FIRST, source",
    "run_rankings": "run_id",
    "trace_lines": "source_file, source_line, record_index, source",
    "baseline_map": "definition, position",
    "run_appearances": "source, run_id, first_snapshot_number",
    "run_disappearances": "source, run_id, first_snapshot_number",
}


# --------------------------------------------------------------------------------------------
# Views: the SELECTs in sql/<name>.sql, stored in tracehouse.duckdb. Their types come from
# DuckDB; each column's meaning is declared here, once (tests check the names against DESCRIBE).


@dataclass(frozen=True)
class ViewColumn:
    name: str
    doc: str


@dataclass(frozen=True)
class View:
    name: str
    doc: str
    columns: tuple[ViewColumn, ...]

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def _v(name: str, doc: str) -> ViewColumn:
    return ViewColumn(name, doc)


def _same_as(table: Table, *names: str) -> tuple[ViewColumn, ...]:
    """Columns passed through unchanged from ``table``, with its documentation."""
    by_name = {c.name: c.doc for c in table.columns}
    return tuple(ViewColumn(name, by_name[name]) for name in names)


BASELINE_SOLUTIONS_VIEW = View(
    "baseline_solutions",
    "The baseline solution(s) of each definition, as decided at import.",
    _same_as(IMPLEMENTATIONS, "definition", "solution", "author", "baseline_rule"),
)

RUN_SUMMARY_VIEW = View(
    "run_summary",
    "One row per run with what, who, where, how fast and its rank.",
    (
        *_same_as(RUNS, "definition"),
        _v("op_type", "Operation type of the definition."),
        *_same_as(RUNS, "solution"),
        _v("author", "Author of the solution (from the run, else from its solution file)."),
        _v(
            "is_baseline",
            "True when the solution is the baseline of this run's definition (a baseline of "
            "another definition is not one here).",
        ),
        *_same_as(
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
        *_same_as(ENVIRONMENTS, "hardware_raw"),
        *_same_as(RUNS, "comparison_key"),
        *_same_as(RUN_RANKINGS, "eligible", "ineligible_reasons", "cohort_size", "rank"),
        *_same_as(CORRECTNESS, "max_absolute_error", "max_relative_error"),
        *_same_as(
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
    ),
)

LEADERBOARD_VIEW = View(
    "leaderboard",
    "tracehouse's headline per (definition, hardware, solution): coverage and speed against the "
    "slice's baseline on workloads both passed, with FlashInfer-Bench's own GPU-mixed score beside "
    "it (sql/leaderboard.sql).",
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
)

RUN_HISTORY_VIEW = View(
    "run_history",
    "One row per run and snapshot range of its source: the first and last snapshot in which it "
    "was present (with the same comparison key and eligibility).",
    (
        *_same_as(RUN_APPEARANCES, "source", "run_id", "first_snapshot_number"),
        _v("first_snapshot_id", "The range's first snapshot (key into source_snapshots)."),
        _v(
            "last_snapshot_number",
            "The last snapshot of the source that held the run (its latest while current).",
        ),
        _v("last_snapshot_id", "The range's last snapshot (key into source_snapshots)."),
        _v("current", "True when the source's latest snapshot holds the run."),
        *_same_as(
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
)


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
BASELINE_MAP = _v(
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
)

FIB_HARDWARE_SCOPES_VIEW = View(
    "fib_hardware_scopes",
    "The hardware scopes of FlashInfer-Bench's figures, per source scope: `all` and each exact "
    "hardware string.",
    (SCOPE_SOURCE, FIB_HARDWARE),
)

FIB_TRACE_LINES_VIEW = View(
    "fib_trace_lines",
    "trace_lines once per source scope they belong to; the union leaves out lines of a "
    "definition the sources disagree on.",
    (
        SCOPE_SOURCE,
        *_same_as(
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
    (SCOPE_SOURCE, WEB_HARDWARE),
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
        BASELINE_MAP,
        _v("definition", "Definition the entry is for."),
        _v("device", "The device string the entry is for, or `default`."),
        _v("solution", "The baseline solution name the entry gives."),
        _v("position", "Order of the entry inside the definition's map (0-based)."),
    ),
)

WEB_MAP_NAMES_VIEW = View(
    "web_map_names",
    "Which baseline maps exist: `author_baseline` always, `baselines_file` when the build was "
    "given --baselines.",
    (_v("baseline_map", "A baseline map's name."),),
)

WEB_BASELINE_NAMES_VIEW = View(
    "web_baseline_names",
    "Per map and definition, every solution name the map gives: such a solution gets no curve "
    "or score of its own on the site.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP,
        _v("definition", "Definition name."),
        _v("solution", "A solution the map names for it (default or device entry)."),
    ),
)

WEB_GROUPS_VIEW = View(
    "web_groups",
    "The web's workload groups per source scope, map, hardware scope and definition, with the "
    "baseline each group is compared against.",
    (
        BASELINE_MAP,
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
)

WEB_CANDIDATES_VIEW = View(
    "web_candidates",
    "Per map: the solutions that get their own web curve and score (those the map does not "
    "name for their definition).",
    (
        SCOPE_SOURCE,
        BASELINE_MAP,
        _v("definition", "Definition name."),
        _v("solution", "Solution name."),
        WEB_AUTHOR,
        LIST_ORDER,
        _v("is_baseline", "True when the map names this solution for the definition."),
        UI_HIDDEN,
    ),
)

WEB_RATIO_ENTRIES_VIEW = View(
    "web_ratio_entries",
    "The web's per-group ratio entries behind fast_p and coverage: one per usable group and "
    "solution of the definition's list other than the group's baseline.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP,
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
)

WEB_DEFINITION_STATS_VIEW = View(
    "web_definition_stats",
    "Per map, hardware scope and web definition: its usable groups, curve grid end and whether "
    "the leaderboard includes it.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP,
        WEB_HARDWARE,
        _v("definition", "Definition name."),
        _v("web_order", "Its position on the site (web_definitions)."),
        _v("n_workloads", "nWorkloads: its usable groups."),
        _v("max_ratio", "maxRatio: the end of its curve grid, at least 1."),
        _v("on_leaderboard", "True when the leaderboard includes it (≥ 1 solution and ≥ 1 line)."),
    ),
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
        BASELINE_MAP,
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
)

WEB_COVERAGE_VIEW = View(
    "web_coverage",
    "The web leaderboard's coverage, per map and hardware scope, for one definition "
    "(author_definition) and over every leaderboard definition (author_all).",
    (
        SCOPE_SOURCE,
        BASELINE_MAP,
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
)

WEB_SOLUTION_SCORES_VIEW = View(
    "web_solution_scores",
    "The web leaderboard's per-solution score (computeSolutionScore), per map and hardware "
    "scope, for every solution of a web definition.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP,
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
)

WEB_AUTHOR_RANKINGS_VIEW = View(
    "web_author_rankings",
    "The web leaderboard's author ranking (computeAuthorRankings), per map and hardware scope, "
    "over the leaderboard's definitions.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP,
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
)

WEB_BUCKETS_VIEW = View(
    "web_buckets",
    "The kernel page's faster / slower / incorrect buckets, per map, hardware scope and "
    "threshold p, for each solution other than the page's baseline.",
    (
        SCOPE_SOURCE,
        BASELINE_MAP,
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
)

RANKING_INPUTS_VIEW = View(
    "ranking_inputs",
    "What sql/run_rankings.sql reads of each run, and the bucket it is ranked in.",
    (
        *_same_as(
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
)


VIEWS: dict[str, View] = {
    v.name: v
    for v in (
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
        WEB_RATIO_ENTRIES_VIEW,
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
    )
}

# Relations of tracehouse.duckdb that are neither a table of TABLES nor a view: the
# settings the views read, stored as tables at each build.
SETTING_TABLES: dict[str, View] = {
    REGRESSION_THRESHOLDS_RELATION.name: REGRESSION_THRESHOLDS_RELATION
}


# The key of each view: the columns that name one row (tests/system/test_many_sources.py checks that
# no view returns two rows with the same key). FlashInfer-Bench's figures are keyed by their
# source scope (`source`: a source, or the union `(all sources)`), then what they describe.
VIEW_KEYS: dict[str, tuple[str, ...]] = {
    "baseline_solutions": ("definition", "solution"),
    "fib_source_scopes": ("source", "member_source"),
    "fib_union_definitions": ("definition",),
    "fib_definitions": ("source", "definition"),
    "fib_solutions": ("source", "solution"),
    "fib_hardware_scopes": ("source", "hardware"),
    "fib_solution_scores": ("source", "hardware", "solution"),
    "fib_ranking_scopes": ("source", "scope_kind", "scope", "definition"),
    "author_rankings": ("source", "hardware", "scope_kind", "scope", "rank"),
    "fib_summary": ("source", "hardware", "scope_kind", "scope"),
    "fib_best_trace": ("source", "hardware", "definition"),
    "web_definitions": ("source", "definition"),
    "web_solutions": ("source", "definition", "solution"),
    "web_hardware_scopes": ("source", "hardware"),
    "web_baseline_maps": ("source", "baseline_map", "definition", "device"),
    "web_map_names": ("baseline_map",),
    "web_baseline_names": ("source", "baseline_map", "definition", "solution"),
    "web_groups": ("source", "baseline_map", "hardware", "definition", "workload_group"),
    "web_ratio_entries": (
        "source",
        "baseline_map",
        "hardware",
        "definition",
        "workload_group",
        "solution",
    ),
    "web_definition_stats": ("source", "baseline_map", "hardware", "definition"),
    "web_candidates": ("source", "baseline_map", "definition", "solution"),
    "fast_p_thresholds": ("p",),
    "web_fast_p": (
        "source",
        "baseline_map",
        "hardware",
        "level",
        "definition",
        "solution",
        "author",
        "p",
    ),
    "web_coverage": ("source", "baseline_map", "hardware", "level", "definition", "author"),
    "web_solution_scores": ("source", "baseline_map", "hardware", "definition", "solution"),
    "web_author_rankings": ("source", "baseline_map", "hardware", "rank"),
    "web_correctness_summary": ("source", "hardware", "level", "definition", "solution", "author"),
    "web_buckets": ("source", "baseline_map", "hardware", "definition", "solution", "p"),
    "win_at_p": ("source", "author_source", "author", "p"),
    "solution_workload_latency": ("definition", "hardware", "solution", "workload_key"),
    "leaderboard_baselines": ("definition", "hardware"),
    "leaderboard": ("definition", "hardware", "solution"),
    "leaderboard_speedups": ("definition", "hardware", "solution", "workload_key"),
    "leaderboard_fast_p": ("definition", "hardware", "solution", "p"),
    "source_summary": ("source",),
}


def slice_order(table: str) -> str:
    """TABLE_ORDER within one source's files (which store no `source` column)."""
    return ", ".join(term for term in TABLE_ORDER[table].split(", ") if term != "source")


STORED: dict[str, Table] = {name: stored_table(table) for name, table in TABLES.items()}
