"""Ctrl-C and SIGTERM for the ``tracehouse`` command: stop at once, leave nothing behind.

``install`` (called by the CLI only, never on import) turns SIGINT and SIGTERM into an
``Interrupted`` exception in the main thread and remembers the signal. Whatever the exception
becomes on its way up (DuckDB reports an interrupted query as its own error, a process pool as
a broken pool), the CLI asks ``received()`` and prints one line instead of a traceback.

Nothing a build writes is visible before the atomic publish (``Warehouse.publish``), so an
interrupt anywhere else leaves the published warehouse as it was. The publish itself runs
``deferred()``: a signal that arrives during the switch is held until the switch is done, and
``published()`` then tells the CLI that the new warehouse is in place, so the message says so.

Parser workers ignore SIGINT (a terminal sends it to the whole process group; the parent
decides) and die on SIGTERM; the parent kills its remaining children with ``stop_children``.
Starting the workers runs ``deferred()`` too, so that every worker that exists is one the
parent knows of and kills.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM)
SAFE_PATH_VARIABLE = "PYTHONSAFEPATH"


class Interrupted(KeyboardInterrupt):
    """The command received SIGINT or SIGTERM."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: int | None = None
_deferred_depth = 0
_pending: int | None = None
_published: str | None = None


def _handler(signum: int, frame: FrameType | None) -> None:
    global _received, _pending
    if _received is None:
        _received = signum
    if _deferred_depth:
        _pending = _pending or signum
        return
    if _importing(frame):
        # An exception raised into a module being imported can abort the process: DuckDB's
        # extension module (nanobind) calls back into Python while it initialises and aborts
        # on an unexpected error (exit -6, seen when Ctrl-C came 5 ms into a build). The
        # watchdog ends the command instead, with the usual line, within GRACE_S.
        return
    raise Interrupted(signum)


def _importing(frame: FrameType | None) -> bool:
    """The main thread is somewhere inside the import machinery."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


_default_unraisable = sys.unraisablehook


def _unraisable(unraisable: Any) -> None:
    """An ``Interrupted`` raised where Python cannot raise it on (a weakref callback, a
    ``__del__``, a garbage collector callback) is dropped without a word: the interrupt is
    recorded, and the watchdog ends the command with its one line within GRACE_S. Python would
    print "Exception ignored in …" and a traceback above that line. Anything else is
    reported as Python reports it."""
    if isinstance(unraisable.exc_value, Interrupted):
        return
    _default_unraisable(unraisable)


def stop_listening() -> None:
    """Ignore further signals: the command is already stopping (a second Ctrl-C must not turn
    the one-line report into a traceback)."""
    for signum in HANDLED:
        signal.signal(signum, signal.SIG_IGN)


def install() -> None:
    """Turn SIGINT and SIGTERM into ``Interrupted`` (main thread of the CLI only), and start the
    watchdog that stops the process even while the main thread is inside C code."""

    for signum in HANDLED:
        signal.signal(signum, _handler)
    sys.unraisablehook = _unraisable
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)
    threading.Thread(
        target=_watchdog, args=(read_end,), name="interrupt-watchdog", daemon=True
    ).start()


# Python runs a signal handler only between bytecodes: a DuckDB query or a Parquet write in C
# may hold the main thread for longer than anyone waits. The watchdog wakes on the signal,
# interrupts the DuckDB connections in use, and if the main thread has still not ended the
# process after GRACE_S (outside the atomic switch), it ends it itself with the same line.
GRACE_S = 2.5
_connections: weakref.WeakSet[Any] = weakref.WeakSet()


def watch_connection(connection: Any) -> Any:
    """Let an interrupt cancel the queries of ``connection`` (a DuckDB connection)."""
    _connections.add(connection)
    return connection


def _watchdog(read_end: int) -> None:
    import time

    while not os.read(read_end, 1):
        pass
    for connection in list(_connections):
        with contextlib.suppress(Exception):
            connection.interrupt()
    time.sleep(GRACE_S)
    while _deferred_depth:  # never stop in the middle of the atomic switch
        time.sleep(0.01)
    code = report(_received or signal.SIGINT)
    stop_children()
    stop_helpers()
    undo_unpublished()
    os._exit(code)


_undo: Callable[[], None] | None = None


def undo_on_interrupt(undo: Callable[[], None] | None) -> None:
    """What a command ended by an interrupt runs last (after stopping the workers), unless
    something was published: a first build's removal of the folder it created, a report's of
    its unlinked page folder. None when the block it covers has ended."""
    global _undo
    _undo = undo


def undo_unpublished() -> None:
    """Run the registered undo unless this process published something. Both ways out of an
    interrupt call it: the watchdog, and the main thread, whose own cleanup the handler's
    exception can cut short (a query cancelled by the watchdog returns first, and the pending
    handler then raises at the first call of the cleanup that catches it)."""
    undo = _undo
    if undo is not None and _published is None:
        with contextlib.suppress(Exception):
            undo()


# The main thread and the watchdog may both decide to end the command (on a busy machine the
# main thread can reach its report just as GRACE_S runs out): whoever comes first prints the
# line, the other finds it printed.
_report_lock = threading.Lock()
_reported_code: int | None = None


def report(signum: int) -> int:
    """Print the interrupt's one line, once per process whichever thread asks first, and
    return the exit code to end with."""
    global _reported_code
    with _report_lock:
        if _reported_code is None:
            import sys

            with contextlib.suppress(Exception):
                line = UNCHANGED if _published is None else published_line(_published)
                sys.stderr.write(line + "\n")
                sys.stderr.flush()
            _reported_code = exit_code(signum)
        return _reported_code


def published_line(generation: str) -> str:
    return f"interrupted after generation {generation} was published; the warehouse is complete"


def _exit_at_once(signum: int, _frame: FrameType | None) -> None:
    import sys

    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(UNCHANGED + "\n")
        sys.stderr.flush()
    os._exit(exit_code(signum))


def install_early() -> None:
    """While the command is still importing its modules nothing has been touched: a signal
    then ends the process at once, with the usual one line. ``install`` takes over in main."""
    for signum in HANDLED:
        signal.signal(signum, _exit_at_once)


UNCHANGED = "interrupted; warehouse unchanged"


def received() -> int | None:
    """The first signal received since ``install``, or None."""
    return _received


def published() -> str | None:
    """The generation this process made current, if it got that far."""
    return _published


def note_published(generation: str | None) -> None:
    global _published
    _published = generation


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Run a block that must not be cut in half (an atomic switch, starting parser workers); a
    signal meanwhile is raised at its end. A switch is not begun once a signal has come: one that arrived while
    a module was being imported was only noted (see ``_handler``), and the command, still
    running until the watchdog ends it, must not publish what the user asked to stop."""
    global _deferred_depth, _pending
    if _deferred_depth == 0 and _received is not None:
        raise Interrupted(_received)
    _deferred_depth += 1
    try:
        yield
    finally:
        _deferred_depth -= 1
    if _deferred_depth == 0 and _pending is not None:
        signum, _pending = _pending, None
        raise Interrupted(signum)


def ignore_in_worker() -> None:
    """Initializer of parser worker processes: the parent handles Ctrl-C and stops them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start_fork_server() -> None:
    """Start multiprocessing's fork server (and its resource tracker) with SIGINT blocked.

    A terminal's Ctrl-C goes to the whole process group. A fork server still importing its
    preload modules would die of it with a traceback on the stderr it shares with us, after our
    one line. Blocked, the signal waits; the server then ignores SIGINT for good, which discards
    it, and its workers inherit the block (they leave interrupts to this process). The tracker
    is started first because its own start unblocks SIGINT when it is done.
    """
    from multiprocessing import forkserver, resource_tracker

    with safe_import_path():
        resource_tracker.ensure_running()
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            forkserver.ensure_running()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


# Parses of this process that use the fork server (a Dagster process may run several).
_fork_server_users = 0
_fork_server_lock = threading.Lock()


@contextlib.contextmanager
def fork_server() -> Iterator[None]:
    """multiprocessing's fork server for a parse (``start_fork_server``), stopped again once no
    parse of this process uses it: it holds its preloaded modules (~66 MiB) for nothing while
    finalize, the build's peak of memory, runs beside it. The next parse starts a new one."""
    global _fork_server_users
    with _fork_server_lock:
        _fork_server_users += 1
    try:
        start_fork_server()
        yield
    finally:
        with _fork_server_lock:
            _fork_server_users -= 1
            if _fork_server_users == 0:
                _stop_fork_server()


def _stop_fork_server() -> None:
    from multiprocessing import forkserver

    # Closing the server's "alive" descriptor makes it exit; CPython has no public call for
    # it (ForkServer._stop is what its own tests use). Without it the server simply stays.
    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if stop is not None:
        with contextlib.suppress(OSError):
            stop()


@contextlib.contextmanager
def safe_import_path() -> Iterator[None]:
    """Python processes started inside this block do not put the working directory on sys.path.

    multiprocessing starts its fork server and resource tracker as ``python -c ...``, and ``-c``
    puts the current directory first on the import path: a ``selectors.py`` or ``bisect.py``
    lying in the folder a user builds from (a dataset clone, say) would be imported, that is,
    executed, while those helpers start, and the workers forked from them inherit the path.
    ``PYTHONSAFEPATH`` (Python 3.11's ``-P``) tells the new interpreter not to add it.
    """
    previous = os.environ.get(SAFE_PATH_VARIABLE)
    os.environ[SAFE_PATH_VARIABLE] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(SAFE_PATH_VARIABLE, None)
        else:
            os.environ[SAFE_PATH_VARIABLE] = previous


def stop_children(timeout_s: float = 2.0) -> None:
    """Kill every child process this process started (parser workers), and reap them."""
    import multiprocessing

    children = multiprocessing.active_children()
    for child in children:
        with contextlib.suppress(Exception):
            child.kill()
    for child in children:
        with contextlib.suppress(Exception):
            child.join(timeout_s)


def stop_helpers() -> None:
    """Just before the process ends on an interrupt: kill the helpers multiprocessing started for
    the workers (the fork server they come from, and the resource tracker, which would print a
    warning about the workers' semaphores), so nothing is left and nothing else is printed."""
    import sys
    import warnings

    # Killing the tracker is ours to do: if a late semaphore clean-up then finds it gone, its
    # "died unexpectedly, relaunching" warning would be a second line after the one we print.
    warnings.filterwarnings("ignore", message="resource_tracker: process died unexpectedly")
    helpers = [
        getattr(getattr(sys.modules.get(module), singleton, None), attribute, None)
        for module, singleton, attribute in (
            ("multiprocessing.forkserver", "_forkserver", "_forkserver_pid"),
            ("multiprocessing.resource_tracker", "_resource_tracker", "_pid"),
        )
    ]
    for pid in helpers:
        if isinstance(pid, int) and pid > 0:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def exit_code(signum: int) -> int:
    """The shell's convention: 128 + signal number (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + signum
