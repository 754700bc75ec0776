"""Where a parser worker's time goes: the per-line rules, or the loop around them (issue 26).

    python -m bench.line_probe [--lines 154000] [--every 12] [--rounds 3] [--check]

Four legs over the same trace files of ``bench.run``'s corpus (every ``--every``-th file), in this
one process, each leg in turn, ``--rounds`` times; CPU time, medians:

- ``product``: the parse as a build runs it (``ingest.worker.ingest_group``): records, row dicts,
  Arrow, staging parts.
- ``rules``: the same rule functions, called per line in a bare loop: the line's bytes, its
  digest, orjson, the repeat branch's shape check, the latencies, ``run_identity``, the run
  id, observed time, excerpt, kept log, correctness bounds and FlashInfer-Bench's row; values
  appended to lists. No ``Record`` beyond the one FlashInfer-Bench's row takes, no runs row
  beyond the identity columns' dict, no Arrow.
- ``rules+parquet``: that, and the runs' columns written as a Parquet file per trace file.
- ``floor``: ../shared/floor/lean_loop.py's per-file function, when that folder is beside the
  checkout (it is run from there, not copied).

The ``rules`` leg takes the lines the product's repeat branch takes (every line of the bench
corpus but the first of each combination, whose cache the product leg fills first); the other
lines are counted and left out. ``--check`` holds the ``rules`` leg's values equal to the
``product`` leg's runs rows, so both legs do the same work.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from bench.run import BENCH_REVISION, FLOOR_PROBE, REPO_ROOT, ensure_dataset

# The source name the probe's runs are qualified by (worker.run_id).
SOURCE = "probe"
# The runs columns the rules leg computes, as the product's runs rows name them.
RUN_COLUMNS = (
    "run_id",
    "status",
    "latency_ms",
    "observed_at",
    "log_excerpt",
    "log",
    "log_bytes",
    "evaluated",
    "ki_status",
    "latency_ns",
    "log_digest",
    "run_digest",
    "comparison_key",
)


class Probe:
    """The corpus's dataset context and the chosen trace files, and the legs over them."""

    def __init__(self, source: Path, every: int, out: Path) -> None:
        from tracehouse.fetch.local import discover
        from tracehouse.identify.context import load_context

        files, _ = discover(source)
        json_files = [f for f in files if f.kind == "json"]
        self.context = load_context(json_files, revision=BENCH_REVISION, baseline_map={}).context
        self.source = source
        self.files = sorted(source.glob("traces/**/*.jsonl"))[::every]
        self.lines = sum(path.read_bytes().count(b"\n") for path in self.files)
        self.out = out
        self.left_out = 0

    def _fresh_out(self) -> Path:
        shutil.rmtree(self.out, ignore_errors=True)
        self.out.mkdir(parents=True)
        return self.out

    def product(self) -> Any:
        from tracehouse.ingest.worker import ingest_group

        files = [(path, path.relative_to(self.source).as_posix()) for path in self.files]
        return ingest_group(files, self.context, self._fresh_out(), "probe", source=SOURCE)

    def product_runs(self) -> dict[str, dict[str, Any]]:
        result = self.product()
        rows: dict[str, dict[str, Any]] = {}
        for name in result.parts.get("runs", []):
            for row in pq.read_table(self.out / name, columns=list(RUN_COLUMNS)).to_pylist():
                rows[row["run_id"]] = row
        return rows

    def rules(self, write: bool) -> list[dict[str, list[Any]]]:
        from tracehouse.ingest import worker
        from tracehouse.ingest.combinations import (
            combination_cache,
            repeatable_shape,
            run_identity,
        )
        from tracehouse.ingest.resolution import RESOLVED_COLUMNS, resolve_run
        from tracehouse.read.evaluation_rules import read_latency, was_evaluated
        from tracehouse.read.fib_lines import fib_trace_line
        from tracehouse.read.normalize import error_bound, kept_log, log_excerpt
        from tracehouse.read.records import Record
        from tracehouse.read.timestamps import observed_at

        out = self._fresh_out()
        context = self.context
        cache = combination_cache(context.fingerprint)
        definitions = context.definitions
        self.left_out = 0
        every_file: list[dict[str, list[Any]]] = []
        for path in self.files:
            rel = path.relative_to(self.source).as_posix()
            in_scope = worker.kernelindex_reads(rel, context.definition_stems)
            data = path.read_bytes()
            hashlib.sha256(data)  # the file's digest, as the product's read takes it
            columns: dict[str, list[Any]] = {name: [] for name in RUN_COLUMNS}
            correctness: list[tuple[Any, ...]] = []
            fib_rows: list[Any] = []
            offset = 0
            for number, raw in enumerate(data.split(b"\n"), 1):
                start, offset = offset, offset + len(raw) + 1
                if not raw:
                    continue
                value = orjson.loads(raw)
                _ = raw.count(b"[") + raw.count(b"{")  # the product's nesting check
                line_digest = hashlib.sha256(raw).hexdigest()
                combination = None
                if repeatable_shape(value, definitions):
                    evaluation = value["evaluation"]
                    combination = cache.get(
                        (
                            value["definition"],
                            orjson.dumps(value["workload"]),
                            orjson.dumps(evaluation["environment"]),
                            in_scope,
                        )
                    )
                if combination is None:
                    self.left_out += 1
                    continue
                evaluation = value["evaluation"]
                status = evaluation["status"]
                log = evaluation.get("log") or ""
                performance = evaluation.get("performance")
                latency_ms = None
                if performance is not None:
                    latency_ms = read_latency(
                        performance["latency_ms"], "latency_ms", required=True
                    ).value
                identity: dict[str, Any] = {}
                run_identity(value, combination, identity)
                columns["run_id"].append(worker.run_id(SOURCE, rel, number, 0, line_digest))
                columns["status"].append(status)
                columns["latency_ms"].append(latency_ms)
                columns["observed_at"].append(observed_at(evaluation["timestamp"]))
                columns["log_excerpt"].append(log_excerpt(log) if status != "PASSED" else None)
                columns["log"].append(kept_log(log))
                columns["log_bytes"].append(worker.log_bytes(log))
                columns["evaluated"].append(was_evaluated(status, log))
                columns["ki_status"].append(identity["ki_status"])
                columns["latency_ns"].append(identity["latency_ns"])
                columns["log_digest"].append(identity["log_digest"])
                # the run completed as a worker completes it (a strict line: a readable file)
                keys = {**combination.shared, **identity, "has_timing": latency_ms is not None}
                known = context.solutions.get(value.get("solution"))
                resolved = dict(
                    zip(RESOLVED_COLUMNS, resolve_run(keys, known, False, None), strict=True)
                )
                columns["run_digest"].append(resolved["run_digest"])
                columns["comparison_key"].append(resolved["comparison_key"])
                correctness_block = evaluation.get("correctness")
                if correctness_block is not None:
                    correctness.append(
                        (
                            error_bound(correctness_block.get("max_absolute_error"), "a"),
                            error_bound(correctness_block.get("max_relative_error"), "r"),
                            combination.tolerance,
                        )
                    )
                fib_rows.append(fib_trace_line(rel, Record(number, 0, start, raw, value, True)))
            if write:
                pq.write_table(pa.table(columns), out / f"{path.stem}.parquet", compression="lz4")
            every_file.append(columns)
        return every_file

    def floor(self, module: Any) -> None:
        out = self._fresh_out()
        for index, path in enumerate(self.files):
            module.one_file((str(path), str(out / f"{index}.parquet")))


def floor_module() -> Any:
    """../shared/floor/lean_loop.py, loaded once: its import is no part of the floor leg's time."""
    spec = importlib.util.spec_from_file_location("lean_loop", FLOOR_PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(probe: Probe) -> int:
    """The rules leg's values against the product's runs rows: how many runs were compared."""
    expected = probe.product_runs()
    compared = 0
    for columns in probe.rules(write=False):
        for index, run_id in enumerate(columns["run_id"]):
            row = expected.get(run_id)
            if row is None:
                raise SystemExit(f"bench.line_probe: run {run_id} is not among the product's runs")
            for name in RUN_COLUMNS:
                if columns[name][index] != row[name]:
                    raise SystemExit(
                        f"bench.line_probe: run {run_id}: {name} is {columns[name][index]!r}"
                        f" in the rules leg, {row[name]!r} in the product's"
                    )
            compared += 1
    return compared


def measure_legs(probe: Probe, rounds: int) -> dict[str, list[float]]:
    legs: dict[str, Callable[[], Any]] = {
        "product": probe.product,
        "rules": lambda: probe.rules(write=False),
        "rules+parquet": lambda: probe.rules(write=True),
    }
    if FLOOR_PROBE.is_file():
        lean_loop = floor_module()
        legs["floor"] = lambda: probe.floor(lean_loop)
    probe.product()  # the combination cache filled, as a worker's first lines fill it
    timings: dict[str, list[float]] = {name: [] for name in legs}
    for _ in range(rounds):
        for name, leg in legs.items():
            started = time.process_time()
            leg()
            timings[name].append(time.process_time() - started)
    return timings


def report_lines(probe: Probe, timings: dict[str, list[float]]) -> list[str]:
    product = statistics.median(timings["product"])
    lines = [
        f"{len(probe.files)} trace files, {probe.lines:,} lines"
        f" ({probe.left_out:,} not repeats: left out of the rules legs);"
        f" CPU seconds, medians of {len(timings['product'])}",
    ]
    for name, values in timings.items():
        median = statistics.median(values)
        lines.append(
            f"  {name:14} {median:7.2f} s  {median / probe.lines * 1e6:7.1f} us a line"
            f"  {median / product:5.2f} x product"
        )
    if "floor" not in timings:
        lines.append(f"  floor: skipped, {FLOOR_PROBE} not found")
    return lines


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"bench.line_probe: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m bench.line_probe", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--lines", type=int, default=154_000, help="bench.run's dataset size")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--every", type=int, default=12, help="every N-th trace file (default 12)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="hold the legs' values equal first")
    parser.add_argument("--data-root", type=Path, default=REPO_ROOT / "data" / "bench")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("every", "rounds"):
        if getattr(args, name) < 1:
            print(f"bench.line_probe: --{name} {getattr(args, name)}: at least 1", file=sys.stderr)
            return 2
    source, _, _ = ensure_dataset(args.data_root.resolve(), args.lines, args.seed)
    probe = Probe(source, args.every, args.data_root.resolve() / f"line-probe-{args.lines}")
    if args.check:
        print(f"checked: {check(probe):,} runs of the rules leg equal the product's rows")
    print("\n".join(report_lines(probe, measure_legs(probe, args.rounds))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
