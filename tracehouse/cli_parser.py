"""The ``tracehouse`` command line: every subcommand, its flags (each setting's flag declared
once, from ``tracehouse.settings``) and its handler, parsed so that a bad argument is one line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from tracehouse.cli_commands import (
    DEFAULT_QUERY_ROWS,
    READ_COMMANDS,
    cmd_build,
    cmd_changes,
    cmd_demo,
    cmd_export,
    cmd_generations,
    cmd_leaderboard,
    cmd_query,
    cmd_record,
    cmd_remove_source,
    cmd_report,
    cmd_rollback,
    cmd_sources,
    cmd_tables,
)
from tracehouse.cli_output import UsageError
from tracehouse.settings import SETTINGS, describe, env_name

OUTPUT_FORMATS = ("table", "csv", "json")
WIDE_HELP = "one line per row however wide (default: fit the terminal, one block per row)"
# Settings each command takes as flags (the others come from TRACEHOUSE_* or their default).
BUILD_SETTINGS = (
    "source",
    "source_name",
    "revision_of",
    "revision",
    "baselines_file",
    "workers",
    "lock_timeout_s",
    "include_blobs",
    "hub_offline",
    "allow_shrink",
)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line naming it, not a usage block."""

    # The end of the command's --help, written only when help is: the build's lists every
    # setting read from the environment only, wrapped to the terminal (~14 ms of every command).
    epilog_of: Callable[[], str] | None = None

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")

    def format_help(self) -> str:
        if self.epilog_of is not None:
            self.epilog = self.epilog_of()
        return super().format_help()


class _VersionAction(argparse.Action):
    """``--version``, with the package version looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        import tracehouse
        from tracehouse.schemas import IMPORTER_VERSION  # Arrow's types: only when asked

        print(f"tracehouse {tracehouse.__version__} ({IMPORTER_VERSION})")
        parser.exit(0)


def _add_settings(command: argparse.ArgumentParser, names: Sequence[str]) -> None:
    """Flags for the named settings, with help from their one declaration; a flag that is not
    given stays None, so the environment (then the default) decides."""
    declared = list(command.get_default("setting_names") or [])
    command.set_defaults(setting_names=declared + [n for n in names if n not in declared])
    for spec in SETTINGS:
        if spec.name not in names or spec.metadata["flag"] is None:
            continue
        kind = spec.metadata["kind"]
        if kind is bool:
            command.add_argument(
                spec.metadata["flag"],
                dest=spec.name,
                action="store_true",
                default=None,
                help=describe(spec).replace("%", "%%"),
            )
        else:
            command.add_argument(
                spec.metadata["flag"],
                dest=spec.name,
                type=int if kind is int else float if kind is float else str,
                metavar=spec.name.upper() if kind is not Path else "PATH",
                help=describe(spec).replace("%", "%%"),
            )


def _environment_only_settings() -> str:
    """The build's settings that have no flag, each with its meaning, wrapped to the width."""
    import textwrap

    from tracehouse.serve import render

    width = min(render.terminal_width(sys.stdout), 100)
    lines = ["settings read from the environment only:"]
    for spec in SETTINGS:
        if spec.metadata["flag"] is not None or spec.name in ("sources",):
            continue
        lines.extend(
            textwrap.wrap(
                str(spec.metadata["doc"]).replace("%", "%%"),
                width,
                initial_indent=f"  {env_name(spec.name)}: ",
                subsequent_indent="      ",
            )
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="tracehouse",
        description="A warehouse for FlashInfer-Bench kernel benchmark results.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=OneLineParser, metavar="COMMAND"
    )

    def add(name: str, help_text: str) -> OneLineParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        assert isinstance(command, OneLineParser)  # (the subparsers' parser_class)
        _add_settings(command, ("warehouse", "catalog", "namespace"))
        if name in READ_COMMANDS:
            _add_settings(command, ("as_of",))
        return command

    build = add("build", "Build or refresh the warehouse from a dataset folder or hf:// URI.")
    build.epilog_of = _environment_only_settings
    build.formatter_class = argparse.RawDescriptionHelpFormatter
    _add_settings(build, BUILD_SETTINGS)
    build.add_argument(
        "--no-wait", action="store_true", help="refuse at once if another build is running"
    )
    build.add_argument("--force", action="store_true", help="rebuild even when nothing changed")
    build.set_defaults(handler=cmd_build)

    query = add("query", "Run one read-only SQL statement against the warehouse.")
    query.add_argument("sql", help="one read-only SQL statement (SELECT, WITH, DESCRIBE, ...)")
    query.add_argument("--format", choices=OUTPUT_FORMATS, default="table")
    query.add_argument(
        "--limit",
        type=_non_negative_int,
        help=f"rows shown in table format (default {DEFAULT_QUERY_ROWS}; 0 for all); "
        "csv and json always write every row",
    )
    query.add_argument("--wide", action="store_true", help=WIDE_HELP)
    query.set_defaults(handler=cmd_query)

    board = add(
        "leaderboard",
        "Per-definition leaderboard, one block per hardware: speed against the baseline beside "
        "coverage, nothing slower than the baseline above it.",
    )
    board.add_argument(
        "definition", help="the definition's name (`tracehouse query` lists them in runs)"
    )
    board.add_argument(
        "--hardware", help="only this normalized hardware, any case (e.g. B200 or b200)"
    )
    board.add_argument("--format", choices=OUTPUT_FORMATS, default="table")
    board.add_argument(
        "--wide", action="store_true", help="every column with its full name, names not elided"
    )
    board.set_defaults(handler=cmd_leaderboard)

    export = add("export", "Export a Parquet snapshot and/or KernelIndex-style JSON.")
    export.add_argument(
        "--snapshot", help="folder to write every table as Parquet plus manifest.json"
    )
    export.add_argument(
        "--kernelindex",
        nargs=2,
        metavar=("DEFINITION", "OUT"),
        help="all results for one definition as JSON",
    )
    export.add_argument(
        "--flashinfer-trace",
        metavar="OUT",
        help="a FlashInfer-Trace dataset folder (current layout) FlashInfer-Bench loads; "
        "OUT must be new or empty",
    )
    export.add_argument(
        "--source", help="with --flashinfer-trace: the source to export (needed when several)"
    )
    export.add_argument(
        "--definition",
        action="append",
        metavar="NAME",
        help="with --flashinfer-trace: only this definition (repeat for more)",
    )
    export.set_defaults(handler=cmd_export)

    record = add(
        "record", "Show one run's KernelIndex record (run id, a unique prefix, or external id)."
    )
    record.add_argument("id", help="a run id, a unique prefix of one, or an external id")
    record.add_argument(
        "--json",
        action="store_true",
        help="print only the canonical manifest {run, protocol, environment}",
    )
    record.add_argument(
        "--html",
        metavar="OUT",
        help="write the run's record page (as the report shows it) to the file OUT",
    )
    record.set_defaults(handler=cmd_record)

    report = add(
        "report",
        "Write the static HTML report (overview + one page per definition) for offline viewing.",
    )
    report.add_argument("--out", required=True, help="folder to write the report into")
    report.set_defaults(handler=cmd_report)

    changes = add(
        "changes",
        "What changed between two states of each source (default: its previous snapshot and "
        "its current one): regressions, improvements, newly failing/passing, solutions and "
        "workloads appeared/disappeared, new record holders; for people and CI.",
    )
    changes.add_argument(
        "--since",
        metavar="SNAPSHOT|REVISION|DATE",
        help="compare with this earlier state instead: a snapshot id or commit sha (or a "
        "prefix), a requested revision, or an ISO date/time (UTC; each source's last build "
        "at or before it)",
    )
    changes.add_argument(
        "--source",
        help="only this source (its name in `tracehouse sources`, or the folder or hf:// URI "
        "given to `tracehouse build --source`)",
    )
    changes.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit with status 1, and say why in one line on stderr, when a regression is "
        "listed (for CI); 2 stays a usage error",
    )
    _add_settings(
        changes, ("regression_min_history", "regression_min_change", "regression_z_threshold")
    )
    changes.add_argument("--format", choices=OUTPUT_FORMATS, default="table")
    changes.add_argument(
        "--wide",
        action="store_true",
        help="name each workload by its uuid too (and each leader change by its comparison key)",
    )
    changes.set_defaults(handler=cmd_changes)

    demo = add(
        "demo", "Generate the demo dataset (if missing), build the warehouse, print a leaderboard."
    )
    demo.add_argument(
        "--source", default="data/demo", help="where the demo dataset lives (default data/demo)"
    )
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument(
        "--revision", help="revision recorded for the demo data (default: derived from the seed)"
    )
    demo.set_defaults(handler=cmd_demo)

    # The schema is the same in every warehouse; --warehouse is taken (and not needed) so a
    # script can pass it to every command alike.
    tables = add(
        "tables",
        "Describe every table and view (or one), column by column (the same in every warehouse).",
    )
    tables.add_argument("name", nargs="?", help="only this table or view")
    tables.add_argument("--wide", action="store_true", help="lines not wrapped to the terminal")
    tables.set_defaults(handler=cmd_tables)

    generations = add("generations", "List the kept generations (completed builds).")
    generations.add_argument("--format", choices=OUTPUT_FORMATS, default="table")
    generations.add_argument("--wide", action="store_true", help=WIDE_HELP)
    generations.set_defaults(handler=cmd_generations)

    sources = add("sources", "List the sources the warehouse holds: revision, snapshot, counts.")
    sources.add_argument("--format", choices=OUTPUT_FORMATS, default="table")
    sources.add_argument("--wide", action="store_true", help=WIDE_HELP)
    sources.set_defaults(handler=cmd_sources)

    remove = add(
        "remove-source",
        "Remove one source's rows from the warehouse (a new generation, like any build).",
    )
    remove.add_argument("name", help="the source's name, as `tracehouse sources` lists it")
    _add_settings(remove, ("lock_timeout_s",))
    remove.set_defaults(handler=cmd_remove_source)

    rollback = add(
        "rollback", "Make an earlier generation current again (default: the one before)."
    )
    rollback.add_argument(
        "generation", nargs="?", help="generation folder name or number (see `generations`)"
    )
    rollback.set_defaults(handler=cmd_rollback)
    return parser


# More rows than any table holds; a larger number is a typo (and overflows DuckDB's LIMIT).
MAX_LIMIT = 10**12


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    if value > MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_LIMIT:,} (0 for all), got {value}")
    return value
