"""The ``tracehouse`` command. Every subcommand is a thin wrapper over the same functions the
Dagster assets call; heavy libraries are imported only by the subcommands that need them, so
read commands start in a fraction of a second and an up-to-date ``build`` returns at once.

What a person sees: one line on stderr for every error (naming the argument or file and the
reason; exit 2 for anything the user can change), one line on Ctrl-C or SIGTERM (exit 130/143;
``tracehouse.interrupts``), never a traceback (``TRACEHOUSE_DEBUG=1`` shows one for an internal
error).
"""

from __future__ import annotations

import contextlib
import os
import sys

from tracehouse import interrupts

# First thing when this module is the program (`tracehouse` or `python -m tracehouse.cli`), so
# Ctrl-C while the rest is imported is also one line, not a traceback.
if __name__ == "__main__" or os.path.basename(sys.argv[0]) == "tracehouse":
    interrupts.install_early()

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from tracehouse.schemas import IMPORTER_VERSION
from tracehouse.settings import (
    SETTINGS,
    Settings,
    SettingsError,
    describe,
    env_name,
    load_settings,
)

OUTPUT_FORMATS = ("table", "csv", "json")
WIDE_HELP = "one line per row however wide (default: fit the terminal, one block per row)"
DEFAULT_QUERY_ROWS = 200
LIST_DEFINITIONS_HINT = '`tracehouse query "SELECT DISTINCT definition FROM runs"` lists them'
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


# Commands that only read: with an object-store warehouse (or --as-of) they read a local replica
# of the state published in the Iceberg catalog.
READ_COMMANDS = frozenset(
    {"query", "leaderboard", "export", "record", "report", "changes", "sources"}
)


class UsageError(Exception):
    """A command line argparse cannot parse; reported in one line, exit 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line naming it, not a usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


class _VersionAction(argparse.Action):
    """``--version``, with the package version looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        import tracehouse

        print(f"tracehouse {tracehouse.__version__} ({IMPORTER_VERSION})")
        parser.exit(0)


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    # Only the settings this command has flags for: `changes --source` is a filter, not one.
    declared = getattr(args, "setting_names", ())
    given: dict[str, Any] = {name: getattr(args, name, None) for name in declared}
    if getattr(args, "no_wait", False):
        given["lock_timeout_s"] = 0.0
    given.update(extra)
    settings = load_settings(**given)
    if getattr(args, "command", None) in READ_COMMANDS and (
        settings.object_store is not None or settings.as_of is not None
    ):
        from tracehouse.publish.iceberg import reading_settings

        settings = reading_settings(settings)
    return settings


def _progress_bar() -> Any:
    """A tqdm bar on stderr when it is a terminal; silent otherwise (logs, CI, pipes)."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bars: dict[str, Any] = {}

    def progress(phase: str, done: int, total: int) -> None:
        bar = bars.get(phase)
        if bar is None:
            bar = bars[phase] = tqdm(
                total=total, desc=phase, unit="file", file=sys.stderr, leave=False
            )
        bar.total = total
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    return progress


def _print_lines(lines: Sequence[str]) -> None:
    """Prose output wrapped to the reader's width (COLUMNS or the terminal's; a pipe gets
    whole lines), every control character in it (a name from the dataset) escaped."""
    from tracehouse.serve import render

    safe = [render.safe(line) for text in lines for line in text.split("\n")]
    width = render.known_width(sys.stdout)
    print("\n".join(render.fit_lines(safe, width) if width else safe))


def cmd_build(args: argparse.Namespace) -> int:
    from tracehouse.build import build_warehouse

    result = build_warehouse(_settings(args), progress=_progress_bar(), force=args.force)
    _print_lines(result.summary_lines())
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from tracehouse.serve import queries, render

    settings = _settings(args)
    if args.format != "table":
        columns, batches = queries.user_query_batches(settings, args.sql)
        _row_writer(args.format)(sys.stdout, columns, batches)
        return 0
    limit = DEFAULT_QUERY_ROWS if args.limit is None else args.limit
    width = 10**9 if args.wide else render.terminal_width(sys.stdout)
    if limit == 0:  # every row: spooled to disk and printed line by line, like csv and json
        table, spool = queries.user_query_table(settings, args.sql)
        with spool:
            for line in table.lines(width):
                sys.stdout.write(line + "\n")
        print(f"({table.rows:,} row{'s' if table.rows != 1 else ''})")
        return 0
    result = queries.user_query(settings, args.sql, limit=limit)
    print("\n".join(render.table(result.columns, result.rows, width)))
    shown, total = len(result.rows), result.total_rows
    if shown < total:
        _print_lines([f"{shown:,} of {total:,} rows shown (--limit N for more, --limit 0 for all)"])
    else:
        print(f"({total:,} row{'s' if total != 1 else ''})")
    return 0


# The leaderboard as a terminal table: one block per hardware, speed and coverage side by side;
# (column, short header, how the value is written). --wide shows every column in full instead.
LEADERBOARD_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("rank", "#", "count"),
    ("solution", "solution", "name"),
    ("geomean_speedup", "geo×", "ratio"),
    ("coverage", "cov", "percent"),
    ("passed", "passed", "text"),
    ("win_rate", "win", "percent"),
    ("latency_us", "µs", "number"),
    ("fib_all_gpus_avg_speedup", "fib×", "ratio"),
    ("note", "note", "name"),
)

LEADERBOARD_LEGEND = (
    "geo× geometric-mean speedup over the baseline on the workloads both passed · cov "
    "workloads passed of the slice's · win share of them faster · µs geometric mean of the "
    "median latency · fib× FlashInfer-Bench's score, every GPU mixed · --wide: every column"
)

LEADERBOARD_CHANGE_LEGEND = (
    "regressed / faster / newly passing: what `tracehouse changes` finds in the latest results "
    "(each source's previous snapshot against its current one); `was` is the figure with those "
    "workloads at the mean of their earlier results"
)
LEADERBOARD_FIB_ZERO = (
    "fib× 0.000: FlashInfer-Bench scores 0 for a solution with any failed workload "
    "(get_solution_score), whatever its speed elsewhere"
)


def _leaderboard_cell(kind: str, value: Any) -> str:
    from tracehouse.serve import render

    if value is None:
        return "-"
    if kind == "count":
        return f"{value:,}"
    if kind == "ratio":
        return f"{value:,.3f}"
    if kind == "percent":
        return f"{value:.0%}"
    if kind == "number":
        return f"{value:,.2f}" if value < 1000 else f"{value:,.0f}"
    return render.text(value)


def _change_note(row: dict[str, Any]) -> list[str]:
    """What the latest `changes` comparison found (queries.LEADERBOARD_CHANGE_COLUMNS), with the
    figure as it was before: ``regressed: was 0.440×``."""
    if row["earlier_geomean_speedup"] is not None:
        was = f"was {row['earlier_geomean_speedup']:,.3f}×"
    elif row["earlier_latency_us"] is not None:
        was = f"was {_leaderboard_cell('number', row['earlier_latency_us'])} µs"
    else:
        was = None
    notes = []
    if row["regressed_workloads"]:
        notes.append(f"regressed: {was}" if was else "regressed")
    if row["improved_workloads"]:
        notes.append(f"faster: {was}" if was and not row["regressed_workloads"] else "faster")
    if row["newly_passing_workloads"]:
        notes.append(f"newly passing {row['newly_passing_workloads']:,}")
    if row["newly_failing_workloads"]:
        notes.append(f"newly failing {row['newly_failing_workloads']:,}")
    return notes


def _leaderboard_note(row: dict[str, Any]) -> str:
    """What the speed figure does not say: the baseline, why there is no speedup, skipped
    records, a FlashInfer-Bench score zeroed by a failure (the change note comes first)."""
    notes = []
    if row["is_baseline"] or row["solution"] == row["baseline_solution"]:
        notes.append("baseline")
    if row["speedup_reason"]:
        notes.append(str(row["speedup_reason"]))
    if row["runs_not_evaluated"]:
        notes.append(f"{row['runs_not_evaluated']:,} skipped")
    if row["fib_all_gpus_avg_speedup"] == 0:
        notes.append("fib× 0: a failure")
    return ", ".join(notes)


def _print_leaderboard(result: Any, wide: bool) -> None:
    import textwrap

    from tracehouse.serve import render
    from tracehouse.serve.queries import LEADERBOARD_ORDER_RULE

    if wide:
        print("\n".join(render.table(result.columns, result.rows, width=10**9)))
        print(LEADERBOARD_ORDER_RULE)
        return
    width = render.terminal_width(sys.stdout)
    rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
    for row in rows:
        row["change_note"] = ", ".join(_change_note(row))
        row["other_notes"] = _leaderboard_note(row)
    headers = [header for _, header, _ in LEADERBOARD_COLUMNS]
    right = [
        kind in ("count", "ratio", "percent", "number") or name == "passed"
        for name, _, kind in LEADERBOARD_COLUMNS
    ]
    elidable = [i for i, (_, _, kind) in enumerate(LEADERBOARD_COLUMNS) if kind == "name"]
    blocks = list(dict.fromkeys(row["hardware"] for row in rows))
    for number, hardware in enumerate(blocks):
        block = [row for row in rows if row["hardware"] == hardware]
        baseline = block[0]["baseline_solution"]
        heading = f"{hardware}: baseline {baseline}" if baseline else f"{hardware}: no baseline"
        if number:
            print()
        print(render.fit_lines([render.safe(heading)], width)[0][:width])
        print("\n".join(_leaderboard_block(block, headers, right, elidable, width)))
    print(textwrap.fill(LEADERBOARD_ORDER_RULE, width=width))
    print(textwrap.fill(LEADERBOARD_LEGEND, width=width))
    if any(row["latest_change"] for row in rows):
        print(textwrap.fill(LEADERBOARD_CHANGE_LEGEND, width=width))
    if any(row["fib_all_gpus_avg_speedup"] == 0 for row in rows):
        print(textwrap.fill(LEADERBOARD_FIB_ZERO, width=width))


def _leaderboard_block(
    block: list[dict[str, Any]],
    headers: list[str],
    right: list[bool],
    elidable: list[int],
    width: int,
) -> list[str]:
    """One hardware's grid in ``width``. A change note (``regressed: was 0.440×``) is never
    elided: the other notes give way first, then the solution names; only when that cannot fit
    is the note elided like any name."""
    from tracehouse.serve import render

    def grid(other_notes: bool, columns: list[int]) -> list[str]:
        cells = []
        for row in block:
            notes = [row["change_note"], row["other_notes"] if other_notes else ""]
            row["note"] = ", ".join(note for note in notes if note)
            cells.append(
                [_leaderboard_cell(kind, row[name]) for name, _, kind in LEADERBOARD_COLUMNS]
            )
        return render.fitted_table(headers, cells, width=width, right=right, elidable=columns)

    if any(row["change_note"] for row in block):
        names_only = [i for i in elidable if LEADERBOARD_COLUMNS[i][0] != "note"]
        for other_notes in (True, False):
            table = grid(other_notes, names_only)
            if all(len(line) <= width for line in table):
                return table
    return grid(True, elidable)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from tracehouse.serve import queries

    settings = _settings(args)
    result = queries.leaderboard(settings, args.definition, hardware=args.hardware)
    if not result.rows:
        reason = queries.leaderboard_not_found(settings, args.definition, args.hardware)
        raise LookupError(f"{reason}; {LIST_DEFINITIONS_HINT}")
    if args.format == "table":
        _print_leaderboard(result, args.wide)
    else:
        _row_writer(args.format)(sys.stdout, result.columns, [result.rows])
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from tracehouse.serve.report import report_summary_line, write_report

    _require_folder_target("--out", Path(args.out))
    result = write_report(_settings(args), Path(args.out))
    _print_lines([report_summary_line(result)])
    return 0


def _require_folder_target(flag: str, path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{flag} {path}: is a file, not a folder")


def cmd_export(args: argparse.Namespace) -> int:
    if not args.kernelindex and not args.snapshot and not args.flashinfer_trace:
        raise UsageError(
            "tracehouse export: nothing to export: give --snapshot DIR, "
            "--kernelindex DEFINITION OUT and/or --flashinfer-trace OUT"
        )
    if (args.source or args.definition) and not args.flashinfer_trace:
        flag = "--source" if args.source else "--definition"
        raise UsageError(f"tracehouse export: {flag} filters --flashinfer-trace OUT only")
    if args.snapshot:
        _require_folder_target("--snapshot", Path(args.snapshot))
    if args.kernelindex and Path(args.kernelindex[1]).is_dir():
        raise IsADirectoryError(f"--kernelindex OUT {args.kernelindex[1]}: is a folder, not a file")
    from tracehouse.serve import export

    settings = _settings(args)
    if args.kernelindex:
        definition, out = args.kernelindex
        written = export.export_kernelindex(settings, definition, Path(out))
        _print_lines([written.summary(definition, out)])
    if args.snapshot:
        manifest = export.export_snapshot(settings, Path(args.snapshot))
        rows = sum(table["rows"] for table in manifest["tables"].values())
        _print_lines(
            [f"exported {len(manifest['tables'])} tables ({rows:,} rows) to {args.snapshot}"]
        )
    if args.flashinfer_trace:
        from tracehouse.serve.fib_export import export_flashinfer_trace

        out = Path(args.flashinfer_trace)
        written = export_flashinfer_trace(
            settings, out, source=args.source, definitions=args.definition or []
        )
        _print_lines([written.summary(out)])
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    from tracehouse.serve import export

    settings = _settings(args)
    if args.html is not None:
        from tracehouse.serve.record_page import write_record_html

        out = Path(args.html)
        if out.is_dir():
            raise IsADirectoryError(f"--html {args.html}: is a folder, not a file")
        if not out.parent.is_dir():
            raise FileNotFoundError(f"--html {args.html}: folder {out.parent} does not exist")
        row = write_record_html(settings, args.id, out)
        _print_lines([f"wrote the record page of run {row['run_id']} to {args.html}"])
        return 0
    if args.json:
        sys.stdout.write(export.record_manifest_json(settings, args.id) + "\n")
    else:
        from tracehouse.serve import render

        # The summary is prose, fitted to the terminal; the manifest that ends it is JSON to
        # copy as it is (its digests are longer than a line), only made safe to print.
        summary, marker, manifest = export.record_text(settings, args.id).partition(
            export.RECORD_MANIFEST_MARKER
        )
        _print_lines([summary.rstrip("\n"), ""] if marker else [summary])
        if marker:
            print(marker + render.json_safe(manifest), end="" if manifest.endswith("\n") else "\n")
    return 0


def cmd_changes(args: argparse.Namespace) -> int:
    from tracehouse.serve import changes
    from tracehouse.serve.queries import connect, within_limits

    settings = _settings(args)
    connection = connect(settings)
    try:
        with within_limits(settings):
            report = changes.change_report(
                connection, settings, since=args.since, source=args.source
            )
    finally:
        connection.close()
    if args.format == "table":
        from tracehouse.serve import render

        # Wrapped here (80 columns for a pipe too): names are wrapped, never elided.
        width = render.terminal_width(sys.stdout)
        print(changes.report_text(report, wide=args.wide, width=width))
    elif args.format == "json":
        from tracehouse.serve import render

        print(render.json_safe(changes.report_json(report)))
    else:
        _row_writer(args.format)(
            sys.stdout, list(changes.CSV_COLUMNS), [changes.report_rows(report)]
        )
    failure = changes.regression_failure_line(report, wide=args.wide)
    if args.fail_on_regression and failure is not None:
        sys.stdout.flush()
        _print_error(f"tracehouse changes: {failure}")
        return changes.EXIT_REGRESSIONS_FOUND
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import hashlib

    from tracehouse.build import build_warehouse
    from tracehouse.demo import generate_dataset
    from tracehouse.serve.queries import busiest_definition, leaderboard

    source = Path(args.source)
    _require_folder_target("--source", source)
    # Demo data has no upstream commit; a revision derived from the generator's seed keeps
    # implementation and run digests defined and stable. Settings are checked first, so a bad
    # argument generates nothing.
    revision = (
        args.revision or hashlib.sha1(f"tracehouse-demo seed={args.seed}".encode()).hexdigest()
    )
    settings = _settings(args, source=str(source), revision=revision)
    if not (source / "traces").exists():
        # Written beside the target and renamed into place, so an interrupted demo never
        # leaves half a dataset that the next `tracehouse demo` would build as if complete.
        # The rename replaces only an empty folder; anything else is not ours to replace.
        if source.is_dir() and any(source.iterdir()):
            raise UsageError(
                f"tracehouse demo: --source {source}: a folder with files but no traces/;"
                " give an empty or new folder"
            )
        from tracehouse.files import replace_atomically

        generated = replace_atomically(
            source, lambda staging: generate_dataset(staging, seed=args.seed, overwrite=True)
        )
        _print_lines(
            [
                f"generated a demo dataset in {source}: {generated.definitions:,} definitions, "
                f"{generated.solutions:,} solutions, {generated.trace_lines:,} trace lines "
                f"(seed {args.seed})"
            ]
        )
    result = build_warehouse(settings, progress=_progress_bar())
    _print_lines(result.summary_lines())
    definition = busiest_definition(settings)
    print()
    _print_lines([f"leaderboard for {definition} (`tracehouse leaderboard {definition}`):"])
    _print_leaderboard(leaderboard(settings, definition), wide=False)
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    import difflib
    import textwrap

    from tracehouse.schemas import SETTING_TABLES, TABLES, VIEWS
    from tracehouse.serve import render

    described: dict[str, tuple[str, list[tuple[str, str, str]]]] = {}
    for table in TABLES.values():
        described[table.name] = (
            f"{table.name}: {table.doc}",
            [(c.name, str(c.type), c.doc) for c in table.columns],
        )
    for view in VIEWS.values():
        described[view.name] = (
            f"{view.name} (view, sql/{view.name}.sql): {view.doc}",
            [(c.name, "", c.doc) for c in view.columns],
        )
    for relation in SETTING_TABLES.values():
        described[relation.name] = (
            f"{relation.name} (table, sql/{relation.name}.sql): {relation.doc}",
            [(c.name, "", c.doc) for c in relation.columns],
        )
    names = list(described)
    if args.name is not None:
        if args.name not in described:
            close = difflib.get_close_matches(args.name, names, n=3, cutoff=0.6)
            hint = (
                f"did you mean {' or '.join(close)}?" if close else "`tracehouse tables` lists them"
            )
            raise LookupError(f"no table or view {args.name!r}; {hint}")
        names = [args.name]
    width = 10**9 if args.wide else render.terminal_width(sys.stdout)
    lines: list[str] = []
    for number, name in enumerate(names):
        title, columns = described[name]
        if number:
            lines.append("")
        lines.extend(textwrap.wrap(title, width, subsequent_indent="  ") or [title])
        for column, kind, doc in columns:
            lines.append(f"  {column}" + (f"  ({kind})" if kind else ""))
            lines.extend(
                textwrap.wrap(doc, width, initial_indent="      ", subsequent_indent="      ")
            )
    print("\n".join(render.fit_lines(lines, width)))
    return 0


def cmd_generations(args: argparse.Namespace) -> int:
    from tracehouse.publish.generations import describe_generation
    from tracehouse.warehouse import Warehouse

    settings = _settings(args)
    warehouse = Warehouse(settings.warehouse, settings.keep_generations)
    current = warehouse.current_generation()
    if settings.object_store is not None:  # its states are the catalog's publications
        from tracehouse.publish.iceberg import publication_lines

        rows = publication_lines(settings)
    else:
        rows = [
            describe_generation(folder, folder.resolve() == current)
            for folder in warehouse.completed_generations()
        ]
    if not rows:
        raise LookupError(f"no completed generation in {settings.warehouse}")
    columns = list(rows[0])
    values = [list(r.values()) for r in rows]
    _print_rows(args.format, columns, values, args.wide)
    return 0


def _row_writer(output_format: str) -> Any:
    """The writer of a machine-readable --format (csv or json)."""
    from tracehouse.serve import render

    return render.write_csv if output_format == "csv" else render.write_json


def _print_rows(
    output_format: str, columns: list[str], values: list[list[Any]], wide: bool = False
) -> None:
    """Rows in the --format asked: a table that fits the terminal (one block per row when a
    grid would not; full width with --wide), CSV or JSON."""
    from tracehouse.serve import render

    if output_format == "table":
        width = 10**9 if wide else render.terminal_width(sys.stdout)
        print("\n".join(render.table(columns, values, width=width, counts=True)))
    else:
        _row_writer(output_format)(sys.stdout, columns, [values])


def cmd_sources(args: argparse.Namespace) -> int:
    from tracehouse.serve.queries import reader

    settings = _settings(args)
    connection = reader(settings)
    try:
        result = connection.execute("SELECT * FROM source_summary ORDER BY source")
        columns = [d[0] for d in result.description or []]
        values = [list(row) for row in result.fetchall()]
    finally:
        connection.close()
    _print_rows(args.format, columns, values, args.wide)
    return 0


def cmd_remove_source(args: argparse.Namespace) -> int:
    from tracehouse.build import remove_source

    settings = _settings(args)
    if settings.object_store is not None:
        raise SettingsError(
            f"--warehouse {settings.object_store}: remove-source changes a local folder's "
            "generations; removing a source from an object-store warehouse is not supported yet"
        )
    result = remove_source(settings, args.name)
    lines = result.summary_lines()
    _print_lines(
        [
            f"removed source {args.name} from {result.warehouse} in {result.seconds:.2f} s "
            f"(generation {result.generation})",
            *(line for line in lines[1:] if not line.startswith("  files parsed")),
        ]
    )
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from tracehouse.publish import generations
    from tracehouse.warehouse import Warehouse

    settings = _settings(args)
    if settings.object_store is not None:
        raise SettingsError(
            f"--warehouse {settings.object_store}: rollback switches a local folder's "
            "generations; an object-store warehouse keeps every publication, read an earlier "
            "one with --as-of <revision|snapshot id>"
        )
    warehouse = Warehouse(settings.warehouse, settings.keep_generations)
    previous, target = generations.roll_back(warehouse, args.generation, settings.lock_timeout_s)
    if target == previous:
        _print_lines([f"generation {target.name} is already current"])
        return 0
    _print_lines(
        [
            f"current generation is now {target.name} (was "
            f"{previous.name if previous else 'none'}); the next `tracehouse build` rebuilds "
            "from its source"
        ]
    )
    return 0


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

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        _add_settings(command, ("warehouse", "catalog", "namespace"))
        if name in READ_COMMANDS:
            _add_settings(command, ("as_of",))
        return command

    build = add("build", "Build or refresh the warehouse from a dataset folder or hf:// URI.")
    build.epilog = _environment_only_settings()
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


def _one_line(error: BaseException) -> str:
    from tracehouse.serve import render

    return render.message(str(error)) or type(error).__name__


def _print_error(line: str) -> None:
    """One line on stderr, whatever file name, typed value or SQL it quotes (render.message)."""
    from tracehouse.serve import render

    print(render.message(line), file=sys.stderr)


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
    if "tracehouse.publish.iceberg" in sys.modules:  # the catalog or object store refused
        errors.extend(sys.modules["tracehouse.publish.iceberg"].catalog_errors())
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
            _print_error(str(error))
            return 2
        if isinstance(error, _user_errors()) or type(error).__module__.startswith(
            ("duckdb", "_duckdb")  # a database error from user SQL is a message
        ):
            _print_error(f"{command}: {_one_line(error)}")
            return 2
        if os.environ.get("TRACEHOUSE_DEBUG"):
            raise
        _print_error(
            f"{command}: internal error: {type(error).__name__}: {_one_line(error)} "
            "(TRACEHOUSE_DEBUG=1 shows the traceback)"
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
