"""The columnar path: a file's clean trace lines as columns, normalised by Polars expressions.

Reading stays shared with the exact path (``records.iter_jsonl``: line numbers, offsets, BOM,
strictness), so both paths see the same records. For each record ``ColumnarBatch.take``
decides in a handful of type checks whether the line has one of the shapes this path handles
exactly (``_clean_trace``); anything else — legacy spellings that need per-record judgement,
concatenated or lenient lines, unknown members, values outside the ranges proved safe below —
goes to the exact per-line path (``transforms.ingest.FileIngester``), which stays the reference.

What varies only per entity is computed once per distinct entity: a trace's identity outside
its per-run fields depends only on (definition, workload, environment, scope), so the first
line of every such combination is run through the exact path in a scratch ingester and its
entity columns are reused for every later line (``_Combination``). Per-run columns (status,
latency, timestamps, numbers, the canonical run body) are Polars expressions over the whole
batch; only byte hashing (line, log) and small JSON re-encodings stay in the reading loop.

The differential tests (tests/unit/test_columnar.py) build the same data both ways and compare
every column (``ingest_group(..., exact=True)`` sends every record down the exact path).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import orjson
import polars as pl
import pyarrow as pa

from tracehouse import kernelindex
from tracehouse.identify.dataset_context import DatasetContext
from tracehouse.kernelindex import canonical_number
from tracehouse.read.evaluation_rules import (
    latency_ns_problem,
    not_evaluated,
    tolerance_bounds,
    was_evaluated,
)
from tracehouse.read.fib_lines import fib_trace_line
from tracehouse.read.normalize import LOG_TRUNCATED_SUFFIX, kept_log, log_excerpt
from tracehouse.read.records import Record
from tracehouse.rejects import FORBIDS_CORRECTNESS

if TYPE_CHECKING:
    from tracehouse.read.normalize import Trace


class FileIngester(Protocol):
    """What this path reads and writes of the exact path's ingester of a file
    (``transforms.ingest.FileIngester``); named here so that this module, which that one
    imports, does not import it back."""

    rel: str
    context: DatasetContext
    in_scope: bool
    fib_reads: bool
    parts: dict[str, Any]
    environments_seen: set[str]
    workloads_seen: set[tuple[str, str]]
    result: Any
    last_trace: Trace | None

    def record(self, record: Record) -> None: ...

    def fib_line(self, record: Record) -> None: ...

    def scratch(self) -> FileIngester: ...


# Members of a trace line, its evaluation, correctness and performance blocks this path takes;
# any other member changes `extra_json` or the schema variant in ways the exact path owns.
TRACE_MEMBERS = frozenset({"definition", "solution", "workload", "evaluation"})
EVALUATION_MEMBERS = frozenset(
    {"status", "environment", "timestamp", "log", "correctness", "performance", "log_file"}
)
CORRECTNESS_MEMBERS = frozenset({"max_absolute_error", "max_relative_error", "extra"})
PERFORMANCE_MEMBERS = frozenset({"latency_ms", "reference_latency_ms", "speedup_factor"})
ERROR_BOUND_WORDS = frozenset({"NaN", "Infinity"})
# `YYYY-MM-DDTHH:MM:SS[.fraction][Z]`: KernelIndex relabels it as UTC and truncates the fraction
# to milliseconds (identity doc §9.5). Offsets and other spellings take the exact path.
CLEAN_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z?")
MAX_SAFE_INTEGER = 2**53 - 1
# Polars writes a Float64 as the shortest round-trip digits, in plain decimal notation from 1e-4
# up to 1e16 (`1.0`, `0.0001`, `123.456`), the same digits ECMAScript's Number::toString chooses;
# ECMAScript prints that whole range in plain notation too, without a trailing `.0`. So inside it
# the canonical text is Polars' text less any `.0`; other values are formatted by the exact
# ``canonical_number`` (tests/unit/test_columnar.py checks both claims with Hypothesis).
PLAIN_FLOAT_MIN = 1e-4
PLAIN_FLOAT_MAX = 1e16


def _number(value: Any) -> float | None:
    """A finite JSON number as a float, or None when this path must not take it."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return float(value)
    return None


def _clean_trace(value: Any, definitions: dict[str, Any]) -> bool:
    """True when a parsed line is an evaluated trace of a shape this path reproduces exactly.

    Lines it refuses are not wrong: they take the exact path, which imports or rejects them.
    """
    if type(value) is not dict or not value.keys() <= TRACE_MEMBERS:
        return False
    definition = value.get("definition")
    if type(definition) is not str or definition not in definitions:
        return False
    solution = value.get("solution")
    if solution is not None and (type(solution) is not str or not solution):
        return False
    evaluation = value.get("evaluation")
    if type(value.get("workload")) is not dict or type(evaluation) is not dict or not evaluation:
        return False
    if not evaluation.keys() <= EVALUATION_MEMBERS:
        return False
    status = evaluation.get("status")
    if type(status) is not str or status not in kernelindex.STATUS_MAP:
        return False
    if type(evaluation.get("environment")) is not dict:
        return False
    timestamp = evaluation.get("timestamp")
    if type(timestamp) is not str or CLEAN_TIMESTAMP.fullmatch(timestamp) is None:
        return False
    try:
        datetime.fromisoformat(timestamp[:19])
    except ValueError:
        return False
    log = evaluation.get("log")
    if log is not None and type(log) is not str:
        return False
    correctness = evaluation.get("correctness")
    performance = evaluation.get("performance")
    if status == "PASSED":
        if performance is None or correctness is None:
            return False
    elif performance is not None:
        return False
    if status == "INCORRECT_NUMERICAL" and correctness is None:
        return False
    if status in FORBIDS_CORRECTNESS and correctness is not None:
        return False
    if correctness is not None:
        if type(correctness) is not dict or not correctness.keys() <= CORRECTNESS_MEMBERS:
            return False
        for member in ("max_absolute_error", "max_relative_error"):
            bound = correctness.get(member)
            if type(bound) is str and bound in ERROR_BOUND_WORDS:
                continue
            number = _number(bound)
            if number is None or number < 0:
                return False
        extra = correctness.get("extra")
        if extra is not None and type(extra) is not dict:
            return False
    if performance is not None:
        if type(performance) is not dict or not performance.keys() <= PERFORMANCE_MEMBERS:
            return False
        latency = _number(performance.get("latency_ms"))
        # Outside latency_ns's range the exact path rejects the line, by the same rule.
        if latency is None or latency_ns_problem(latency) is not None:
            return False
        for member in ("reference_latency_ms", "speedup_factor"):
            other = performance.get(member)
            if other is not None and (_number(other) is None or other < 0):
                return False
    return True


@dataclass
class _Combination:
    """What every line sharing (definition, workload, environment, scope) has in common: the
    entity columns the exact path derived for the first such line."""

    columns: dict[str, Any]
    # KernelIndex's derivation succeeded (identity_error may still say it would not carry the
    # line, e.g. outside its layout); the per-run identity columns are filled only then.
    identified: bool
    environment_row: dict[str, Any]
    workload_row: dict[str, Any]  # its source columns are those of the representative line
    workload_key: str
    workload_variants: tuple[str, ...]
    environment_variants: tuple[str, ...]
    environment_extra: dict[str, Any]
    tolerance_max_atol: float | None
    tolerance_max_rtol: float | None
    # What FlashInfer-Bench reads of the raw workload and environment (its trace_lines row).
    fib_columns: dict[str, str | None]


# trace_lines columns (tracehouse.read.fib_lines) that depend only on the raw workload and
# environment, which every line of a combination shares byte for byte.
FIB_ENTITY_COLUMNS = ("workload_uuid", "hardware", "device")
# Entity columns copied from the representative line's exact row.
COMBINATION_COLUMNS = (
    "environment_id",
    "hardware",
    "workload_key",
    "workload_uuid",
    "operation_digest",
    "workload_digest",
    "environment_digest",
    "protocol_digest",
    "correctness_key",
    "identity_error",
    "identity_complete",
)
# What was derived per combination key — a _Combination (trace lines), a _WorkloadRecord
# (workload-only records), or None where the exact path must take every such line — kept per
# process and dataset context: entities repeat across the files one worker parses.
_COMBINATIONS: dict[str, dict[tuple[Any, ...], Any]] = {}


def _combination_cache(context: DatasetContext) -> dict[tuple[Any, ...], Any]:
    cache = _COMBINATIONS.get(context.fingerprint)
    if cache is None:
        _COMBINATIONS.clear()  # a new context: earlier derivations may no longer hold
        cache = _COMBINATIONS[context.fingerprint] = {}
    return cache


@dataclass
class ColumnarBatch:
    """The clean trace lines of a group of files gathered as columns until the next flush."""

    context: DatasetContext
    combination_ids: dict[tuple[Any, ...], int] = field(default_factory=dict)
    combinations: list[_Combination] = field(default_factory=list)
    # (source_file, kernelindex_scope, path_author, FlashInfer-Bench reads it) of each file
    # seen, by position
    files: list[tuple[str, bool, str | None, bool]] = field(default_factory=list)
    file_ids: dict[str, int] = field(default_factory=dict)
    rows: list[tuple[Any, ...]] = field(default_factory=list)  # one per line, _LOOP_SCHEMA order
    derived: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rows = []
        self.derived = _combination_cache(self.context)

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, record: Record, ingester: FileIngester) -> bool:
        """Gather one record of the file ``ingester`` reads (transforms.ingest.FileIngester),
        or return False for that exact path to handle it."""
        value = record.value
        if not record.strict or record.index:
            return False
        if not _clean_trace(value, ingester.context.definitions):
            return self._take_workload(record, ingester)
        evaluation = value["evaluation"]
        workload_bytes = orjson.dumps(value["workload"])
        environment_bytes = orjson.dumps(evaluation["environment"])
        key = (value["definition"], workload_bytes, environment_bytes, ingester.in_scope)
        combination_id = self.combination_ids.get(key)
        if combination_id is None:
            combination = self.derived.get(key, _COMBINATION_UNKNOWN)
            if combination is _COMBINATION_UNKNOWN:
                combination = self.derived[key] = _derive_combination(ingester, record)
            if combination is None:
                return False
            combination_id = self.combination_ids[key] = len(self.combinations)
            self.combinations.append(combination)
        combination = self.combinations[combination_id]
        self._add_entities(combination, value["definition"], record, ingester)
        file_id = self.file_ids.get(ingester.rel)
        if file_id is None:
            file_id = self.file_ids[ingester.rel] = len(self.files)
            author = ingester.rel.split("/")[1] if ingester.in_scope else None
            self.files.append((ingester.rel, ingester.in_scope, author, ingester.fib_reads))

        raw = record.raw
        line_digest = hashlib.sha256(raw).hexdigest()
        run_id = hashlib.sha256(
            f"{ingester.rel}\n{record.line}\n{record.index}\n{line_digest}".encode()
        ).hexdigest()[:32]
        status = evaluation["status"]
        log = evaluation.get("log")
        if log:
            encoded = log.encode("utf-8")
            log_bytes = len(encoded)
            log_digest = "sha256:" + hashlib.sha256(encoded).hexdigest()
            log_truncated = log[-64:].rstrip().endswith(LOG_TRUNCATED_SUFFIX)
            excerpt = log_excerpt(log) if status != "PASSED" else None
        else:
            log_bytes, log_digest, log_truncated, excerpt = 0, None, False, None
        has_log_file = "log_file" in evaluation
        record_extra: dict[str, Any] = {}
        if combination.environment_extra:
            record_extra["environment"] = combination.environment_extra
        if has_log_file:
            record_extra["log_file"] = evaluation["log_file"]

        correctness = evaluation.get("correctness")
        if correctness is not None:
            # "NaN" or "Infinity" words go to the *_special columns (_clean_trace took no other
            # strings); numbers to the value columns.
            absolute = correctness["max_absolute_error"]
            relative = correctness["max_relative_error"]
            absolute_is_word = type(absolute) is str
            relative_is_word = type(relative) is str
            extra = correctness.get("extra")
            ratio = extra.get("matched_ratio") if extra is not None else None
            correctness_columns: tuple[Any, ...] = (
                True,
                None if absolute_is_word else float(absolute),
                absolute if absolute_is_word else None,
                None if relative_is_word else float(relative),
                relative if relative_is_word else None,
                float(ratio)
                if isinstance(ratio, int | float) and type(ratio) is not bool
                else None,
                orjson.dumps({"extra": extra}).decode() if "extra" in correctness else None,
            )
        else:
            correctness_columns = NO_CORRECTNESS

        performance = evaluation.get("performance")
        if performance is not None:
            reference = performance.get("reference_latency_ms")
            speedup = performance.get("speedup_factor")
            performance_columns: tuple[Any, ...] = (
                float(performance["latency_ms"]),
                None if reference is None else float(reference),
                None if speedup is None else float(speedup),
            )
        else:
            performance_columns = NO_PERFORMANCE
        # One tuple per line, in _LOOP_SCHEMA order: Polars builds the columns in one pass.
        self.rows.append(
            (
                file_id,
                run_id,
                line_digest,
                record.line,
                record.offset,
                combination_id,
                value["definition"],
                value.get("solution"),
                status,
                evaluation["timestamp"],
                was_evaluated(status, log or ""),
                log_bytes,
                log_digest,
                log_truncated,
                excerpt,
                kept_log(log),
                has_log_file,
                orjson.dumps(record_extra).decode() if record_extra else None,
                *correctness_columns,
                *performance_columns,
            )
        )
        ingester.result.runs += 1
        return True

    def _take_workload(self, record: Record, ingester: FileIngester) -> bool:
        """A workload-only record (no evaluation): one workloads row per (definition, key) and
        file, derived once per distinct workload like a trace's entities."""
        value = record.value
        if type(value) is not dict or not not_evaluated(value.get("evaluation")):
            return False
        definition = value.get("definition")
        workload = value.get("workload")
        if type(definition) is not str or definition not in ingester.context.definitions:
            return False
        if type(workload) is not dict:
            return False
        key = ("workload", definition, orjson.dumps(workload))
        row = self.derived.get(key, _COMBINATION_UNKNOWN)
        if row is _COMBINATION_UNKNOWN:
            row = self.derived[key] = _derive_workload_row(ingester, record)
        if row is None:
            return False
        seen_key = (definition, row.workload_key)
        if seen_key not in ingester.workloads_seen:
            ingester.workloads_seen.add(seen_key)
            ingester.parts["workloads"].add(
                {
                    **row.workload_row,
                    "source_file": ingester.rel,
                    "source_line": record.line,
                    "record_index": record.index,
                }
            )
        ingester.result.workload_records += 1
        ingester.fib_line(
            record
        )  # a workload line with `"evaluation": {}` counts for FlashInfer-Bench
        return True

    @staticmethod
    def _add_entities(
        combination: _Combination, definition: str, record: Record, ingester: FileIngester
    ) -> None:
        """The file's environment and workload rows, first occurrence first, as the exact path
        writes them (its `seen` sets are shared, so the two paths never write one twice)."""
        environment_id = combination.environment_row["environment_id"]
        if environment_id not in ingester.environments_seen:
            ingester.environments_seen.add(environment_id)
            ingester.parts["environments"].add(combination.environment_row)
        seen_key = (definition, combination.workload_key)
        if seen_key not in ingester.workloads_seen:
            ingester.workloads_seen.add(seen_key)
            ingester.parts["workloads"].add(
                {
                    **combination.workload_row,
                    "source_file": ingester.rel,
                    "source_line": record.line,
                    "record_index": record.index,
                }
            )

    def frames(self) -> tuple[pa.Table, pa.Table, pa.Table]:
        """The gathered lines as staging runs, correctness and trace_lines tables; the batch is
        emptied."""
        from tracehouse import schemas
        from tracehouse.schemas import STAGING_RUNS

        batch = pl.DataFrame(self.rows, schema=_LOOP_SCHEMA, orient="row")
        entities = pl.DataFrame(
            [
                {
                    "combination": index,
                    **{name: c.columns.get(name) for name in COMBINATION_COLUMNS},
                    "identified": c.identified,
                    "variants_before_log": ",".join(c.workload_variants + c.environment_variants),
                    "tolerance_max_atol": c.tolerance_max_atol,
                    "tolerance_max_rtol": c.tolerance_max_rtol,
                    **{f"fib_{name}": value for name, value in c.fib_columns.items()},
                }
                for index, c in enumerate(self.combinations)
            ],
            schema=_ENTITY_SCHEMA,
        )
        files = pl.DataFrame(
            {
                "file": range(len(self.files)),
                "source_file": [f[0] for f in self.files],
                "kernelindex_scope": [f[1] for f in self.files],
                "path_author": [f[2] for f in self.files],
                "fib_reads": [f[3] for f in self.files],
            },
            schema={
                "file": pl.Int64(),
                "source_file": pl.String(),
                "kernelindex_scope": pl.Boolean(),
                "path_author": pl.String(),
                "fib_reads": pl.Boolean(),
            },
        )
        runs = _run_columns(
            batch.join(entities, on="combination", how="left").join(files, on="file", how="left")
        )
        runs_table = runs.select(STAGING_RUNS.column_names).to_arrow()
        correctness_table = (
            runs.filter(pl.col("has_correctness"))
            .select(
                "run_id",
                pl.col("absolute_error").alias("max_absolute_error"),
                pl.col("absolute_special").alias("max_absolute_error_special"),
                pl.col("relative_error").alias("max_relative_error"),
                pl.col("relative_special").alias("max_relative_error_special"),
                "matched_ratio",
                pl.lit(kernelindex.RUN_COMPARATOR).alias("comparator"),
                "tolerance_max_atol",
                "tolerance_max_rtol",
                pl.col("correctness_extra_json").alias("extra_json"),
            )
            .to_arrow()
        )
        self.rows.clear()
        return (
            runs_table.cast(STAGING_RUNS.arrow_schema),
            correctness_table.cast(schemas.STORED["correctness"].arrow_schema),
            _fib_trace_lines(runs).cast(schemas.STORED["trace_lines"].arrow_schema),
        )


_COMBINATION_UNKNOWN: Any = object()

_LOOP_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.Int64(),
    "run_id": pl.String(),
    "line_digest": pl.String(),
    "source_line": pl.Int64(),
    "source_offset": pl.Int64(),
    "combination": pl.Int64(),
    "definition": pl.String(),
    "solution": pl.String(),
    "status": pl.String(),
    "timestamp_raw": pl.String(),
    "evaluated": pl.Boolean(),
    "log_bytes": pl.Int64(),
    "log_digest": pl.String(),
    "log_truncated": pl.Boolean(),
    "log_excerpt": pl.String(),
    "log": pl.String(),
    "has_log_file": pl.Boolean(),
    "extra_json": pl.String(),
    "has_correctness": pl.Boolean(),
    "absolute_error": pl.Float64(),
    "absolute_special": pl.String(),
    "relative_error": pl.Float64(),
    "relative_special": pl.String(),
    "matched_ratio": pl.Float64(),
    "correctness_extra_json": pl.String(),
    "latency_ms": pl.Float64(),
    "reference_latency_ms": pl.Float64(),
    "speedup_factor": pl.Float64(),
}
# The trailing columns of a line without a correctness or a performance block.
NO_CORRECTNESS = (False, None, None, None, None, None, None)
NO_PERFORMANCE = (None, None, None)
_ENTITY_SCHEMA: dict[str, pl.DataType] = {
    "combination": pl.Int64(),
    **{name: pl.String() for name in COMBINATION_COLUMNS},
    "identity_complete": pl.Boolean(),
    "identified": pl.Boolean(),
    "variants_before_log": pl.String(),
    "tolerance_max_atol": pl.Float64(),
    "tolerance_max_rtol": pl.Float64(),
    **{f"fib_{name}": pl.String() for name in FIB_ENTITY_COLUMNS},
}


def _derive_combination(ingester: FileIngester, record: Record) -> _Combination | None:
    """Run the exact path on a representative line in a scratch ingester and keep what every
    line of its combination shares; None when the exact path would not import it."""
    scratch = ingester.scratch()
    scratch.record(record)
    trace = scratch.last_trace
    if (
        trace is None
        or len(scratch.parts["runs"]) != 1
        or len(scratch.parts["environments"]) != 1
        or len(scratch.parts["workloads"]) != 1
    ):
        return None
    row = scratch.parts["runs"].rows[0]
    workload_variants = tuple(v for v in trace.variants if v in ("legacy_format_key", "no_uuid"))
    environment_variants = tuple(
        v for v in trace.variants if v in ("device_key", "numeric_lib_version")
    )
    max_atol, max_rtol = tolerance_bounds(trace.workload)
    line = fib_trace_line(ingester.rel, record) or {}
    return _Combination(
        columns={name: row.get(name) for name in COMBINATION_COLUMNS},
        identified=row.get("run_body_template") is not None,
        environment_row=scratch.parts["environments"].rows[0],
        workload_row=scratch.parts["workloads"].rows[0],
        workload_key=row["workload_key"],
        workload_variants=workload_variants,
        environment_variants=environment_variants,
        environment_extra=trace.environment_extra,
        tolerance_max_atol=max_atol,
        tolerance_max_rtol=max_rtol,
        fib_columns={name: line.get(name) for name in FIB_ENTITY_COLUMNS},
    )


@dataclass(frozen=True)
class _WorkloadRecord:
    workload_row: dict[str, Any]
    workload_key: str


def _derive_workload_row(ingester: FileIngester, record: Record) -> _WorkloadRecord | None:
    """The exact path's workloads row for a workload-only record, or None when it rejects it."""
    scratch = ingester.scratch()
    scratch.record(record)
    if len(scratch.parts["workloads"]) != 1 or scratch.result.rejected:
        return None
    row = scratch.parts["workloads"].rows[0]
    return _WorkloadRecord(row, row["workload_key"])


# --- per-run expressions -----------------------------------------------------------------------


def js_number_text(column: str) -> pl.Expr:
    """ECMAScript Number::toString of a Float64 column inside the plain-notation range proved
    above; null outside it (filled by ``_fill_number_texts``)."""
    value = pl.col(column)
    text = value.cast(pl.String)
    plain = (value.abs() >= PLAIN_FLOAT_MIN) & (value.abs() < PLAIN_FLOAT_MAX)
    return (
        pl.when(value == 0)
        .then(pl.lit("0"))
        .when(plain)
        .then(pl.when(text.str.ends_with(".0")).then(text.str.head(-2)).otherwise(text))
        .otherwise(None)
    )


NUMBER_COLUMNS = (
    "latency_ms",
    "reference_latency_ms",
    "speedup_factor",
    "absolute_error",
    "relative_error",
)


def _fill_number_texts(frame: pl.DataFrame) -> pl.DataFrame:
    """Number texts outside the plain range, from the exact formatter, once per distinct value."""
    replacements = []
    for column in NUMBER_COLUMNS:
        text = f"{column}_text"
        missing = frame.filter(pl.col(column).is_not_null() & pl.col(text).is_null())
        if missing.height == 0:
            continue
        values = missing.get_column(column).unique().to_list()
        mapping = {value: canonical_number(value) for value in values}
        replacements.append(
            pl.when(pl.col(text).is_null() & pl.col(column).is_not_null())
            .then(pl.col(column).replace_strict(mapping, default=None, return_dtype=pl.String))
            .otherwise(pl.col(text))
            .alias(text)
        )
    return frame.with_columns(replacements) if replacements else frame


def _quoted(column: str) -> pl.Expr:
    """A JSON string of ASCII-safe text (digests, statuses, timestamps): quotes only."""
    return pl.lit('"') + pl.col(column) + pl.lit('"')


RUN_ENVELOPE_PREFIX = kernelindex.RUN_ENVELOPE_PREFIX
TEMPLATE_SLOT = '"' + kernelindex.RUN_TEMPLATE_SLOT + '"'


def _run_body_template() -> pl.Expr:
    """The canonical BenchmarkRun envelope (kernelindex.run_body_template), member by member in
    JCS order, with the implementation and workload digests left as slots."""
    correctness = (
        pl.lit('"correctness":{"comparator":"' + kernelindex.RUN_COMPARATOR + '"')
        + pl.when(pl.col("absolute_error_text").is_not_null())
        .then(pl.lit(',"maximumAbsoluteError":') + pl.col("absolute_error_text"))
        .otherwise(pl.lit(""))
        + pl.when(pl.col("relative_error_text").is_not_null())
        .then(pl.lit(',"maximumRelativeError":') + pl.col("relative_error_text"))
        .otherwise(pl.lit(""))
        + pl.lit("},")
    )
    evidence = (
        pl.lit('"evidence":{"logs":{"digest":')
        + _quoted("log_digest")
        + pl.lit(',"uri":"kernelindex:artifact/')
        + pl.col("log_digest")
        + pl.lit('"}},')
    )
    metrics = (
        pl.lit(',"metrics":{"latency_ms":')
        + pl.col("latency_ms_text")
        + pl.when(pl.col("reference_latency_ms_text").is_not_null())
        .then(pl.lit(',"reference_latency_ms":') + pl.col("reference_latency_ms_text"))
        .otherwise(pl.lit(""))
        + pl.when(pl.col("speedup_factor_text").is_not_null())
        .then(pl.lit(',"speedup_factor":') + pl.col("speedup_factor_text"))
        .otherwise(pl.lit(""))
        + pl.lit("}")
    )
    timing = (
        pl.lit(',"timing":{"latencyNs":{"mean":')
        + pl.col("latency_ns").cast(pl.String)
        + pl.lit('},"primaryStatistic":"mean"}')
    )
    return (
        pl.lit(RUN_ENVELOPE_PREFIX)
        + pl.when(pl.col("has_correctness")).then(correctness).otherwise(pl.lit(""))
        + pl.lit('"environmentDigest":')
        + _quoted("environment_digest")
        + pl.lit(",")
        + pl.when(pl.col("log_digest").is_not_null()).then(evidence).otherwise(pl.lit(""))
        + pl.lit('"implementationDigest":' + TEMPLATE_SLOT + ',"observedAt":')
        + _quoted("observed_text")
        + pl.lit(',"protocolDigest":')
        + _quoted("protocol_digest")
        + pl.lit(',"sourceNative":{"benchmark":')
        + pl.col("definition_json")
        + pl.when(pl.col("latency_ms").is_not_null()).then(metrics).otherwise(pl.lit(""))
        + pl.lit(',"source":"' + kernelindex.HARNESS_NAME + '"},"status":')
        + _quoted("ki_status")
        + pl.when(pl.col("latency_ms").is_not_null()).then(timing).otherwise(pl.lit(""))
        + pl.lit(',"workloadDigest":' + TEMPLATE_SLOT + "}}")
    )


def _fib_error_bound(prefix: str) -> pl.Expr:
    """FlashInfer-Bench reads the "Infinity" word as infinity and "NaN" as no number."""
    return (
        pl.when(pl.col(f"{prefix}_special") == "Infinity")
        .then(pl.lit(math.inf))
        .otherwise(pl.col(f"{prefix}_error"))
    )


def _fib_trace_lines(runs: pl.DataFrame) -> pa.Table:
    """The trace_lines rows of the batch's lines (fib_lines.fib_trace_line, column-wise): a
    clean line is one strict JSON object with a non-empty evaluation whose numbers are finite,
    so most of FlashInfer-Bench's reading is the staged columns themselves."""
    return (
        runs.filter(pl.col("fib_reads"))
        .select(
            "source_file",
            "source_line",
            "record_index",
            pl.lit(True).alias("json_parse_ok"),
            "definition",
            "solution",
            pl.col("fib_workload_uuid").alias("workload_uuid"),
            pl.lit(True).alias("has_evaluation"),
            "status",
            pl.col("fib_hardware").alias("hardware"),
            pl.col("fib_device").alias("device"),
            pl.col("has_timing").alias("has_performance"),
            "latency_ms",
            pl.col("has_timing").alias("latency_is_json_number"),
            "speedup_factor",
            _fib_error_bound("absolute").alias("max_absolute_error"),
            _fib_error_bound("relative").alias("max_relative_error"),
            pl.col("timestamp_raw").alias("timestamp"),
        )
        .to_arrow()
    )


def _run_columns(frame: pl.DataFrame) -> pl.DataFrame:
    # The definition name as a JSON string, formatted once per distinct name.
    names = frame.get_column("definition").unique().to_list()
    frame = frame.with_columns(
        pl.col("definition")
        .replace_strict(
            {name: kernelindex.canonical_string(name) for name in names}, return_dtype=pl.String
        )
        .alias("definition_json")
    )
    scaled = pl.col("latency_ms") * 1e6
    whole = scaled.floor()
    fraction = pl.col("timestamp_raw").str.extract(r"\.([0-9]+)", 1)
    observed_text = (
        pl.col("timestamp_raw").str.head(19)
        + pl.lit(".")
        + fraction.fill_null("").str.head(3).str.pad_end(3, "0")
        + pl.lit("Z")
    )
    frame = frame.with_columns(
        pl.col("status").replace_strict(kernelindex.STATUS_MAP).alias("ki_status"),
        (whole + (scaled - whole >= 0.5).cast(pl.Float64)).cast(pl.Int64).alias("latency_ns"),
        observed_text.alias("observed_text"),
        *(js_number_text(column).alias(f"{column}_text") for column in NUMBER_COLUMNS),
    )
    frame = _fill_number_texts(frame)
    identified = pl.col("identified")
    variant = (
        pl.when(pl.col("has_log_file"))
        .then(
            pl.when(pl.col("variants_before_log") == "")
            .then(pl.lit("log_file"))
            .otherwise(pl.col("variants_before_log") + pl.lit(",log_file"))
        )
        .otherwise(pl.col("variants_before_log"))
    )
    return frame.with_columns(
        pl.col("status").alias("status_raw"),
        pl.col("observed_text")
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.3fZ", time_unit="ms", time_zone="UTC")
        .alias("observed_at"),
        pl.when(pl.col("log_digest").is_not_null())
        .then(pl.lit("reproducible"))
        .otherwise(pl.lit("reported"))
        .alias("evidence_level"),
        (
            pl.lit("trace/")
            + pl.col("solution").fill_null("unknown")
            + pl.lit("/")
            + pl.col("workload_key")
        ).alias("external_id"),
        pl.when(variant == "").then(pl.lit("current")).otherwise(variant).alias("schema_variant"),
        pl.lit(0, dtype=pl.Int64).alias("record_index"),
        pl.col("latency_ms").is_not_null().alias("has_timing"),
        # Clean lines have a finite positive latency; the other kinds take the exact path.
        pl.lit(None, dtype=pl.String()).alias("latency_special"),
    ).with_columns(
        # Lines KernelIndex cannot identify keep only what the exact path keeps without one.
        pl.when(identified).then(pl.col("evidence_level")).otherwise(None).alias("evidence_level"),
        pl.when(identified).then(pl.col("external_id")).otherwise(None).alias("external_id"),
        pl.when(identified).then(_run_body_template()).otherwise(None).alias("run_body_template"),
    )
