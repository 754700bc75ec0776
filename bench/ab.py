"""Two versions of tracehouse timed against each other, alternated, as whole processes.

    python -m bench.ab --base REV [--leg changed|cold|warm] [--pairs 5] [--lines 154000]
                       [--work-dir data/bench/ab]

This machine's speed drifts by ~20% within an hour, so a change of a few percent shows only
when the old and the new code run in turns, on the same dataset, as the same kind of process.
``--base`` (any git revision) is exported with ``git archive`` into ``<work-dir>/tree-<sha>``;
the other side is this checkout, uncommitted edits included. Each side builds its own
warehouse; each pair runs both sides, the order alternating from pair to pair.

Each build runs as ``python -m tracehouse`` with its tree as the working directory, which puts
that tree first on ``sys.path``. Run from elsewhere (or through the ``tracehouse`` console
script), both sides would import the editable install of this checkout and compare it with
itself; so each side is first asked which ``tracehouse`` it imports, and a side that imports
another tree stops the run.

Legs: ``changed`` (the default) appends one PASSED line to the largest trace file and builds,
then builds the restored file (not timed); ``cold`` builds into a removed warehouse; ``warm``
builds again with nothing changed. The dataset is ``bench.run``'s for ``--lines``.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

from bench.measure import Sample, measure
from bench.run import REPO_ROOT, FileChange, build_arguments, ensure_dataset

LEGS = ("changed", "cold", "warm")
DEFAULT_WORK_DIR = REPO_ROOT / "data" / "bench" / "ab"
# Every read has a time budget: git answers (an export of this repository is a few MB) and an
# import of tracehouse take seconds, so these only stop a hung process.
GIT_TIMEOUT_S = 120
IMPORT_TIMEOUT_S = 60


class AbError(Exception):
    """A one-line reason the comparison cannot run."""


def resolve_revision(revision: str) -> str:
    try:
        done = subprocess.run(
            [
                "git",
                "-C",
                str(REPO_ROOT),
                "rev-parse",
                "--verify",
                "--quiet",
                f"{revision}^{{commit}}",
            ],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise AbError(f"--base {revision}: git did not answer ({error})") from error
    if done.returncode != 0 or not done.stdout.strip():
        raise AbError(f"--base {revision}: not a commit of {REPO_ROOT}")
    return done.stdout.strip()


def export_tree(sha: str, work_dir: Path) -> Path:
    """The files of commit ``sha`` in ``<work_dir>/tree-<sha>`` (reused when already there)."""
    tree = work_dir / f"tree-{sha}"
    if (tree / "tracehouse" / "__init__.py").is_file():
        return tree
    partial = work_dir / f".tree-{sha}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", sha],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(partial, filter="data")
    except (OSError, subprocess.SubprocessError, tarfile.TarError) as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise AbError(f"--base {sha[:12]}: could not export it ({error})") from error
    partial.rename(tree)
    return tree


def tree_environment(tree: Path) -> dict[str, str]:
    """The environment of every process of a side: ``tree`` first on the import path. The
    working directory is not enough: a build's parser workers come from multiprocessing's
    fork server, which starts without it (``interrupts.safe_import_path``) and so imported the
    installed tracehouse, the head's, for the base's builds too (every A/B of a parse change
    before this compared the head's parse with itself)."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(tree), *filter(None, [environment.get("PYTHONPATH")])]
    )
    return environment


def _python_in(tree: Path, arguments: list[str], what: str, timeout_s: float) -> str:
    """stdout of ``python <arguments>`` run in ``tree``; AbError saying ``what`` failed."""
    try:
        done = subprocess.run(
            [sys.executable, *arguments],
            cwd=tree,
            env=tree_environment(tree),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise AbError(f"{tree}: could not {what} ({error})") from error
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip())[-200:]
        raise AbError(f"{tree}: could not {what} ({tail})")
    return done.stdout


def compile_tree(tree: Path) -> None:
    """Write the bytecode of the tree's packages, as an install does. With
    PYTHONDONTWRITEBYTECODE set (this machine and CI set it), an exported tree would otherwise
    compile its modules afresh in every process of every build, and lose ~2 s of CPU a cold
    build to the side whose tree is compiled."""
    folders = [name for name in ("tracehouse", "pipelines") if (tree / name).is_dir()]
    _python_in(tree, ["-m", "compileall", "-q", "-j0", *folders], "compile it", GIT_TIMEOUT_S)


# Asked of a parser worker started as a build starts them: `python -m` puts the working
# directory first on the path, and the fork server preloads the worker module.
WORKER_IMPORT_CHECK = """
import os, sys
sys.path[0] = os.getcwd()
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from tracehouse import interrupts
context = multiprocessing.get_context("forkserver")
context.set_forkserver_preload(["tracehouse.ingest.worker"])
with interrupts.fork_server():
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        print(pool.submit(eval, "__import__('tracehouse').__file__").result())
"""


def imported_package(tree: Path) -> Path:
    """Where ``tracehouse`` comes from for a parser worker of a build started in ``tree`` as
    the builds are."""
    out = _python_in(
        tree, ["-c", WORKER_IMPORT_CHECK], "ask which tracehouse it imports", IMPORT_TIMEOUT_S
    )
    return Path(out.strip()).resolve().parent


def build_command(source: Path, warehouse: Path) -> list[str]:
    # `-m`, never the console script: only then is the tree (the working directory) first on
    # sys.path.
    return [sys.executable, "-m", "tracehouse", *build_arguments(source, warehouse)]


class Side:
    """One version: its tree, its warehouse and its timed builds."""

    def __init__(self, name: str, tree: Path, warehouse: Path) -> None:
        self.name = name
        self.tree = tree
        self.warehouse = warehouse
        self.samples: list[Sample] = []

    def build(self, source: Path) -> Sample:
        sample = measure(
            build_command(source, self.warehouse), cwd=self.tree, env=tree_environment(self.tree)
        )
        if sample.returncode in (130, -signal.SIGINT):
            # Ctrl-C reaches the build and this process at once; on a busy machine the build may
            # have ended on it before this process's own KeyboardInterrupt is raised.
            raise KeyboardInterrupt
        if sample.returncode != 0:
            tail = (sample.stderr_tail or sample.stdout_tail).strip().splitlines()
            reason = tail[-1] if tail else f"exit {sample.returncode}"
            raise AbError(f"{self.name} ({self.tree}): the build failed: {reason}")
        return sample


def run_leg(leg: str, sides: list[Side], source: Path, pairs: int) -> None:
    for side in sides:
        # A warehouse left by an earlier run may be another version's, which a build would
        # rebuild whole (and refuse, its run_history shrinking): every leg starts afresh.
        shutil.rmtree(side.warehouse, ignore_errors=True)
        if leg != "cold":
            side.build(source)  # the starting warehouse, not timed
    for pair in range(pairs):
        order = sides if pair % 2 == 0 else list(reversed(sides))
        for side in order:
            if leg == "cold":
                shutil.rmtree(side.warehouse, ignore_errors=True)
                side.samples.append(side.build(source))
            elif leg == "warm":
                side.samples.append(side.build(source))
            else:
                change = FileChange.prepare(source)
                change.apply()
                try:
                    side.samples.append(side.build(source))
                finally:
                    change.restore()
                side.build(source)  # back to the unchanged dataset, not timed


def summary_lines(leg: str, sides: list[Side]) -> list[str]:
    lines = [f"{leg} build, {len(sides[0].samples)} alternated pair(s), seconds"]
    for side in sides:
        walls = [s.wall_s for s in side.samples]
        cpus = [s.cpu_s for s in side.samples]
        lines.append(
            f"  {side.name:5} wall median {statistics.median(walls):7.3f}  "
            f"({' '.join(f'{w:.2f}' for w in walls)})"
        )
        lines.append(
            f"  {'':5} CPU  median {statistics.median(cpus):7.3f}  "
            f"({' '.join(f'{c:.2f}' for c in cpus)})"
        )
    base, head = sides
    deltas = [h.wall_s - b.wall_s for b, h in zip(base.samples, head.samples, strict=True)]
    lines.append(
        f"  head - base, wall per pair: median {statistics.median(deltas):+.3f} "
        f"({' '.join(f'{d:+.2f}' for d in deltas)})"
    )
    return lines


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"bench.ab: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m bench.ab", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git revision to compare against")
    parser.add_argument("--leg", choices=LEGS, default="changed")
    parser.add_argument("--pairs", type=int, default=5, help="alternated pairs (default 5)")
    parser.add_argument("--lines", type=int, default=154_000, help="bench.run's dataset size")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR)
    parser.add_argument("--data-root", type=Path, default=REPO_ROOT / "data" / "bench")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.pairs < 1:
        print(f"bench.ab: --pairs {args.pairs}: at least 1", file=sys.stderr)
        return 2
    try:
        sha = resolve_revision(args.base)
        work_dir = args.work_dir.resolve()
        work_dir.mkdir(parents=True, exist_ok=True)
        base_tree = export_tree(sha, work_dir)
        sides = [
            Side("base", base_tree, work_dir / "warehouse-base"),
            Side("head", REPO_ROOT, work_dir / "warehouse-head"),
        ]
        for side in sides:
            compile_tree(side.tree)
            found = imported_package(side.tree)
            if found != (side.tree / "tracehouse").resolve():
                raise AbError(f"{side.name}: a build started in {side.tree} imports {found}")
        source, _, _ = ensure_dataset(args.data_root.resolve(), args.lines, args.seed)
        print(f"base {sha[:12]} ({base_tree}) against head ({REPO_ROOT}), {source}", flush=True)
        run_leg(args.leg, sides, source, args.pairs)
    except AbError as error:
        print(f"bench.ab: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # run_leg has put the changed trace file back by now (FileChange.restore in a finally)
        print("bench.ab: interrupted; the dataset is as it was", file=sys.stderr)
        return 130
    print("\n".join(summary_lines(args.leg, sides)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
