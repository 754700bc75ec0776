"""Measuring one benchmark leg: a whole process tree's wall time, CPU time and peak memory.

A leg is one child process, but its work may run in processes that the child never waits for.
The build's parse workers start from a multiprocessing forkserver; the build leaves that server
running at exit (it quits on its own once its pipe to the build closes), so the kernel never
adds the server's CPU time, nor that of the workers the server reaped, to the build's rusage,
and ``os.wait4`` on the build alone misses them. So while a leg runs, the measuring process is a
Linux *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): descendants orphaned during the leg
are reparented to it rather than to init. After the leg exits, it reaps every such descendant
with ``os.wait4`` (waiting briefly for stragglers, killing any that outlive the grace period)
and adds their rusage to the leg's.

Reaping is by pid, for the processes that became this process's children during the leg,
not ``wait4(-1)``: the measuring process may have children of its own (a test runner's), which
must neither be reaped by the harness nor be waited for.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>
PR_GET_CHILD_SUBREAPER = 37
# How long reaped-but-running descendants (a forkserver draining its pipe) may outlive the leg
# before they are killed; a healthy leg's last descendant is gone within milliseconds.
STRAGGLER_GRACE_S = 5.0
TREE_SAMPLE_INTERVAL_S = 0.1


@dataclass
class Sample:
    """One run of one leg."""

    wall_s: float  # the leg process's life, by the parent's clock
    cpu_s: float  # user + sys of every process of the leg: own_cpu_s + descendants_cpu_s
    user_s: float
    sys_s: float
    peak_rss_mib: float  # ru_maxrss: the largest single process of the leg's tree
    # Sampled peak of the summed RSS of the whole tree (every TREE_SAMPLE_INTERVAL_S), at least
    # peak_rss_mib; None when not sampled.
    peak_tree_rss_mib: float | None
    returncode: int
    own_cpu_s: float = 0.0  # what os.wait4 of the leg process reports (it and what it reaped)
    descendants_cpu_s: float = 0.0  # orphans the harness reaped (e.g. a forkserver and workers)
    reaped_descendants: int = 0
    killed_stragglers: int = 0  # descendants still running STRAGGLER_GRACE_S after the leg
    linger_s: float = 0.0  # from the leg's exit to its last descendant reaped
    subreaper: bool = False  # False: the platform could not reparent orphans to the harness
    stdout_tail: str = ""
    stderr_tail: str = ""


# --------------------------------------------------------------------------------------------
# Child subreaper
# --------------------------------------------------------------------------------------------


def _libc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _prctl(libc: Any, option: int, argument: Any) -> None:
    null = ctypes.c_ulong(0)
    if libc.prctl(ctypes.c_int(option), argument, null, null, null) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def is_child_subreaper() -> bool | None:
    """This process's subreaper flag; None where it cannot be read (not Linux)."""
    libc = _libc()
    if libc is None:
        return None
    flag = ctypes.c_int(0)
    try:
        _prctl(libc, PR_GET_CHILD_SUBREAPER, ctypes.byref(flag))
    except OSError:
        return None
    return bool(flag.value)


@contextlib.contextmanager
def child_subreaper() -> Iterator[bool]:
    """Be a child subreaper inside the block (the previous flag is restored); yields success."""
    libc = _libc()
    previous = is_child_subreaper()
    if libc is None or previous is None:
        yield False
        return
    try:
        _prctl(libc, PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1))
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        _prctl(libc, PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(int(previous)))


# --------------------------------------------------------------------------------------------
# The process table
# --------------------------------------------------------------------------------------------


def process_children() -> dict[int, list[int]]:
    """Parent pid -> child pids, for every process in /proc (zombies included)."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            # The command name may hold spaces and parentheses: fields start after the last ')'.
            fields = stat[stat.rfind(b")") + 2 :].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def own_children() -> set[int]:
    return set(process_children().get(os.getpid(), ()))


class TreeRssSampler(threading.Thread):
    """Polls /proc for the summed RSS of the leg's processes and all their descendants.

    The roots are this process's children that were not there before the leg: the leg process
    and any descendant orphaned (and so reparented here) while the leg runs. Shared pages count
    once per process, so the sum is an upper bound of the tree's memory.
    """

    def __init__(self, before: set[int], interval_s: float = TREE_SAMPLE_INTERVAL_S) -> None:
        super().__init__(daemon=True)
        self.before = before
        self.interval_s = interval_s
        self.peak_bytes = 0
        self._stop_event = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak_bytes = max(self.peak_bytes, self._tree_rss())
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=2)

    def _tree_rss(self) -> int:
        children = process_children()
        stack = [pid for pid in children.get(os.getpid(), ()) if pid not in self.before]
        total = 0
        while stack:
            pid = stack.pop()
            stack.extend(children.get(pid, ()))
            try:
                with open(f"/proc/{pid}/statm", "rb") as handle:
                    total += int(handle.read().split()[1]) * self._page
            except (OSError, IndexError, ValueError):
                continue  # exited meanwhile, or a zombie
        return total


# --------------------------------------------------------------------------------------------
# Reaping what the leg left behind
# --------------------------------------------------------------------------------------------


@dataclass
class Reaped:
    """The summed rusage of the descendants a leg left to the harness."""

    processes: int = 0
    user_s: float = 0.0
    sys_s: float = 0.0
    max_rss_bytes: int = 0
    killed: int = 0
    linger_s: float = 0.0

    def add(self, usage: Any) -> None:
        self.processes += 1
        self.user_s += usage.ru_utime
        self.sys_s += usage.ru_stime
        self.max_rss_bytes = max(self.max_rss_bytes, _maxrss_bytes(usage))


def _maxrss_bytes(usage: Any) -> int:
    # Linux reports ru_maxrss in KiB, macOS in bytes.
    return usage.ru_maxrss if sys.platform == "darwin" else usage.ru_maxrss * 1024


def reap_descendants(before: set[int], grace_s: float = STRAGGLER_GRACE_S) -> Reaped:
    """Reap every child of this process not in `before`, until none is left.

    Children reaped here may have children of their own, which the kernel reparents here as
    they exit; the loop picks those up too. Whatever still runs after `grace_s` is killed (and
    counted), so a leg that leaves a daemon behind cannot hang the benchmark.
    """
    reaped = Reaped()
    started = time.monotonic()
    deadline = started + grace_s
    not_ours: set[int] = set()  # listed under our pid, but reaped by someone else meanwhile
    while True:
        pending = own_children() - before - not_ours
        if not pending:
            break
        progressed = False
        for pid in sorted(pending):
            try:
                done, _, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                not_ours.add(pid)
                continue
            if done:
                reaped.add(usage)
                progressed = True
        if progressed:
            continue
        if time.monotonic() < deadline:
            time.sleep(0.005)
            continue
        for pid in sorted(pending):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            try:
                _, _, usage = os.wait4(pid, 0)
            except ChildProcessError:
                not_ours.add(pid)
                continue
            reaped.add(usage)
            reaped.killed += 1
    reaped.linger_s = time.monotonic() - started
    return reaped


# --------------------------------------------------------------------------------------------
# One measured run
# --------------------------------------------------------------------------------------------


def _tail(handle: Any, limit: int = 2000) -> str:
    handle.seek(0, os.SEEK_END)
    size = handle.tell()
    handle.seek(max(0, size - limit))
    return handle.read().decode("utf-8", "replace")


def measure(
    command: Sequence[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    sample_tree: bool = True,
    straggler_grace_s: float = STRAGGLER_GRACE_S,
) -> Sample:
    """Run `command` as one child process; return the wall/CPU time and peak memory of its tree."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        child_subreaper() as subreaping,
    ):
        before = own_children()
        start = time.perf_counter()
        process = subprocess.Popen(
            list(command), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
        sampler = TreeRssSampler(before) if sample_tree and Path("/proc").is_dir() else None
        if sampler is not None:
            sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if sampler is not None:
            sampler.stop()
        reaped = reap_descendants(before, straggler_grace_s)
        own_cpu = usage.ru_utime + usage.ru_stime
        peak_rss = max(_maxrss_bytes(usage), reaped.max_rss_bytes)
        # The tree holds at least its largest process, which a short leg may have reached
        # between two samples.
        peak_tree = max(sampler.peak_bytes, peak_rss) if sampler is not None else None
        return Sample(
            wall_s=wall,
            cpu_s=own_cpu + reaped.user_s + reaped.sys_s,
            user_s=usage.ru_utime + reaped.user_s,
            sys_s=usage.ru_stime + reaped.sys_s,
            peak_rss_mib=peak_rss / MIB,
            peak_tree_rss_mib=peak_tree / MIB if peak_tree is not None else None,
            returncode=process.returncode,
            own_cpu_s=own_cpu,
            descendants_cpu_s=reaped.user_s + reaped.sys_s,
            reaped_descendants=reaped.processes,
            killed_stragglers=reaped.killed,
            linger_s=reaped.linger_s,
            subreaper=subreaping,
            stdout_tail=_tail(out),
            stderr_tail=_tail(err),
        )
