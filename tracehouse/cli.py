"""The ``tracehouse`` command. Every subcommand is a thin wrapper over the same functions the
Dagster assets call; heavy libraries are imported only by the subcommands that need them, so
read commands start in a fraction of a second and an up-to-date ``build`` returns at once.

What a person sees: one line on stderr for every error (naming the argument or file and the
reason; exit 2 for anything the user can change), one line on Ctrl-C or SIGTERM (exit 130/143;
``tracehouse.interrupts``), never a traceback (``TRACEHOUSE_DEBUG=1`` shows one for an internal
error).

This module is the entry point (``main``): it parses the command line (``cli_parser``), runs the
subcommand's handler (``cli_commands``) and turns whatever goes wrong into that one line
(``cli_output``).
"""

from __future__ import annotations

import contextlib
import os
import sys

from tracehouse import interrupts

# First thing when this module is the program (``tracehouse``, ``python -m tracehouse`` or
# ``python -m tracehouse.cli``; not a program that imports tracehouse), so Ctrl-C while the rest
# is imported is also one line, not a traceback.
if (
    __name__ == "__main__"
    or os.path.basename(sys.argv[0]) == "tracehouse"
    or getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None)
    == "tracehouse.__main__"
):
    interrupts.install_early()
    # numpy, which DuckDB and pyarrow import, starts OpenBLAS's threads, and they spin for a
    # while after the import: ~0.15 s of CPU in each process, taken from the build on a
    # 2-core machine. tracehouse does no linear algebra. A value the user set is kept; the
    # build's worker processes inherit it.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from collections.abc import Sequence

from tracehouse.cli_output import UsageError, one_line, print_error
from tracehouse.cli_parser import build_parser


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors caused by what the user typed or pointed at: one line, exit 2."""
    from tracehouse.assemble.invariants import InvariantViolation
    from tracehouse.warehouse import WarehouseBusy

    errors: list[type[BaseException]] = [
        UsageError,
        ValueError,  # SettingsError, NotADataset, bad JSON in a baselines file, ...
        LookupError,
        OSError,  # missing or unreadable paths, a file where a folder belongs, ...
        WarehouseBusy,
        InvariantViolation,
    ]
    if "tracehouse.fetch.hub" in sys.modules:
        errors.append(sys.modules["tracehouse.fetch.hub"].HubError)
    if "tracehouse.publish.iceberg.catalog" in sys.modules:  # the catalog or object store refused
        errors.extend(sys.modules["tracehouse.publish.iceberg.catalog"].catalog_errors())
    return tuple(errors)


def _report_interrupt(signum: int) -> int:
    interrupts.stop_listening()
    return interrupts.report(signum)  # once, even if the watchdog is ending the process too


def main(argv: Sequence[str] | None = None) -> int:
    import threading

    if threading.current_thread() is not threading.main_thread():
        return _run(argv)  # signals belong to whoever owns the main thread
    interrupts.install()
    try:
        try:
            code = _run(argv)
        finally:
            interrupts.stop_listening()  # from here on the command is ending anyway
    except KeyboardInterrupt:  # arrived between _run's last line and the one above
        code = 1
    signum = interrupts.received()
    if signum is None:
        return code
    code = _report_interrupt(signum)
    # Stop at once: kill parser workers, and do not wait for threads (Hub downloads) that
    # would otherwise keep the process alive until they time out.
    interrupts.stop_children()
    interrupts.stop_helpers()
    interrupts.undo_unpublished()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _run(argv: Sequence[str] | None) -> int:
    command = "tracehouse"
    try:
        args = build_parser().parse_args(argv)
        command = f"tracehouse {args.command}"
        return int(args.handler(args))
    except BrokenPipeError:  # `tracehouse ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except BaseException as error:
        signum = interrupts.received()
        if signum is not None:  # whatever the interrupt became on its way up
            return _report_interrupt(signum)
        if isinstance(error, SystemExit | KeyboardInterrupt):
            raise
        if isinstance(error, UsageError):
            print_error(str(error))
            return 2
        if isinstance(error, _user_errors()) or type(error).__module__.startswith(
            ("duckdb", "_duckdb")  # a database error from user SQL is a message
        ):
            print_error(f"{command}: {one_line(error)}")
            return 2
        if os.environ.get("TRACEHOUSE_DEBUG"):
            raise
        print_error(
            f"{command}: internal error: {type(error).__name__}: {one_line(error)} "
            "(TRACEHOUSE_DEBUG=1 shows the traceback)"
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
