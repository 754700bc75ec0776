"""How much a warehouse grows when a new revision of its source changes one trace file.

    python -m bench.storage --source DATASET [--work FOLDER] [--keep-generations N]

The dataset is linked (not copied) into a work folder, built at revision A, then one trace
file is replaced by a copy with one more PASSED line (a later re-run), and the folder is
built again at revision B into the same warehouse. The warehouse is measured after each build
as the bytes of its distinct files (hard links counted once), whole and by part (generations,
table parts, staging parts, history). The changed file's share is its share of the dataset's
trace bytes times the warehouse after the first build; the growth is compared with it.

Two settings are measured, as they differ for a reason: with ``keep_generations`` 1 only the
current state and run_history stay (the retained growth of a revision); with the default 3,
the two generations before stay for rollback, and since a new revision re-resolves every run
(run digests embed the revision, KernelIndex §8), each of them keeps its own runs parts.
``make bench`` runs both (bench/run.py) and prints them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REVISION_A = "a" * 40
REVISION_B = "b" * 40


def distinct_bytes(folder: Path) -> int:
    """Bytes of the distinct files under ``folder`` (each inode once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for path in folder.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        stat = path.stat()
        if (stat.st_dev, stat.st_ino) in seen:
            continue
        seen.add((stat.st_dev, stat.st_ino))
        total += stat.st_size
    return total


def _history_bytes(warehouse: Path) -> int:
    current = warehouse / "current"
    return sum(
        distinct_bytes(current / f"{table}.parquet")
        for table in ("run_appearances", "run_disappearances")
        if (current / f"{table}.parquet").exists()
    )


def breakdown(warehouse: Path) -> dict[str, int]:
    return {
        "total": distinct_bytes(warehouse),
        "table_parts": distinct_bytes(warehouse / "cache" / "parts"),
        "staging": distinct_bytes(warehouse / "cache" / "staging"),
        "history": _history_bytes(warehouse),
    }


# The warehouse before issue 29 kept logs, reference code and solution sources only as digests
# and sizes: a cold build of the 40,146-line bench corpus (seed 7) at tracehouse 8ed6648 took
# 48,392,240 bytes (distinct files, cache included), 58,766,490 with everything kept. Per trace
# line, so that a corpus of any size compares with it (the bound: 1.5 times).
BEFORE_LOSSLESS = {"commit": "8ed6648", "trace_lines": 40_146, "bytes": 48_392_240}


def warehouse_size(warehouse: Path, trace_lines: int) -> dict[str, Any]:
    """The warehouse after a build, whole and by part, per trace line against BEFORE_LOSSLESS."""
    sizes = breakdown(warehouse)
    published = warehouse / "current" / "tracehouse.duckdb"
    sizes["tracehouse_duckdb"] = published.stat().st_size if published.exists() else 0
    per_line = sizes["total"] / trace_lines if trace_lines else None
    before = BEFORE_LOSSLESS["bytes"] / BEFORE_LOSSLESS["trace_lines"]
    return {
        **sizes,
        "trace_lines": trace_lines,
        "bytes_per_trace_line": per_line,
        "before_lossless": {**BEFORE_LOSSLESS, "bytes_per_trace_line": before},
        "ratio_to_before": None if per_line is None else per_line / before,
    }


def render_size(size: dict[str, Any]) -> str:
    ratio = size["ratio_to_before"]
    before = size["before_lossless"]
    return (
        f"warehouse size after the cold build: {size['total']:,} bytes "
        f"({size['bytes_per_trace_line'] or 0:,.0f} per trace line; tracehouse.duckdb "
        f"{size['tracehouse_duckdb']:,}, staging {size['staging']:,}); before logs, references "
        f"and sources were kept (tracehouse {before['commit']}, {before['trace_lines']:,} lines): "
        f"{before['bytes_per_trace_line']:,.0f} per trace line, ratio "
        f"{'-' if ratio is None else f'{ratio:.2f}'} (issue 29: at most 1.5)"
    )


def _build(source: Path, warehouse: Path, revision: str, keep_generations: int) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TRACEHOUSE_")}
    environment["TRACEHOUSE_KEEP_GENERATIONS"] = str(keep_generations)
    command = [sys.executable, "-m", "tracehouse.cli", "build", "--source", str(source)]
    command += ["--warehouse", str(warehouse), "--revision", revision, "--allow-shrink"]
    result = subprocess.run(command, capture_output=True, text=True, env=environment)
    if result.returncode != 0:
        raise RuntimeError(f"build at {revision[:8]} failed: {result.stderr.strip()[-500:]}")


def _changed_copy(path: Path) -> int:
    """Replace ``path`` (a hard link into the original dataset) by a copy with one more
    PASSED line, a later re-run of its first one; returns the file's new size."""
    import orjson

    raw = path.read_bytes()
    line = next((x for x in raw.splitlines() if b'"status":"PASSED"' in x), None)
    if line is None:
        raise LookupError(f"no PASSED line in {path}")
    record = orjson.loads(line)
    record["evaluation"]["timestamp"] = "2026-12-31T23:59:59.999999"
    path.unlink()  # break the link: the original dataset stays as it was
    path.write_bytes(raw + (b"" if raw.endswith(b"\n") else b"\n") + orjson.dumps(record) + b"\n")
    return path.stat().st_size


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)


def revision_growth(source: Path, work: Path, keep_generations: int) -> dict[str, Any]:
    """Build ``source`` at two revisions that differ in one trace file; measure the warehouse."""
    shutil.rmtree(work, ignore_errors=True)
    dataset = work / "dataset"
    shutil.copytree(source, dataset, copy_function=_link_or_copy)
    warehouse = work / "warehouse"
    traces = sorted((dataset / "traces").rglob("*.jsonl"), key=lambda p: (-p.stat().st_size, p))
    trace_bytes = sum(p.stat().st_size for p in traces)
    _build(dataset, warehouse, REVISION_A, keep_generations)
    before = breakdown(warehouse)
    changed = next(p for p in traces if b'"status":"PASSED"' in p.read_bytes())
    changed_bytes = _changed_copy(changed)
    _build(dataset, warehouse, REVISION_B, keep_generations)
    after = breakdown(warehouse)
    share = before["total"] * changed_bytes / trace_bytes
    growth = after["total"] - before["total"]
    return {
        "keep_generations": keep_generations,
        "changed_file": str(changed.relative_to(dataset)),
        "changed_file_bytes": changed_bytes,
        "trace_bytes": trace_bytes,
        "warehouse_before": before,
        "warehouse_after": after,
        "growth_bytes": growth,
        "history_growth_bytes": after["history"] - before["history"],
        "file_share_bytes": round(share),
        "growth_over_share": growth / share if share else None,
    }


def measure_storage(source: Path, work: Path) -> list[dict[str, Any]]:
    """The retained growth (one generation kept) and the growth with the default three."""
    try:
        return [revision_growth(source, work / f"keep-{n}", n) for n in (1, 3)]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def render(results: list[dict[str, Any]]) -> list[str]:
    lines = ["warehouse growth when a new revision changes one trace file:"]
    for r in results:
        ratio = r["growth_over_share"]
        lines.append(
            f"  keep_generations {r['keep_generations']}: {r['warehouse_before']['total']:,} -> "
            f"{r['warehouse_after']['total']:,} bytes, growth {r['growth_bytes']:,} "
            f"(run_history {r['history_growth_bytes']:,}); the file's share "
            f"{r['file_share_bytes']:,} ({r['changed_file_bytes']:,} of {r['trace_bytes']:,} "
            f"trace bytes); growth / share {'-' if ratio is None else f'{ratio:.2f}'}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.storage", description=__doc__)
    parser.add_argument("--source", required=True, help="a dataset folder")
    parser.add_argument("--work", default="data/bench/storage", help="scratch folder")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    results = measure_storage(Path(args.source), Path(args.work))
    print(json.dumps(results, indent=1) if args.json else "\n".join(render(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
