"""`tracehouse export --flashinfer-trace OUT`: the warehouse back to a FlashInfer-Trace dataset.

The folder is written in the current layout (flashinfer-trace-format.md §1.1)::

    definitions/<op_type>/<definition>.json
    solutions/<author>/<op_type>/<definition>/<solution>.json
    workloads/<op_type>/<definition>.jsonl
    traces/<author>/<op_type>/<definition>.jsonl

Every record comes from the warehouse's own columns (no source file is read): definitions from
``definitions.definition_json``, solutions from ``implementations`` (``spec_json``, ``sources``),
workload-only records from ``workloads`` rows read from workload files, and each run from
``runs`` (with its full ``log``), ``workloads``, ``environments`` and ``correctness``. Identity
never comes from paths, as FlashInfer-Bench's own loader takes none either (§1.3), so a path
part that is not a plain file name is replaced by a digest of it.

Legacy-era spellings are written as the current schema names them, which is how tracehouse read
them: ``type`` → ``op_type``, ``device`` → ``hardware``, ``format`` → ``type`` (inputs),
capitalised languages lower-cased. A trace whose log came from the pre-2025-10-11 ``error`` key
keeps it there, so FlashInfer-Bench reads the empty ``log`` it read from the original, and
tracehouse reads the same log again.

Not written: safetensors blobs (workloads reference them by path, as before), records the
build rejected (``rejects`` keeps their first 200 characters only), and unknown keys of a
solution file (``implementations.extra_json``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tracehouse.serve.queries import reader, within_limits
from tracehouse.settings import Settings
from tracehouse.warehouse import Warehouse, generation_sources

# A path part longer than this (bytes) is replaced by its digest: file systems cap names at 255.
MAX_NAME_BYTES = 200
UNKNOWN = "unknown"


def path_part(text: str | None) -> str:
    """``text`` as one file or folder name inside OUT: as it is when it is a plain name, else
    ``_`` and 16 hex of its SHA-256 (never a separator, ``..``, a NUL or an over-long name)."""
    if not text:
        return UNKNOWN
    if (
        "/" in text
        or "\\" in text
        or "\0" in text
        or text in (".", "..")
        or text.startswith(".")
        or len(text.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
    ):
        return "_" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return text


@dataclass
class Written:
    """What the export wrote, for its summary line."""

    definitions: int = 0
    solutions: int = 0
    workloads: int = 0
    traces: int = 0
    files: int = 0

    def summary(self, out: Path) -> str:
        return (
            f"exported {self.definitions:,} definitions, {self.solutions:,} solutions, "
            f"{self.workloads:,} workloads and {self.traces:,} traces ({self.files:,} files) "
            f"as a FlashInfer-Trace dataset to {out}"
        )


@dataclass
class _Files:
    """JSONL files being filled, each line appended in record order."""

    root: Path
    lines: dict[Path, list[bytes]] = field(default_factory=dict)

    def add(self, relative: Path, record: dict[str, Any] | bytes) -> None:
        """One record, or one line of JSON text as it was read."""
        line = record if isinstance(record, bytes) else _dumps(record)
        self.lines.setdefault(relative, []).append(line)

    def write(self) -> int:
        for relative, lines in sorted(self.lines.items()):
            _write(self.root / relative, b"\n".join(lines) + b"\n")
        return len(self.lines)


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("xb") as handle:  # never over a file this export did not just create
        handle.write(data)


def _loads(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def _rows(connection: Any, sql: str, parameters: dict[str, Any]) -> Iterator[dict[str, Any]]:
    cursor = connection.execute(sql, parameters)
    names = [d[0] for d in cursor.description]
    while batch := cursor.fetchmany(2048):
        for row in batch:
            yield dict(zip(names, row, strict=True))


def _refuse_non_empty(out: Path) -> bool:
    """True when OUT is to be created; ValueError (one line) when it exists and is not an
    empty folder."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ValueError(f"--flashinfer-trace {out}: exists and is not a folder")
    if out.is_dir():
        if any(True for _ in out.iterdir()):
            raise ValueError(
                f"--flashinfer-trace {out}: folder is not empty; the export writes only into "
                "a new or empty folder (name another one, or empty this one yourself)"
            )
        return False
    return True


def _choose_source(settings: Settings, wanted: str | None) -> str:
    generation = Warehouse(settings.warehouse).require_current()
    names = sorted(s.source for s in generation_sources(generation))
    if wanted is not None:
        if wanted not in names:
            listed = ", ".join(names) or "none"
            raise LookupError(f"--source {wanted!r}: no such source in the warehouse ({listed})")
        return wanted
    if len(names) != 1:
        raise LookupError(
            f"--source: the warehouse holds {len(names)} sources ({', '.join(names)}); name the "
            "one to export (a dataset folder is one source's records)"
        )
    return names[0]


def _check_definitions(connection: Any, source: str, wanted: list[str]) -> None:
    known = {
        r[0]
        for r in connection.execute(
            "SELECT definition FROM definitions WHERE source = $source", {"source": source}
        ).fetchall()
    }
    missing = [name for name in wanted if name not in known]
    if missing:
        raise LookupError(
            f"--definition {missing[0]!r}: no such definition in source {source!r}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )


DEFINITIONS_SQL = """
SELECT definition, op_type, schema_variant, definition_json
FROM definitions
WHERE source = $source AND ($all OR list_contains($wanted, definition))
ORDER BY source_file
"""

SOLUTIONS_SQL = """
SELECT i.solution, i.definition, i.author, i.spec_json, i.sources, i.description,
       d.op_type
FROM implementations AS i
LEFT JOIN definitions AS d ON d.source = i.source AND d.definition = i.definition
WHERE i.source = $source AND ($all OR list_contains($wanted, i.definition))
ORDER BY i.source_file
"""

# Workload-only records: rows of workload files (workloads/**, and the legacy
# traces/workloads/**) that are not an evaluated trace line and not a trace line without an
# evaluation (those are traces to FlashInfer-Bench).
WORKLOADS_SQL = """
SELECT w.definition, w.workload_uuid, w.axes_json, w.inputs_json, w.tolerance_json, d.op_type
FROM workloads AS w
LEFT JOIN definitions AS d ON d.source = w.source AND d.definition = w.definition
WHERE w.source = $source AND ($all OR list_contains($wanted, w.definition))
  AND NOT EXISTS (
      SELECT 1 FROM runs AS r
      WHERE r.source = w.source AND r.source_file = w.source_file
        AND r.source_line = w.source_line)
  AND NOT EXISTS (
      SELECT 1 FROM trace_lines AS t
      WHERE t.source = w.source AND t.source_file = w.source_file
        AND t.source_line = w.source_line
        AND t.solution IS NOT NULL)
ORDER BY w.source_file, w.source_line
"""

TRACES_SQL = """
SELECT r.definition, r.solution, r.author, r.path_author, d.op_type,
       w.workload_uuid, w.axes_json, w.inputs_json, w.tolerance_json,
       r.status, e.hardware_raw, e.libs_json, e.extra_json AS environment_extra,
       r.timestamp_raw, r.log, r.schema_variant, r.extra_json,
       c.run_id IS NOT NULL AS has_correctness,
       c.max_absolute_error, c.max_absolute_error_special,
       c.max_relative_error, c.max_relative_error_special, c.extra_json AS correctness_extra,
       r.latency_ms, r.latency_special, r.reference_latency_ms, r.speedup_factor,
       r.source_file, r.source_line, 0 AS record_index, r.run_id
FROM runs AS r
JOIN environments AS e ON e.source = r.source AND e.environment_id = r.environment_id
LEFT JOIN workloads AS w
    ON w.source = r.source AND w.definition = r.definition AND w.workload_key = r.workload_key
LEFT JOIN correctness AS c ON c.source = r.source AND c.run_id = r.run_id
LEFT JOIN definitions AS d ON d.source = r.source AND d.definition = r.definition
WHERE r.source = $source AND ($all OR list_contains($wanted, r.definition))
ORDER BY r.source_file, r.source_line, r.run_id
"""

# Trace-file lines with a solution and `"evaluation": null`: FlashInfer-Bench loads them as
# traces (counted as failed, never scored); the build kept their workload, not a run.
UNEVALUATED_SQL = """
SELECT t.definition, t.solution, k.author, d.op_type,
       w.workload_uuid, w.axes_json, w.inputs_json, w.tolerance_json,
       t.source_file, t.source_line, t.record_index
FROM trace_lines AS t
LEFT JOIN implementations AS k ON k.source = t.source AND k.solution = t.solution
LEFT JOIN definitions AS d ON d.source = t.source AND d.definition = t.definition
LEFT JOIN workloads AS w
    ON w.source = t.source AND w.definition = t.definition AND w.workload_uuid = t.workload_uuid
WHERE t.source = $source AND NOT t.has_evaluation AND t.solution IS NOT NULL
  AND t.definition IS NOT NULL AND w.definition IS NOT NULL
  AND ($all OR list_contains($wanted, t.definition))
ORDER BY t.source_file, t.source_line, t.record_index
"""


# Trace-file records the build refused for a rule of its own that FlashInfer-Bench's models do
# not share: they are written back as they were read, so the export loads as the original did.
REFUSED_TRACES_SQL = """
SELECT x.file AS source_file, x.line AS source_line, 0 AS record_index, x.reason, x.raw
FROM rejects AS x
WHERE x.source = $source AND x.raw IS NOT NULL AND starts_with(x.file, 'traces/')
  AND x.reason IN ('unknown_definition', 'invalid_latency')
ORDER BY x.file, x.line
"""


def _fib_reads_refused(reason: str, value: Any) -> bool:
    """Whether FlashInfer-Bench loads a trace record the build refused for ``reason``: it never
    checks that a trace's definition exists, and it takes any latency >= 0 (tracehouse refuses
    zero, which no timer measures, and latencies beyond 2**53 ns)."""
    if not isinstance(value, dict) or not isinstance(value.get("definition"), str):
        return False
    if reason == "unknown_definition":
        return True
    evaluation = value.get("evaluation")
    performance = evaluation.get("performance") if isinstance(evaluation, dict) else None
    if not isinstance(performance, dict):
        return False
    return all(
        isinstance(number, int | float) and not isinstance(number, bool) and number >= 0
        for number in performance.values()
    )


def _definition(row: dict[str, Any]) -> dict[str, Any]:
    value = orjson.loads(row["definition_json"])
    if row["schema_variant"] == "legacy_type_key":  # `type` (before 2025-09-16) is `op_type`
        value = {("op_type" if k == "type" else k): v for k, v in value.items()}
    return value


def _solution(row: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = {"name": row["solution"], "definition": row["definition"]}
    if row["author"] is not None:
        value["author"] = row["author"]
    spec = _loads(row["spec_json"])
    if isinstance(spec, dict) and isinstance(spec.get("language"), str):
        spec["language"] = spec["language"].lower()  # `Python`, `Triton` (Aug 2025)
    if spec is not None:
        value["spec"] = spec
    value["sources"] = [
        {k: v for k, v in source.items() if v is not None} for source in row["sources"]
    ]
    if row["description"] is not None:
        value["description"] = row["description"]
    return value


def _workload(row: dict[str, Any]) -> dict[str, Any]:
    workload: dict[str, Any] = {
        "axes": orjson.loads(row["axes_json"]),
        "inputs": orjson.loads(row["inputs_json"]),
    }
    if row["workload_uuid"] is not None:
        workload["uuid"] = row["workload_uuid"]
    if row["tolerance_json"] is not None:
        workload["tolerance"] = orjson.loads(row["tolerance_json"])
    return workload


def _bound(value: float | None, special: str | None) -> float | str | None:
    """An error bound as FlashInfer-Bench writes it: a number, or "NaN" / "Infinity"."""
    if value is not None:
        return value
    return special if special in ("NaN", "Infinity") else None


def _trace(row: dict[str, Any]) -> dict[str, Any]:
    record_extra: dict[str, Any] = _loads(row["extra_json"]) or {}
    environment: dict[str, Any] = {
        "hardware": row["hardware_raw"],
        "libs": orjson.loads(row["libs_json"]),
    }
    environment_extra = _loads(row["environment_extra"]) or record_extra.get("environment")
    if isinstance(environment_extra, dict):
        environment.update({k: v for k, v in environment_extra.items() if k not in environment})
    evaluation: dict[str, Any] = {
        "status": row["status"],
        "environment": environment,
        "timestamp": row["timestamp_raw"],
    }
    variants = set(row["schema_variant"].split(","))
    # A log read from `error` stays there: FlashInfer-Bench reads no log from such a line.
    evaluation["error" if "error_key" in variants else "log"] = row["log"] or ""
    if "log_file" in record_extra:
        evaluation["log_file"] = record_extra["log_file"]
    correctness = None
    if row["has_correctness"]:
        correctness = {}
        for name in ("max_relative_error", "max_absolute_error"):
            bound = _bound(row[name], row[f"{name}_special"])
            if bound is not None:
                correctness[name] = bound
        correctness.update(_loads(row["correctness_extra"]) or {})
    performance = None
    if row["status"] == "PASSED":  # the only status with a performance block (normalize)
        latency = row["latency_ms"]
        special = row["latency_special"]
        performance = {"latency_ms": latency if latency is not None else special}
        if special == "absent":
            del performance["latency_ms"]
        for name in ("reference_latency_ms", "speedup_factor"):
            if row[name] is not None:
                performance[name] = row[name]
    evaluation["correctness"] = correctness
    evaluation["performance"] = performance
    evaluation_extra = record_extra.get("evaluation")
    if isinstance(evaluation_extra, dict):
        evaluation.update({k: v for k, v in evaluation_extra.items() if k not in evaluation})
    line: dict[str, Any] = {
        "definition": row["definition"],
        "workload": _workload(row),
        "solution": row["solution"],
        "evaluation": evaluation,
    }
    for key, value in record_extra.items():
        if key not in ("evaluation", "environment", "log_file") and key not in line:
            line[key] = value
    return line


def export_flashinfer_trace(
    settings: Settings, out: Path, *, source: str | None, definitions: list[str]
) -> Written:
    """Write the warehouse's records of one source (and of ``definitions`` only, when given)
    as a FlashInfer-Trace dataset folder ``out``, which must be new or empty. On any error,
    what this export wrote is removed again; nothing is written outside ``out``."""
    created = _refuse_non_empty(out)
    connection = reader(settings)
    try:
        with within_limits(settings):
            chosen = _choose_source(settings, source)
            if definitions:
                _check_definitions(connection, chosen, definitions)
            out.mkdir(parents=True, exist_ok=True)
            try:
                return _export(connection, out, chosen, definitions)
            except BaseException:
                _remove_written(out, created)
                raise
    finally:
        connection.close()


def _remove_written(out: Path, created: bool) -> None:
    if created:
        shutil.rmtree(out, ignore_errors=True)
        return
    for child in out.iterdir():  # the folder was empty: everything in it is this export's
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _export(connection: Any, out: Path, source: str, definitions: list[str]) -> Written:
    parameters = {"source": source, "all": not definitions, "wanted": definitions}
    written = Written()
    for row in _rows(connection, DEFINITIONS_SQL, parameters):
        folder = path_part(row["op_type"])
        _write(
            out / "definitions" / folder / f"{path_part(row['definition'])}.json",
            orjson.dumps(_definition(row), option=orjson.OPT_INDENT_2) + b"\n",
        )
        written.definitions += 1
        written.files += 1
    for row in _rows(connection, SOLUTIONS_SQL, parameters):
        relative = (
            Path("solutions")
            / path_part(row["author"])
            / path_part(row["op_type"])
            / path_part(row["definition"])
            / f"{path_part(row['solution'])}.json"
        )
        _write(out / relative, orjson.dumps(_solution(row), option=orjson.OPT_INDENT_2) + b"\n")
        written.solutions += 1
        written.files += 1
    lines = _Files(out)
    for row in _rows(connection, WORKLOADS_SQL, parameters):
        relative = (
            Path("workloads") / path_part(row["op_type"]) / f"{path_part(row['definition'])}.jsonl"
        )
        lines.add(
            relative,
            {
                "definition": row["definition"],
                "workload": _workload(row),
                "solution": None,
                "evaluation": None,
            },
        )
        written.workloads += 1
    traces: list[tuple[tuple[str, int, int], Path, dict[str, Any] | bytes]] = []
    for row in _rows(connection, TRACES_SQL, parameters):
        traces.append((_position(row), _trace_path(row), _trace(row)))
    for row in _rows(connection, UNEVALUATED_SQL, parameters):
        record = {
            "definition": row["definition"],
            "workload": _workload(row),
            "solution": row["solution"],
            "evaluation": None,
        }
        traces.append((_position(row), _trace_path(row), record))
    authors = {
        row["solution"]: row["author"] for row in _rows(connection, SOLUTIONS_SQL, parameters)
    }
    op_types = {
        row["definition"]: row["op_type"] for row in _rows(connection, DEFINITIONS_SQL, parameters)
    }
    for row in _rows(connection, REFUSED_TRACES_SQL, {"source": source}):
        raw = row["raw"].strip()
        try:
            value = json.loads(raw)  # NaN and Infinity tokens, as FlashInfer-Bench reads them
        except ValueError:
            continue
        if not _fib_reads_refused(row["reason"], value):
            continue
        definition = value["definition"]
        if definitions and definition not in definitions:
            continue
        solution = value.get("solution")
        relative = (
            Path("traces")
            / path_part(authors.get(solution) if isinstance(solution, str) else None)
            / path_part(op_types.get(definition))
            / f"{path_part(definition)}.jsonl"
        )
        traces.append((_position(row), relative, raw.encode()))
    traces.sort(key=lambda item: item[0])  # the original file and line order
    for _, relative, record in traces:
        lines.add(relative, record)
    written.traces = len(traces)
    written.files += lines.write()
    return written


def _position(row: dict[str, Any]) -> tuple[str, int, int]:
    return (row["source_file"], row["source_line"], row["record_index"])


def _trace_path(row: dict[str, Any]) -> Path:
    author = row.get("author") or row.get("path_author")
    return (
        Path("traces")
        / path_part(author)
        / path_part(row["op_type"])
        / f"{path_part(row['definition'])}.jsonl"
    )
