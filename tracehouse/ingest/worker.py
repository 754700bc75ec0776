"""One JSONL file in, staging Parquet parts out: the unit of parallel and incremental work.

``ingest_file`` runs in a worker process. It streams one file, normalises each record, derives
its KernelIndex identities (``tracehouse/kernelindex/``) and writes the rows it produced as small Parquet
parts. A part depends only on the file's bytes and on the dataset context (definitions,
solutions, revision), so a rebuild reuses it while both are unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tracehouse import kernelindex, schemas
from tracehouse.files import read_parquet_file, replacing_atomically, sha256_file
from tracehouse.identify.dataset_context import DatasetContext
from tracehouse.ingest.combinations import (
    ENTITY_COLUMNS,
    Combination,
    combination_cache,
    repeatable_shape,
    run_identity,
)
from tracehouse.ingest.group import (
    CHUNK_ROWS,
    FILE_HOLD_ROWS,
    CarriedFile,
    FileResult,
    GroupResult,
)
from tracehouse.ingest.resolution import RESOLVED_COLUMNS, resolve_run
from tracehouse.kernelindex import digest, manifest_digest, text_digest
from tracehouse.kernelindex.cache import WORKLOAD_CACHE_ENTRIES, BoundedCache, own_size
from tracehouse.read.evaluation_rules import read_latency, tolerance_bounds, was_evaluated
from tracehouse.read.fib_lines import fib_trace_line, is_fib_trace_file
from tracehouse.read.normalize import (
    ENTITY_VARIANTS,
    Bound,
    RecordError,
    Trace,
    classify,
    error_bound,
    kept_log,
    log_excerpt,
    log_truncated,
    matched_ratio,
    normalize_hardware,
    normalize_trace,
    normalize_workload,
    to_json,
    trace_extra_json,
)
from tracehouse.read.records import (
    FileEnd,
    Record,
    iter_jsonl,
    looks_binary,
    raw_prefix,
    unreadable_file,
)
from tracehouse.read.timestamps import observed_at
from tracehouse.rejects import Reject

# The tables a line adds a row to (a run, its FlashInfer-Bench line, or a reject): what a chunk
# counts.
CHUNK_TABLES = tuple(table.name for table in (schemas.RUNS, schemas.TRACE_LINES, schemas.REJECTS))

PART_TABLES = schemas.STAGING_TABLES
# A row group costs ~0.1 ms however few its rows: at a chunk's flush, a table holding fewer rows
# than this (the entity tables gain a few a file) waits for a later flush or the close.
FEW_ROWS = 256


def kernelindex_reads(rel: str, stems: frozenset[str]) -> bool:
    """KernelIndex reads traces/<author>/.../<definition stem>.jsonl only (identity doc §2.1)."""
    parts = rel.split("/")
    return (
        len(parts) >= 3
        and parts[0] == "traces"
        and rel.endswith(".jsonl")
        and parts[-1][: -len(".jsonl")] in stems
    )


class _Rows:
    """The rows one file produced for one or more tables; columns are built once, at the end.

    Tables that take their columns from the same rows (``runs`` and its ``run_keys``: one dict
    a run) share one ``_Rows``, converted once for both."""

    def __init__(self, *names: str) -> None:
        self.tables = {name: PART_TABLES[name] for name in names}
        fields: dict[str, pa.Field] = {}
        for table in self.tables.values():
            for column in table.arrow_schema:
                fields.setdefault(column.name, column)
        self.row_type = pa.struct(list(fields.values()))
        self.rows: list[dict[str, Any]] = []
        self.add = self.rows.append

    def __len__(self) -> int:
        return len(self.rows)

    def to_arrow(self) -> dict[str, pa.Table]:
        """Each table's rows, by name."""
        # Rows are dicts without their null members. Arrow reads them as one struct column in
        # C++ (a missing member is null, a member outside the schema is not read) and the
        # struct's children are the tables' columns: no Python loop over rows or cells.
        if not self.rows:
            return {name: table.arrow_schema.empty_table() for name, table in self.tables.items()}
        struct = pa.array(self.rows, type=self.row_type)
        columns = dict(zip(self.row_type.names, struct.flatten(), strict=True))
        return {
            name: pa.Table.from_arrays(
                [columns[column] for column in table.arrow_schema.names],
                schema=table.arrow_schema,
            )
            for name, table in self.tables.items()
        }


def log_bytes(log: str) -> int:
    """The UTF-8 size of a log (lone surrogates as three bytes each); an ASCII one (the flag
    CPython keeps on every string) is its length, without encoding kilobytes a line."""
    return len(log) if log.isascii() else len(log.encode("utf-8", "surrogatepass"))


def schema_variant(variants: list[str]) -> str:
    """``runs.schema_variant``: the legacy features a line needed, or ``current``."""
    return ",".join(variants) or "current"


def run_id(source: str, rel: str, line: int, index: int, line_digest: str) -> str:
    """A run's id: its file, line, position and bytes, qualified by the source's name, so the
    same trace line read from two sources (a dataset and its fork) is two runs."""
    record = hashlib.sha256(f"{rel}\n{line}\n{index}\n{line_digest}".encode()).hexdigest()[:32]
    return hashlib.sha256(f"{source}\n{record}".encode()).hexdigest()[:32]


# Per-process caches: an environment's row is a pure function of its raw content, and a
# workload row's derived columns of (context fingerprint, definition, workload).
_ENVIRONMENTS: dict[bytes, dict[str, Any]] = {}
_WORKLOADS = BoundedCache(WORKLOAD_CACHE_ENTRIES)


def environment_id(
    hardware: str, libs: dict[str, str], extra: dict[str, Any] | None, numeric_libs: bool
) -> str:
    """The environments key: a digest of the raw environment as written. The one place this
    rule lives; the Dagster check recomputes stored ids with it."""
    raw_environment: dict[str, Any] = {"hardware": hardware, "libs": libs}
    if extra:
        raw_environment["extra"] = extra
    if numeric_libs:  # `3.5` and `"3.5"` are different environments to KernelIndex
        raw_environment["numeric_lib_versions"] = True
    return digest(orjson.loads(orjson.dumps(raw_environment, default=str)))


def _environment_row(trace: Trace) -> dict[str, Any]:
    numeric_libs = "numeric_lib_version" in trace.variants
    vendor, product = normalize_hardware(trace.hardware)
    row: dict[str, Any] = {
        "environment_id": environment_id(
            trace.hardware, trace.libs, trace.environment_extra, numeric_libs
        ),
        "hardware_raw": trace.hardware,
        "hardware_vendor": vendor,
        "hardware_product": product,
        "libs_json": to_json(trace.libs),
        "torch_version": trace.libs.get("torch"),
        "cuda_version": trace.libs.get("cuda"),
        "triton_version": trace.libs.get("triton"),
        "extra_json": to_json(trace.environment_extra) if trace.environment_extra else None,
    }
    if numeric_libs:
        row["identity_error"] = "numeric_lib_version"
        return row
    try:
        spec = kernelindex.environment_spec(trace.canonical["evaluation"]["environment"])
        row["environment_digest"] = manifest_digest("ExecutionEnvironment", spec)
        row["ki_hardware_architecture"] = spec["hardware"]["architecture"]
    except kernelindex.IdentityError as error:
        row["identity_error"] = error.code
    return row


def new_part_rows() -> dict[str, _Rows]:
    """A group's rows by table; the run keys are the runs' own rows (``_Rows``)."""
    run_keys = schemas.STAGING_RUN_KEYS.name
    parts = {name: _Rows(name) for name in PART_TABLES if name != run_keys}
    parts[run_keys] = parts["runs"] = _Rows("runs", run_keys)
    return parts


class FileIngester:
    """The exact per-line path for one file; its rows go to ``parts``, which the files of one
    group share."""

    def __init__(
        self,
        rel: str,
        context: DatasetContext,
        parts: dict[str, _Rows] | None = None,
        *,
        source: str,
    ) -> None:
        self.rel = rel
        self.source = source
        self.context = context
        self.in_scope = kernelindex_reads(rel, context.definition_stems)
        self.fib_reads = is_fib_trace_file(rel)
        self.path_author = rel.split("/")[1] if self.in_scope else None
        self.strict_file = True
        self.parts = parts if parts is not None else new_part_rows()
        self.environments_seen: set[str] = set()
        self.workloads_seen: set[tuple[str, str]] = set()
        self.result = FileResult(rel)
        self.combinations = combination_cache(context.fingerprint)

    def reject(self, line: int | None, reason: str, message: str, raw: bytes | None) -> None:
        self.parts["rejects"].add(
            {
                "file": self.rel,
                "line": line,
                "reason": reason,
                "message": message,
                "raw_prefix": raw_prefix(raw) if raw is not None else None,
                "raw": raw.decode("utf-8", "replace") if raw is not None else None,
            }
        )
        self.result.rejected += 1

    def fib_line(self, record: Record) -> None:
        """FlashInfer-Bench's own view of a trace line, whichever path imports it (or none)."""
        if self.fib_reads:
            line = fib_trace_line(self.rel, record)
            if line is not None:
                self.parts["trace_lines"].add(line)

    def record(self, record: Record) -> None:
        self.result.records += 1
        if not record.strict and self.strict_file:
            self.strict_file = False
            if self.in_scope:
                self._complete_again_as_unreadable()
        kind = classify(record.value)
        if kind is None:
            if isinstance(record.value, dict):
                self.reject(
                    record.line, "unrecognized_record", "neither a trace nor a workload", record.raw
                )
            else:
                kind_name = type(record.value).__name__
                self.reject(
                    record.line, "not_an_object", f"a JSON {kind_name}, not an object", record.raw
                )
            return
        try:
            if kind == "trace":
                self._trace(record)
            elif kind == "workload":
                self._workload(record)
            else:
                raise RecordError("unrecognized_record", f"a {kind} record inside a JSONL file")
        except RecordError as error:
            self.reject(record.line, error.reason, error.message, record.raw)

    # -- workloads --------------------------------------------------------------------------

    def _workload_row(
        self,
        definition: str,
        workload: dict[str, Any],
        key: str,
        record: Record,
        derived: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The workload row for this record, or None when this file already had it. A repeat
        line hands over its combination's ``derived`` columns (``workload_columns``)."""
        seen_key = (definition, key)
        if seen_key in self.workloads_seen:
            return None
        self.workloads_seen.add(seen_key)
        if derived is None:
            derived = self.workload_columns(definition, workload, key)
        return {
            **derived,
            "source_file": self.rel,
            "source_line": record.line,
            "record_index": record.index,
        }

    def workload_columns(
        self, definition: str, workload: dict[str, Any], key: str
    ) -> dict[str, Any]:
        """A workload row's columns that depend only on its content and the context, from the
        process's cache when it derived them already."""
        try:
            content_key: bytes | None = orjson.dumps(
                [self.context.fingerprint, definition, workload]
            )
        except TypeError:  # an integer beyond 64 bits, say: derived every time
            content_key = None
        if content_key is not None and b"null" in content_key:
            content_key = None  # orjson writes NaN and null alike: not a key
        derived = _WORKLOADS.get(content_key) if content_key is not None else None
        if derived is None:
            derived = self._derive_workload(definition, workload, key)
            if content_key is not None:
                _WORKLOADS.put(content_key, derived)
        return derived

    def _derive_workload(
        self, definition: str, workload: dict[str, Any], key: str
    ) -> dict[str, Any]:
        """A workload row's columns that depend only on its content and the context."""
        row: dict[str, Any] = {
            "definition": definition,
            "workload_key": key,
            "workload_uuid": workload.get("uuid"),
            "axes_json": to_json(workload.get("axes")),
            "inputs_json": to_json(workload.get("inputs")),
            "tolerance_json": to_json(workload["tolerance"]) if "tolerance" in workload else None,
        }
        definition_object = self.context.definitions.get(definition)
        operation = self.context.operation_digests.get(definition)
        row["operation_digest"] = operation
        if definition_object is None or operation is None:
            row["identity_error"] = (
                "unknown_definition" if definition_object is None else "invalid_definition"
            )
            return row
        try:
            case = kernelindex.workload_case_identity(workload, definition_object, operation)
            row["workload_digest"] = case.workload_digest
            row["correctness_key"] = case.correctness_key
        except kernelindex.IdentityError as error:
            row["identity_error"] = error.code
        return row

    def _workload(self, record: Record) -> None:
        value = record.value
        definition = value.get("definition")
        if not isinstance(definition, str) or not definition:
            raise RecordError("missing_field", "workload record has no definition")
        if definition not in self.context.definitions:
            raise RecordError(
                "unknown_definition", f"definition {definition!r} is not in the dataset"
            )
        workload, _ = normalize_workload(value.get("workload"))
        row = self._workload_row(definition, workload, kernelindex.workload_key(workload), record)
        if row is not None:
            self.parts["workloads"].add(row)
        self.result.workload_records += 1

    # -- traces -----------------------------------------------------------------------------

    def _environment_of(self, trace: Trace) -> dict[str, Any]:
        """The environments row of a line's environment, derived once per process."""
        key = orjson.dumps(
            [
                trace.hardware,
                trace.libs,
                trace.environment_extra,
                "numeric_lib_version" in trace.variants,
            ],
            default=str,
        )
        cached = _ENVIRONMENTS.get(key)
        if cached is None:
            cached = _ENVIRONMENTS[own_size(key)] = _environment_row(trace)
        return cached

    def _environment(self, environment: dict[str, Any]) -> str:
        """The id of an environments row, which this file's parts get once."""
        environment_id = environment["environment_id"]
        if environment_id not in self.environments_seen:
            self.environments_seen.add(environment_id)
            self.parts["environments"].add({**environment, "source_file": self.rel})
        return environment_id

    def _trace(self, record: Record) -> None:
        combination_key = self._combination_key(record)
        if combination_key is not None:
            combination = self.combinations.get(combination_key)
            if combination is not None:
                self._repeat(record, combination)
                return
        trace = normalize_trace(record.value)
        context = self.context
        definition_object = context.definitions.get(trace.definition)
        if definition_object is None:
            raise RecordError(
                "unknown_definition", f"definition {trace.definition!r} is not in the dataset"
            )
        operation = context.operation_digests.get(trace.definition)

        line_digest = hashlib.sha256(record.raw).hexdigest()
        row: dict[str, Any] = {
            "run_id": run_id(self.source, self.rel, record.line, record.index, line_digest),
            "definition": trace.definition,
            "solution": trace.solution,
            "workload_uuid": trace.workload.get("uuid"),
            "status": trace.status,
            "status_raw": trace.status_raw,
            "evaluated": was_evaluated(trace.status, trace.log),
            "latency_ms": trace.latency_ms,
            "latency_special": trace.latency_special,
            "reference_latency_ms": trace.reference_latency_ms,
            "speedup_factor": trace.speedup_factor,
            "timestamp_raw": trace.timestamp,
            "line_digest": line_digest,
            "kernelindex_scope": self.in_scope,
            "log_truncated": trace.log_truncated,
            "schema_variant": schema_variant(trace.variants),
            "extra_json": trace.extra_json,
            "identity_complete": False,
        }
        self._per_run_columns(row, record, trace.status, trace.log, trace.latency_ms)
        environment = self._environment_of(trace)
        row["hardware"] = normalize_hardware(trace.hardware)[1]
        row["workload_key"] = kernelindex.workload_key(trace.workload)
        row["environment_id"] = self._environment(environment)
        # A combination's lines share its workload's columns: derived here for all of them.
        workload_columns = (
            self.workload_columns(trace.definition, trace.workload, row["workload_key"])
            if combination_key is not None
            else None
        )
        workload_row = self._workload_row(
            trace.definition, trace.workload, row["workload_key"], record, workload_columns
        )
        if workload_row is not None:
            self.parts["workloads"].add(workload_row)

        # KernelIndex reads the raw line; files it never reads get the same derivation over
        # the normalised record, so legacy layouts still get comparable keys (README).
        source_object = record.value if self.in_scope else trace.canonical
        skip_reason = None if self.in_scope else "outside_kernelindex_layout"
        try:
            found = kernelindex.identify_trace_line(
                source_object,
                definition=definition_object,
                operation_digest=operation,
                implementation_digest=None,
                run_body_template=True,
            )
        except kernelindex.IdentityError as error:
            skip_reason = error.code
            found = None
        if found is not None:
            row.update(
                ki_status=found.ki_status,
                latency_ns=found.latency_ns,
                operation_digest=found.operation_digest,
                workload_digest=found.workload_digest,
                environment_digest=found.environment_digest,
                protocol_digest=found.protocol_digest,
                correctness_key=found.correctness_key,
                run_body_template=found.run_body_template,
                evidence_level=found.evidence_level,
                external_id=found.external_id,
                log_digest=found.log_digest,
            )
            row["identity_complete"] = skip_reason is None
        else:
            row["ki_status"] = kernelindex.STATUS_MAP.get(trace.status_raw)
            row["log_digest"] = text_digest(trace.log) if trace.log else None
            if trace.latency_ms is not None:
                # In range: normalize_trace rejected the line otherwise (latency_ns_problem).
                row["latency_ns"] = kernelindex.latency_ns(trace.latency_ms)
        row["line_identity_error"] = skip_reason
        tolerance = tolerance_bounds(trace.workload)
        if combination_key is not None:
            assert workload_columns is not None  # derived above for every combination
            self.combinations.put(
                combination_key,
                Combination(
                    found is not None,
                    environment,
                    trace.workload,
                    {
                        **{name: row.get(name) for name in ENTITY_COLUMNS},
                        "definition": trace.definition,
                        "workload_uuid": row["workload_uuid"],
                        # a repeatable line has no per-run variant and no member of its own
                        "schema_variant": schema_variant(
                            [v for v in trace.variants if v in ENTITY_VARIANTS]
                        ),
                        "extra_json": trace_extra_json({}, {}, trace.environment_extra),
                        "kernelindex_scope": self.in_scope,
                    },
                    tolerance,
                    workload_columns,
                ),
            )
        self._add_run(row)
        if trace.correctness is not None:
            assert trace.absolute_error is not None and trace.relative_error is not None
            self._add_correctness(
                row["run_id"],
                trace.correctness,
                trace.absolute_error,
                trace.relative_error,
                trace.matched_ratio,
                tolerance,
            )

    def _repeat(self, record: Record, combination: Combination) -> None:
        """A later line of a combination this process derived, of repeatable shape (so its
        members are of the types and ranges ``repeatable_shape`` checked, and it cannot be
        refused): its own run from its per-run members, the rest its combination's."""
        value = record.value
        evaluation = value["evaluation"]
        status = evaluation["status"]
        log = evaluation.get("log") or ""
        performance = evaluation.get("performance")
        latency_ms = reference_ms = speedup = None
        if performance is not None:
            latency_ms = read_latency(performance["latency_ms"], "latency_ms", required=True).value
            reference_ms = read_latency(
                performance.get("reference_latency_ms"), "reference_latency_ms", required=False
            ).value
            speedup = read_latency(
                performance.get("speedup_factor"), "speedup_factor", required=False
            ).value
        line_digest = hashlib.sha256(record.raw).hexdigest()
        row: dict[str, Any] = {
            **combination.shared,
            "run_id": run_id(self.source, self.rel, record.line, record.index, line_digest),
            "solution": value.get("solution"),
            "status": status,
            "status_raw": status,
            "evaluated": was_evaluated(status, log),
            "latency_ms": latency_ms,
            "reference_latency_ms": reference_ms,
            "speedup_factor": speedup,
            "timestamp_raw": evaluation["timestamp"],
            "line_digest": line_digest,
            "log_truncated": log_truncated(log),
        }
        self._per_run_columns(row, record, status, log, latency_ms)
        run_identity(value, combination, row)
        self._environment(combination.environment)
        workload_row = self._workload_row(
            row["definition"],
            combination.workload,
            row["workload_key"],
            record,
            combination.workload_columns,
        )
        if workload_row is not None:
            self.parts["workloads"].add(workload_row)
        self._add_run(row)
        correctness = evaluation.get("correctness")
        if correctness is not None:
            self._add_correctness(
                row["run_id"],
                correctness,
                error_bound(correctness.get("max_absolute_error"), "max_absolute_error"),
                error_bound(correctness.get("max_relative_error"), "max_relative_error"),
                matched_ratio(correctness)[0],
                combination.tolerance,
            )

    def _per_run_columns(
        self, row: dict[str, Any], record: Record, status: str, log: str, latency_ms: float | None
    ) -> None:
        """The runs columns both branches derive the same way from the line and its run."""
        row["observed_at"] = observed_at(row["timestamp_raw"])
        row["log_bytes"] = log_bytes(log)
        # failures only: a passing build log's warnings are not what anyone looks for
        row["log_excerpt"] = log_excerpt(log) if status != "PASSED" else None
        row["log"] = kept_log(log)
        row["path_author"] = self.path_author
        row["source_file"] = self.rel
        row["source_line"] = record.line
        row["record_index"] = record.index
        row["has_timing"] = latency_ms is not None

    def _combination_key(self, record: Record) -> tuple[Any, ...] | None:
        """The key of the line's combination when its shape lets it reuse one, else None."""
        value = record.value
        if (
            not record.strict
            or record.index
            or not repeatable_shape(value, self.context.definitions)
        ):
            return None
        evaluation = value["evaluation"]
        return (
            value["definition"],
            orjson.dumps(value["workload"]),
            orjson.dumps(evaluation["environment"]),
            self.in_scope,
        )

    def _complete_again_as_unreadable(self) -> None:
        """The file's runs not written yet, completed again now that KernelIndex cannot read
        the file (a line was not strict JSON): those already written are resolved again by
        finalize, which is slower (ingest/resolution.py). A run's row and its keys are one
        dict, and the file's rows are the last ones gathered."""
        rows = self.parts["runs"].rows
        for row in reversed(rows):
            if row["source_file"] != self.rel:
                break
            self._complete(row, unreadable=True)

    def _complete(self, row: dict[str, Any], *, unreadable: bool) -> None:
        """A run's row completed (resolution.resolve_run with what this worker knows: the
        source's solutions, whether KernelIndex reads the file, the line's own workload case),
        with what it assumed in its keys."""
        known = self.context.solutions.get(row["solution"])
        row["solution_known"] = known is not None
        row["file_unreadable"] = unreadable
        row.update(zip(RESOLVED_COLUMNS, resolve_run(row, known, unreadable, None), strict=True))

    def _add_run(self, row: dict[str, Any]) -> None:
        self._complete(row, unreadable=self.in_scope and not self.strict_file)
        self.parts["runs"].add(row)  # and its run keys: the same rows (new_part_rows)
        self.result.runs += 1

    def _add_correctness(
        self,
        run_id: str,
        correctness: dict[str, Any],
        absolute: Bound,
        relative: Bound,
        ratio: float | None,
        tolerance: tuple[float | None, float | None],
    ) -> None:
        """A run's correctness row: the one place it is formed."""
        max_atol, max_rtol = tolerance
        correctness_extra = {
            k: v
            for k, v in correctness.items()
            if k not in ("max_absolute_error", "max_relative_error")
        }
        self.parts["correctness"].add(
            {
                "run_id": run_id,
                "max_absolute_error": absolute.value,
                "max_absolute_error_special": absolute.special,
                "max_relative_error": relative.value,
                "max_relative_error_special": relative.special,
                "matched_ratio": ratio,
                "comparator": kernelindex.RUN_COMPARATOR,
                "tolerance_max_atol": max_atol,
                "tolerance_max_rtol": max_rtol,
                "extra_json": to_json(correctness_extra) if correctness_extra else None,
            }
        )


def part_file_name(part_key: str, table: str) -> str:
    """The file name of a group's staging part of ``table``: one for each table, the same key."""
    return f"{part_key}.{table}.0.parquet"


def parquet_writer(path: Path, schema: pa.Schema, table: str) -> pq.ParquetWriter:
    """The writer of a staging part of ``table``: one place for both kinds.

    A parted table's part is written as the table stores it, since it becomes the table's part
    as it is (unless finalize resolves it again): level 1 zstd, and long text columns
    (``schemas.ZSTD_COLUMNS``) without a dictionary or statistics (a dictionary of logs is
    dropped anyway, and a log as the min or max of a row group would only make the footer
    large). Any other staging part is read whole, once, by finalize: lz4, no statistics, no
    dictionary (most of its columns are digests, unique per row)."""
    if table not in schemas.GROUP_PARTED_TABLES:
        return pq.ParquetWriter(
            path, schema, compression="lz4", write_statistics=False, use_dictionary=False
        )
    long_text = set(schemas.ZSTD_COLUMNS.get(table, ()))
    short = [name for name in schema.names if name not in long_text]
    # (pyarrow takes a list of columns for both; its stubs say a bool)
    per_column: dict[str, Any] = {"use_dictionary": short, "write_statistics": short}
    return pq.ParquetWriter(path, schema, compression="zstd", compression_level=1, **per_column)


# The bytes (as Arrow columns) of a parted table's rows gathered before they are one row group
# of its part. A part is the table's part as it is (parquet_writer), and readers pay for each
# row group: a row group per flush (CHUNK_ROWS runs, ~1,900 at 1,000,000 runs) took the report
# of the many-workloads warehouse from ~26 s to ~32 s.
PART_ROW_GROUP_BYTES = 16 * 1024 * 1024


class PartWriter:
    """Buffers the rows of a group of files and streams them into one Parquet part per table:
    each flush turns the rows gathered into columns and appends them, a parted table's in row
    groups of about PART_ROW_GROUP_BYTES, so a worker holds at most ``chunk_rows`` rows and a
    row group whatever the size of its group. A part appears under its name only once it is
    complete (``close``)."""

    def __init__(self, staging_dir: Path, part_key: str) -> None:
        self.staging_dir = staging_dir
        self.part_key = part_key
        self.rows = new_part_rows()
        self.written: dict[str, list[str]] = {}
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._gathered: dict[str, list[pa.Table]] = {}  # a parted table's next row group
        self._gathered_bytes: dict[str, int] = {}  # (summed as gathered, not per flush)
        self._parts = contextlib.ExitStack()  # each part's temporary, renamed or removed

    def _writer(self, name: str, schema: pa.Schema) -> pq.ParquetWriter:
        if name not in self._writers:
            filling = self._parts.enter_context(
                replacing_atomically(self.staging_dir / self._file_name(name))
            )
            self._writers[name] = parquet_writer(filling, schema, name)
        return self._writers[name]

    def _file_name(self, name: str) -> str:
        return part_file_name(self.part_key, name)

    def append(self, name: str, table: pa.Table) -> None:
        """Append rows that are already columns (a part's own schema) to the part ``name``."""
        schema = PART_TABLES[name].arrow_schema
        self._write(name, table.select(schema.names).cast(schema))

    def _write(self, name: str, table: pa.Table) -> None:
        if name not in schemas.GROUP_PARTED_TABLES:
            self._writer(name, table.schema).write_table(table)
            return
        self._gathered.setdefault(name, []).append(table)
        self._gathered_bytes[name] = self._gathered_bytes.get(name, 0) + table.nbytes
        if self._gathered_bytes[name] >= PART_ROW_GROUP_BYTES:
            self._write_gathered(name)

    def _write_gathered(self, name: str) -> None:
        gathered = self._gathered.pop(name, [])
        self._gathered_bytes.pop(name, None)
        if gathered:
            rows = pa.concat_tables(gathered)
            self._writer(name, rows.schema).write_table(rows, row_group_size=rows.num_rows)

    def flush(self, chunk_rows: int | None = None) -> None:
        """Append the rows gathered so far to the parts, and forget them. With ``chunk_rows``
        (a chunk is full), a table holding fewer than ``min(chunk_rows, FEW_ROWS)`` rows waits:
        row groups of a few rows beside every chunk of runs cost ~1 µs a line."""
        least = 1 if chunk_rows is None else min(chunk_rows, FEW_ROWS)
        for rows in {id(rows): rows for rows in self.rows.values()}.values():
            if len(rows) >= least:
                for name, table in rows.to_arrow().items():
                    self._write(name, table)
                rows.rows.clear()

    def close(self) -> None:
        """Flush, then put every part in place under its name."""
        self.flush()
        for name in list(self._gathered):
            self._write_gathered(name)
        for writer in self._writers.values():
            writer.close()
        self._parts.close()
        self.written = {name: [self._file_name(name)] for name in sorted(self._writers)}
        self._writers.clear()

    def abort(self) -> None:
        """Drop the parts being written (the group failed or was interrupted)."""
        for writer in self._writers.values():
            with contextlib.suppress(Exception):
                writer.close()
        self._writers.clear()
        self._gathered.clear()
        self._gathered_bytes.clear()
        abandoned = RuntimeError("the group's parts were abandoned")
        with contextlib.suppress(RuntimeError):
            self._parts.__exit__(RuntimeError, abandoned, None)


def ingest_group(
    files: list[tuple[Path, str]],
    context: DatasetContext,
    staging_dir: Path,
    part_key: str,
    *,
    chunk_rows: int = CHUNK_ROWS,
    hold_rows: int = FILE_HOLD_ROWS,
    carried: Sequence[CarriedFile] = (),
    carried_parts: Sequence[tuple[str, Path]] = (),
    keep_parts: bool = False,
    source: str,
) -> GroupResult:
    """Parse a group of JSONL files into one set of staging parts. Never raises for bad content.

    Every record takes the same per-line path (``FileIngester.record``); grouping small files
    amortises the per-Parquet-file costs. Rows are written ``chunk_rows`` at a time, but a file
    KernelIndex may still find unreadable holds up to ``hold_rows`` more (FILE_HOLD_ROWS). The
    rows of the ``carried`` files are copied from the group's previous parts ``carried_parts``
    ((table, part) pairs) instead; when those cannot be read, the files are parsed like the
    others. With ``keep_parts`` (the previous parts hold the rows of the carried files and
    nothing else) they are not copied but kept, and the group's parts are those and the new ones
    (``_keeps_parts``).
    """
    writer = PartWriter(staging_dir, part_key)
    result = GroupResult()
    kept_parts: list[tuple[str, Path]] = []
    try:
        # A grown file is read on from its old end, unless the bytes up to there changed
        # after all: then it is parsed whole.
        ends = {c.rel: _old_end(c) for c in carried if c.grown}
        rewritten = [c for c in carried if c.rel in ends and ends[c.rel] is None]
        files = [*files, *((Path(c.location), c.rel) for c in rewritten)]
        carried = [c for c in carried if c not in rewritten]
        if keep_parts and carried and not rewritten and _keeps_parts(carried_parts):
            kept_parts = list(carried_parts)
        if carried and (kept_parts or carry_rows(writer, carried_parts, {c.rel for c in carried})):
            for kept in carried:
                resume = ends.get(kept.rel)
                result.files[kept.rel] = (
                    kept.result()
                    if resume is None
                    else _read_on(
                        kept,
                        resume,
                        context,
                        writer,
                        carried_parts,
                        (chunk_rows, hold_rows),
                        source,
                    )
                )
        elif carried:
            writer.abort()
            writer = PartWriter(staging_dir, part_key)
            files = [*files, *((Path(c.location), c.rel) for c in carried)]
        for path, rel in files:
            ingester = FileIngester(rel, context, writer.rows, source=source)
            _ingest_lines(path, ingester, writer, (chunk_rows, hold_rows))
            ingester.result.kernelindex_unreadable = ingester.in_scope and not ingester.strict_file
            result.files[rel] = ingester.result
        writer.close()
    except BaseException:
        writer.abort()
        raise
    # The kept parts first: their rows are the older ones.
    for table, path in kept_parts:
        result.parts.setdefault(table, []).append(path.name)
    for table, names in writer.written.items():
        result.parts.setdefault(table, []).extend(names)
    return result


def _keeps_parts(parts: Sequence[tuple[str, Path]]) -> bool:
    """Whether a group's previous parts can stay as they are: each is a staging part of this
    importer (its schema, read from the footer, is its table's). Else the rows are carried
    (``carry_rows``), which drops what it cannot read."""
    try:
        for name, path in parts:
            if name not in PART_TABLES or not pq.read_schema(path).equals(
                PART_TABLES[name].arrow_schema
            ):
                return False
    except (OSError, pa.ArrowException):
        return False
    return True


def _old_end(grown: CarriedFile) -> tuple[Any, FileEnd] | None:
    """For a file that grew: a SHA-256 fed with its bytes up to where its last read ended, and
    that end, when those bytes are still the ones read then; else None."""
    assert grown.end_line is not None and grown.end_offset is not None
    content = hashlib.sha256()
    left = grown.end_offset
    try:
        with open(grown.location, "rb") as handle:
            while left > 0:
                block = handle.read(min(left, 1 << 20))
                if not block:
                    return None
                content.update(block)
                left -= len(block)
    except OSError:
        return None  # parsed whole, which reports it
    if content.hexdigest() != grown.sha256:
        return None
    return content, FileEnd(grown.end_line, grown.end_offset)


def _read_on(
    grown: CarriedFile,
    resume: tuple[Any, FileEnd],
    context: DatasetContext,
    writer: PartWriter,
    parts: Sequence[tuple[str, Path]],
    chunking: tuple[int, int],
    source: str,
) -> FileResult:
    """Parse the lines a grown file gained, as its whole parse would have (its rows up to its
    old end are carried): the counts go on from its old ones, the environments and workloads
    its carried rows hold are not given again, and one line KernelIndex cannot read before
    still makes the whole file unreadable for it."""
    ingester = FileIngester(grown.rel, context, writer.rows, source=source)
    ingester.result = FileResult(
        grown.rel, records=grown.records, runs=grown.runs, rejected=grown.rejected, read_on=True
    )
    ingester.strict_file = not grown.kernelindex_unreadable
    environments, workloads = _entities_of(parts, grown.rel)
    ingester.environments_seen.update(environments)
    ingester.workloads_seen.update(workloads)
    _ingest_lines(Path(grown.location), ingester, writer, chunking, resume)
    ingester.result.kernelindex_unreadable = ingester.in_scope and not ingester.strict_file
    return ingester.result


def _entities_of(
    parts: Sequence[tuple[str, Path]], rel: str
) -> tuple[set[str], set[tuple[str, str]]]:
    """The environment ids and (definition, workload key) pairs the staged rows of file
    ``rel`` hold (each file's parts give each of them once). Read as Python lists, not
    filtered by pyarrow.compute: the tables are small, and its import costs ~0.08 s."""

    def rows(path: Path, *columns: str) -> Iterator[tuple[Any, ...]]:
        table = read_parquet_file(path, ["source_file", *columns])
        listed = [table.column(name).to_pylist() for name in ("source_file", *columns)]
        return (row[1:] for row in zip(*listed, strict=True) if row[0] == rel)

    environments: set[str] = set()
    workloads: set[tuple[str, str]] = set()
    for name, path in parts:
        if name == "environments":
            environments.update(environment for (environment,) in rows(path, "environment_id"))
        elif name == "workloads":
            workloads.update(rows(path, "definition", "workload_key"))
    return environments, workloads


def _file_column(table: schemas.Table) -> str | None:
    """The column of a staging part that names the file its rows came from; None for a
    table whose rows are known by their run (correctness)."""
    return next((c for c in ("source_file", "file") if c in table.column_names), None)


def carry_rows(writer: PartWriter, parts: Sequence[tuple[str, Path]], kept: set[str]) -> bool:
    """Append to ``writer`` the rows of the files ``kept`` from a group's previous ``parts``
    ((table, part) pairs),
    a row group at a time (memory is one row group's, whatever the group's size). False when
    a part cannot be read as a staging part of this importer: the caller then drops what was
    appended and parses the files instead.

    The rows are those a parse of the files would give: a file's rows (its environments and
    workloads included: each file's parts get their own) depend on its bytes and the dataset
    context alone, and the plan carries only files whose bytes and context are unchanged (or,
    for a file that only grew, its rows up to its old end, the bytes they came from)."""
    import pyarrow.compute as pc  # ~50 ms to import: only a build that carries rows pays it

    kept_files = pa.array(sorted(kept), type=pa.string())
    with contextlib.ExitStack() as opened:
        try:
            by_table: dict[str, list[pq.ParquetFile]] = {}
            for name, path in parts:
                handle = opened.enter_context(pq.ParquetFile(path))
                if name not in PART_TABLES or not handle.schema_arrow.equals(
                    PART_TABLES[name].arrow_schema
                ):
                    return False
                by_table.setdefault(name, []).append(handle)
            runs = [h.read(columns=["run_id", "source_file"]) for h in by_table.get("runs", [])]
            kept_runs = pa.chunked_array(
                [r.filter(pc.field("source_file").isin(kept_files))["run_id"] for r in runs],
                type=pa.string(),
            ).combine_chunks()
            for name, table in PART_TABLES.items():
                column = _file_column(table)
                keys = kept_files if column is not None else kept_runs
                for handle in by_table.get(name, []):
                    for index in range(handle.num_row_groups):
                        rows = handle.read_row_group(index)
                        rows = rows.filter(pc.field(column or "run_id").isin(keys))
                        if rows.num_rows:
                            writer.append(name, rows)
        except (OSError, pa.ArrowException):
            return False
    return True


def _ingest_lines(
    path: Path,
    ingester: FileIngester,
    writer: PartWriter,
    chunking: tuple[int, int],
    resume: tuple[Any, FileEnd] | None = None,
) -> None:
    """Parse a file's lines into the parts; with ``resume`` (a SHA-256 fed with the file's
    bytes so far, and where they end), only the lines after that end. ``chunking``: the rows
    written at a time, and how many more a file holds while KernelIndex may still find it
    unreadable (FILE_HOLD_ROWS)."""
    chunk_rows, hold_rows = chunking
    counts = ingester.result
    if resume is None:
        try:
            if looks_binary(path):
                counts.content_sha256 = sha256_file(path)
                ingester.reject(
                    None, "binary_file", "the file holds binary data, not JSON lines", None
                )
                return
        except OSError as error:
            _unreadable(ingester, error)
            return
    # (A grown file is read on only when its old lines held runs, so it is no binary file.)
    content, end = resume if resume is not None else (hashlib.sha256(), FileEnd())
    unreadable: list[OSError] = []

    def records() -> Iterator[Record | Reject]:
        # Only an error reading the source file is the file's; an error writing the parts
        # (a full disk, say) is raised from the loop below, outside this handler, and fails
        # the group.
        try:
            yield from iter_jsonl(path, ingester.rel, content, end)
        except OSError as error:
            unreadable.append(error)

    # The rows a chunk counts (a flush empties these lists in place), looked at once a line.
    runs, lines, rejects = (writer.rows[name].rows for name in CHUNK_TABLES)
    if max(len(runs), len(lines), len(rejects)) >= (FEW_ROWS if ingester.in_scope else chunk_rows):
        writer.flush(chunk_rows)  # the files' before: this one's rows can be held whole
    for item in records():
        most = chunk_rows + hold_rows if ingester.in_scope and ingester.strict_file else chunk_rows
        if len(runs) >= most or len(lines) >= most or len(rejects) >= most:
            writer.flush(chunk_rows)
        if isinstance(item, Reject):
            counts.records += 1
            ingester.reject(item.line, item.reason, item.message, None)
            ingester.parts["rejects"].rows[-1]["raw_prefix"] = item.raw_prefix
        else:
            ingester.fib_line(item)
            ingester.record(item)
    if unreadable:
        _unreadable(ingester, unreadable[0])
        return
    counts.content_sha256 = content.hexdigest()
    if end.resumable:
        counts.end_line, counts.end_offset = end.line, end.offset


def _unreadable(ingester: FileIngester, error: OSError) -> None:
    reject = unreadable_file(ingester.rel, error)
    ingester.reject(reject.line, reject.reason, reject.message, None)
