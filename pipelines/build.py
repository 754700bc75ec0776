"""Building the warehouse: discover, load context, ingest files in parallel, finalize in DuckDB,
publish atomically. The CLI and the Dagster assets both call ``build_warehouse``.

Incremental by construction: every JSONL file becomes staging parts keyed by its content and
by the dataset context, so a rebuild re-parses only files whose bytes changed, and the
finalize step always assembles the full tables from parts — an incremental build yields
exactly the tables of a from-scratch one.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipelines import IMPORTER_VERSION, kernelindex
from pipelines.files import replace_atomically, sha256_file, write_atomically
from pipelines.settings import Settings
from pipelines.sources.local import SourceFile, discover, git_revision
from pipelines.warehouse import Warehouse

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass
class ResolvedSource:
    root: Path
    source: str
    requested_revision: str | None
    resolved_sha: str | None
    fetch_rejects: list[Any] = field(default_factory=list)  # records.Reject
    transferred_files: list[str] = field(default_factory=list)


@dataclass
class BuildResult:
    warehouse: Path
    up_to_date: bool
    seconds: float
    table_counts: dict[str, int]
    rejects_by_reason: dict[str, int]
    files_parsed: int
    files_reused: int
    records_read: int
    snapshot_id: str | None
    source: ResolvedSource | None = None

    def summary_lines(self) -> list[str]:
        if self.up_to_date:
            return [f"warehouse {self.warehouse} is up to date ({self.seconds:.2f} s)"]
        lines = [f"built {self.warehouse} in {self.seconds:.2f} s"]
        lines.append(
            f"  files parsed {self.files_parsed}, reused {self.files_reused}, records read {self.records_read}"
        )
        for table, count in self.table_counts.items():
            lines.append(f"  {table:<17} {count:>10,}")
        if self.rejects_by_reason:
            lines.append("  rejects by reason:")
            for reason, count in sorted(self.rejects_by_reason.items()):
                lines.append(f"    {reason:<26} {count:>8,}")
        return lines


def resolve_source(
    source: str, settings: Settings, progress: ProgressFn | None = None
) -> ResolvedSource:
    """A local folder as it is, or a Hub dataset fetched (incrementally) into the cache."""
    if settings.revision is not None and not kernelindex.is_commit_sha(settings.revision):
        raise ValueError(
            f"--revision {settings.revision!r} is not a commit sha (40 lowercase hex characters)"
        )
    if not source.startswith("hf://"):  # a folder; the Hub client is not even imported
        root = Path(source)
        revision = settings.revision or git_revision(root)
        return ResolvedSource(root, source, None, revision)
    from pipelines.sources import hub

    reference = hub.parse_hub_uri(source)
    assert reference is not None
    from pipelines.transforms.records import Reject

    def callback(done_files: int, total_files: int, *_: Any) -> None:
        if progress is not None:
            progress("fetch", done_files, total_files)

    snapshot = hub.fetch_dataset(
        reference, settings.hub_cache_dir, include_blobs=settings.include_blobs, progress=callback
    )
    rejects = [Reject(r.path, None, "unsafe_path", r.message, None) for r in snapshot.rejected]
    rejects += [Reject(r.path, None, "fetch_failed", r.message, None) for r in snapshot.failed]
    return ResolvedSource(
        snapshot.root,
        source,
        reference.revision,
        snapshot.resolved_sha,
        rejects,
        list(snapshot.transferred_files),
    )


def _state_key(settings: Settings, source: ResolvedSource) -> dict[str, Any]:
    baselines = settings.baselines_file
    baselines_fp = None
    if baselines is not None and baselines.exists():
        stat = baselines.stat()
        baselines_fp = [str(baselines.resolve()), stat.st_size, stat.st_mtime_ns]
    return {
        "importer": IMPORTER_VERSION,
        "source": source.source,
        "root": str(source.root.resolve()),
        "revision": source.resolved_sha,
        "baselines": baselines_fp,
    }


def _read_manifest(warehouse: Warehouse) -> dict[str, Any]:
    try:
        return json.loads(warehouse.manifest_path.read_text())
    except (OSError, ValueError):
        return {}


# Worker processes inherit the context through fork instead of receiving it per task.
_WORKER_CONTEXT: Any = None


def _ingest_task(task: tuple[str, str, str, str]) -> Any:
    from pipelines.transforms.ingest import ingest_file

    path, rel, staging, part_key = task
    return ingest_file(Path(path), rel, _WORKER_CONTEXT, Path(staging), part_key)


def build_warehouse(
    settings: Settings,
    *,
    source: str | None = None,
    progress: ProgressFn | None = None,
    force: bool = False,
) -> BuildResult:
    started = time.perf_counter()
    warehouse = Warehouse(settings.warehouse)
    with warehouse.build_lock(settings.lock_timeout_s):
        resolved = resolve_source(source or settings.source, settings, progress)
        files, discovery_rejects = discover(resolved.root)
        state = _state_key(settings, resolved)
        manifest = _read_manifest(warehouse)
        fingerprints = {f.rel: f.fingerprint for f in files}
        if (
            not force
            and manifest.get("state") == state
            and manifest.get("fingerprints") == fingerprints
            and warehouse.current_generation() is not None
            and manifest.get("generation") == warehouse.current_generation().name  # type: ignore[union-attr]
        ):
            return BuildResult(
                warehouse.root,
                True,
                time.perf_counter() - started,
                {},
                {},
                0,
                len(files),
                0,
                manifest.get("snapshot_id"),
                resolved,
            )
        return _full_build(
            settings,
            warehouse,
            resolved,
            files,
            discovery_rejects,
            state,
            manifest,
            progress,
            started,
        )


def _load_context_cached(
    warehouse: Warehouse, json_files: list[SourceFile], settings: Settings, resolved: ResolvedSource
) -> Any:
    from pipelines.transforms.context import load_context, read_baseline_map

    key = hashlib.sha256(
        json.dumps(
            [_state_key(settings, resolved), [[f.rel, f.fingerprint] for f in json_files]]
        ).encode()
    ).hexdigest()
    cache_file = warehouse.cache / "context.pickle"
    try:
        with cache_file.open("rb") as handle:
            cached_key, loaded = pickle.load(handle)
        if cached_key == key:
            return loaded
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError):
        pass
    loaded = load_context(
        json_files,
        revision=resolved.resolved_sha,
        baseline_map=read_baseline_map(settings.baselines_file),
    )

    def write_pickle(temporary: Path) -> None:
        with temporary.open("wb") as handle:
            pickle.dump((key, loaded), handle, protocol=pickle.HIGHEST_PROTOCOL)

    replace_atomically(cache_file, write_pickle)
    return loaded


def _full_build(
    settings: Settings,
    warehouse: Warehouse,
    resolved: ResolvedSource,
    files: list[SourceFile],
    discovery_rejects: list[Any],
    state: dict[str, Any],
    manifest: dict[str, Any],
    progress: ProgressFn | None,
    started: float,
) -> BuildResult:
    global _WORKER_CONTEXT
    from pipelines.transforms import finalize

    warehouse.remove_stale_generations()
    json_files = [f for f in files if f.kind == "json"]
    line_files = [f for f in files if f.kind == "jsonl"]
    loaded = _load_context_cached(warehouse, json_files, settings, resolved)
    context = loaded.context

    previous: dict[str, Any] = (
        manifest.get("files", {}) if manifest.get("context") == context.fingerprint else {}
    )
    warehouse.staging.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    file_entries: dict[str, Any] = {}
    tasks: list[tuple[str, str, str, str]] = []
    sizes: dict[str, int] = {}
    for source_file in line_files:
        entry = previous.get(source_file.rel)
        if (
            entry
            and entry["fingerprint"] == source_file.fingerprint
            and _parts_exist(warehouse, entry)
        ):
            file_entries[source_file.rel] = {**entry}
            continue
        content_sha = sha256_file(source_file.path)
        part_key = hashlib.sha256(f"{content_sha}\n{context.fingerprint}".encode()).hexdigest()[:32]
        if entry and entry["part_key"] == part_key and _parts_exist(warehouse, entry):
            file_entries[source_file.rel] = {**entry, "fingerprint": source_file.fingerprint}
            continue
        file_entries[source_file.rel] = {
            "fingerprint": source_file.fingerprint,
            "sha256": content_sha,
            "part_key": part_key,
        }
        tasks.append((str(source_file.path), source_file.rel, str(warehouse.staging), part_key))
        sizes[source_file.rel] = source_file.size
    tasks.sort(key=lambda t: -sizes[t[1]])  # biggest first keeps both cores busy to the end

    _WORKER_CONTEXT = context
    if tasks:
        _run_tasks(tasks, settings.workers, progress, results)
    for rel, result in results.items():
        file_entries[rel].update(
            parts=result.parts,
            records=result.records,
            runs=result.runs,
            rejected=result.rejected,
            kernelindex_unreadable=result.kernelindex_unreadable,
        )

    outcome = finalize.finalize(
        warehouse=warehouse,
        settings=settings,
        resolved=resolved,
        loaded=loaded,
        files=files,
        file_entries=file_entries,
        discovery_rejects=discovery_rejects,
        progress=progress,
    )
    write_atomically(
        warehouse.manifest_path,
        json.dumps(
            {
                "state": state,
                "context": context.fingerprint,
                "fingerprints": {f.rel: f.fingerprint for f in files},
                "files": file_entries,
                "generation": outcome.generation.name,
                "snapshot_id": outcome.snapshot_id,
            },
            sort_keys=True,
        ).encode(),
    )
    _remove_unreferenced_parts(warehouse, file_entries)
    records_read = sum(e.get("records", 0) for e in file_entries.values())
    return BuildResult(
        warehouse.root,
        False,
        time.perf_counter() - started,
        outcome.table_counts,
        dict(sorted(Counter(outcome.rejects_by_reason).items())),
        len(tasks),
        len(line_files) - len(tasks),
        records_read + len(json_files),
        outcome.snapshot_id,
        resolved,
    )


def _parts_exist(warehouse: Warehouse, entry: dict[str, Any]) -> bool:
    parts = entry.get("parts")
    if parts is None:
        return False
    return all((warehouse.staging / name).exists() for names in parts.values() for name in names)


def _run_tasks(
    tasks: list[tuple[str, str, str, str]],
    workers: int,
    progress: ProgressFn | None,
    results: dict[str, Any],
) -> None:
    if progress:
        progress("parse", 0, len(tasks))
    if workers <= 1 or len(tasks) == 1:
        for done, task in enumerate(tasks, start=1):
            results[task[1]] = _ingest_task(task)
            if progress:
                progress("parse", done, len(tasks))
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)), mp_context=multiprocessing.get_context("fork")
    ) as pool:
        futures = {pool.submit(_ingest_task, task): task[1] for task in tasks}
        for done, future in enumerate(as_completed(futures), start=1):
            results[futures[future]] = future.result()
            if progress:
                progress("parse", done, len(tasks))


def _remove_unreferenced_parts(warehouse: Warehouse, file_entries: dict[str, Any]) -> None:
    keep = {
        name
        for entry in file_entries.values()
        for names in entry.get("parts", {}).values()
        for name in names
    }
    for path in warehouse.staging.iterdir():
        if path.name not in keep:
            path.unlink(missing_ok=True)


def utc_now() -> datetime:
    return datetime.now(UTC)
