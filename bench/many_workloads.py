"""Issue 16's scale benchmark: a build and a report over many distinct workloads.

    python -m bench.many_workloads [--lines 1000000] [--workloads 200000] [--data-root data/bench]

Memory that grows with the number of distinct entities (workloads above all) stays hidden in a
corpus that repeats a few shapes. This one generates ``--lines`` trace lines over ``--workloads``
distinct workloads (one device; 40 definitions, one baseline and four other solutions each, one
trace per solution and workload), then measures, each leg its own process with the whole process
tree sampled (bench/measure.py):

- ``build``: a cold build with a dataset revision (every digest computed);
- ``report``: ``tracehouse report`` of that warehouse.

and checks them against issue 26's targets: the build at most 60 s (goal 30 s) and 1 GiB over
the whole tree (goal 600 MiB); the report at most 30 s (goal 10 s) and 1 GiB (goal 500 MiB).
Results go to ``bench/results/many_workloads_<lines>.json``; the exit code is 1 when a target
is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.measure import Sample, measure
from bench.run import REPO_ROOT, machine_info, tracehouse_command, warm_page_cache

DEFINITIONS = 40
SOLUTIONS_PER_DEFINITION = 5  # the baseline and four others
HARDWARE = ("NVIDIA H100 80GB HBM3",)
REVISION = "1" * 40
MIB = 1024 * 1024

# (leg, measure, limit, goal) — limits are the "must", goals its "goal"
TARGETS: tuple[tuple[str, str, float, float | None], ...] = (
    ("build", "peak_tree_rss_mib", 1024.0, 600.0),
    ("build", "wall_s", 60.0, 30.0),
    ("report", "peak_tree_rss_mib", 1024.0, 500.0),
    ("report", "wall_s", 30.0, 10.0),
)


def ensure_dataset(data_root: Path, lines: int, workloads: int) -> Path:
    """Generate the corpus once per (lines, workloads); reused while its stamp matches."""
    from tracehouse.demo import generate_dataset

    workloads_per_definition = max(1, workloads // DEFINITIONS)
    solutions = max(2, lines // (DEFINITIONS * workloads_per_definition))
    root = data_root / f"many-{lines}-{workloads}"
    stamp = root.with_suffix(".json")
    wanted = {"lines": lines, "workloads": workloads, "solutions": solutions}
    if stamp.is_file() and (root / "traces").is_dir():
        try:
            if json.loads(stamp.read_text()) == wanted:
                return root
        except ValueError:
            pass
    data_root.mkdir(parents=True, exist_ok=True)
    generate_dataset(
        root,
        seed=16,
        definitions=DEFINITIONS,
        workloads_per_definition=workloads_per_definition,
        solutions_per_definition=solutions,
        hardware=HARDWARE,
        log_scale=0.1,
        overwrite=True,
    )
    stamp.write_text(json.dumps(wanted) + "\n")
    return root


def _leg(command: list[str], name: str) -> Sample:
    sample = measure(command, cwd=REPO_ROOT, env={**os.environ, "COLUMNS": "80"})
    if sample.returncode != 0:
        raise SystemExit(f"{name} failed (exit {sample.returncode}): {sample.stderr_tail}")
    return sample


def run(args: argparse.Namespace) -> dict[str, Any]:
    data_root = Path(args.data_root)
    source = ensure_dataset(data_root, args.lines, args.workloads)
    warm_page_cache(source)
    warehouse = data_root / f"warehouse-many-{args.lines}"
    report_dir = data_root / f"report-many-{args.lines}"
    for folder in (warehouse, report_dir):
        shutil.rmtree(folder, ignore_errors=True)
    cli = tracehouse_command()
    build = _leg(
        [*cli, "build", "--source", str(source), "--warehouse", str(warehouse)]
        + ["--revision", REVISION],
        "build",
    )
    report = _leg(
        [*cli, "report", "--out", str(report_dir), "--warehouse", str(warehouse)], "report"
    )
    samples = {"build": build, "report": report}
    checks = []
    for leg, what, limit, goal in TARGETS:
        value = getattr(samples[leg], what)
        checks.append(
            {
                "leg": leg,
                "measure": what,
                "value": value,
                "must": limit,
                "goal": goal,
                "met": value is not None and value <= limit,
                "goal_met": None if goal is None else value is not None and value <= goal,
            }
        )
    return {
        "lines": args.lines,
        "workloads": args.workloads,
        "dataset_bytes": sum(p.stat().st_size for p in source.rglob("*") if p.is_file()),
        "machine": machine_info(),
        "legs": {
            name: {
                "wall_s": s.wall_s,
                "cpu_s": s.cpu_s,
                "peak_rss_mib": s.peak_rss_mib,
                "peak_tree_rss_mib": s.peak_tree_rss_mib,
            }
            for name, s in samples.items()
        },
        "checks": checks,
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"many workloads: {result['lines']:,} trace lines, {result['workloads']:,} workloads, "
        f"{result['dataset_bytes'] / MIB:,.0f} MiB",
    ]
    for name, leg in result["legs"].items():
        lines.append(
            f"  {name:<7} {leg['wall_s']:8.1f} s wall {leg['cpu_s']:8.1f} s cpu "
            f"{leg['peak_tree_rss_mib']:7.0f} MiB tree peak"
        )
    for check in result["checks"]:
        unit = "s" if check["measure"] == "wall_s" else "MiB"
        goal = "" if check["goal"] is None else f", goal <= {check['goal']:.0f} {unit}"
        verdict = "ok" if check["met"] else "MISSED"
        lines.append(
            f"  {verdict:<6} {check['leg']} {check['measure']} {check['value']:.1f} {unit} "
            f"(must <= {check['must']:.0f} {unit}{goal})"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.many_workloads")
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--workloads", type=int, default=200_000)
    parser.add_argument("--data-root", default=str(REPO_ROOT / "data" / "bench"))
    parser.add_argument("--out", default=str(REPO_ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    if args.lines < args.workloads or args.workloads < DEFINITIONS:
        parser.error(f"--lines must be >= --workloads >= {DEFINITIONS}")
    result = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"many_workloads_{args.lines}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(render(result))
    return 0 if all(check["met"] for check in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
