"""Benchmark harness for issue 9: the warehouse build against plain readers of the same files.

    python -m bench.run --lines 154000 [--repeat 3] [--out bench/results]
                        [--only cold,warm,changed,duckdb,polars,orjson,traceset]
                        [--scaling-base-lines 154000] [--scaling-large-lines 1000000]
                        [--leaderboard-query]

Generates (or reuses) a demo dataset of about ``--lines`` trace lines with
``tracehouse.demo.generate_dataset`` under ``<data-root>/<lines>``, then measures each leg as a
whole separate process, side by side in the same run, ``--repeat`` times (median reported):

  cold      ``tracehouse build --source DIR --warehouse W`` after removing W (cache included)
  warm      the same command again, nothing changed
  changed   the same command after appending one valid PASSED line to the largest trace file
            (the file's bytes and mtime are restored afterwards)
  duckdb    DuckDB ``CREATE TABLE t AS SELECT * FROM read_json('DIR/traces/**/*.jsonl', ...)``
  polars    Polars ``read_ndjson`` of every trace file as columns (schema inferred over all
            rows), concatenated into one frame. The glob ``scan_ndjson('DIR/traces/**/*.jsonl')``
            takes its schema from the first file and fails on these files (fields that are
            null in one file are objects in another), so each file is read on its own.
  orjson    ``orjson.loads`` of every line of every trace file
  traceset  FlashInfer-Bench ``TraceSet.from_path(DIR)`` (skipped when not importable)

How a leg is measured is in ``bench.measure``: wall time by the parent's clock; CPU time (user +
sys) of every process of the leg, orphaned descendants included (the build's forkserver and its
workers), which the parent reaps as a child subreaper; peak RSS both as ``ru_maxrss`` (the
largest single process) and as the sampled sum over the process tree, the figure checked
against the 600 MiB target.

The page cache is warmed by reading every dataset file once before the first leg, so the legs
compare parsing work rather than disk speed. Results go to ``<out>/bench_<lines>.json`` and
``.md``; issue 9's acceptance checks (``bench.checks``) are printed and recorded, each with its
rule and value. Earlier results of other sizes in ``<out>`` (``make bench-large``, ``make
bench-1m``) feed the scaling checks and a combined scaling table.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.checks import (
    BUILD_LEGS,
    LARGE_LINES,
    SizeResult,
    earlier_results,
    leg_checks,
    scaling_checks,
    scaling_rows,
)
from bench.measure import MIB, Sample, measure

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LINES = 154_000
DEFAULT_SEED = 7
LEGS: tuple[str, ...] = (
    "cold",
    "warm",
    "changed",
    "odd",
    "duckdb",
    "floor",
    "polars",
    "orjson",
    "traceset",
)
READER_LEGS: tuple[str, ...] = ("duckdb", "polars", "orjson", "traceset")
# Builds are timed with a dataset revision: digests embed it, and without one some are never
# computed (KernelIndex's manifests), so a build without it would be cheaper than a real one.
BENCH_REVISION = "b" * 40
# The floor probe of issue 26 (../shared/floor/lean_loop.py beside the checkout): the bare
# per-line work of a cold build in a lean loop over 2 worker processes. Run as it is, never
# copied into the project; the leg is skipped when the folder is absent.
FLOOR_PROBE = REPO_ROOT.parent / "shared" / "floor" / "lean_loop.py"
FLOOR_SKIPPED = f"skipped: {FLOOR_PROBE} not found"
RATIO_REFERENCES: tuple[str, ...] = (
    "duckdb",
    "floor",
    "polars",
    "cold",
)  # each leg's wall / theirs
DUCKDB_MAX_OBJECT_SIZE = 64 * 1024 * 1024  # logs reach 5 MiB per line; the default is 16 MB
GIB = 1024 * MIB
TRACESET_SKIPPED = "skipped: flashinfer-bench not installed"

LEG_DESCRIPTIONS: dict[str, str] = {
    "cold": "tracehouse build, empty warehouse (cache removed)",
    "warm": "tracehouse build, nothing changed",
    "changed": "tracehouse build after one trace file changed (one PASSED line appended)",
    "odd": "tracehouse cold build of the corpus with one line in ten in an odd shape",
    "duckdb": "DuckDB read_json of traces/**/*.jsonl into a table",
    "floor": "../shared/floor/lean_loop.py, 2 workers: a cold build's bare per-line work",
    "polars": "Polars read_ndjson of each trace file (schema over all rows), concatenated",
    "orjson": "orjson.loads of every trace line",
    "traceset": "flashinfer_bench TraceSet.from_path",
    "leaderboard": "tracehouse leaderboard DEFINITION (process)",
}


# --------------------------------------------------------------------------------------------
# Legs that run inside the child process (python -m bench.run --leg NAME --source DIR)
# --------------------------------------------------------------------------------------------


def _trace_files(source: Path) -> list[Path]:
    return sorted(p for p in (source / "traces").rglob("*.jsonl") if p.is_file())


def leg_duckdb(source: Path) -> dict[str, Any]:
    """Load every trace file into one DuckDB table with schema auto-detection."""
    import duckdb

    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE t AS SELECT * FROM read_json($path, format = 'newline_delimited', "
        "maximum_object_size = $max_object_size)",
        {
            "path": str(source / "traces" / "**" / "*.jsonl"),
            "max_object_size": DUCKDB_MAX_OBJECT_SIZE,
        },
    )
    row = connection.execute("SELECT count(*) FROM t").fetchone()
    return {"rows": int(row[0]) if row else 0}


def leg_polars(source: Path) -> dict[str, Any]:
    """Read every trace file as columns with Polars, into one frame."""
    import polars as pl

    frames = [pl.read_ndjson(path, infer_schema_length=None) for path in _trace_files(source)]
    # Files of different eras infer different struct fields: take the union of their columns.
    table = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    return {"rows": table.height}


def leg_orjson(source: Path) -> dict[str, Any]:
    """Parse every non-blank line of every trace file with orjson."""
    import orjson

    rows = 0
    for path in _trace_files(source):
        with path.open("rb") as handle:
            for line in handle:
                if line.strip():
                    orjson.loads(line)
                    rows += 1
    return {"rows": rows}


def leg_traceset(source: Path) -> dict[str, Any]:
    """FlashInfer-Bench's own loader (pydantic validation of every file)."""
    from flashinfer_bench.data import TraceSet  # type: ignore[import-not-found]

    trace_set = TraceSet.from_path(str(source))
    return {"rows": sum(len(v) for v in trace_set.traces.values())}


CHILD_LEGS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "duckdb": leg_duckdb,
    "polars": leg_polars,
    "orjson": leg_orjson,
    "traceset": leg_traceset,
}


# --------------------------------------------------------------------------------------------
# Legs as they run in the parent
# --------------------------------------------------------------------------------------------


@dataclass
class Leg:
    name: str
    description: str
    command: list[str] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return bool(self.samples) and all(s.returncode == 0 for s in self.samples)

    def median(self, attribute: str) -> float | None:
        values = [getattr(s, attribute) for s in self.samples if s.returncode == 0]
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    def child_result(self) -> dict[str, Any] | None:
        """What a bench.run child leg printed (e.g. rows loaded), from its last run."""
        if not self.samples or self.samples[-1].returncode != 0:
            return None
        lines = self.samples[-1].stdout_tail.strip().splitlines()
        try:
            result = json.loads(lines[-1]) if lines else None
        except ValueError:
            return None
        return result if isinstance(result, dict) else None

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "command": self.command,
            "skipped": self.skipped,
            "ok": self.ok,
            "runs": len(self.samples),
            "failed_runs": sum(1 for s in self.samples if s.returncode != 0),
            "median": {
                "wall_s": self.median("wall_s"),
                "cpu_s": self.median("cpu_s"),
                "own_cpu_s": self.median("own_cpu_s"),
                "descendants_cpu_s": self.median("descendants_cpu_s"),
                "peak_rss_mib": self.median("peak_rss_mib"),
                "peak_tree_rss_mib": self.median("peak_tree_rss_mib"),
            },
            "max_peak_rss_mib": max((s.peak_rss_mib for s in self.samples), default=None),
            "child_result": self.child_result(),
            "samples": [asdict(s) for s in self.samples],
        }


# --------------------------------------------------------------------------------------------
# Dataset, commands, machine
# --------------------------------------------------------------------------------------------


def _generator_fingerprint(lines: int, seed: int) -> dict[str, Any]:
    generator = hashlib.sha256()
    for module in sorted((REPO_ROOT / "tracehouse" / "demo").glob("*.py")):
        generator.update(module.name.encode() + b"\0" + module.read_bytes())
    return {
        "target_trace_lines": lines,
        "seed": seed,
        "generator_sha256": generator.hexdigest(),
    }


def ensure_dataset(data_root: Path, lines: int, seed: int) -> tuple[Path, dict[str, Any], bool]:
    """The dataset for `lines`, generated unless one with the same parameters is already there."""
    from tracehouse.demo import generate_dataset

    root = data_root / str(lines)
    stamp = data_root / f"{lines}.dataset.json"
    fingerprint = _generator_fingerprint(lines, seed)
    if stamp.is_file() and (root / "traces").is_dir():
        with contextlib.suppress(ValueError, OSError):
            recorded = json.loads(stamp.read_text())
            if recorded.get("fingerprint") == fingerprint:
                return root, recorded["dataset"], True
    data_root.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        stamp.unlink()
    result = generate_dataset(root, seed=seed, target_trace_lines=lines, overwrite=True)
    dataset = result.to_dict()
    stamp.write_text(json.dumps({"fingerprint": fingerprint, "dataset": dataset}, indent=2) + "\n")
    return root, dataset, False


def warm_page_cache(root: Path) -> int:
    """Read every file once so that no leg pays for cold disk reads; returns bytes read."""
    total = 0
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with path.open("rb") as handle:
                while chunk := handle.read(8 * MIB):
                    total += len(chunk)
    return total


def tracehouse_command() -> list[str]:
    """The `tracehouse` console script of this interpreter's environment, else the module."""
    for search in (str(Path(sys.executable).parent), None):
        found = shutil.which("tracehouse", path=search)
        if found:
            return [found]
    return [sys.executable, "-c", "import sys; from tracehouse.cli import main; sys.exit(main())"]


def build_arguments(source: Path, warehouse: Path) -> list[str]:
    """The arguments of the timed `tracehouse build` (with a revision: every digest computed)."""
    return [
        "build",
        "--source",
        str(source),
        "--warehouse",
        str(warehouse),
        "--revision",
        BENCH_REVISION,
    ]


def child_command(leg: str, source: Path) -> list[str]:
    return [sys.executable, "-m", "bench.run", "--leg", leg, "--source", str(source)]


def flashinfer_bench_available() -> bool:
    try:
        return importlib.util.find_spec("flashinfer_bench") is not None
    except (ImportError, ValueError):
        return False


def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_info() -> dict[str, Any]:
    cpu_model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    ram_bytes: int | None = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_bytes = int(line.split()[1]) * 1024
                break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    commit = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    return {
        "load_average_after": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "cpu_model": cpu_model,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "ram_gib": round(ram_bytes / GIB, 1) if ram_bytes else None,
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": {
            name: _package_version(name)
            for name in ("tracehouse", "duckdb", "orjson", "polars", "pyarrow", "flashinfer-bench")
        },
        "git_commit": commit,
    }


# --------------------------------------------------------------------------------------------
# The one-file change
# --------------------------------------------------------------------------------------------


@dataclass
class FileChange:
    """Appends one valid PASSED line (a later re-run) to a trace file, and undoes it."""

    path: Path
    line: bytes
    original_size: int
    original_mtime_ns: tuple[int, int]

    @classmethod
    def prepare(cls, source: Path) -> FileChange:
        import orjson

        candidates = sorted(_trace_files(source), key=lambda p: (-p.stat().st_size, str(p)))
        for path in candidates:
            with path.open("rb") as handle:
                for raw in handle:
                    if b'"status":"PASSED"' not in raw:
                        continue
                    record = orjson.loads(raw)
                    record["evaluation"]["timestamp"] = "2026-12-31T23:59:59.999999"
                    stat = path.stat()
                    return cls(
                        path=path,
                        line=orjson.dumps(record) + b"\n",
                        original_size=stat.st_size,
                        original_mtime_ns=(stat.st_atime_ns, stat.st_mtime_ns),
                    )
        raise LookupError(f"no PASSED trace line under {source / 'traces'}")

    def apply(self) -> None:
        with self.path.open("rb+") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell():
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
            handle.write(self.line)

    def restore(self) -> None:
        os.truncate(self.path, self.original_size)
        os.utime(self.path, ns=self.original_mtime_ns)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def _parse_only(text: str | None) -> list[str]:
    if not text:
        return list(LEGS)
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = sorted(set(chosen) - set(LEGS))
    if unknown or not chosen:
        raise ValueError(
            f"unknown leg(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(LEGS)}"
        )
    return [leg for leg in LEGS if leg in chosen]


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from bench.storage import render_size, warehouse_size

    started = datetime.now().isoformat(timespec="seconds")
    load_before = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    only: list[str] = args.only
    data_root = Path(args.data_root)
    print(
        f"dataset: about {args.lines:,} trace lines (seed {args.seed}) under {data_root}",
        flush=True,
    )
    t0 = time.perf_counter()
    source, dataset, reused = ensure_dataset(data_root, args.lines, args.seed)
    generate_s = time.perf_counter() - t0
    print(
        f"  {'reused' if reused else 'generated'} {source}: {dataset['trace_lines']:,} trace lines, "
        f"{dataset['total_bytes'] / 1e6:,.0f} MB in {dataset['total_files']:,} files"
        + ("" if reused else f" ({generate_s:.1f} s)"),
        flush=True,
    )
    warehouse = Path(args.warehouse) if args.warehouse else data_root / f"warehouse-{args.lines}"
    warmed = warm_page_cache(source)
    print(f"  page cache warmed: {warmed / 1e6:,.0f} MB read", flush=True)

    legs: dict[str, Leg] = {name: Leg(name, LEG_DESCRIPTIONS[name]) for name in only}
    build = [*tracehouse_command(), *build_arguments(source, warehouse)]
    for name in BUILD_LEGS:
        if name in legs:
            legs[name].command = build
    for name in READER_LEGS:
        if name in legs:
            legs[name].command = child_command(name, source)
    odd_warehouse = data_root / f"warehouse-{args.lines}-odd"
    if "odd" in legs:
        from bench.odd_corpus import ensure_odd_corpus

        odd_source, odd_lines = ensure_odd_corpus(source, dataset)
        print(f"  odd corpus {odd_source}: {odd_lines:,} lines in odd shapes", flush=True)
        legs["odd"].command = [
            *build[: build.index("--source") + 1],
            str(odd_source),
            "--warehouse",
            str(odd_warehouse),
            *build[build.index("--revision") :],
        ]
    if "floor" in legs:
        if FLOOR_PROBE.is_file():
            floor_out = data_root / f"floor-{args.lines}"
            legs["floor"].command = [
                sys.executable,
                str(FLOOR_PROBE),
                str(source),
                str(floor_out),
                "2",
            ]
        else:
            legs["floor"].skipped = FLOOR_SKIPPED
            print(f"  floor: {FLOOR_SKIPPED}", flush=True)
    if "traceset" in legs and not flashinfer_bench_available():
        legs["traceset"].skipped = TRACESET_SKIPPED
        print(f"  traceset: {TRACESET_SKIPPED}", flush=True)

    change = FileChange.prepare(source) if "changed" in legs else None
    sample_tree = not args.no_tree_rss
    size: dict[str, Any] | None = None
    for repeat in range(args.repeat):
        print(f"repeat {repeat + 1}/{args.repeat}", flush=True)
        for name, leg in legs.items():
            if leg.skipped:
                continue
            if name == "cold":
                shutil.rmtree(warehouse, ignore_errors=True)
            if name == "odd":
                shutil.rmtree(odd_warehouse, ignore_errors=True)
            if name == "changed" and "cold" not in legs and not warehouse.exists():
                measure(
                    build, sample_tree=False
                )  # the change must be measured on a built warehouse
            if name == "changed" and change is not None:
                change.apply()
                try:
                    sample = measure(leg.command, sample_tree=sample_tree)
                finally:
                    change.restore()
            else:
                sample = measure(leg.command, sample_tree=sample_tree)
            leg.samples.append(sample)
            if name == "cold" and size is None and sample.returncode == 0:
                # issue 29: what the warehouse keeps, measured before other legs add to it
                size = warehouse_size(warehouse, dataset["trace_lines"])
                print(f"  {render_size(size)}", flush=True)
            flag = "" if sample.returncode == 0 else f"  FAILED (exit {sample.returncode})"
            print(f"  {name:<9} {_sample_line(sample)}{flag}", flush=True)
            if sample.returncode != 0:
                print(
                    "    " + sample.stderr_tail.strip().replace("\n", "\n    ")[-1500:], flush=True
                )

    leaderboard = (
        run_leaderboard(args, source, warehouse, build, sample_tree)
        if args.leaderboard_query
        else None
    )
    storage = None
    if "cold" in only and not args.no_storage:  # issue 12: a changed revision's cost on disk
        from bench.storage import measure_storage, render

        storage = measure_storage(source, data_root / "storage")
        print("\n".join(render(storage)), flush=True)
    summaries = {name: leg.summary() for name, leg in legs.items()}
    references = {
        f"ratio_to_{name}": legs[name].median("wall_s") if name in legs and legs[name].ok else None
        for name in RATIO_REFERENCES
    }
    for summary in summaries.values():
        for key, reference in references.items():
            summary[key] = _ratio(summary["median"]["wall_s"], reference)
    report: dict[str, Any] = {
        "benchmark": "tracehouse issue 9",
        "started": started,
        "parameters": {
            "lines": args.lines,
            "seed": args.seed,
            "repeat": args.repeat,
            "only": only,
            "source": str(source),
            "warehouse": str(warehouse),
            "duckdb_read_json": {
                "format": "newline_delimited",
                "maximum_object_size": DUCKDB_MAX_OBJECT_SIZE,
            },
            "changed_file": str(change.path) if change else None,
            "page_cache_warmed_bytes": warmed,
            "scaling_base_lines": args.scaling_base_lines,
            "scaling_large_lines": args.scaling_large_lines,
        },
        "machine": {**machine_info(), "load_average_before": load_before},
        "dataset": {**dataset, "reused": reused, "generate_s": None if reused else generate_s},
        "legs": summaries,
        "leaderboard": leaderboard,
        "storage": storage,
        "warehouse_size": size,
    }
    out = Path(args.out)
    earlier, unreadable = earlier_results(out, args.lines)
    sizes = {result.lines: result for result in earlier}
    sizes[args.lines] = SizeResult.from_report(report, "this run")
    report["scaling"] = {
        "rows": scaling_rows(sizes, args.scaling_base_lines),
        "notes": unreadable,
    }
    report["checks"] = leg_checks(summaries) + scaling_checks(
        sizes, args.scaling_base_lines, args.scaling_large_lines, out
    )
    return report


def _ratio(value: float | None, reference: float | None) -> float | None:
    return None if value is None or not reference else value / reference


def _sample_line(sample: Sample) -> str:
    """One run of a leg as printed while the benchmark runs."""
    line = f"{sample.wall_s:8.2f} s wall {sample.cpu_s:8.2f} s cpu"
    if sample.reaped_descendants:
        line += (
            f" ({sample.descendants_cpu_s:.2f} s of it in {sample.reaped_descendants} "
            "reaped descendant(s))"
        )
    line += f" {sample.peak_rss_mib:6.0f} MiB largest process"
    if sample.peak_tree_rss_mib is not None:
        line += f" {sample.peak_tree_rss_mib:6.0f} MiB tree"
    if sample.killed_stragglers:
        line += f"  ({sample.killed_stragglers} straggler(s) killed)"
    return line


def run_leaderboard(
    args: argparse.Namespace, source: Path, warehouse: Path, build: list[str], sample_tree: bool
) -> dict[str, Any]:
    """Time `tracehouse leaderboard` as a process and the same query in-process via DuckDB."""
    # Build (or bring up to date with the restored trace file) before querying; not timed.
    prepared = measure(build, sample_tree=False)
    if prepared.returncode != 0:
        print(f"leaderboard: skipped, the build failed (exit {prepared.returncode})", flush=True)
        return {"skipped": f"build failed: {prepared.stderr_tail.strip()[-500:]}"}
    definition = args.definition or _busiest_definition(warehouse) or _first_definition(source)
    command = [*tracehouse_command(), "leaderboard", definition, "--warehouse", str(warehouse)]
    leg = Leg("leaderboard", LEG_DESCRIPTIONS["leaderboard"], command)
    for _ in range(args.repeat):
        leg.samples.append(measure(command, sample_tree=sample_tree))
    result: dict[str, Any] = {"definition": definition, "process": leg.summary()}
    result["in_process"] = _leaderboard_in_process(warehouse, definition, max(3, args.repeat))
    print(
        f"leaderboard {definition}: process {_fmt(leg.median('wall_s'), '.3f')} s; "
        f"in-process {_fmt(result['in_process'].get('query_median_s'), '.4f')} s per query",
        flush=True,
    )
    return result


def _busiest_definition(warehouse: Path) -> str | None:
    try:
        from tracehouse.serve.queries import busiest_definition
        from tracehouse.settings import load_settings

        return busiest_definition(load_settings(warehouse=warehouse))
    except Exception:
        return None


def _first_definition(source: Path) -> str:
    return sorted((source / "definitions").rglob("*.json"))[0].stem


def _leaderboard_in_process(warehouse: Path, definition: str, repeat: int) -> dict[str, Any]:
    try:
        from tracehouse.serve.queries import LEADERBOARD_SQL
        from tracehouse.warehouse import Warehouse, connect_read_only
    except ImportError as error:
        return {"skipped": f"tracehouse.serve.queries not importable: {error}"}
    parameters = {"definition": definition, "hardware": None}
    timings: list[float] = []
    rows = 0
    try:
        started = time.perf_counter()
        connection = connect_read_only(Warehouse(warehouse))
        connect_s = time.perf_counter() - started
        try:
            for _ in range(repeat):
                started = time.perf_counter()
                rows = len(connection.execute(LEADERBOARD_SQL, parameters).fetchall())
                timings.append(time.perf_counter() - started)
        finally:
            connection.close()
    except Exception as error:  # the warehouse API is still moving; report, don't crash
        return {"skipped": f"in-process query failed: {type(error).__name__}: {error}"}
    return {
        "connect_s": connect_s,
        "first_query_s": timings[0],
        "query_median_s": statistics.median(timings),
        "query_samples_s": timings,
        "rows": rows,
    }


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


HEADER = [
    "leg",
    "wall s",
    "CPU s",
    "peak RSS MiB",
    "tree RSS MiB",
    "x DuckDB",
    "x floor",
    "x Polars",
    "x cold",
]


def table_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, leg in report["legs"].items():
        median = leg["median"]
        if leg["skipped"]:
            rows.append([name, "skipped", *([""] * (len(HEADER) - 2))])
            continue
        state = "" if leg["ok"] else f" (FAILED {leg['failed_runs']}/{leg['runs']})"
        rows.append(
            [
                name,
                _fmt(median["wall_s"], ".2f"),
                _fmt(median["cpu_s"], ".2f"),
                _fmt(median["peak_rss_mib"], ".0f"),
                _fmt(median["peak_tree_rss_mib"], ".0f"),
                _fmt(leg.get("ratio_to_duckdb"), ".2f"),
                _fmt(leg.get("ratio_to_floor"), ".2f"),
                _fmt(leg.get("ratio_to_polars"), ".2f"),
                _fmt(leg.get("ratio_to_cold"), ".3f") + state,
            ]
        )
    return rows


SCALING_HEADER = [
    "--lines",
    "trace lines",
    "traces MB",
    "cold wall s",
    "cold CPU s",
    "build tree RSS MiB",
    "x 1x peak",
    "largest process MiB",
    "run",
    "commit",
]


def scaling_table_rows(report: dict[str, Any]) -> list[list[str]]:
    return [
        [
            f"{row['lines']:,}",
            "—" if row["trace_lines"] is None else f"{row['trace_lines']:,}",
            _fmt(row["traces_mb"], ",.0f"),
            _fmt(row["cold_wall_s"], ".2f"),
            _fmt(row["cold_cpu_s"], ".2f"),
            _fmt(row["build_peak_tree_rss_mib"], ".0f"),
            _fmt(row["peak_vs_1x"], ".2f"),
            _fmt(row["build_peak_rss_mib"], ".0f"),
            row["origin"] if row["origin"] == "this run" else f"{row['origin']} {row['started']}",
            row["commit"] or "—",
        ]
        for row in report["scaling"]["rows"]
    ]


def _check_value(check: dict[str, Any]) -> str:
    value, unit = check["value"], check.get("unit", "x")
    if value is None:
        return "—"
    if unit == "MiB":
        return f"{value:.0f} MiB"
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:.3f}"


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.rjust(w) if i else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


MEASURES_NOTE = (
    "CPU = user + sys of every process of the leg: the leg process and the children it waited "
    "for (`os.wait4`), plus every descendant orphaned during the leg (the build's forkserver "
    "and its workers), which the harness reaps as a child subreaper. peak RSS = `ru_maxrss`, "
    "the largest single process; tree RSS = the sampled peak of the summed RSS of the leg's "
    "whole process tree (shared pages counted per process), the figure checked against the "
    "600 MiB target."
)


def render_text(report: dict[str, Any]) -> str:
    out = [
        f"\nmedian of {report['parameters']['repeat']} run(s), "
        f"{report['dataset']['trace_lines']:,} trace lines, "
        f"{report['dataset']['bytes']['traces'] / 1e6:,.0f} MB of traces",
        *_aligned([HEADER, *table_rows(report)]),
    ]
    out += [f"{name}: {leg['skipped']}" for name, leg in report["legs"].items() if leg["skipped"]]
    out += [
        "CPU counts every process of a leg (orphaned descendants reaped by the harness); "
        "the RSS target is checked on the process-tree figure",
    ]
    if len(report["scaling"]["rows"]) > 1:
        out += ["", "scaling (latest result of each size):"]
        out += _aligned([SCALING_HEADER, *scaling_table_rows(report)])
    out += [f"note: {note}" for note in report["scaling"]["notes"]]
    out += ["", "acceptance checks (issue 9):"]
    for check in report["checks"]:
        note = f"  [{check['note']}]" if check["note"] else ""
        out.append(
            f"  {check['status']:<4}  {check['check']:<44} {check['rule']:<58} "
            f"{_check_value(check)}{note}"
        )
    if report.get("warehouse_size"):
        from bench.storage import render_size

        out += ["", render_size(report["warehouse_size"])]
    if report.get("storage"):
        from bench.storage import render

        out += ["", *render(report["storage"])]
    m = report["machine"]
    out += [
        "",
        f"machine: {m['cpu_model']}, {m['usable_cpus']} usable / {m['logical_cpus']} logical CPUs, "
        f"{m['ram_gib']} GiB RAM, {m['os']}",
        "python " + m["python"] + ", " + ", ".join(f"{k} {v}" for k, v in m["packages"].items()),
        _load_line(m),
    ]
    return "\n".join(out)


def _load_line(machine: dict[str, Any]) -> str:
    before, after = machine.get("load_average_before"), machine.get("load_average_after")
    if not before or not after:
        return ""
    line = f"load average (1 min) before {before[0]:.2f}, after {after[0]:.2f}"
    if before[0] > 0.5 * (machine.get("usable_cpus") or 1):
        line += " -- other work was running: wall times are noisy, compare CPU times"
    return line


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def render_markdown(report: dict[str, Any]) -> str:
    d = report["dataset"]
    m = report["machine"]
    lines = [
        f"# Benchmark: {d['trace_lines']:,} trace lines",
        "",
        f"Run {report['started']} on commit `{m['git_commit']}`; median of "
        f"{report['parameters']['repeat']} run(s) per leg, each leg a separate process.",
        "",
        "## Dataset",
        "",
        f"- source `{report['parameters']['source']}` ({'reused' if d['reused'] else 'generated'}), seed {d['seed']}",
        f"- {d['definitions']} definitions, {d['workloads']:,} workloads, {d['solutions']:,} solutions, "
        f"{d['trace_lines']:,} trace lines in {d['files']['traces']} trace files",
        f"- {d['total_bytes'] / 1e6:,.1f} MB in {d['total_files']:,} files "
        f"(traces {d['bytes']['traces'] / 1e6:,.1f} MB, "
        f"{d['bytes']['traces'] / max(1, d['trace_lines']):,.0f} bytes per line)",
        "- statuses: " + ", ".join(f"{k} {v:,}" for k, v in d["status_counts"].items()),
        "",
        "## Results",
        "",
        *_markdown_table(HEADER, table_rows(report)),
    ]
    lines += [
        f"\n{name}: {leg['skipped']}" for name, leg in report["legs"].items() if leg["skipped"]
    ]
    lines += ["", MEASURES_NOTE]
    if len(report["scaling"]["rows"]) > 1:
        lines += [
            "",
            "## Scaling",
            "",
            f"The latest result of each size in the results folder; 1x = "
            f"{report['parameters']['scaling_base_lines']:,} lines. Peaks are the build's "
            "process-tree RSS (max over its runs).",
            "",
            *_markdown_table(SCALING_HEADER, scaling_table_rows(report)),
        ]
    lines += [f"\nNote: {note}" for note in report["scaling"]["notes"]]
    lines += [
        "",
        "## Acceptance checks (issue 9)",
        "",
        *_markdown_table(
            ["status", "check", "rule", "value", "note"],
            [
                [c["status"], c["check"], c["rule"], _check_value(c), c["note"]]
                for c in report["checks"]
            ],
        ),
    ]
    if report.get("leaderboard") and "skipped" in report["leaderboard"]:
        lines += ["", f"Leaderboard query: {report['leaderboard']['skipped']}"]
    elif report.get("leaderboard"):
        lb = report["leaderboard"]
        proc = lb["process"]["median"]["wall_s"]
        inproc = lb["in_process"]
        lines += [
            "",
            f"## Leaderboard query (`{lb['definition']}`)",
            "",
            f"- `tracehouse leaderboard` as a process: {_fmt(proc, '.3f')} s wall (median)",
            f"- in-process DuckDB: connect {_fmt(inproc.get('connect_s'), '.4f')} s, first query "
            f"{_fmt(inproc.get('first_query_s'), '.4f')} s, median {_fmt(inproc.get('query_median_s'), '.4f')} s"
            if "skipped" not in inproc
            else f"- in-process: {inproc['skipped']}",
        ]
    if report.get("storage"):
        from bench.storage import render

        lines += [
            "",
            "## Storage",
            "",
            *(f"- {line.strip()}" for line in render(report["storage"])),
        ]
    if report.get("warehouse_size"):
        from bench.storage import render_size

        lines += ["", "## Warehouse size", "", f"- {render_size(report['warehouse_size'])}"]
    lines += [
        "",
        "## Machine",
        "",
        f"- CPU: {m['cpu_model']} ({m['usable_cpus']} usable / {m['logical_cpus']} logical)",
        f"- RAM: {m['ram_gib']} GiB; OS: {m['os']}",
        f"- Python {m['python']}; " + ", ".join(f"{k} {v}" for k, v in m["packages"].items()),
        f"- {_load_line(m)}",
        "",
    ]
    return "\n".join(lines)


def write_report(report: dict[str, Any], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    stem = f"bench_{report['parameters']['lines']}"
    json_path, md_path = out / f"{stem}.json", out / f"{stem}.md"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    md_path.write_text(render_markdown(report))
    return json_path, md_path


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line and exit 2, not usage + message
        self.exit(2, f"{self.prog}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m bench.run", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--lines", type=int, default=DEFAULT_LINES, help="about this many trace lines"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per leg (median reported)")
    parser.add_argument(
        "--out", default=str(REPO_ROOT / "bench" / "results"), help="results folder"
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--data-root",
        default=str(REPO_ROOT / "data" / "bench"),
        help="where datasets are generated",
    )
    parser.add_argument("--warehouse", default=None, help="default: <data-root>/warehouse-<lines>")
    parser.add_argument("--only", default=None, help=f"comma-separated legs among {','.join(LEGS)}")
    parser.add_argument(
        "--leaderboard-query", action="store_true", help="also time `tracehouse leaderboard`"
    )
    parser.add_argument("--definition", default=None, help="definition for --leaderboard-query")
    parser.add_argument(
        "--scaling-base-lines",
        type=int,
        default=DEFAULT_LINES,
        help="the 1x size of the scaling checks (4x is 4 times it)",
    )
    parser.add_argument(
        "--scaling-large-lines",
        type=int,
        default=LARGE_LINES,
        help="the large size of the scaling checks",
    )
    parser.add_argument("--no-tree-rss", action="store_true", help="do not sample process-tree RSS")
    parser.add_argument(
        "--no-storage",
        action="store_true",
        help="skip the storage measurement (bench/storage.py: growth per changed revision)",
    )
    parser.add_argument("--leg", choices=sorted(CHILD_LEGS), help=argparse.SUPPRESS)
    parser.add_argument("--source", default=None, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.leg:  # inside a measured child process
        result = CHILD_LEGS[args.leg](Path(args.source))
        print(json.dumps(result))
        return 0
    for option in ("repeat", "lines", "scaling_base_lines", "scaling_large_lines"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be positive")
    try:
        args.only = _parse_only(args.only)
    except ValueError as error:
        parser.error(f"--only: {error}")
    report = run_benchmark(args)
    print(render_text(report))
    json_path, md_path = write_report(report, Path(args.out))
    print(f"\nwrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
