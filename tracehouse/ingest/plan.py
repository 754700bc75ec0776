"""What a build parses: the source's trace files in groups (FILE_GROUPS, by name), each group
reused while its files' bytes, the dataset context and its staging parts are unchanged, else
one ingest task; and running those tasks in a pool of parser workers."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.abc
import json
import pickle
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tracehouse import interrupts
from tracehouse.fetch.local import SourceFile, discover
from tracehouse.fetch.resolve import NO_SOURCE, ProgressFn, ResolvedSource, resolve_source
from tracehouse.files import replace_atomically, sha256_file, sha256_files
from tracehouse.ingest import group as group_parse
from tracehouse.ingest.manifest import FileEntry, Manifest, SourceManifest, read_manifest
from tracehouse.memory import arrow_uses_the_c_allocator
from tracehouse.schemas import IMPORTER_VERSION, STAGING_FORMAT
from tracehouse.settings import Settings, SettingsError
from tracehouse.warehouse import Warehouse

# Runs a build's ingest tasks: (tasks, workers, progress) -> one GroupResult per task, in order.
ParseFn = Callable[[list["IngestTask"], int, ProgressFn | None], list[Any]]


def state_key(settings: Settings, source: ResolvedSource) -> dict[str, Any]:
    baselines = settings.baselines_file
    baselines_fp = None
    if baselines is not None and baselines.exists():
        stat = baselines.stat()
        baselines_fp = [str(baselines.resolve()), stat.st_size, stat.st_mtime_ns]
    return {
        "importer": IMPORTER_VERSION,
        "staging": STAGING_FORMAT,
        # the source's identity, never the spelling of the argument: `data/x`, `./data/x` and
        # its absolute path, from any working directory, are one source state
        "source": source.uri,
        "root": str(source.root.resolve()),
        "revision": source.resolved_sha,
        "baselines": baselines_fp,
    }


# The dataset context, set once per worker process (by set_worker_context) rather than sent
# with every task.
_WORKER_CONTEXT: Any = None


def set_worker_context(context: Any) -> None:
    global _WORKER_CONTEXT
    _WORKER_CONTEXT = context


class _RefuseImports(importlib.abc.MetaPathFinder):
    """Modules a process does without (``refuse_imports``), refused when first imported: each
    importer here carries on without them, and the bytes it writes are the same.

    - ``pandas``: pyarrow imports it (0.4 s of CPU a process) the first time it converts a
      Python list, only to ask whether the list is a pandas object. Parser workers and a
      ``tracehouse build`` process refuse it; a process that parses in place for somebody else
      (Dagster, a notebook) keeps pandas, as pyarrow remembers a refused import for the rest of
      the process.
    - ``numpy``: DuckDB and pyarrow import it when they are imported (~0.1 s of a build's
      0.25 s of imports) and use it only to hand over numpy arrays, which a build never asks
      for. A ``tracehouse build`` process refuses it."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in self.names:
            raise ImportError(f"this tracehouse process does not import {name}")


def refuse_imports(*names: str) -> None:
    """From now on this process does not import the modules ``names`` (top-level names) it has
    not imported yet (see _RefuseImports)."""
    finder = next((f for f in sys.meta_path if isinstance(f, _RefuseImports)), None)
    if finder is None:
        finder = _RefuseImports()
        sys.meta_path.insert(0, finder)
    finder.names.update(name for name in names if name not in sys.modules)


def _start_worker(context: Any) -> None:
    """Initializer of a parser worker: the parent handles Ctrl-C and stops it; the context
    arrives once per worker."""
    interrupts.ignore_in_worker()
    refuse_imports("pandas")
    arrow_uses_the_c_allocator()  # a worker's chunks are short-lived Arrow tables
    set_worker_context(context)


# Files are parsed and stored in groups: one set of Parquet parts per group instead of per file
# (most trace files hold a few dozen lines). A file's group depends only on its path, so adding
# or changing a file rewrites its group's parts alone: its definition's files (file_group_name),
# and those of any other definition whose name falls in the same group. Only the changed files
# are parsed; the others' rows are carried over from the group's previous parts
# (_carried_files, worker.carry_rows). With 64 groups, 12 of the
# bench corpus's 30 groups held two definitions or more (a changed file re-parsed 16 files,
# 24 MB); with 256, 6 of 41 (8 files, 14 MB).
FILE_GROUPS = 256


# At most this many files per ingest task: a worker holds some state per file of its task until
# the task's parts are written, so a group of many small files (200,000 one-line files are
# 3,125 a group) is parsed as several tasks, each writing its own parts of the group.
FILES_PER_TASK = 500
# A parser worker is replaced after it has parsed about this many files: what it keeps from
# task to task (the entities it has seen, the allocator's high water mark) grows with the files
# it has parsed; 200,000 one-line files took each worker past 1 GiB. A fresh one from the fork
# server costs a fork, the context and the first line of every combination it meets again, so
# workers are renewed by files parsed, not by tasks: a source of a few hundred big files is
# parsed by one set of workers.
FILES_PER_WORKER = 8 * FILES_PER_TASK


# Suffixes the layouts put after a definition's name (flashinfer-trace-format.md §1):
# `<def>.jsonl`, `<def>.workload.jsonl`, `<def>_workloads.jsonl`.
DEFINITION_FILE_SUFFIXES = (".workload.jsonl", "_workloads.jsonl", ".jsonl")


def file_group_name(rel: str) -> str:
    """What a file's group is chosen by: its name without the layout's suffix, which every
    layout makes the definition's name. The files of one definition (its workloads file and
    every author's traces) are parsed together, by one worker, one after the other
    (``plan_files``), so the entities they share are derived once: the combination caches are
    per process and bounded, and spread over every group they were derived again and again
    (1,000,000 lines over 200,000 workloads: ~5 derivations a workload instead of one)."""
    name = rel.rsplit("/", 1)[-1]
    for suffix in DEFINITION_FILE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


# A task is never cut below this many bytes of files for the sake of balance (above).
MIN_TASK_BYTES = 32 * 1024 * 1024


def _task_chunks(members: list[SourceFile], task_bytes: int) -> Iterator[list[SourceFile]]:
    """A group's files in order, in tasks of at most FILES_PER_TASK files and about
    ``task_bytes`` (a bigger file is a task of its own)."""
    chunk: list[SourceFile] = []
    size = 0
    for source_file in members:
        if chunk and (len(chunk) == FILES_PER_TASK or size + source_file.size > task_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(source_file)
        size += source_file.size
    if chunk:
        yield chunk


def file_group(rel: str) -> int:
    return int(hashlib.sha256(file_group_name(rel).encode()).hexdigest()[:8], 16) % FILE_GROUPS


@dataclass(frozen=True)
class IngestTask:
    """Files of one group to parse into the staging parts named by part_key."""

    files: tuple[tuple[str, str], ...]  # (absolute path, dataset-relative path)
    staging: str
    part_key: str
    size: int
    chunk_rows: int  # rows buffered before a part is written (memory stays flat)
    # The group the files belong to (its part_key when one task parses the whole group): the
    # results of a group's tasks are one group's parts (build._full_build joins them).
    group: str = ""
    # Files of the group whose rows are carried over from its previous parts, not parsed
    # (group.CarriedFile, worker.carry_rows), and those parts as (table, path) pairs.
    carried: tuple[Any, ...] = ()
    carried_parts: tuple[tuple[str, str], ...] = ()
    # Those parts hold the carried files' rows and nothing else: they are kept as they are,
    # and the task's own parts hold only what it parses (_carried_files).
    keep_parts: bool = False
    # The source's name: a run's id is qualified by it (worker.run_id).
    source: str = ""
    # Rows a file may hold beyond a chunk while KernelIndex may still find it unreadable
    # (group.FILE_HOLD_ROWS, read when the tasks are made, as chunk_rows).
    hold_rows: int = 0

    @property
    def grown_files(self) -> int:
        """How many of its carried files only grew: their new lines are parsed."""
        return sum(1 for c in self.carried if c.grown)

    @property
    def first_file(self) -> str:
        """The dataset-relative path of the task's first file, parsed or carried (a task that
        only carries rows parses none)."""
        return self.files[0][1] if self.files else self.carried[0].rel


def _ingest_task(task: IngestTask) -> Any:
    from tracehouse.ingest.worker import ingest_group

    return ingest_group(
        [(Path(path), rel) for path, rel in task.files],
        _WORKER_CONTEXT,
        Path(task.staging),
        task.part_key,
        chunk_rows=task.chunk_rows,
        hold_rows=task.hold_rows,
        carried=task.carried,
        carried_parts=[(table, Path(part)) for table, part in task.carried_parts],
        keep_parts=task.keep_parts,
        source=task.source,
    )


def load_context_cached(
    warehouse: Warehouse, json_files: list[SourceFile], settings: Settings, resolved: ResolvedSource
) -> Any:
    """The source's dataset context (identify.context.LoadedContext) with its definition and
    implementation rows on disk (``stored_rows``), from the warehouse's cache when it holds
    them for these files and settings: the context in one pickle, the rows in another
    (store_context_rows), which a build hands to finalize as it is."""
    from tracehouse.identify.context import load_context, read_baseline_map, store_context_rows

    key = hashlib.sha256(
        json.dumps(
            [state_key(settings, resolved), [[f.rel, f.fingerprint] for f in json_files]]
        ).encode()
    ).hexdigest()
    # Not the name of the single pickle of earlier versions (context-<key>.pickle, the rows
    # inside), which is removed once these are written: an earlier tracehouse then finds no
    # context and loads it afresh, never one whose rows are elsewhere.
    cache_file = warehouse.cache / f"context-{resolved.key}.loaded.pickle"
    rows_file = warehouse.cache / f"context-{resolved.key}.rows.pickle"
    try:
        with cache_file.open("rb") as handle:
            cached_key, loaded = pickle.load(handle)
        stored = loaded.stored_rows
        if cached_key == key and stored is not None:
            # (the folder may have moved since: the rows are beside the context, by name)
            loaded.stored_rows = replace(stored, path=rows_file)
            if loaded.stored_rows.intact():
                return loaded
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError):
        pass
    loaded = load_context(
        json_files,
        revision=resolved.resolved_sha,
        baseline_map=read_baseline_map(settings.baselines_file),
    )
    # The rows first: a context pickle names rows that are there.
    store_context_rows(loaded, rows_file)

    def write_pickle(temporary: Path) -> None:
        with temporary.open("wb") as handle:
            pickle.dump((key, loaded), handle, protocol=pickle.HIGHEST_PROTOCOL)

    replace_atomically(cache_file, write_pickle)
    (warehouse.cache / f"context-{resolved.key}.pickle").unlink(missing_ok=True)  # (above)
    return loaded


@dataclass
class IngestPlan:
    """What a build parses, and the manifest entries of the groups it reuses."""

    loaded: Any  # context.LoadedContext
    group_mode: str
    file_entries: dict[str, Any]
    tasks: list[IngestTask]


def plan_files(
    settings: Settings,
    warehouse: Warehouse,
    resolved: ResolvedSource,
    files: list[SourceFile],
    manifest: Manifest,
) -> IngestPlan:

    json_files = [f for f in files if f.kind == "json"]
    line_files = [f for f in files if f.kind == "jsonl"]
    loaded = load_context_cached(warehouse, json_files, settings, resolved)
    context = loaded.context

    before = manifest.sources.get(resolved.name)
    previous: dict[str, FileEntry] = {}
    if before is not None and before.context == context.fingerprint:
        previous = before.files
    warehouse.staging.mkdir(parents=True, exist_ok=True)
    file_entries: dict[str, FileEntry] = {}
    tasks: list[IngestTask] = []
    # How many files each previous state of a group had: its parts hold the rows of those.
    files_of_state = Counter(e.group_key for e in previous.values() if e.group_key)
    intact = _IntactParts(warehouse, previous)
    groups: dict[int, list[SourceFile]] = {}
    for source_file in line_files:
        groups.setdefault(file_group(source_file.rel), []).append(source_file)
    # Parts depend on the dataset context, on their own shape and on the source's name (the
    # runs' ids are qualified by it).
    group_mode = json.dumps([context.fingerprint, STAGING_FORMAT, resolved.name])
    # A group is one or a few definitions' files: where one definition holds much of the
    # source, its group is cut into tasks so that every worker has a share of the parse.
    task_bytes = max(MIN_TASK_BYTES, sum(f.size for f in line_files) // (2 * settings.workers))
    for members in groups.values():
        # One definition's files one after the other: what they share stays in the caches.
        members.sort(key=lambda f: (file_group_name(f.rel), f.rel))
        contents = _Contents(previous)
        reused = _reusable_group(members, previous, group_mode, contents, intact)
        if reused is not None:
            file_entries.update(reused)
            continue

        # Parts are named by what the group looked like on disk; the content digests come
        # back from the workers, which hash each file as they read it.
        def named(chunk: list[SourceFile]) -> str:
            listing = [[f.rel, f.fingerprint] for f in chunk]
            return hashlib.sha256(json.dumps([group_mode, listing]).encode()).hexdigest()[:32]

        group = named(members)
        for source_file in members:
            file_entries[source_file.rel] = FileEntry(list(source_file.fingerprint))
        # The group's unchanged files keep their rows; only the others are parsed.
        carried, carried_parts, keep_parts = _carried_files(
            warehouse, members, previous, contents, files_of_state, intact
        )
        carried_rels = {c.rel for c in carried}
        to_parse = [f for f in members if f.rel not in carried_rels]
        for index, chunk in enumerate(list(_task_chunks(to_parse, task_bytes)) or [[]]):
            carry = carried if index == 0 else ()
            listed = chunk + ([f for f in members if f.rel in carried_rels] if carry else [])
            tasks.append(
                IngestTask(
                    tuple((f.location, f.rel) for f in chunk),
                    str(warehouse.staging),
                    group if len(listed) == len(members) else named(listed),
                    sum(f.size for f in chunk),
                    group_parse.CHUNK_ROWS,
                    group,
                    carry,
                    carried_parts if carry else (),
                    keep_parts and bool(carry),
                    resolved.name,
                    group_parse.FILE_HOLD_ROWS,
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
        return plan_files(
            settings, warehouse, resolved, files, read_manifest(warehouse.manifest_path)
        )


def parse_task(task: IngestTask, context: Any) -> Any:
    """Parse one group in this process (``group.GroupResult``), with ``context`` the
    dataset context of the plan it came from."""
    set_worker_context(context)
    return _ingest_task(task)


def group_parts_key(group_mode: str, shas: dict[str, str]) -> str:
    """What a group's parts depend on: the dataset context, the path mode, each file's bytes."""
    listing = "".join(f"{rel}\0{sha}\n" for rel, sha in sorted(shas.items()))
    return hashlib.sha256(f"{group_mode}\n{listing}".encode()).hexdigest()


class _Contents:
    """The content digest of a source file as a build plans it: the previous build's while
    the file's size, mtime and inode are unchanged, else hashed (once a build)."""

    def __init__(self, previous: dict[str, FileEntry]) -> None:
        self.previous = previous
        self.hashed: dict[str, str] = {}

    def sha256(self, source_file: SourceFile) -> str:
        entry = self.previous.get(source_file.rel)
        if (
            entry is not None
            and entry.sha256
            and entry.fingerprint == list(source_file.fingerprint)
        ):
            return entry.sha256
        if source_file.rel not in self.hashed:
            self.hashed[source_file.rel] = sha256_file(source_file.path)
        return self.hashed[source_file.rel]


def _reusable_group(
    members: list[SourceFile],
    previous: dict[str, FileEntry],
    group_mode: str,
    contents: _Contents,
    intact: _IntactParts,
) -> dict[str, FileEntry] | None:
    """The previous entries of a group whose files all have the same bytes as last time, or None.

    Only files whose size, mtime or inode changed are hashed again; a new file means a parse.
    """
    found = [previous.get(f.rel) for f in members]
    entries = [e for e in found if e is not None and e.group_key and e.sha256]
    if len(entries) != len(members):
        return None
    shas = {f.rel: contents.sha256(f) for f in members}
    group_key = group_parts_key(group_mode, shas)
    if any(e.group_key != group_key for e in entries) or not intact.of(entries):
        return None
    return {
        f.rel: replace(e, fingerprint=list(f.fingerprint))
        for f, e in zip(members, entries, strict=True)
    }


def _carried_files(
    warehouse: Warehouse,
    members: list[SourceFile],
    previous: dict[str, FileEntry],
    contents: _Contents,
    files_of_state: Counter[str],
    intact: _IntactParts,
) -> tuple[tuple[Any, ...], tuple[tuple[str, str], ...], bool]:
    """The files of a group to parse again whose rows can be carried over from the group's
    previous parts instead (``group.CarriedFile``: same bytes, same dataset context, parts
    intact), those parts as (table, path) pairs, and whether the parts can be kept as they
    are; none when the previous parts are not all there as written.

    Parts are kept when every file they were parsed from is carried (none removed, none
    changed but by growing) and they are fewer than KEPT_PARTS_MAX a table: then a build after
    a re-run was appended to a trace file writes only the new lines' rows (copying the group's
    rows cost ~0.27 s of such a build on the bench corpus); past that bound the rows are
    copied into one part again, so a group's parts do not grow without end."""
    known = [(f, previous[f.rel]) for f in members if f.rel in previous]
    keys = [e.group_key for _, e in known if e.group_key and e.sha256 and e.parts]
    if not keys:
        return (), (), False
    # The files of one previous state of the group (they share its parts).
    group_key = max(set(keys), key=keys.count)
    known = [(f, e) for f, e in known if e.group_key == group_key]
    if not intact.of([e for _, e in known]):
        return (), (), False
    carried = []
    for source_file, entry in known:
        try:
            unchanged = contents.sha256(source_file) == entry.sha256
        except OSError:  # the parse reports it
            continue
        # A file that only grew, from an end its last read could go on from: its old lines
        # are carried, its new ones parsed (once the worker has checked the old bytes). Its
        # old lines must hold a run: a file of no JSON object at all is read whole (a NUL
        # in its first bytes makes it one binary_file reject, records.looks_binary).
        grown = (
            not unchanged
            and entry.end_line is not None
            and entry.end_offset is not None
            and entry.runs > 0
            and source_file.size > entry.end_offset
        )
        if unchanged or grown:
            carried.append(
                group_parse.CarriedFile(
                    source_file.location,
                    source_file.rel,
                    entry.sha256 or "",
                    entry.records,
                    entry.runs,
                    entry.rejected,
                    entry.kernelindex_unreadable,
                    entry.end_line,
                    entry.end_offset,
                    grown,
                )
            )
    # The group's parts in their order (the older rows first), each once.
    parts = list(
        dict.fromkeys(
            (table, name) for _, e in known for table, names in e.parts.items() for name in names
        )
    )
    keep = (
        len(carried) == len(known) == files_of_state[group_key]
        and max(Counter(table for table, _ in parts).values()) < KEPT_PARTS_MAX
    )
    return (
        tuple(carried),
        tuple((table, str(warehouse.staging / name)) for table, name in parts),
        keep,
    )


# At most this many staging files per table in a group whose parts are kept (each build that
# reads on after an append adds one); at this many, the rows are copied into one part again.
KEPT_PARTS_MAX = 8


class _IntactParts:
    """Whether each staging part the previous build recorded still has the bytes it was written
    with. Every part is asked about (a group is either reused whole or carries its unchanged
    files' rows), so all are hashed at the first question, several at once (``sha256_files``;
    the bench corpus's 64 MB of parts took ~0.09 s one by one)."""

    def __init__(self, warehouse: Warehouse, previous: dict[str, FileEntry]) -> None:
        self._staging = warehouse.staging
        self._recorded = {
            name: entry.part_digests.get(name)
            for entry in previous.values()
            for names in entry.parts.values()
            for name in names
        }
        self._intact: dict[str, bool] | None = None

    def of(self, entries: list[FileEntry]) -> bool:
        """Whether the parts of a group's entries are all there, as written."""
        if self._intact is None:
            found = sha256_files([self._staging / name for name in self._recorded])
            self._intact = {
                name: digest is not None and found[self._staging / name] == digest
                for name, digest in self._recorded.items()
            }
        return all(
            self._intact.get(name, False)
            for entry in entries
            for names in entry.parts.values()
            for name in names
        )


def pool_starts_early(
    settings: Settings, line_files: list[SourceFile], before: SourceManifest | None
) -> contextlib.AbstractContextManager[None]:
    """The parser pool's fork server, started before the plan when a build is the first of its
    source (``before`` is None) and will parse in a pool (``_run_tasks``: two workers or more,
    files of two groups or more): the server imports the parser's modules (~0.4 s) on the core
    the plan leaves idle, instead of after it. Held until the parse ends (the block's end);
    any other build gets a block that does nothing, so a warm or changed build, which parses
    one task or none in process, never starts a server for nothing."""
    if before is not None or settings.workers <= 1:
        return contextlib.nullcontext()  # (before the groups: a later build names none)
    groups = (file_group(f.rel) for f in line_files)
    first = next(groups, None)
    if all(group == first for group in groups):
        return contextlib.nullcontext()
    _parser_processes()
    return interrupts.fork_server()


def _parser_processes() -> Any:
    """multiprocessing's context of the parser workers: forked from a fork server that has
    imported the parser's modules (a fork server starts with those named before it starts)."""
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tracehouse.ingest.worker"])
    return context


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
    from concurrent.futures import ProcessPoolExecutor, as_completed

    gathered: dict[int, Any] = {}
    # Workers start from a clean server process, not by forking this one: a fork copies a
    # process whose Polars/DuckDB thread pools may hold locks (in Dagster, tests, a notebook),
    # and the child then hangs on its first frame.
    context = _parser_processes()
    with interrupts.fork_server():
        # A pool per batch of tasks, so that a worker parses about FILES_PER_WORKER files (the
        # executor's own max_tasks_per_child can hang on Python 3.11 when a worker retires).
        for indices in worker_batches(tasks, max(1, workers) * FILES_PER_WORKER):
            pool = ProcessPoolExecutor(
                max_workers=min(workers, len(indices)),
                mp_context=context,
                initializer=_start_worker,
                initargs=(_WORKER_CONTEXT,),
            )
            try:
                # Starting a worker must not be cut in half: a worker the fork server has forked
                # but this process has not yet noted escapes stop_children, and once the pool below
                # is dropped it finds its queues' semaphores gone and prints a traceback after our
                # line. An interrupt meanwhile is held until every worker is started (and known).
                with interrupts.deferred():
                    futures = {pool.submit(_ingest_task, tasks[i]): i for i in indices}
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


def worker_batches(tasks: list[IngestTask], files_per_batch: int) -> Iterator[range]:
    """Consecutive runs of task indices, each of at most ``files_per_batch`` files (a task with
    more is a batch of its own)."""
    first, files = 0, 0
    for index, task in enumerate(tasks):
        if index > first and files + len(task.files) > files_per_batch:
            yield range(first, index)
            first, files = index, 0
        files += len(task.files)
    if first < len(tasks):
        yield range(first, len(tasks))


def remove_unreferenced_staging(warehouse: Warehouse, manifest: Manifest) -> None:
    """Staging parts no source's files use any more."""
    keep = manifest.staging_parts()
    if not warehouse.staging.exists():
        return
    for path in warehouse.staging.iterdir():
        if path.name not in keep:
            path.unlink(missing_ok=True)
