"""What leaves the warehouse: Parquet snapshots, KernelIndex records and per-definition JSON.

A KernelIndex record is rebuilt from the warehouse's own columns (no source file needed) and
checked against the stored run digest, so a record that prints is one whose identity holds.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracehouse import kernelindex
from tracehouse.files import replace_atomically, sha256_file, write_atomically
from tracehouse.kernelindex import canonical_json, manifest_digest
from tracehouse.serve import changes
from tracehouse.serve.output_folder import OutputKind, claimed
from tracehouse.serve.queries import reader, spill_folder, spill_limit_mb, within_limits
from tracehouse.settings import Settings
from tracehouse.warehouse import Warehouse, write_sorted_table

# The line after which `tracehouse record` prints the manifest, as JSON to copy as it is.
RECORD_MANIFEST_MARKER = "manifest (`--json` prints only this):\n"

RUN_COLUMNS_SQL = """
SELECT r.*, e.hardware_raw, e.libs_json,
       c.max_absolute_error, c.max_relative_error,
       k.eligible, k.ineligible_reasons, k.cohort_size, k.rank,
       strftime(r.observed_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS observed_at_text,
       (c.run_id IS NOT NULL) AS has_correctness,
       w.axes_json, w.inputs_json,
       p.name AS protocol_name, p.title AS protocol_title, p.timer AS protocol_timer,
       p.primary_statistic AS protocol_statistic, p.comparator AS protocol_comparator
FROM runs AS r
JOIN environments AS e ON e.environment_id = r.environment_id AND e.source = r.source
LEFT JOIN correctness AS c USING (run_id)
LEFT JOIN run_rankings AS k USING (run_id)
LEFT JOIN workloads AS w
    ON w.source = r.source AND w.definition = r.definition AND w.workload_key = r.workload_key
LEFT JOIN protocols AS p ON p.protocol_digest = r.protocol_digest
"""


def run_rows(settings: Settings, where: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
    connection = reader(settings)
    try:
        with within_limits(settings):
            return run_rows_on(connection, where, parameters)
    finally:
        connection.close()


def run_rows_on(connection: Any, where: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
    """``run_rows`` over an open read connection (the report reads many records over one)."""
    cursor = connection.execute(f"{RUN_COLUMNS_SQL} WHERE {where}", parameters)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


# Shortest run id prefix `tracehouse record` accepts (run ids are 32 hex characters).
MIN_PREFIX = 6


def find_run(settings: Settings, wanted: str) -> dict[str, Any]:
    """A run by its run id, a unique run id prefix (at least 6 characters), or its KernelIndex
    external id (re-runs share one: the newest wins, and the others are named)."""
    rows = run_rows(
        settings,
        "r.run_id = $id OR r.external_id = $id "
        "OR (length($id) >= $min_prefix AND starts_with(r.run_id, $id)) "
        "ORDER BY r.run_id = $id DESC, r.external_id = $id DESC, r.observed_at DESC NULLS LAST, "
        "r.run_id",
        {"id": wanted, "min_prefix": MIN_PREFIX},
    )
    if not rows:
        hint = f" (a run id prefix needs {MIN_PREFIX}+ characters)" if len(wanted) < 32 else ""
        raise LookupError(f"no run with id, id prefix or external id {wanted!r}{hint}")
    first = rows[0]
    if first["run_id"] == wanted:
        return first
    by_external = [row for row in rows if row["external_id"] == wanted]
    if by_external:
        if len(by_external) > 1:
            others = ", ".join(row["run_id"] for row in by_external[1:])
            print(
                f"note: {len(by_external)} runs share external id {wanted!r}; showing the newest "
                f"({first['run_id']}); others: {others}",
                file=sys.stderr,
            )
        return by_external[0]
    if len(rows) > 1:
        shown = ", ".join(row["run_id"] for row in rows[:3])
        raise LookupError(
            f"run id prefix {wanted!r} matches {len(rows)} runs ({shown}"
            f"{', ...' if len(rows) > 3 else ''}); give more characters"
        )
    return first


def run_spec_from_row(row: dict[str, Any]) -> dict[str, Any] | None:
    """The BenchmarkRun spec (§9.1) from stored columns; None when the identity is incomplete."""
    needed = ("implementation_digest", "workload_digest", "environment_digest", "ki_status")
    if any(row.get(name) is None for name in needed):
        return None
    spec: dict[str, Any] = {
        "implementationDigest": row["implementation_digest"],
        "workloadDigest": row["workload_digest"],
        "protocolDigest": row["protocol_digest"],
        "environmentDigest": row["environment_digest"],
        "status": row["ki_status"],
    }
    if row["has_correctness"]:
        correctness: dict[str, Any] = {"comparator": kernelindex.RUN_COMPARATOR}
        if row["max_absolute_error"] is not None:
            correctness["maximumAbsoluteError"] = row["max_absolute_error"]
        if row["max_relative_error"] is not None:
            correctness["maximumRelativeError"] = row["max_relative_error"]
        spec["correctness"] = correctness
    source_native: dict[str, Any] = {
        "source": kernelindex.HARNESS_NAME,
        "benchmark": row["definition"],
    }
    if row["latency_ns"] is not None and row["latency_ms"] is not None:
        spec["timing"] = {"primaryStatistic": "mean", "latencyNs": {"mean": row["latency_ns"]}}
        metrics: dict[str, Any] = {"latency_ms": row["latency_ms"]}
        for name in ("reference_latency_ms", "speedup_factor"):
            if row[name] is not None:
                metrics[name] = row[name]
        source_native["metrics"] = metrics
    spec["sourceNative"] = source_native
    if row["log_digest"] is not None:
        spec["evidence"] = {
            "logs": {
                "uri": f"kernelindex:artifact/{row['log_digest']}",
                "digest": row["log_digest"],
            }
        }
    spec["observedAt"] = row["observed_at_text"]
    return spec


def record_manifest_from_row(row: dict[str, Any]) -> dict[str, Any]:
    spec = run_spec_from_row(row)
    if spec is None:
        raise LookupError(
            f"run {row['run_id']} has no complete KernelIndex identity ({row.get('identity_error') or 'missing digests'})"
        )
    if row["run_digest"] is not None and manifest_digest("BenchmarkRun", spec) != row["run_digest"]:
        raise RuntimeError(f"run {row['run_id']}: the stored run digest does not match its columns")
    environment = {"hardware": row["hardware_raw"], "libs": json.loads(row["libs_json"])}
    return kernelindex.record_manifest(
        spec,
        kernelindex.run_metadata(row["definition"], row["solution"], row["workload_key"]),
        kernelindex.environment_spec(environment),
        kernelindex.environment_metadata(environment),
    )


def record_manifest_json(settings: Settings, run_or_external_id: str) -> str:
    """The canonical manifest {run, protocol, environment}: RFC 8785 bytes, so byte-stable."""
    return canonical_json(record_manifest_from_row(find_run(settings, run_or_external_id))).decode()


# The record events of the comparison keys in the list $keys, oldest first per key.
RECORD_HISTORY_SQL = """
SELECT e.comparison_key, e.record_number, e.run_id, r.run_digest, e.solution, e.latency_ns,
       strftime(e."at" AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS at_text,
       e.previous_solution, e.previous_latency_ns,
       strftime(e.previous_observed_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%g') || 'Z'
           AS previous_observed_at_text
FROM record_events AS e
JOIN runs AS r USING (run_id)
-- a filter DuckDB takes below record_events' windows (their partition is the key), where the
-- semi join of `IN (SELECT unnest($keys))` walked every key's history first (1.1 s against
-- 0.6 at 1,000,000 runs)
WHERE list_contains($keys, e.comparison_key)
ORDER BY e.comparison_key, e.record_number
"""


def record_history(settings: Settings, comparison_key: str) -> list[dict[str, Any]]:
    """The record events of one comparison key, oldest first (sql/marts/record_events.sql)."""
    connection = reader(settings)
    try:
        with within_limits(settings):
            return record_histories_on(connection, [comparison_key]).get(comparison_key, [])
    finally:
        connection.close()


def record_histories_on(connection: Any, keys: list[str]) -> dict[str, list[dict[str, Any]]]:
    """``record_history`` of every key of ``keys`` over an open read connection, in one query
    (the record events view is computed once, not once per key)."""
    cursor = connection.execute(RECORD_HISTORY_SQL, {"keys": keys})
    names = [d[0] for d in cursor.description]
    histories: dict[str, list[dict[str, Any]]] = {}
    for values in cursor.fetchall():
        row = dict(zip(names, values, strict=True))
        histories.setdefault(row["comparison_key"], []).append(row)
    return histories


def _latency(ns: int) -> str:
    return kernelindex.format_latency_ns(ns)


THIS_RUN_MARKER = "  ← this run"


def record_lines(run: dict[str, Any], events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The record page's record facts: whether and since when the run held its comparison
    group's record, whom it took it from, who took it next; then the group's whole history."""
    if not run["eligible"]:
        return [("record", "not eligible to rank, so it cannot hold a record")]

    def is_this_run(event: dict[str, Any]) -> bool:
        # An identical copy of the run (same run digest) shares its record.
        return event["run_id"] == run["run_id"] or (
            run["run_digest"] is not None and event["run_digest"] == run["run_digest"]
        )

    mine = next((i for i, event in enumerate(events) if is_this_run(event)), None)
    if mine is None:
        holder = events[-1]
        status = (
            f"never held it; record holder {holder['solution']} "
            f"{_latency(holder['latency_ns'])} since {holder['at_text']}"
        )
    else:
        event = events[mine]
        if event["previous_latency_ns"] is None:
            taken = "first result in its comparison group"
        else:
            taken = (
                f"took it from {event['previous_solution']} "
                f"{_latency(event['previous_latency_ns'])} (observed {event['previous_observed_at_text']})"
            )
        if mine + 1 < len(events):
            following = events[mine + 1]
            kept = (
                f"held until {following['at_text']}, taken by {following['solution']} "
                f"{_latency(following['latency_ns'])}"
            )
        else:
            kept = "still holds it"
        status = f"record since {event['at_text']}, {taken}; {kept}"
    lines = [("record", status)]
    for i, event in enumerate(events):
        marker = THIS_RUN_MARKER if i == mine else ""
        lines.append(
            (
                "record history" if i == 0 else "",
                f"{event['at_text']}  {event['solution']}  {_latency(event['latency_ns'])}{marker}",
            )
        )
    return lines


def _number(value: float) -> str:
    return canonical_json(value).decode()


def record_text(settings: Settings, run_or_external_id: str) -> str:
    """The record as a person reads it: the facts first, then the canonical manifest (the
    part `--json` prints), or why the run has none."""
    row = find_run(settings, run_or_external_id)
    events = record_history(settings, row["comparison_key"]) if row["eligible"] else []
    facts = record_facts(row, events)
    width = max(len(label) for label, _ in facts)
    lines = [f"{label:<{width}}  {value}" for label, value in facts]
    manifest, missing = record_manifest_or_why(row)
    if manifest is None:
        lines += ["", *missing]
    else:
        lines += ["", RECORD_MANIFEST_MARKER.rstrip("\n")]
        lines.append(json.dumps(manifest, indent=2, ensure_ascii=False))
    return "\n".join(lines)


def record_manifest_or_why(row: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """The run's canonical manifest, or (None, the lines that say why it has none)."""
    try:
        return record_manifest_from_row(row), []
    except LookupError as missing:
        lines = [f"no KernelIndex manifest: {missing}"]
        if row["implementation_digest"] is None:
            lines.append(
                "(implementation and run digests need the dataset revision: rebuild with "
                "--revision <40-hex sha>, from a git clone, or from an hf:// source)"
            )
        return None, lines


def _inputs_text(inputs_json: str | None) -> str:
    """Each input by name and kind (``A random, sm_scale scalar 0.125, x safetensors``)."""
    try:
        inputs = json.loads(inputs_json) if inputs_json else None
    except ValueError:
        inputs = None
    if not isinstance(inputs, dict) or not inputs:
        return "none recorded"
    shown = []
    for name, spec in inputs.items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        text = f"{name} {kind or '?'}"
        if isinstance(spec, dict) and kind == "scalar" and "value" in spec:
            text += f" {spec['value']}"
        shown.append(text)
    return ", ".join(shown)


def record_facts(row: dict[str, Any], events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What `tracehouse record` prints before the manifest, as (label, value) lines (a label
    left empty continues the one above): the record page of the report shows the same."""
    environment = {"hardware": row["hardware_raw"], "libs": json.loads(row["libs_json"])}
    try:
        environment_spec: dict[str, Any] | None = kernelindex.environment_spec(environment)
    except kernelindex.IdentityError:
        environment_spec = None
    reasons = list(row["ineligible_reasons"] or [])
    observed = row["observed_at_text"] or f"unknown (timestamp {row['timestamp_raw']!r})"
    facts: list[tuple[str, str]] = [
        ("run", f"{row['solution']} · {row['definition']}"),
        ("run id", row["run_id"]),
        ("run digest", row["run_digest"] or "—"),
        ("external id", row["external_id"] or "—"),
        ("status", f"{row['ki_status']} (upstream {row['status_raw']})"),
    ]
    if not row["evaluated"]:
        facts.append(("evaluated", "no: FlashInfer-Bench skipped it after repeated failures"))
    if row["latency_ns"] is not None:
        facts.append(
            (
                "mean latency",
                f"{row['latency_ns']:,} ns ({kernelindex.format_latency_ns(row['latency_ns'])}) · mean",
            )
        )
    elif row["latency_special"] is not None:
        facts.append(("mean latency", f"not a number ({row['latency_special']}); never ranked"))
    if row["speedup_factor"] is not None:
        facts.append(("source-native", kernelindex.source_native_line(row["speedup_factor"])))
    rank = (
        f"rank {row['rank']} of {row['cohort_size']}" if row["rank"] is not None else "not ranked"
    )
    facts.append(("rank", f"{rank} — {kernelindex.rank_line(row['rank'], observed, reasons)}"))
    facts += record_lines(row, events)
    facts += [
        (
            "workload",
            f"{changes.axes_text(row.get('axes_json')) or 'no axes'} (key {row['workload_key']})",
        ),
        ("inputs", _inputs_text(row.get("inputs_json"))),
        ("comparison key", row["comparison_key"] or "—"),
        ("operation digest", row["operation_digest"] or "—"),
        ("workload digest", row["workload_digest"] or "—"),
        ("environment digest", row["environment_digest"] or "—"),
        ("protocol digest", row["protocol_digest"] or "—"),
    ]
    if row.get("protocol_name"):
        facts.append(
            (
                "protocol",
                f"{row['protocol_title']} ({row['protocol_name']}) · timer "
                f"{row['protocol_timer']} · {row['protocol_statistic']} · comparator "
                f"{row['protocol_comparator']}",
            )
        )
    facts += [
        ("correctness key", row["correctness_key"] or "—"),
        ("implementation digest", row["implementation_digest"] or "—"),
        ("evidence level", row["evidence_level"] or "—"),
        ("observed", observed),
    ]
    if environment_spec is not None:
        hardware = environment_spec["hardware"]
        facts.append(
            (
                "environment",
                f"GPU {hardware['product']} ({hardware['architecture']}) · "
                f"{kernelindex.environment_summary(environment_spec)}",
            )
        )
        if environment_spec.get("software", {}).get("cudaToolkit"):
            facts.append(("CUDA toolkit", environment_spec["software"]["cudaToolkit"]))
    else:
        facts.append(("environment", f"{row['hardware_raw']} (no KernelIndex environment)"))
    if row["has_correctness"]:
        shown = [f"comparator {kernelindex.RUN_COMPARATOR}"]
        for label, name in (
            ("max absolute error", "max_absolute_error"),
            ("max relative error", "max_relative_error"),
        ):
            value = row[name]
            shown.append(f"{label} {_number(value) if value is not None else 'not recorded'}")
        shown.append(f"result {row['ki_status']}")
        facts.append(("correctness", ", ".join(shown)))
    if row["identity_error"]:
        facts.append(("identity error", row["identity_error"]))
    facts.append(("source", f"{row['source_file']}:{row['source_line']}"))
    return facts


@dataclass(frozen=True)
class KernelIndexExport:
    """What `export --kernelindex` wrote, and what it could not say about each run."""

    runs: int
    without_manifest: int  # no KernelIndex identity: manifest null
    not_eligible: int  # may not rank (ineligibleReasons)
    # Of those without a manifest: the ones whose only missing part is the implementation
    # digest of a source built without a dataset revision (identityError is null for them).
    without_revision: int = 0

    def summary(self, definition: str, out: Path | str) -> str:
        left_out = []
        if self.without_revision:
            left_out.append(
                f"{self.without_revision:,} without a manifest (no dataset revision: pass "
                "--revision to the build, or build from a git clone or hf://)"
            )
        if self.without_manifest > self.without_revision:
            left_out.append(
                f"{self.without_manifest - self.without_revision:,} without a manifest "
                "(see identityError)"
            )
        if self.not_eligible:
            left_out.append(f"{self.not_eligible:,} not eligible to rank (see ineligibleReasons)")
        tail = f"; of them {', '.join(left_out)}" if left_out else "; every one with a manifest"
        return f"wrote {self.runs:,} runs of {definition} to {out}{tail}"


def export_kernelindex(settings: Settings, definition: str, out: Path) -> KernelIndexExport:
    """All results for one definition, as KernelIndex's "All results → JSON" offers them."""
    rows = run_rows(
        settings,
        "r.definition = $definition ORDER BY r.comparison_key NULLS LAST, k.rank NULLS LAST, r.observed_at, r.run_id",
        {"definition": definition},
    )
    if not rows:
        raise LookupError(f"no runs for definition {definition!r}")
    results = []
    for row in rows:
        spec = run_spec_from_row(row)
        entry: dict[str, Any] = {
            "runId": row["run_id"],
            "externalId": row["external_id"],
            "runDigest": row["run_digest"],
            "comparisonKey": row["comparison_key"],
            "rank": row["rank"],
            "cohortSize": row["cohort_size"],
            "eligible": row["eligible"],
            "ineligibleReasons": list(row["ineligible_reasons"] or []),
            "evidenceLevel": row["evidence_level"],
            "manifest": record_manifest_from_row(row) if spec is not None else None,
            "identityError": row["identity_error"],
            "source": {"file": row["source_file"], "line": row["source_line"]},
        }
        results.append(entry)
    unrevised = _sources_without_revision(settings)
    document = {"apiVersion": kernelindex.API_VERSION, "definition": definition, "runs": results}
    write_atomically(out, json.dumps(document, indent=2, ensure_ascii=False).encode() + b"\n")
    return KernelIndexExport(
        runs=len(results),
        without_manifest=sum(1 for entry in results if entry["manifest"] is None),
        not_eligible=sum(1 for entry in results if not entry["eligible"]),
        without_revision=sum(
            1
            for row, entry in zip(rows, results, strict=True)
            if entry["manifest"] is None
            and row["implementation_digest"] is None
            and (row["source"], row["solution"]) in unrevised
        ),
    )


def _sources_without_revision(settings: Settings) -> set[tuple[str, str]]:
    """(source, solution) whose implementation digest is missing because the source was built
    without a dataset revision (implementations.identity_error, not the run's)."""
    from tracehouse.serve.queries import fetch

    found = fetch(
        settings,
        "SELECT DISTINCT source, solution FROM implementations "
        "WHERE identity_error = 'no_dataset_revision'",
    )
    return {(str(source), str(solution)) for source, solution in found.rows}


def _write_sorted(
    generation: Path, table: str, target: Path, settings: Settings | None = None
) -> None:
    """``warehouse.write_sorted_table``; with ``settings`` (``export --snapshot``) the sort runs
    within the read commands' memory and spill limits, spilling to a folder of this process
    (swept like a reader's if it dies)."""
    if settings is None:
        write_sorted_table(generation, table, target)
        return
    folder = spill_folder(settings)
    with contextlib.suppress(OSError):  # a reader without write access spills nowhere
        folder.mkdir(parents=True, exist_ok=True)
    config: dict[str, str | bool | int | float | list[str]] = {
        "memory_limit": f"{settings.query_memory_mb}MiB",
        "temp_directory": str(folder / f"{os.getpid()}-export-{generation.name}"),
        "max_temp_directory_size": f"{spill_limit_mb(settings)}MiB",
    }
    write_sorted_table(generation, table, target, config, within_limits(settings))


# What marks a folder as a snapshot `export --snapshot` wrote (and holds its lock while it
# writes): an export replaces same-named files only in a folder it made or found empty.
SNAPSHOT_FOLDER = OutputKind(
    command="tracehouse export --snapshot",
    flag="--snapshot",
    marker=".tracehouse-export.json",
    marker_bytes=b'{"written_by": "tracehouse export --snapshot"}\n',
)


def export_snapshot(settings: Settings, out: Path) -> dict[str, Any]:
    """Every table as Parquet plus manifest.json (rows, bytes, sha256). Byte-identical for an
    unchanged warehouse: files are copied as they are and the manifest holds no export time.
    ``out`` must be new, empty or a snapshot folder written before (``SNAPSHOT_FOLDER``)."""
    import pyarrow.parquet as pq

    from tracehouse.schemas import (  # Arrow declarations: only this export needs them
        IMPORTER_VERSION,
        TABLES,
    )

    generation = Warehouse(settings.warehouse).require_current()
    tables: dict[str, Any] = {}
    with claimed(SNAPSHOT_FOLDER, out, settings.lock_timeout_s):
        for name in TABLES:
            source = generation / f"{name}.parquet"
            target = out / f"{name}.parquet"
            if source.is_dir():
                replace_atomically(
                    target, functools.partial(_write_sorted, generation, name, settings=settings)
                )
            else:
                replace_atomically(target, functools.partial(shutil.copyfile, source))
            tables[name] = {
                "file": target.name,
                "rows": pq.ParquetFile(target).metadata.num_rows,
                "bytes": target.stat().st_size,
                "sha256": sha256_file(target),
            }
        manifest = {"importer_version": IMPORTER_VERSION, "tables": tables}
        write_atomically(
            out / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True).encode() + b"\n"
        )
    return manifest
