"""Definitions and solutions: the dataset context every trace line is read against.

They are small whole-file JSON documents, loaded in path order. The first file with a given
name wins (the harness itself refuses duplicates; the warehouse records them in rejects).
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracehouse import kernelindex, schemas
from tracehouse.fetch.local import SourceFile
from tracehouse.files import sha256_file, write_atomically
from tracehouse.identify.dataset_context import DatasetContext
from tracehouse.kernelindex import digest
from tracehouse.memory import return_freed_memory
from tracehouse.read.normalize import (
    RecordError,
    classify,
    normalize_definition,
    normalize_solution,
)
from tracehouse.read.records import Record, read_json_file
from tracehouse.rejects import Reject
from tracehouse.schemas import IMPORTER_VERSION


@dataclass(frozen=True)
class StoredRows:
    """A context's definition and implementation rows waiting on disk: a pickle of both lists
    by table name (``store_context_rows``), and the SHA-256 of its bytes, which names the
    context tables' files (assemble/finalize.py) without reading the rows again."""

    path: Path
    sha256: str

    def read(self) -> dict[str, list[dict[str, Any]]]:
        """The rows by table name; an error when the file no longer has the bytes it was
        written with."""
        data = self.path.read_bytes()
        if hashlib.sha256(data).hexdigest() != self.sha256:
            raise RuntimeError(f"{self.path}: the context's rows changed since they were written")
        rows: dict[str, list[dict[str, Any]]] = pickle.loads(data)  # the warehouse's own file
        return rows

    def intact(self) -> bool:
        """Whether the file is there with the bytes it was written with."""
        try:
            return sha256_file(self.path) == self.sha256
        except OSError:
            return False


@dataclass
class LoadedContext:
    context: DatasetContext
    definition_rows: list[dict[str, Any]] = field(default_factory=list)
    implementation_rows: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    # Where the two row lists wait once they are on disk (``store_context_rows``, which
    # empties them); None while they are in the lists.
    stored_rows: StoredRows | None = None


def store_context_rows(loaded: LoadedContext, path: Path) -> StoredRows:
    """The dataset context's definition and implementation rows pickled into ``path`` (written
    atomically), and their lists in ``loaded`` emptied: a build keeps them on disk while its
    workers parse, not in the parent's memory (at 1,000,000 lines the solutions' rows, and what
    reading them left in the allocator, were ~75 MiB of the parent's 182), and a later build of
    the same context takes the file as it is (ingest.plan.load_context_cached): unpickling
    the rows and pickling them again for finalize, which hashed them, was ~0.1 s of a build after
    one changed file of the bench corpus.

    Pickled, not Parquet: a parent that loads pyarrow and DuckDB before the parse holds their
    ~60 MiB through it."""

    # (pickle.dumps gives the bytes pickle.dump streams to a file: the rows' digest, and so the
    # context tables' file names, are what they were when the rows were streamed.)
    data = pickle.dumps(
        {
            schemas.DEFINITIONS.name: loaded.definition_rows,
            schemas.IMPLEMENTATIONS.name: loaded.implementation_rows,
        },
        protocol=pickle.HIGHEST_PROTOCOL,
    )
    write_atomically(path, data)
    stored = loaded.stored_rows = StoredRows(path, hashlib.sha256(data).hexdigest())
    del data
    loaded.definition_rows.clear()
    loaded.implementation_rows.clear()
    return_freed_memory()
    return stored


def baseline_rule(
    author: str | None, solution: str, definition: str, baseline_map: dict[str, dict[str, str]]
) -> str | None:
    """Why a solution is its definition's baseline, or None. The one place this rule lives.

    FlashInfer-Bench's CLI takes author ``baseline`` (``flashinfer`` before 2026-04-12); the web
    leaderboard takes a hard-coded name map (format doc §4.1, §4.2).
    """
    if author == "baseline":
        return "author:baseline"
    if author == "flashinfer":
        return "author:flashinfer"
    if solution in baseline_map.get(definition, {}).values():
        return "baseline_map"
    return None


def _identity_definition(value: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    # KernelIndex reads `op_type`; a legacy file's `type` is carried over so that datasets
    # KernelIndex never reads still get a meaningful family (README, "identities").
    if row["schema_variant"] == "legacy_type_key":
        return {**value, "op_type": row["op_type"]}
    return value


def load_context(
    json_files: list[SourceFile],
    *,
    revision: str | None,
    baseline_map: dict[str, dict[str, str]],
) -> LoadedContext:
    loaded = LoadedContext(DatasetContext({}, {}, frozenset(), ""))
    definitions: dict[str, dict[str, Any]] = {}
    operation_digests: dict[str, str | None] = {}
    solution_values: list[tuple[SourceFile, Record, dict[str, Any]]] = []
    # Trace rows depend on definitions only; solutions and the revision join in at finalize.
    fingerprint = hashlib.sha256(f"{IMPORTER_VERSION}\n".encode())
    stems: set[str] = set()

    for source in json_files:
        item = read_json_file(source.path, source.rel)
        if isinstance(item, Reject):
            loaded.rejects.append(item)
            continue
        kind = classify(item.value)
        if kind == "definition":
            fingerprint.update(f"{source.rel}\n".encode())
            fingerprint.update(hashlib.sha256(item.raw).digest())
        try:
            if kind == "definition":
                row = normalize_definition(item.value)
                name = row["definition"]
                if source.rel.startswith("definitions/"):
                    stems.add(source.rel.rsplit("/", 1)[-1].split(".json", 1)[0])
                if name in definitions:
                    raise RecordError(
                        "duplicate_definition",
                        f"definition {name!r} already defined by an earlier file",
                    )
                value = _identity_definition(item.value, row)
                try:
                    row["operation_digest"] = kernelindex.operation_digest(value)
                except kernelindex.IdentityError as error:
                    row["identity_error"] = error.code
                parts = source.rel.split("/")
                row["path_op_type"] = (
                    parts[1] if len(parts) > 2 and parts[0] == "definitions" else None
                )
                row.update(source_file=source.rel, source_line=1)
                definitions[name] = value
                operation_digests[name] = row.get("operation_digest")
                loaded.definition_rows.append(row)
            elif kind == "solution":
                solution_values.append((source, item, normalize_solution(item.value)))
            elif isinstance(item.value, dict):
                raise RecordError("unrecognized_record", "neither a definition nor a solution")
            else:
                raise RecordError(
                    "not_an_object", f"a JSON {type(item.value).__name__}, not an object"
                )
        except RecordError as error:
            loaded.rejects.append(Reject(source.rel, 1, error.reason, error.message, None))

    solutions: set[str] = set()
    for source, item, row in solution_values:
        name = row["solution"]
        if name in solutions:
            loaded.rejects.append(
                Reject(
                    source.rel,
                    1,
                    "duplicate_solution",
                    f"solution {name!r} already defined by an earlier file",
                    None,
                )
            )
            continue
        entries = row.pop("_source_entries")
        row["sources_digest"] = digest(
            [[path, hashlib.sha256(body).hexdigest()] for path, body in entries]
        )
        definition = definitions.get(row["definition"])
        operation = operation_digests.get(row["definition"])
        if definition is None:
            row["identity_error"] = "unknown_definition"
        elif operation is None:
            row["identity_error"] = "invalid_definition"
        elif revision is None:
            row["identity_error"] = "no_dataset_revision"
        else:
            try:
                row["implementation_digest"] = kernelindex.implementation_digest(
                    item.value, definition, operation, revision
                )
            except kernelindex.IdentityError as error:
                row["identity_error"] = error.code
        rule = baseline_rule(row["author"], name, row["definition"], baseline_map)
        parts = source.rel.split("/")
        row.update(
            is_baseline=rule is not None,
            baseline_rule=rule,
            path_author=parts[1] if len(parts) > 2 and parts[0] == "solutions" else None,
            source_file=source.rel,
            source_line=1,
        )
        loaded.implementation_rows.append(row)
        solutions.add(name)

    loaded.context = DatasetContext(
        definitions=definitions,
        operation_digests=operation_digests,
        definition_stems=frozenset(stems),
        fingerprint=fingerprint.hexdigest(),
        # KernelIndex skips a solution of a definition the import does not hold.
        solutions={
            row["solution"]: (row["author"], row.get("implementation_digest"))
            for row in loaded.implementation_rows
            if row["definition"] in definitions
        },
    )
    return loaded


# FlashInfer-Bench's map is a few KB: a name per definition and device.
BASELINE_MAP_MAX_BYTES = 16 << 20


def read_baseline_map(path: Path | None) -> dict[str, dict[str, str]]:
    """FlashInfer-Bench's web baseline map: {definition: {"default": name, <device>: name}}.

    A file of any other shape is an error naming the file and what is wrong, never ignored."""
    if path is None:
        return {}
    import json

    from tracehouse.files import NotARegularFile, read_bounded

    try:
        data = json.loads(read_bounded(path, BASELINE_MAP_MAX_BYTES))
    except NotARegularFile as error:
        raise NotARegularFile(f"baselines file {error}") from None
    except OSError as error:
        raise FileNotFoundError(
            f"baselines file {path}: cannot read it ({error.strerror or error})"
        ) from None
    except ValueError as error:  # invalid JSON or invalid UTF-8
        raise ValueError(f"baselines file {path}: not JSON ({error})") from None
    except RecursionError:  # a map is two levels deep; this is not one
        raise ValueError(f"baselines file {path}: JSON nesting is too deep to parse") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"baselines file {path}: must be a JSON object "
            '{"<definition>": {"default": "<solution>", "<device>": "<solution>"}}, '
            f"not a JSON {type(data).__name__}"
        )
    for definition, entry in data.items():
        if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
            raise ValueError(
                f"baselines file {path}: the entry for {definition!r} must be an object of "
                'solution names such as {"default": "<solution>"}'
            )
    return {str(d): {str(k): v for k, v in entry.items()} for d, entry in data.items()}


def baseline_map_rows(path: Path | None) -> list[dict[str, Any]]:
    """The baseline map as ``baseline_map`` rows, keys in file order (the web's kernel page
    falls back to the first device entry when a definition has no ``default``)."""
    return [
        {"definition": definition, "device": device, "solution": solution, "position": position}
        for definition, entry in read_baseline_map(path).items()
        for position, (device, solution) in enumerate(entry.items())
    ]
