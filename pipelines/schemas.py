"""Every warehouse table, declared once: column names, Arrow types, nullability and meaning.

Writers build their Arrow tables from these schemas (``arrow_schema``), so a frame with a
missing, extra or mistyped column fails where it is written, and the README glossary and the
``tracehouse tables`` output are generated from the same declarations.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from pipelines import IMPORTER_VERSION  # noqa: F401  (re-exported)

UTC_MS = pa.timestamp("ms", tz="UTC")
STRINGS = pa.list_(pa.string())


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

DEFINITIONS = Table(
    "definitions",
    "One row per operation definition (definitions/**.json), keyed by its name.",
    ("definition",),
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
        *SOURCE_COLUMNS,
    ),
)

IMPLEMENTATIONS = Table(
    "implementations",
    "One row per solution (solutions/**.json): who wrote it and how it is called. Source text stays out.",
    ("solution",),
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
        _c("source_files", I64, "Number of source files.", False),
        _c("source_bytes", I64, "Total UTF-8 bytes of all sources.", False),
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
        *SOURCE_COLUMNS,
    ),
)

WORKLOADS = Table(
    "workloads",
    "One row per (definition, workload_key): the concrete shapes and inputs, from workload files and traces.",
    ("definition", "workload_key"),
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
    ),
)

ENVIRONMENTS = Table(
    "environments",
    "One row per distinct evaluation environment (hardware string + libs) seen in traces.",
    ("environment_id",),
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
    ),
)

REJECTS = Table(
    "rejects",
    "Every record or file that could not be imported, with the reason.",
    ("file", "line"),
    (
        _c("file", S, "Dataset-relative path.", False),
        _c("line", I64, "1-based line number; null for whole-file problems."),
        _c("reason", S, "Reason code from REJECT_REASONS.", False),
        _c("message", S, "Human-readable detail.", False),
        _c("raw_prefix", S, "The first 200 characters of the raw text (invalid UTF-8 replaced)."),
    ),
)

SOURCE_SNAPSHOTS = Table(
    "source_snapshots",
    "Which source revision each warehouse state came from.",
    ("snapshot_id",),
    (
        _c("snapshot_id", S, "sha256 of (source, resolved sha, file list digest).", False),
        _c("source", S, "Folder path or hf:// URI as given.", False),
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
        _c("importer_version", S, "Importer version.", False),
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

INGEST_PATHS = Table(
    "ingest_paths",
    "Per JSONL file: how many records the columnar path took and how many the exact per-line path.",
    ("source_file",),
    (
        _c("source_file", S, "Dataset-relative path of the JSONL file.", False),
        _c("records", I64, "Non-blank records read from the file (imported or rejected).", False),
        _c("runs", I64, "Records imported as runs.", False),
        _c(
            "columnar_records",
            I64,
            "Records the columnar path (Polars expressions) took; always runs.",
            False,
        ),
        _c(
            "exact_records",
            I64,
            "Records the exact per-line reference path took (every record under --exact).",
            False,
        ),
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
        INGEST_PATHS,
    )
}


def _same(table: Table, *names: str) -> tuple[Column, ...]:
    """Columns a view passes through unchanged, with their declaration in ``table``."""
    by_name = {c.name: c for c in table.columns}
    return tuple(by_name[name] for name in names)


# The SQL views of tracehouse.duckdb (sql/<name>.sql), each column documented: the Dagster view
# assets and `tracehouse tables` show these, and a test keeps them equal to the SQL's columns.
VIEWS: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "run_summary",
            "One row per run with what, who, where, how fast and its rank (sql/run_summary.sql).",
            ("run_id",),
            (
                *_same(RUNS, "definition"),
                *_same(DEFINITIONS, "op_type"),
                *_same(RUNS, "solution"),
                _c("author", S, "The solution's author (from its file), when known."),
                _c(
                    "is_baseline",
                    B,
                    "True when the solution is the baseline of this run's definition.",
                    False,
                ),
                *_same(RUNS, "workload_uuid", "workload_key", "status", "ki_status", "evaluated"),
                *_same(RUNS, "latency_ns", "latency_ms", "latency_special"),
                *_same(RUNS, "reference_latency_ms", "speedup_factor", "observed_at"),
                *_same(RUNS, "timestamp_raw", "hardware"),
                *_same(ENVIRONMENTS, "hardware_raw"),
                *_same(RUNS, "comparison_key"),
                *_same(RUN_RANKINGS, "eligible", "ineligible_reasons", "cohort_size", "rank"),
                *_same(CORRECTNESS, "max_absolute_error", "max_relative_error"),
                *_same(RUNS, "evidence_level", "external_id", "run_id", "run_digest"),
                *_same(RUNS, "operation_digest", "workload_digest", "environment_digest"),
                *_same(RUNS, "protocol_digest", "correctness_key", "implementation_digest"),
                *_same(RUNS, "identity_error", "snapshot_id", "source_file", "source_line"),
            ),
        ),
        Table(
            "leaderboard",
            "Per (definition, hardware, solution): coverage and speed against the definition's "
            "baseline (sql/leaderboard.sql).",
            ("definition", "hardware", "solution"),
            (
                *_same(RUNS, "definition", "hardware"),
                _c("solution", S, "Solution name.", False),
                _c("author", S, "The solution's author (from its file), when known."),
                _c(
                    "is_baseline", B, "True when the solution is this definition's baseline.", False
                ),
                _c("runs", I64, "Runs of the solution on this definition and hardware.", False),
                _c(
                    "runs_not_evaluated",
                    I64,
                    "Of those, records FlashInfer-Bench wrote without evaluating (runs.evaluated).",
                    False,
                ),
                _c("workloads_covered", I64, "Distinct workloads attempted.", False),
                _c("workloads_passed", I64, "Distinct workloads with a PASSED run.", False),
                _c(
                    "workloads_compared",
                    I64,
                    "Workloads both the solution and the baseline passed (the ratios' basis).",
                    False,
                ),
                _c(
                    "geomean_speedup",
                    F64,
                    "Geometric mean of baseline_ms / solution_ms over the compared workloads, "
                    "each side's best latency.",
                ),
                _c("win_rate", F64, "Share of compared workloads where the solution is faster."),
                _c(
                    "fib_mean_speedup",
                    F64,
                    "Arithmetic mean of the same ratios; 0 when the solution has any failed run "
                    "(FlashInfer-Bench's report summary rule, within one hardware).",
                ),
            ),
        ),
        Table(
            "solution_latency",
            "Per (definition, hardware, solution): typical best latency and its spread over "
            "re-runs (sql/solution_latency.sql).",
            ("definition", "hardware", "solution"),
            (
                *_same(RUNS, "definition", "hardware"),
                _c("solution", S, "Solution name.", False),
                _c("workloads_timed", I64, "Workloads with a PASSED run and a latency.", False),
                _c(
                    "best_latency_us",
                    F64,
                    "Median over those workloads of the solution's best latency there, in µs.",
                ),
                _c("workloads_rerun", I64, "Of those, workloads run more than once.", False),
                _c(
                    "rerun_spread",
                    F64,
                    "Median over re-run workloads of (max - min) / min latency; null without "
                    "re-runs.",
                ),
            ),
        ),
        Table(
            "baseline_solutions",
            "The baseline solution(s) of each definition, as decided at import "
            "(sql/baseline_solutions.sql).",
            ("definition", "solution"),
            _same(IMPLEMENTATIONS, "definition", "solution", "author", "baseline_rule"),
        ),
    )
}

# Row order of every table as written or exported, so two builds of the same data give
# byte-identical files.
TABLE_ORDER = {
    "definitions": "definition",
    "implementations": "solution",
    "workloads": "definition, workload_key",
    "environments": "environment_id",
    "protocols": "protocol_digest",
    "runs": "source_file, source_line, run_id",
    "correctness": "run_id",
    "rejects": "file, line NULLS FIRST, reason, message, raw_prefix NULLS FIRST",
    "run_rankings": "run_id",
    "ingest_paths": "source_file",
}


# Reason codes of the rejects table. One place; tests and the README read it.
REJECT_REASONS: dict[str, str] = {
    "invalid_json": "The text is not JSON (syntax error, truncated line).",
    "invalid_utf8": "The bytes are not valid UTF-8.",
    "too_deeply_nested": "JSON nesting deeper than the parser allows.",
    "not_an_object": "The JSON value is not an object (array, string, number, ...).",
    "unrecognized_record": "An object that is neither a definition, solution, workload nor trace.",
    "missing_field": "A required field is missing or empty.",
    "invalid_field": "A field has the wrong type or an impossible value.",
    "unknown_status": "evaluation.status is not a FlashInfer-Bench status.",
    "status_field_mismatch": "correctness/performance presence contradicts the status (e.g. PASSED without performance).",
    "invalid_latency": "A latency is not a finite positive number (bool, string, zero, negative, NaN, overflow).",
    "invalid_error_bound": "A correctness error bound is negative, boolean or not a number.",
    "unknown_definition": "The record names a definition that is not in the dataset.",
    "duplicate_definition": "A second definition file with an already-seen name (first in path order wins).",
    "duplicate_solution": "A second solution file with an already-seen name (first in path order wins).",
    "unreadable_file": "The file could not be read (permissions, I/O error, not a regular file).",
    "binary_file": "The file holds binary data, not JSON text.",
    "empty_file": "A .json file with no content.",
    "symlink_outside_source": "A symbolic link that leads outside the source folder (not followed).",
    "unsafe_path": "A remote file name with `..`, an absolute path, a backslash or a control character.",
    "fetch_failed": "A remote file could not be fetched or failed its size/hash check.",
}
