"""How long read commands take as whole processes (issue 10: "start in <= 0.3 s").

    python -m bench.startup [--warehouse W] [--repeat 10]

Without ``--warehouse`` a small demo warehouse is built into a temporary folder first. Each
command runs ``--repeat`` times as its own process; wall time is the parent's clock, CPU time
(user + sys) comes from ``os.wait4``. The minimum is the figure least disturbed by other load on
the machine; the median is printed beside it. Timing lives here rather than in the tests: the
tests check what is imported (tests/system/test_output.py), which is what makes start-up short.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "--version": ["--version"],
    "query SELECT 1": ["query", "SELECT 1"],
    "query run_summary (csv)": ["query", "SELECT * FROM run_summary LIMIT 100", "--format", "csv"],
    "leaderboard": ["leaderboard", "{definition}"],
    "generations": ["generations"],
}
TARGET_S = 0.3


def _timed(argv: list[str]) -> tuple[float, float]:
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        stderr = process.stderr.read().decode() if process.stderr else ""
        raise SystemExit(f"{' '.join(argv)} failed: {stderr}")
    return wall, usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warehouse", type=Path)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    cli = [sys.executable, "-m", "tracehouse.cli"]
    with tempfile.TemporaryDirectory() as scratch:
        warehouse = args.warehouse
        if warehouse is None:
            warehouse = Path(scratch) / "warehouse"
            subprocess.run(
                [
                    *cli,
                    "demo",
                    "--source",
                    str(Path(scratch) / "demo"),
                    "--warehouse",
                    str(warehouse),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        definition = subprocess.run(
            [*cli, "query", "SELECT definition FROM runs LIMIT 1", "--format", "csv"]
            + ["--warehouse", str(warehouse)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()[1]
        print(f"{'command':<26} {'min s':>7} {'median s':>9} {'CPU s':>7}  (n={args.repeat})")
        for name, command in COMMANDS.items():
            full = [*cli, *(part.format(definition=definition) for part in command)]
            if command[0] != "--version":
                full += ["--warehouse", str(warehouse)]
            runs = [_timed(full) for _ in range(args.repeat)]
            walls = [wall for wall, _ in runs]
            cpu = min(c for _, c in runs)
            mark = "ok" if min(walls) <= TARGET_S else f"over {TARGET_S} s"
            print(
                f"{name:<26} {min(walls):>7.3f} {statistics.median(walls):>9.3f} {cpu:>7.3f}  {mark}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
