"""Scaling of the fanned-out ingest (pipelines/defs/fanout.py) by number of worker processes.

    python -m bench.fanout --lines 154000 [--workers 1,2,4] [--executors cli,multiprocess,dask]
                           [--out bench/results]

On the bench corpus (``bench.run.ensure_dataset``, generated once under ``data/bench/<lines>``),
each configuration builds an empty warehouse from scratch:

  cli           ``tracehouse build --workers N`` (its own process pool), as a reference
  multiprocess  ``fanout_ingest_job`` under Dagster's multiprocess executor, ``max_concurrent``
                N, step processes forked from a server that preloaded the parser
  dask          ``fanout_ingest_dask_job`` on a ``dask.distributed.LocalCluster`` of N worker
                processes (one thread each) on 127.0.0.1, started before the clock starts

and reports the wall time of the whole build and, for the Dagster runs, the span of the parse
steps (first slot started to last slot finished, from the run's events), each with its speedup
over one worker of the same kind. Results go to ``<out>/fanout_<lines>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.run import DEFAULT_LINES, DEFAULT_SEED, REPO_ROOT, ensure_dataset, warm_page_cache

EXECUTORS = ("cli", "multiprocess", "dask")
REVISION = "b" * 40  # digests embed a revision; any fixed one will do


@dataclass
class Measured:
    executor: str
    workers: int
    wall_s: float
    parse_span_s: float | None  # first parse step start to last parse step end (Dagster)
    # Distinct processes the parse steps ran in (Dagster): the multiprocess executor starts one
    # per step (at most N at a time), a Dask cluster reuses its N workers.
    parse_processes: int | None


def run_cli_build(source: Path, warehouse: Path, workers: int) -> Measured:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tracehouse.cli", "build", "--source", str(source)]
        + ["--warehouse", str(warehouse), "--revision", REVISION, "--workers", str(workers)],
        check=True,
        capture_output=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")},
    )
    return Measured("cli", workers, time.perf_counter() - started, None, None)


def run_dagster_build(source: Path, warehouse: Path, executor: str, workers: int) -> Measured:
    import dagster as dg

    from pipelines.defs import fanout

    settings = {"source": str(source), "warehouse": str(warehouse), "revision": REVISION}
    resources = {"warehouse": {"config": settings}}
    with (
        tempfile.TemporaryDirectory(prefix="fanout-bench-") as home,
        dg.DagsterInstance.local_temp(home) as instance,
    ):
        if executor == "multiprocess":
            execution = {"max_concurrent": workers, "start_method": fanout.FORKSERVER}
            started = time.perf_counter()
            result = dg.execute_job(
                dg.reconstructable(fanout.multiprocess_job),
                instance=instance,
                run_config={"resources": resources, "execution": {"config": execution}},
            )
            wall = time.perf_counter() - started
        else:
            from distributed import LocalCluster

            options: dict[str, Any] = {"dashboard_address": None}
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                **options,
            )
            try:
                execution = {"cluster": {"existing": {"address": cluster.scheduler_address}}}
                started = time.perf_counter()
                result = dg.execute_job(
                    dg.reconstructable(fanout.dask_job),
                    instance=instance,
                    run_config={"resources": resources, "execution": {"config": execution}},
                )
                wall = time.perf_counter() - started
            finally:
                cluster.close()
        if not result.success:
            raise RuntimeError(f"{executor} run with {workers} workers failed")
        span, processes = _parse_span(instance.all_logs(result.run_id))
    return Measured(executor, workers, wall, span, processes)


def _parse_span(entries: Any) -> tuple[float | None, int]:
    """From a run's event log entries: the span of its parse steps, and their processes."""
    starts, ends, pids = [], [], set()
    for entry in entries:
        event = entry.dagster_event
        if event is None or not (entry.step_key or "").startswith("parse_slot_"):
            continue
        if event.event_type_value == "STEP_START":  # logged by the process that runs the step
            starts.append(entry.timestamp)
            if event.pid is not None:
                pids.add(event.pid)
        elif event.event_type_value == "STEP_SUCCESS":
            ends.append(entry.timestamp)
    return (max(ends) - min(starts) if starts and ends else None), len(pids)


def measure(source: Path, scratch: Path, executor: str, workers: int) -> Measured:
    warehouse = scratch / f"warehouse-{executor}-{workers}"
    shutil.rmtree(warehouse, ignore_errors=True)
    try:
        if executor == "cli":
            return run_cli_build(source, warehouse, workers)
        return run_dagster_build(source, warehouse, executor, workers)
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


def table(results: list[Measured]) -> list[str]:
    one = {(r.executor): r for r in results if r.workers == 1}
    rows = [
        "| executor | worker processes | wall s | × 1 worker | parse steps s | × 1 worker "
        "| processes that parsed |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        base = one.get(r.executor)
        speedup = f"{base.wall_s / r.wall_s:.2f}" if base else "-"
        span = f"{r.parse_span_s:.2f}" if r.parse_span_s is not None else "-"
        span_speedup = (
            f"{base.parse_span_s / r.parse_span_s:.2f}"
            if base and base.parse_span_s and r.parse_span_s
            else "-"
        )
        processes = str(r.parse_processes) if r.parse_processes is not None else "-"
        rows.append(
            f"| {r.executor} | {r.workers} | {r.wall_s:.2f} | {speedup} | {span} "
            f"| {span_speedup} | {processes} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.fanout", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--lines", type=int, default=DEFAULT_LINES)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--executors", default=",".join(EXECUTORS), help=", ".join(EXECUTORS))
    parser.add_argument("--data-root", default=str(REPO_ROOT / "data" / "bench"))
    parser.add_argument("--out", default=str(REPO_ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    try:
        workers = [int(w) for w in args.workers.split(",")]
    except ValueError:
        parser.error(f"--workers {args.workers}: not a comma-separated list of integers")
    if not workers or min(workers) < 1:
        parser.error(f"--workers {args.workers}: every count must be at least 1")
    executors = args.executors.split(",")
    unknown = sorted(set(executors) - set(EXECUTORS))
    if unknown:
        parser.error(f"--executors: unknown {', '.join(unknown)}; choose from {EXECUTORS}")

    source, dataset, _ = ensure_dataset(Path(args.data_root), args.lines, args.seed)
    warm_page_cache(source)
    scratch = Path(args.data_root) / f"fanout-{args.lines}"
    scratch.mkdir(parents=True, exist_ok=True)
    results = [
        measure(source, scratch, executor, count)
        for executor in executors
        for count in sorted(set(workers))
    ]
    lines = [
        f"Fanned-out ingest, cold builds of {dataset.get('trace_lines', args.lines):,} trace "
        f"lines ({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end):",
        "",
        *table(results),
    ]
    print("\n".join(lines))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"fanout_{args.lines}.md").write_text("\n".join(lines) + "\n")
    (out / f"fanout_{args.lines}.json").write_text(
        json.dumps({"dataset": dataset, "results": [asdict(r) for r in results]}, indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
