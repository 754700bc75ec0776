"""The tables of what a source's files hold: definitions, solutions, workloads, environments,
runs with their correctness, FlashInfer-Bench's trace lines, the records a build refused, and
the protocol constant runs refer to.
"""

from __future__ import annotations

from tracehouse.tables.declare import (
    F64,
    I64,
    SNAPSHOT_OF_ROW,
    SOURCE_COLUMNS,
    SOURCE_FILES,
    SOURCE_NAME,
    STRINGS,
    UTC_MS,
    B,
    S,
    Table,
)
from tracehouse.tables.declare import column as _c

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
    per_source=True,
    order="definition, source",
    from_context=True,
    zstd_columns=("reference", "definition_json"),
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
    per_source=True,
    order="solution, source",
    from_context=True,
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
    per_source=True,
    staged=True,
    order="definition, workload_key, source",
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
    per_source=True,
    staged=True,
    order="environment_id, source",
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
    order="protocol_digest",
    source_independent=True,
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
    per_source=True,
    parted="file_group",
    staged=True,
    order="source_file, source_line, run_id",
    holds_results=True,
    zstd_columns=("log",),
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
    per_source=True,
    parted="file_group",
    staged=True,
    order="run_id",
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
    per_source=True,
    parted="file_group",
    staged=True,
    order="file, line NULLS FIRST, reason, message, raw_prefix NULLS FIRST, source",
    shrink_exempt=True,
    zstd_columns=("raw",),
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
    per_source=True,
    parted="file_group",
    staged=True,
    order="source_file, source_line, record_index, source",
)
