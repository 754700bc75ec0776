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
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracehouse import interrupts
from tracehouse.assemble import invariants
from tracehouse.assemble.invariants import CHECKS_FILE, read_checks
from tracehouse.fetch.local import SourceFile, discover
from tracehouse.fetch.resolve import (
    NO_SOURCE,
    ProgressFn,
    ResolvedSource,
    file_fingerprints,
    resolve_source,
)
from tracehouse.files import read_parquet_file, sha256_file, write_atomically
from tracehouse.ingest.manifest import (
    Manifest,
    SourceManifest,
    read_manifest,
    write_manifest,
)
from tracehouse.ingest.plan import (
    ParseFn,
    group_parts_key,
    load_context_cached,
    plan_files,
    pool_starts_early,
    remove_unreferenced_staging,
    run_tasks,
    set_worker_context,
    state_key,
)
from tracehouse.memory import arrow_uses_the_c_allocator
from tracehouse.publish import generations
from tracehouse.schemas import HISTORY_TABLES
from tracehouse.settings import Settings, SettingsError
from tracehouse.storage import create_folder, empty_folder, remove_created_folder
from tracehouse.warehouse import (
    GenerationSource,
    Warehouse,
    discard_reusable_cache,
    generation_damage,
    generation_sources,
    generation_tables,
    holds_sources,
    schema_difference,
    source_key,
    table_files,
)


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
    # Of the files parsed, those that only grew: only their new lines were parsed.
    files_grown: int = 0

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
        grown = f" ({self.files_grown:,} only past the old end)" if self.files_grown else ""
        lines.append(
            f"  files parsed {self.files_parsed:,}{grown}, reused {self.files_reused:,}, "
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
                from tracehouse.publish.iceberg.replica import discard_stale_staging

                discarded = discard_stale_staging(settings, warehouse)
            arguments = (settings, warehouse, source, progress, force, require_fact_rows)
            try:
                result = _build_locked(*arguments, started, parse or run_tasks)
            except BaseFoundDamaged:
                # Found by the byte check beside the build's start: start again, checking
                # first, which builds on an intact generation as a repair does.
                result = _build_locked(*arguments, started, parse or run_tasks, check_first=True)
            result.repaired = discarded or result.repaired
            if settings.catalog is not None:  # the published form: Iceberg tables in a catalog
                from tracehouse.publish.iceberg.commit import publish_generation

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

            def clean_up(failure: BaseException) -> None:
                """An interrupt or a refusal: drop the unfinished generation and temporary
                files now (the published one is untouched), unless this build's switch
                happened."""
                if interrupts.published() != published_before:
                    return
                generations.remove_stale_generations(warehouse)
                if interrupts.received() is not None or isinstance(failure, KeyboardInterrupt):
                    # "warehouse unchanged": not even the Hub files fetched so far stay
                    undo_first_build()
                elif created is not None and not _keeps_fetched_files(warehouse, settings):
                    remove_created_folder(warehouse.root, created)

            try:
                clean_up(error)
            except KeyboardInterrupt:
                # A Ctrl-C during a query: the watchdog cancels the query, which returns first,
                # and the pending handler then raises at the first call of this cleanup. It
                # runs again, whole, under the build lock, before the interrupt goes on.
                clean_up(error)
                raise
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
    *,
    check_first: bool = False,
) -> BuildResult:
    resolved = resolve_source(source, settings, progress)
    # Every byte of the base is checked before the build relies on it (it links its files):
    # in a thread beside discovery and the plan, unless ``check_first``.
    current, repair = warehouse.base_generation(content=check_first)
    base_check = None
    if repair is not None and not check_first:
        current, repair = warehouse.base_generation()
    elif current is not None and not check_first:
        base_check = BaseCheck(current)
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
        if base_check is not None:
            base_check.wait()  # it reads the base's definitions
        _refuse_another_dataset(settings, warehouse, resolved, files, current, same_name)
    state = state_key(settings, resolved)
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
        if base_check is not None:
            base_check.wait()
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
    guard = _publish_guard(settings, current, require_fact_rows, outdated)
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
        base_check,
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
    paths = table_files(current, "definitions", held.key)
    before = {
        name
        for path in paths
        for name in read_parquet_file(path, ["definition"]).column(0).to_pylist()
    }
    if not before:
        return  # nothing to compare with: a source that had no definition files
    loaded = load_context_cached(
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
    from tracehouse.warehouse import table_row_count

    return {table: table_row_count(generation, table) for table in generation_tables(generation)}


def published_counts(generation: Path) -> dict[str, int]:
    """Rows of every table of a published generation: the counts its build recorded with its
    checks (the generation's files, checks.json included, are checked against their digests
    before it is built on), else from the Parquet footers. Reading every footer cost a build
    after one changed file ~0.1-0.2 s."""
    try:
        recorded = read_checks(generation).get("tables_shrink_within_limit")
        counts = recorded[1].get("new_counts") if recorded else None
    except (AttributeError, KeyError, TypeError):  # not what a build writes: count the rows
        counts = None

    if (
        isinstance(counts, dict)
        and set(counts) == set(generation_tables(generation))
        and all(type(count) is int and count >= 0 for count in counts.values())
    ):
        return dict(counts)
    return table_counts(generation)


GuardFn = Callable[[Path, dict[str, int], dict[str, Any]], None]


def _publish_guard(
    settings: Settings, current: Path | None, require_fact_rows: bool, outdated: str | None = None
) -> GuardFn:
    """The last step before publishing: compare the new tables with the current generation's,
    record every outcome in the generation, and refuse what must not be published.
    ``outdated`` says the build rebuilds a generation of an older schema version: then run
    history starts again, which the refusal says instead of blaming the source."""
    previous = published_counts(current) if current is not None else None

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
            advice = (
                "Check the source, or pass --allow-shrink (TRACEHOUSE_ALLOW_SHRINK=1) to "
                "publish it anyway"
            )
            if outdated is not None and set(shrink["shrinking_tables"]) & set(HISTORY_TABLES):
                advice = (
                    f"{outdated}: rebuilt by this version, its run history starts again. "
                    "Pass --allow-shrink (TRACEHOUSE_ALLOW_SHRINK=1) to rebuild it without "
                    "its history, or keep building it with the tracehouse that wrote it"
                )
            raise ShrinkRefused(
                f"refused to publish: {changes} against the current generation "
                f"({current.name if current else '-'}), more than max_shrink_share "
                f"{settings.max_shrink_share:.0%}; the warehouse is unchanged. {advice}",
                dict(outcomes),
            )
        if require_fact_rows and not outcomes["fact_tables_not_empty"][0]:
            invariants.raise_failures(outcomes, ["fact_tables_not_empty"])

    return guard


class ShrinkRefused(invariants.InvariantViolation):
    """A build would drop more of a table than allowed; nothing was published."""


class BaseFoundDamaged(Exception):
    """The byte check of the base generation, run beside the build (``BaseCheck``), found it
    damaged: the build starts again, checking first."""


class BaseCheck:
    """``generation_damage(base, content=True)`` in a thread, started with the build: hashing
    the base (~50 MB of the bench corpus's parts, ~0.05 s) takes the other core while the build
    discovers its files and plans, instead of coming first. ``wait`` is called before anything
    relies on the base (finalize links its files; an up-to-date build reports it as current),
    and raises ``BaseFoundDamaged`` when it is not intact."""

    def __init__(self, generation: Path) -> None:
        self.generation = generation
        self._problem: str | None = None
        # A daemon thread: an interrupted build ends without waiting for the hashing.
        self._thread = threading.Thread(target=self._check, name="base-check", daemon=True)
        self._thread.start()

    def _check(self) -> None:
        try:
            # One thread: beside the build's own Python work (discovery and planning), each
            # hashing thread takes the GIL back after every chunk, and with four of them the
            # discovery of the bench corpus took 0.1 s instead of 0.045 s.
            self._problem = generation_damage(self.generation, content=True, threads=1)
        except Exception as error:
            self._problem = f"{self.generation}: not checked ({error})"

    def wait(self) -> None:
        self._thread.join()
        if self._problem is not None:
            raise BaseFoundDamaged(self._problem)


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
    base_check: BaseCheck | None = None,
) -> BuildResult:
    generations.remove_stale_generations(warehouse)
    json_files = [f for f in files if f.kind == "json"]
    line_files = [f for f in files if f.kind == "jsonl"]
    with contextlib.ExitStack() as early_pool:
        if parse is run_tasks:  # (the Dagster fan-out parses in its own executor's workers)
            early_pool.enter_context(
                pool_starts_early(settings, line_files, manifest.sources.get(resolved.name))
            )
        plan = plan_files(settings, warehouse, resolved, files, manifest)
        loaded, context = plan.loaded, plan.loaded.context
        file_entries, tasks, group_mode = plan.file_entries, plan.tasks, plan.group_mode

        # The context's rows wait on disk through the parse (load_context_cached stored them,
        # or found them stored by an earlier build); finalize reads them if it must.
        context_rows = loaded.stored_rows
        assert context_rows is not None
        set_worker_context(context)
        results: list[Any] = parse(tasks, settings.workers, progress) if tasks else []
        early_pool.close()  # finalize, the build's peak of memory, runs without it
        # Only now: DuckDB and pyarrow held through the parse were ~60 MiB of the parent's
        # resident size beside its workers (and the parse's process tree is at its peak).
        from tracehouse.assemble import finalize

        arrow_uses_the_c_allocator()  # finalize is the build's peak of memory

        _record_parsed_groups(warehouse, file_entries, group_mode, tasks, results)
        _refuse_a_source_without_runs(settings, resolved, file_entries)
        if base_check is not None:
            base_check.wait()  # before finalize links the base's files
        outcome = finalize.finalize(
            warehouse=warehouse,
            settings=settings,
            resolved=resolved,
            loaded=loaded,
            context_rows=context_rows,
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
    # A file that only grew is parsed past its old end (or whole when its old bytes changed).
    files_parsed = sum(len(task.files) + task.grown_files for task in tasks)
    files_grown = sum(f.read_on for result in results for f in result.files.values())
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
        files_grown=files_grown,
    )


def _record_parsed_groups(
    warehouse: Warehouse,
    file_entries: dict[str, Any],
    group_mode: str,
    tasks: list[Any],
    results: list[Any],
) -> None:
    """Each parsed file's manifest entry: its content digest, its group's key and staging
    parts (with their digests), and its counts."""
    # A group parsed as several tasks (ingest.plan.FILES_PER_TASK) has the parts of all of them.
    groups: dict[str, tuple[dict[str, Any], dict[str, list[str]]]] = {}
    for task, result in zip(tasks, results, strict=True):
        counts_of, parts = groups.setdefault(task.group or task.part_key, ({}, {}))
        counts_of.update(result.files)
        for table, names in result.parts.items():
            parts.setdefault(table, []).extend(names)
    for counts_of, parts in groups.values():
        group_key = group_parts_key(
            group_mode, {rel: counts.content_sha256 for rel, counts in counts_of.items()}
        )
        digests = {
            name: sha256_file(warehouse.staging / name)
            for names in parts.values()
            for name in names
        }
        for rel, counts in counts_of.items():
            entry = file_entries[rel]
            entry.sha256 = counts.content_sha256
            entry.group_key = group_key
            entry.parts = parts  # one dict for the group's files (manifest.py)
            entry.part_digests = digests
            entry.records = counts.records
            entry.runs = counts.runs
            entry.rejected = counts.rejected
            entry.kernelindex_unreadable = counts.kernelindex_unreadable
            entry.end_line, entry.end_offset = counts.end_line, counts.end_offset


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


def utc_now() -> datetime:
    return datetime.now(UTC)


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
        # its context and the context's rows (plan.load_context_cached)
        for stale in warehouse.cache.glob(f"context-{source_key(name)}.*pickle"):
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
