"""Building the warehouse: discover, load context, ingest files in parallel, finalize in DuckDB,
publish atomically. The CLI and the Dagster assets both call ``build_warehouse``.

Incremental by construction: every JSONL file becomes staging parts keyed by its content and
by the dataset context, so a rebuild re-parses only files whose bytes changed, and the
finalize step always assembles the full tables from parts — an incremental build yields
exactly the tables of a from-scratch one.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import pickle
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracehouse import interrupts
from tracehouse.assemble import invariants
from tracehouse.fetch.local import SourceFile, discover, git_revision, require_dataset
from tracehouse.files import replace_atomically, sha256_file, write_atomically
from tracehouse.ingest.manifest import (
    FileEntry,
    Manifest,
    SourceManifest,
    read_manifest,
    write_manifest,
)
from tracehouse.publish import generations
from tracehouse.schemas import IMPORTER_VERSION
from tracehouse.settings import Settings, SettingsError
from tracehouse.storage import create_folder, empty_folder, remove_created_folder
from tracehouse.warehouse import (
    GenerationSource,
    Warehouse,
    discard_reusable_cache,
    generation_sources,
    holds_sources,
    schema_difference,
    source_key,
    table_files,
)

# Written into each generation before it is published: the outcome of every invariant and
# publish guard evaluated on it, which the Dagster asset checks report.
CHECKS_FILE = "checks.json"
NO_SOURCE = (
    "no source given: pass --source <dataset folder | hf://datasets/<org>/<name>[@rev]> or set "
    "TRACEHOUSE_SOURCE (`tracehouse demo` builds the demo data)"
)

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)
# Runs a build's ingest tasks: (tasks, workers, progress) -> one GroupResult per task, in order.
ParseFn = Callable[[list["IngestTask"], int, ProgressFn | None], list[Any]]


@dataclass
class ResolvedSource:
    root: Path
    source: str  # as given to the build
    requested_revision: str | None
    resolved_sha: str | None
    fetch_rejects: list[Any] = field(default_factory=list)  # rejects.Reject
    transferred_files: list[str] = field(default_factory=list)
    name: str = ""  # the source's name in the warehouse (source_identity)
    uri: str = ""  # what the name stands for: an absolute folder, or hf:// without @revision
    # A Hub snapshot's cache blobs, where its entries may link (huggingface_hub's symlinks)
    links_within: Path | None = None
    # Why a Hub source was read from the cache without being asked for (the Hub was down)
    note: str | None = None

    @property
    def key(self) -> str:
        return source_key(self.name)


def source_identity(source: str, name: str | None) -> tuple[str, str]:
    """(name, uri) of a source: the uri is the absolute folder or the hf:// dataset without
    its revision, so every revision of a source has one name; the default name is the
    folder's own name or the Hub's <org>/<name>."""
    if source.startswith("hf://"):
        from tracehouse.fetch import hub

        reference = hub.parse_hub_uri(source)
        assert reference is not None
        uri = f"hf://datasets/{reference.repo_id}"
        return name or reference.repo_id, uri
    folder = Path(source).resolve()
    return name or folder.name or str(folder), str(folder)


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
    generation: str | None = None
    # Every invariant and publish guard evaluated before publishing, by name (empty when
    # nothing was built: the current generation's are in its checks.json).
    checks: dict[str, invariants.Outcome] = field(default_factory=dict)
    # What was committed to the Iceberg catalog (tracehouse.publish.iceberg), when there is one.
    published: str | None = None
    # Why the build did not build on the current generation (Warehouse.base_generation).
    repaired: str | None = None
    # Why nothing of the current generation was reused: another schema version wrote it.
    outdated: str | None = None

    def summary_lines(self) -> list[str]:
        source_note = [f"  note: {self.source.note}"] if self.source and self.source.note else []
        if self.up_to_date:
            lines = [f"warehouse {self.warehouse} is up to date ({self.seconds:.2f} s)"]
            return lines + source_note + ([self.published] if self.published else [])
        lines = [f"built {self.warehouse} in {self.seconds:.2f} s (generation {self.generation})"]
        lines += source_note
        if self.repaired:
            lines.append(f"  repaired: {self.repaired}; rebuilt from the source")
        if self.outdated:
            lines.append(f"  upgraded: {self.outdated}; rebuilt from the source")
        lines.append(
            f"  files parsed {self.files_parsed:,}, reused {self.files_reused:,}, "
            f"records read {self.records_read:,}"
        )
        for table, count in self.table_counts.items():
            lines.append(f"  {table:<17} {count:>10,}")
        if self.rejects_by_reason:
            lines.append("  rejects by reason:")
            for reason, count in sorted(self.rejects_by_reason.items()):
                lines.append(f"    {reason:<26} {count:>8,}")
        if self.source is not None and self.source.resolved_sha is None:
            lines.append(
                "  note: no dataset revision, so implementation_digest and run_digest are empty "
                "(KernelIndex §8); pass --revision <40-hex commit sha> or build from a git clone "
                "or an hf:// source"
            )
        if self.published:
            lines.append(self.published)
        return lines


def _source_name(settings: Settings) -> str | None:
    """The name a build gives its source: ``--revision-of`` (the source it continues) or
    ``--source-name``; both only when they agree."""
    if (
        settings.revision_of is not None
        and settings.source_name is not None
        and settings.revision_of != settings.source_name
    ):
        raise SettingsError(
            f"--revision-of {settings.revision_of!r} and --source-name {settings.source_name!r}: "
            "a revision keeps its source's name; give one of them"
        )
    return settings.revision_of or settings.source_name


def resolve_source(
    source: str, settings: Settings, progress: ProgressFn | None = None
) -> ResolvedSource:
    """A local folder as it is, or a Hub dataset fetched (incrementally) into the cache."""
    if not source.startswith("hf://"):  # a folder; the Hub client is not even imported
        root = Path(source).resolve()
        require_dataset(root, source)
        revision = settings.revision or git_revision(root)
        name, uri = source_identity(source, _source_name(settings))
        return ResolvedSource(root, source, None, revision, name=name, uri=uri)
    from tracehouse.fetch import hub

    reference = hub.parse_hub_uri(source)
    assert reference is not None
    from tracehouse.rejects import Reject

    def callback(done_files: int, total_files: int, *_: Any) -> None:
        if progress is not None:
            progress("fetch", done_files, total_files)

    cache_dir = settings.hub_cache_for(reference.repo_id)
    snapshot = hub.fetch_dataset(
        reference,
        cache_dir,
        include_blobs=settings.include_blobs,
        progress=callback,
        retry=hub.RetryPolicy.within(settings.hub_timeout_s, settings.hub_fetch_timeout_s),
        offline=settings.hub_offline,
    )
    require_complete(snapshot)
    require_dataset(snapshot.root, source)
    rejects = [Reject(r.path, None, "unsafe_path", r.message, None) for r in snapshot.rejected]
    name, uri = source_identity(source, _source_name(settings))
    return ResolvedSource(
        snapshot.root,
        source,
        reference.revision,
        snapshot.resolved_sha,
        rejects,
        list(snapshot.transferred_files),
        name=name,
        uri=uri,
        links_within=cache_dir / "blobs",
        note=snapshot.note,
    )


def require_complete(snapshot: Any) -> None:
    """Refuse a Hub snapshot that lacks a selected file (``hub.HubSnapshot.failed``).

    A build publishes a complete reading of its source or nothing. Building without the file
    would drop its runs from the tables (under the shrink guard when it holds fewer than half)
    and record them in run_history as having left the source, which they did not. Keeping the
    file's rows from the previous build instead would publish a generation that claims to be
    the new commit while holding another commit's bytes for that file. So the build stops; the
    files that did arrive stay in the cache, and the next build fetches only what is missing.
    """
    if not snapshot.failed:
        return
    first = snapshot.failed[0]
    others = len(snapshot.failed) - 1
    more = f" (and {others} more file{'s' if others > 1 else ''})" if others else ""
    from tracehouse.fetch.hub import HubError

    raise HubError(
        f"{snapshot.source_uri}: {first.message}{more}; nothing was published, the warehouse "
        "is unchanged (files already fetched stay cached for the next build)"
    )


def _state_key(settings: Settings, source: ResolvedSource) -> dict[str, Any]:
    baselines = settings.baselines_file
    baselines_fp = None
    if baselines is not None and baselines.exists():
        stat = baselines.stat()
        baselines_fp = [str(baselines.resolve()), stat.st_size, stat.st_mtime_ns]
    return {
        "importer": IMPORTER_VERSION,
        # the source's identity, never the spelling of the argument: `data/x`, `./data/x` and
        # its absolute path, from any working directory, are one source state
        "source": source.uri,
        "root": str(source.root.resolve()),
        "revision": source.resolved_sha,
        "baselines": baselines_fp,
    }


# The dataset context, set once per worker process (by _set_worker_context) rather than sent
# with every task.
_WORKER_CONTEXT: Any = None


def _set_worker_context(context: Any) -> None:
    global _WORKER_CONTEXT
    _WORKER_CONTEXT = context


def _start_worker(context: Any) -> None:
    """Initializer of a parser worker: the parent handles Ctrl-C and stops it; the context
    arrives once per worker."""
    interrupts.ignore_in_worker()
    _set_worker_context(context)


# Files are parsed and stored in groups: one Polars frame and one set of Parquet parts per group
# instead of per file (most trace files hold a few dozen lines). A file's group depends only on
# its path, so adding or changing a file re-parses its group alone, about 1/FILE_GROUPS of the
# dataset.
FILE_GROUPS = 64


def file_group(rel: str) -> int:
    return int(hashlib.sha256(rel.encode()).hexdigest()[:8], 16) % FILE_GROUPS


@dataclass(frozen=True)
class IngestTask:
    """One group of files to parse into the staging parts named by part_key."""

    files: tuple[tuple[str, str], ...]  # (absolute path, dataset-relative path)
    staging: str
    part_key: str
    size: int
    chunk_rows: int  # rows buffered before a part is written (memory stays flat)


def _ingest_task(task: IngestTask) -> Any:
    from tracehouse.ingest.worker import ingest_group

    return ingest_group(
        [(Path(path), rel) for path, rel in task.files],
        _WORKER_CONTEXT,
        Path(task.staging),
        task.part_key,
        chunk_rows=task.chunk_rows,
    )


def build_warehouse(
    settings: Settings,
    *,
    source: str | None = None,
    progress: ProgressFn | None = None,
    force: bool = False,
    require_fact_rows: bool = False,
    parse: ParseFn | None = None,
) -> BuildResult:
    """Build (or find up to date) the warehouse of ``settings``. Nothing is published unless
    every invariant holds, no table shrinks beyond ``settings.max_shrink_share`` (unless
    ``allow_shrink``), and, with ``require_fact_rows``, the fact tables have rows.

    ``parse`` runs the build's ingest tasks (default: a process pool of ``settings.workers``);
    the Dagster fan-out passes one that takes what its executor's workers already parsed."""
    started = time.perf_counter()
    source = source or settings.source
    if source is None:
        raise SettingsError(NO_SOURCE)
    if source.startswith("hf://"):  # a bad HF_ENDPOINT is refused before anything is written
        from tracehouse.fetch import hub

        hub.hub_endpoint()
    if settings.baselines_file is not None:  # a bad map is an error even when nothing changed
        from tracehouse.identify.context import read_baseline_map

        read_baseline_map(settings.baselines_file)
    warehouse = Warehouse(settings.warehouse, settings.keep_generations)
    was_empty = warehouse.root.is_dir() and not any(warehouse.root.iterdir())
    created = create_folder(warehouse.root)
    with _build_lock(warehouse, settings.lock_timeout_s):
        published_before = interrupts.published()

        def undo_first_build() -> None:
            """An interrupted first build: the folder as the user had it (no folder, or empty)."""
            if warehouse.current_generation() is not None:
                return  # another build published meanwhile: not ours to undo
            if created is not None:
                remove_created_folder(warehouse.root, created)
            elif was_empty:
                empty_folder(warehouse.root)

        interrupts.undo_on_interrupt(undo_first_build)  # also when the watchdog ends the process
        try:
            discarded = None
            if settings.object_store is not None:
                from tracehouse.publish.iceberg import discard_stale_staging

                discarded = discard_stale_staging(settings, warehouse)
            result = _build_locked(
                settings,
                warehouse,
                source,
                progress,
                force,
                require_fact_rows,
                started,
                parse or run_tasks,
            )
            result.repaired = discarded or result.repaired
            if settings.catalog is not None:  # the published form: Iceberg tables in a catalog
                from tracehouse.publish.iceberg import publish_generation

                if settings.object_store is not None:
                    # Readers see the catalog, not the staging folder: until the publication
                    # row lands, an interrupted build left the warehouse unchanged.
                    interrupts.note_published(None)
                published = publish_generation(
                    settings,
                    warehouse,
                    source_name=result.source.name if result.source else None,
                    force=force,
                )
                result.published = published.summary_line(settings)
            return result
        except BaseException as error:
            # An interrupt or a refusal: drop the unfinished generation and temporary files
            # now (the published one is untouched), unless this build's switch happened.
            if interrupts.published() == published_before:
                generations.remove_stale_generations(warehouse)
                if interrupts.received() is not None or isinstance(error, KeyboardInterrupt):
                    # "warehouse unchanged": not even the Hub files fetched so far stay
                    undo_first_build()
                elif created is not None and not _keeps_fetched_files(warehouse, settings):
                    remove_created_folder(warehouse.root, created)
            full = _device_full(error, warehouse.root)
            if full is not None:
                raise full from None
            raise
        finally:
            interrupts.undo_on_interrupt(None)


@contextlib.contextmanager
def _build_lock(warehouse: Warehouse, timeout_s: float) -> Iterator[None]:
    """The warehouse's build lock, on the folder as it is once the lock is held: the build that
    held it before may have removed the folder it created (and the lock file with it) when it
    failed, and then the lock is taken again, on the folder made anew."""
    while True:
        with warehouse.build_lock(timeout_s):
            if warehouse.root.is_dir():
                yield
                return


def _keeps_fetched_files(warehouse: Warehouse, settings: Settings) -> bool:
    """True when a failed build's new folder holds what must outlive it: nothing published,
    but the Hub files it fetched, which its error line promises the next build."""
    if warehouse.current_generation() is not None:
        return True
    blobs = settings.hub_cache_dir / "blobs"
    if not blobs.resolve().is_relative_to(warehouse.root.resolve()):
        return False
    return blobs.is_dir() and any(blobs.iterdir())


def _device_full(error: BaseException, warehouse: Path) -> OSError | None:
    """A full disk as one line naming the warehouse: Parquet and DuckDB writers report
    ENOSPC without the file they were writing (`[Errno 28] Error writing bytes to file`)."""
    errno_full = (errno.ENOSPC, errno.EDQUOT)
    if isinstance(error, OSError) and error.errno in errno_full and error.filename is None:
        code = error.errno
    elif "No space left on device" in str(error) and not isinstance(error, OSError):
        code = errno.ENOSPC  # DuckDB's IOException
    else:
        return None
    return OSError(
        code,
        f"{os.strerror(code)} while writing the warehouse (nothing was published; free space "
        "on its device or build elsewhere)",
        str(warehouse),
    )


def _build_locked(
    settings: Settings,
    warehouse: Warehouse,
    source: str,
    progress: ProgressFn | None,
    force: bool,
    require_fact_rows: bool,
    started: float,
    parse: ParseFn,
) -> BuildResult:
    resolved = resolve_source(source, settings, progress)
    current, repair = warehouse.base_generation()  # every byte checked: its files are reused
    if repair is not None:
        _refuse_losing_other_sources(warehouse, resolved.name, repair, current)
    outdated = schema_difference(current) if current is not None else None
    if outdated is not None and current is not None:
        outdated = f"generation {current.name} {outdated}"
        _refuse_dropping_outdated_sources(warehouse, resolved.name, outdated, current)
    if repair is not None or outdated is not None:
        discard_reusable_cache(warehouse)  # nothing read from a damaged or older layout
    held = (
        {s.source: s for s in generation_sources(current)}
        if current is not None and outdated is None and holds_sources(current)
        else {}
    )
    same_name = held.get(resolved.name)
    if settings.revision_of is not None and same_name is None:
        names = ", ".join(map(repr, sorted(held))) or "none"
        raise SettingsError(
            f"--revision-of {settings.revision_of!r}: the warehouse has no source of that name "
            f"(it holds {names}); build the first run without --revision-of"
        )
    if settings.revision_of is None and same_name is not None and same_name.uri != resolved.uri:
        raise SettingsError(
            f"--source {source}: the warehouse's source {resolved.name!r} is {same_name.uri}; "
            "building this one under that name would replace its rows. Pass --source-name "
            f"to give it its own name, or --revision-of {resolved.name} to record it as that "
            "source's next revision (`tracehouse sources` lists them)"
        )
    files, discovery_rejects = discover(resolved.root, resolved.links_within)
    if settings.revision_of is not None and current is not None and same_name is not None:
        _refuse_another_dataset(settings, warehouse, resolved, files, current, same_name)
    state = _state_key(settings, resolved)
    manifest = read_manifest(warehouse.manifest_path)
    previous = manifest.sources.get(resolved.name)
    fingerprints = file_fingerprints(files)
    if (
        not force
        and outdated is None
        and previous is not None
        and previous.state == state
        and previous.fingerprints == fingerprints
        and same_name is not None
        and same_name.snapshot_id == previous.snapshot_id
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
            previous.snapshot_id,
            resolved,
            generation=current.name if current is not None else None,
        )
    guard = _publish_guard(settings, current, require_fact_rows)
    result = _full_build(
        settings,
        warehouse,
        resolved,
        files,
        discovery_rejects,
        state,
        manifest,
        progress,
        started,
        parse,
        guard,
        None if outdated is not None else current,
    )
    result.repaired = repair
    result.outdated = outdated
    return result


def _refuse_another_dataset(
    settings: Settings,
    warehouse: Warehouse,
    resolved: ResolvedSource,
    files: list[SourceFile],
    current: Path,
    held: GenerationSource,
) -> None:
    """``--revision-of NAME`` continues NAME's history: refuse a folder that shares none of
    NAME's definitions (another dataset's results would read as NAME's regressions)."""
    import pyarrow.parquet as pq

    paths = table_files(current, "definitions", held.key)
    before = {
        name
        for path in paths
        for name in pq.read_table(path, columns=["definition"]).column(0).to_pylist()
    }
    if not before:
        return  # nothing to compare with: a source that had no definition files
    loaded = _load_context_cached(
        warehouse, [f for f in files if f.kind == "json"], settings, resolved
    )
    now = set(loaded.context.definitions)
    if now & before:
        return

    def some(names: set[str]) -> str:
        listed = ", ".join(sorted(names)[:3])
        return f"{listed}, …" if len(names) > 3 else listed or "no definition"

    raise SettingsError(
        f"--revision-of {held.source!r}: {resolved.source} shares none of its definitions "
        f"(it defines {some(now)}; {held.source!r} defines {some(before)}), so it is another "
        "dataset, not a revision; build it under its own name (--source-name)"
    )


def _refuse_dropping_outdated_sources(
    warehouse: Warehouse, name: str, outdated: str, current: Path
) -> None:
    """A build starts afresh beside a generation of an older schema version (nothing of it can
    be reused): refuse when it holds other sources, whose rows it would silently drop."""
    if not holds_sources(current):
        return
    others = sorted(s.source for s in generation_sources(current) if s.source != name)
    if others:
        raise SettingsError(
            f"{warehouse.root}: {outdated}, and also holds {', '.join(map(repr, others))}, "
            f"which a build of {name!r} cannot re-read: build each source into a new warehouse "
            "(--source-name), or rebuild it with the tracehouse that wrote it"
        )


def _refuse_losing_other_sources(
    warehouse: Warehouse, name: str, problem: str, base: Path | None
) -> None:
    """A repair rebuilds this source on ``base`` (an older intact generation, or nothing):
    refuse it when the damaged generation holds other sources that ``base`` lacks, whose rows
    it would silently drop."""
    damaged = warehouse.current_generation()
    if damaged is None or damaged == base:
        return
    held: set[str] = set()
    try:
        held.update(s.source for s in generation_sources(damaged))
    except (ValueError, OSError):  # the list itself is damaged: the build manifest knows too
        held.update(read_manifest(warehouse.manifest_path).sources)
    kept = (
        {s.source for s in generation_sources(base)}
        if base is not None and holds_sources(base)
        else set()
    )
    others = sorted(held - kept - {name})
    if others:
        raise SettingsError(
            f"{problem}; the damaged generation also holds {', '.join(map(repr, others))}, "
            f"which no intact generation has and a build of {name!r} cannot re-read: build "
            "into a new warehouse, or restore the file"
        )


def table_counts(generation: Path) -> dict[str, int]:
    """Rows of every table of a generation, from the Parquet footers (no data read)."""
    from tracehouse.schemas import TABLES
    from tracehouse.warehouse import table_row_count

    return {
        table: table_row_count(generation, table)
        for table in TABLES
        if (generation / f"{table}.parquet").exists()
    }


def read_checks(generation: Path) -> dict[str, invariants.Outcome]:
    """The invariant outcomes a build recorded in ``generation`` before publishing it."""
    try:
        stored = json.loads((generation / CHECKS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {name: (entry["passed"], entry["metadata"]) for name, entry in stored.items()}


GuardFn = Callable[[Path, dict[str, int], dict[str, Any]], None]


def _publish_guard(settings: Settings, current: Path | None, require_fact_rows: bool) -> GuardFn:
    """The last step before publishing: compare the new tables with the current generation's,
    record every outcome in the generation, and refuse what must not be published."""
    previous = table_counts(current) if current is not None else None

    def guard(generation: Path, counts: dict[str, int], outcomes: dict[str, Any]) -> None:
        outcomes["tables_shrink_within_limit"] = invariants.tables_shrink_within_limit(
            previous, counts, settings.max_shrink_share
        )
        outcomes["fact_tables_not_empty"] = invariants.fact_tables_not_empty(counts)
        write_atomically(
            generation / CHECKS_FILE,
            json.dumps(
                {name: {"passed": ok, "metadata": meta} for name, (ok, meta) in outcomes.items()},
                sort_keys=True,
                default=str,
            ).encode(),
        )
        shrink_ok, shrink = outcomes["tables_shrink_within_limit"]
        if not shrink_ok and not settings.allow_shrink:
            shrinking = sorted(shrink["shrinking_tables"].items(), key=lambda i: i[0] != "runs")
            changes = ", ".join(f"{t} {c}" for t, c in shrinking[:3])
            if len(shrinking) > 3:
                changes += f" and {len(shrinking) - 3} more tables"
            raise ShrinkRefused(
                f"refused to publish: {changes} against the current generation "
                f"({current.name if current else '-'}), more than max_shrink_share "
                f"{settings.max_shrink_share:.0%}; the warehouse is unchanged. Check the source, "
                "or pass --allow-shrink (TRACEHOUSE_ALLOW_SHRINK=1) to publish it anyway",
                dict(outcomes),
            )
        if require_fact_rows and not outcomes["fact_tables_not_empty"][0]:
            invariants.raise_failures(outcomes, ["fact_tables_not_empty"])

    return guard


class ShrinkRefused(invariants.InvariantViolation):
    """A build would drop more of a table than allowed; nothing was published."""


def _load_context_cached(
    warehouse: Warehouse, json_files: list[SourceFile], settings: Settings, resolved: ResolvedSource
) -> Any:
    from tracehouse.identify.context import load_context, read_baseline_map

    key = hashlib.sha256(
        json.dumps(
            [_state_key(settings, resolved), [[f.rel, f.fingerprint] for f in json_files]]
        ).encode()
    ).hexdigest()
    cache_file = warehouse.cache / f"context-{resolved.key}.pickle"
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


@dataclass
class IngestPlan:
    """What a build parses, and the manifest entries of the groups it reuses."""

    loaded: Any  # context.LoadedContext
    group_mode: str
    file_entries: dict[str, Any]
    tasks: list[IngestTask]


def _plan_ingest(
    settings: Settings,
    warehouse: Warehouse,
    resolved: ResolvedSource,
    files: list[SourceFile],
    manifest: Manifest,
) -> IngestPlan:
    from tracehouse.ingest import worker as ingest

    json_files = [f for f in files if f.kind == "json"]
    line_files = [f for f in files if f.kind == "jsonl"]
    loaded = _load_context_cached(warehouse, json_files, settings, resolved)
    context = loaded.context

    before = manifest.sources.get(resolved.name)
    previous: dict[str, FileEntry] = {}
    if before is not None and before.context == context.fingerprint:
        previous = before.files
    warehouse.staging.mkdir(parents=True, exist_ok=True)
    file_entries: dict[str, FileEntry] = {}
    tasks: list[IngestTask] = []
    groups: dict[int, list[SourceFile]] = {}
    for source_file in line_files:
        groups.setdefault(file_group(source_file.rel), []).append(source_file)
    group_mode = context.fingerprint
    for members in groups.values():
        reused = _reusable_group(warehouse, members, previous, group_mode)
        if reused is not None:
            file_entries.update(reused)
            continue
        # Parts are named by what the group looked like on disk; the content digests come
        # back from the workers, which hash each file as they read it.
        part_key = hashlib.sha256(
            json.dumps([group_mode, [[f.rel, f.fingerprint] for f in members]]).encode()
        ).hexdigest()[:32]
        for source_file in members:
            file_entries[source_file.rel] = FileEntry(list(source_file.fingerprint))
        tasks.append(
            IngestTask(
                tuple((str(f.path), f.rel) for f in members),
                str(warehouse.staging),
                part_key,
                sum(f.size for f in members),
                ingest.CHUNK_ROWS,
            )
        )
    tasks.sort(key=lambda t: -t.size)  # biggest first keeps both cores busy to the end
    return IngestPlan(loaded, group_mode, file_entries, tasks)


def plan_ingest(settings: Settings, *, source: str | None = None) -> IngestPlan:
    """The ingest tasks a build of ``settings`` would run now (none when nothing changed),
    planned exactly as ``build_warehouse`` plans them, under the build lock. For runners that
    parse the groups elsewhere (the Dagster fan-out) and then call ``build_warehouse`` with a
    ``parse`` that takes their results."""
    source = source or settings.source
    if source is None:
        raise SettingsError(NO_SOURCE)
    warehouse = Warehouse(settings.warehouse, settings.keep_generations)
    with warehouse.build_lock(settings.lock_timeout_s):
        resolved = resolve_source(source, settings)
        files, _ = discover(resolved.root, resolved.links_within)
        return _plan_ingest(
            settings, warehouse, resolved, files, read_manifest(warehouse.manifest_path)
        )


def parse_task(task: IngestTask, context: Any) -> Any:
    """Parse one group in this process (``ingest.GroupResult``), with ``context`` the
    dataset context of the plan it came from."""
    _set_worker_context(context)
    return _ingest_task(task)


def _full_build(
    settings: Settings,
    warehouse: Warehouse,
    resolved: ResolvedSource,
    files: list[SourceFile],
    discovery_rejects: list[Any],
    state: dict[str, Any],
    manifest: Manifest,
    progress: ProgressFn | None,
    started: float,
    parse: ParseFn,
    guard: GuardFn | None = None,
    base: Path | None = None,
) -> BuildResult:
    global _WORKER_CONTEXT
    from tracehouse.assemble import finalize

    generations.remove_stale_generations(warehouse)
    json_files = [f for f in files if f.kind == "json"]
    line_files = [f for f in files if f.kind == "jsonl"]
    plan = _plan_ingest(settings, warehouse, resolved, files, manifest)
    loaded, context = plan.loaded, plan.loaded.context
    file_entries, tasks, group_mode = plan.file_entries, plan.tasks, plan.group_mode

    _WORKER_CONTEXT = context
    results: list[Any] = parse(tasks, settings.workers, progress) if tasks else []
    for result in results:
        group_key = _group_key(
            group_mode, {rel: counts.content_sha256 for rel, counts in result.files.items()}
        )
        digests = {
            name: sha256_file(warehouse.staging / name)
            for names in result.parts.values()
            for name in names
        }
        for rel, counts in result.files.items():
            entry = file_entries[rel]
            entry.sha256 = counts.content_sha256
            entry.group_key = group_key
            entry.parts = {table: list(names) for table, names in result.parts.items()}
            entry.part_digests = dict(digests)
            entry.records = counts.records
            entry.runs = counts.runs
            entry.rejected = counts.rejected
            entry.kernelindex_unreadable = counts.kernelindex_unreadable

    _refuse_a_source_without_runs(settings, resolved, file_entries)
    outcome = finalize.finalize(
        warehouse=warehouse,
        settings=settings,
        resolved=resolved,
        loaded=loaded,
        files=files,
        file_entries=file_entries,
        discovery_rejects=discovery_rejects,
        progress=progress,
        before_publish=guard,
        base=base,
        publish=generations.publish,
    )
    # Sources the published generation no longer holds (removed) drop out of the manifest.
    held = {s.source for s in generation_sources(outcome.generation)}
    manifest.sources = {name: m for name, m in manifest.sources.items() if name in held}
    manifest.sources[resolved.name] = SourceManifest(
        state=state,
        context=context.fingerprint,
        fingerprints=file_fingerprints(files),
        files=file_entries,
        snapshot_id=outcome.snapshot_id,
    )
    write_manifest(warehouse.manifest_path, manifest)
    remove_unreferenced_staging(warehouse, manifest)
    records_read = sum(e.records for e in file_entries.values())
    files_parsed = sum(len(task.files) for task in tasks)
    return BuildResult(
        warehouse.root,
        False,
        time.perf_counter() - started,
        outcome.table_counts,
        dict(sorted(Counter(outcome.rejects_by_reason).items())),
        files_parsed,
        len(line_files) - files_parsed,
        records_read + len(json_files),
        outcome.snapshot_id,
        resolved,
        generation=outcome.generation.name,
        checks=outcome.checks,
    )


class NoRunsRefused(ValueError):
    """Every trace record of the source was rejected: publishing it would say "built" about a
    source that contributes nothing (a wrong folder, a format tracehouse cannot read)."""


def _refuse_a_source_without_runs(
    settings: Settings, resolved: ResolvedSource, file_entries: dict[str, Any]
) -> None:
    runs = sum(e.runs or 0 for e in file_entries.values())
    rejected = sum(e.rejected or 0 for e in file_entries.values())
    if runs > 0 or rejected == 0 or settings.allow_shrink:
        return
    first = min(rel for rel, e in file_entries.items() if e.rejected)
    raise NoRunsRefused(
        f"--source {resolved.source}: no run imported, {rejected:,} record"
        f"{'s' if rejected != 1 else ''} rejected (first in {first}); the warehouse is "
        "unchanged. Check the source, or pass --allow-shrink to publish it anyway"
    )


def _group_key(group_mode: str, shas: dict[str, str]) -> str:
    """What a group's parts depend on: the dataset context, the path mode, each file's bytes."""
    listing = "".join(f"{rel}\0{sha}\n" for rel, sha in sorted(shas.items()))
    return hashlib.sha256(f"{group_mode}\n{listing}".encode()).hexdigest()


def _reusable_group(
    warehouse: Warehouse,
    members: list[SourceFile],
    previous: dict[str, FileEntry],
    group_mode: str,
) -> dict[str, FileEntry] | None:
    """The previous entries of a group whose files all have the same bytes as last time, or None.

    Only files whose size, mtime or inode changed are hashed again; a new file means a parse.
    """
    found = [previous.get(f.rel) for f in members]
    entries = [e for e in found if e is not None and e.group_key and e.sha256]
    if len(entries) != len(members):
        return None
    shas = {}
    for source_file, entry in zip(members, entries, strict=True):
        same = entry.fingerprint == list(source_file.fingerprint)
        shas[source_file.rel] = entry.sha256 if same else sha256_file(source_file.path)
    group_key = _group_key(group_mode, shas)
    if any(e.group_key != group_key for e in entries) or not _parts_intact(warehouse, entries):
        return None
    return {
        f.rel: replace(e, fingerprint=list(f.fingerprint))
        for f, e in zip(members, entries, strict=True)
    }


def _parts_intact(warehouse: Warehouse, entries: list[FileEntry]) -> bool:
    """Whether the staging parts of a group's entries are all there with the bytes they were
    written with (each part is read once: the files of a group share their parts)."""
    digests: dict[str, str | None] = {}
    for entry in entries:
        for names in entry.parts.values():
            for name in names:
                digests[name] = entry.part_digests.get(name)
    for name, digest in digests.items():
        try:
            if digest is None or sha256_file(warehouse.staging / name) != digest:
                return False
        except OSError:
            return False
    return True


def run_tasks(tasks: list[IngestTask], workers: int, progress: ProgressFn | None) -> list[Any]:
    """Parse every task in a pool of ``workers`` processes; results come back in task order."""
    results: list[Any] = []
    _run_tasks(tasks, workers, progress, results)
    return results


def _run_tasks(
    tasks: list[IngestTask],
    workers: int,
    progress: ProgressFn | None,
    results: list[Any],
) -> None:
    """Parse every task; results come back in task order. The progress counts files (a task
    is a group of files), so the bar's total is the number of files this build parses."""
    total_files = sum(len(task.files) for task in tasks)
    done_files = 0
    if progress:
        progress("parse", 0, total_files)
    if workers <= 1 or len(tasks) == 1:
        for task in tasks:
            results.append(_ingest_task(task))
            done_files += len(task.files)
            if progress:
                progress("parse", done_files, total_files)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    gathered: dict[int, Any] = {}
    # Workers start from a clean server process, not by forking this one: a fork copies a
    # process whose Polars/DuckDB thread pools may hold locks (in Dagster, tests, a notebook),
    # and the child then hangs on its first frame.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tracehouse.ingest.worker", "tracehouse.ingest.columnar"])
    interrupts.start_fork_server()
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)),
        mp_context=context,
        initializer=_start_worker,
        initargs=(_WORKER_CONTEXT,),
    )
    try:
        # Starting a worker must not be cut in half: a worker the fork server has forked but
        # this process has not yet noted escapes stop_children, and once the pool below is
        # dropped it finds its queues' semaphores gone and prints a traceback after our line.
        # An interrupt meanwhile is held until every worker is started (and known).
        with interrupts.deferred():
            futures = {pool.submit(_ingest_task, task): i for i, task in enumerate(tasks)}
        for future in as_completed(futures):
            index = futures[future]
            gathered[index] = future.result()
            done_files += len(tasks[index].files)
            if progress:
                progress("parse", done_files, total_files)
    except BaseException:  # Ctrl-C or a failed task: stop the workers now, wait for none
        interrupts.stop_children()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    results.extend(gathered[index] for index in range(len(tasks)))


def remove_unreferenced_staging(warehouse: Warehouse, manifest: Manifest) -> None:
    """Staging parts no source's files use any more."""
    keep = manifest.staging_parts()
    if not warehouse.staging.exists():
        return
    for path in warehouse.staging.iterdir():
        if path.name not in keep:
            path.unlink(missing_ok=True)


def utc_now() -> datetime:
    return datetime.now(UTC)


def file_fingerprints(files: list[SourceFile]) -> dict[str, list[int]]:
    """What a build compares to find a source's files unchanged (its manifest's
    ``fingerprints``): each discovered file's size, modification time and inode, by path. The
    one rule for "the files are as the last build read them"; content is hashed only past it."""
    return {f.rel: list(f.fingerprint) for f in files}


def source_version(settings: Settings) -> str:
    """What the configured source is at right now, cheaply: the commit a Hub revision resolves
    to; for a folder, a digest of its files' ``file_fingerprints``, after its git HEAD (or the
    given revision) when it has one, as ``<sha>+files:<digest>``; with several sources (the
    ``sources`` setting), a digest of each one's. The Dagster source asset's data version."""
    if settings.sources:
        from tracehouse.settings import parse_sources

        versions = [
            f"{name}={_one_source_version(uri, settings)}"
            for name, uri in sorted(parse_sources(settings.sources).items())
        ]
        return "sources:" + hashlib.sha256("\n".join(versions).encode()).hexdigest()[:32]
    if settings.source is None:
        raise SettingsError(NO_SOURCE)
    return _one_source_version(settings.source, settings)


def _one_source_version(source: str, settings: Settings) -> str:
    if source.startswith("hf://"):
        from tracehouse.fetch import hub

        reference = hub.parse_hub_uri(source)
        assert reference is not None
        if hub.hub_offline(settings.hub_offline):  # the commit the cache holds, asking no one
            cache_dir = settings.hub_cache_for(reference.repo_id)
            return hub.fetch_dataset(reference, cache_dir, offline=True).resolved_sha
        return hub.resolve_revision(reference, retry=hub.RetryPolicy.within(settings.hub_timeout_s))
    root = Path(source)
    require_dataset(root, source)
    # The files as the build would find them, compared by the build's own rule: a file edited
    # or written into a clone whose HEAD did not move (``flashinfer-bench run --local``) is a
    # new version, as it is a rebuild for ``tracehouse build``. Only stat calls, no reads.
    files, _ = discover(root)
    listing = json.dumps(sorted(file_fingerprints(files).items())).encode()
    digest = "files:" + hashlib.sha256(listing).hexdigest()[:32]
    revision = settings.revision or git_revision(root)
    return digest if revision is None else f"{revision}+{digest}"


def remove_source(settings: Settings, name: str) -> BuildResult:
    """Remove one source from the warehouse: a new generation without its rows, published
    atomically under the build lock (rankings span what remains). Its staging and table
    parts go once no kept generation links them."""
    from tracehouse.assemble import finalize

    started = time.perf_counter()
    warehouse = Warehouse(settings.warehouse, settings.keep_generations)
    current = warehouse.require_current()
    with warehouse.build_lock(settings.lock_timeout_s):
        published_before = interrupts.published()
        try:
            current = warehouse.require_current(content=True)  # its files are reused
            held = [s.source for s in generation_sources(current)]
            if name not in held:
                raise LookupError(
                    f"no source {name!r} in {warehouse.root} (it holds: {', '.join(held)})"
                )
            if held == [name]:
                raise SettingsError(
                    f"{name!r} is the only source of {warehouse.root}; removing it would leave "
                    "an empty warehouse. Build another source first, or delete the folder"
                )
            generations.remove_stale_generations(warehouse)
            # Removing a source shrinks the tables by design: the outcome is recorded, the
            # shrink is not refused.
            guard = _publish_guard(replace(settings, allow_shrink=True), current, False)
            outcome = finalize.finalize_without_source(
                warehouse=warehouse,
                settings=settings,
                name=name,
                before_publish=guard,
                publish=generations.publish,
            )
        except BaseException:
            if interrupts.published() == published_before:
                generations.remove_stale_generations(warehouse)
            raise
        manifest = read_manifest(warehouse.manifest_path)
        manifest.sources.pop(name, None)
        write_manifest(warehouse.manifest_path, manifest)
        remove_unreferenced_staging(warehouse, manifest)
        for stale in warehouse.cache.glob(f"context-{source_key(name)}.pickle"):
            stale.unlink(missing_ok=True)
    return BuildResult(
        warehouse.root,
        False,
        time.perf_counter() - started,
        outcome.table_counts,
        dict(sorted(outcome.rejects_by_reason.items())),
        0,
        0,
        0,
        outcome.snapshot_id,
        generation=outcome.generation.name,
        checks=outcome.checks,
    )
