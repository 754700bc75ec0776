"""The handler of each ``tracehouse`` subcommand: a thin wrapper over the functions the Dagster
assets call, importing the heavy libraries only when it runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tracehouse.cli_leaderboard import print_leaderboard
from tracehouse.cli_output import (
    UsageError,
    print_error,
    print_lines,
    print_rows,
    progress_bar,
    row_writer,
)
from tracehouse.settings import Settings, SettingsError, load_settings

DEFAULT_QUERY_ROWS = 200
LIST_DEFINITIONS_HINT = '`tracehouse query "SELECT DISTINCT definition FROM runs"` lists them'


# Commands that only read: with an object-store warehouse (or --as-of) they read a local replica
# of the state published in the Iceberg catalog.
READ_COMMANDS = frozenset(
    {"query", "leaderboard", "export", "record", "report", "changes", "sources"}
)


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
        from tracehouse.publish.iceberg.replica import reading_settings

        settings = reading_settings(settings)
    return settings


def cmd_build(args: argparse.Namespace) -> int:
    from tracehouse.build import build_warehouse
    from tracehouse.ingest.plan import refuse_imports

    settings = _settings(args)
    if settings.catalog is None:
        # A build that parses in this process (one changed group) converts rows without
        # pandas, 0.5 s of a one-file build, and DuckDB and pyarrow load without numpy, 0.1 s
        # of every build that writes a generation; Iceberg's writer is left to import what it
        # needs.
        refuse_imports("pandas", "numpy")
    result = build_warehouse(settings, progress=progress_bar(), force=args.force)
    print_lines(result.summary_lines())
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from tracehouse.serve import queries, render

    settings = _settings(args)
    if args.format != "table":
        columns, batches = queries.user_query_batches(settings, args.sql)
        row_writer(args.format)(sys.stdout, columns, batches)
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
        print_lines([f"{shown:,} of {total:,} rows shown (--limit N for more, --limit 0 for all)"])
    else:
        print(f"({total:,} row{'s' if total != 1 else ''})")
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from tracehouse.serve import queries

    settings = _settings(args)
    result = queries.leaderboard(settings, args.definition, hardware=args.hardware)
    if not result.rows:
        reason = queries.leaderboard_not_found(settings, args.definition, args.hardware)
        raise LookupError(f"{reason}; {LIST_DEFINITIONS_HINT}")
    if args.format == "table":
        print_leaderboard(result, args.wide)
    else:
        row_writer(args.format)(sys.stdout, result.columns, [result.rows])
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from tracehouse.serve.report import report_summary_line, write_report

    _require_folder_target("--out", Path(args.out))
    result = write_report(_settings(args), Path(args.out))
    print_lines([report_summary_line(result)])
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
        print_lines([written.summary(definition, out)])
    if args.snapshot:
        manifest = export.export_snapshot(settings, Path(args.snapshot))
        rows = sum(table["rows"] for table in manifest["tables"].values())
        print_lines(
            [f"exported {len(manifest['tables'])} tables ({rows:,} rows) to {args.snapshot}"]
        )
    if args.flashinfer_trace:
        from tracehouse.serve.fib_export import export_flashinfer_trace

        out = Path(args.flashinfer_trace)
        written = export_flashinfer_trace(
            settings, out, source=args.source, definitions=args.definition or []
        )
        print_lines([written.summary(out)])
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
        print_lines([f"wrote the record page of run {row['run_id']} to {args.html}"])
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
        print_lines([summary.rstrip("\n"), ""] if marker else [summary])
        if marker:
            print(marker + render.json_safe(manifest), end="" if manifest.endswith("\n") else "\n")
    return 0


def cmd_changes(args: argparse.Namespace) -> int:
    from tracehouse.serve import changes, changes_text
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
        print(changes_text.report_text(report, wide=args.wide, width=width))
    elif args.format == "json":
        from tracehouse.serve import render

        print(render.json_safe(changes_text.report_json(report)))
    else:
        row_writer(args.format)(
            sys.stdout, list(changes_text.CSV_COLUMNS), [changes_text.report_rows(report)]
        )
    failure = changes_text.regression_failure_line(report, wide=args.wide)
    if args.fail_on_regression and failure is not None:
        sys.stdout.flush()
        print_error(f"tracehouse changes: {failure}")
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
        print_lines(
            [
                f"generated a demo dataset in {source}: {generated.definitions:,} definitions, "
                f"{generated.solutions:,} solutions, {generated.trace_lines:,} trace lines "
                f"(seed {args.seed})"
            ]
        )
    result = build_warehouse(settings, progress=progress_bar())
    print_lines(result.summary_lines())
    definition = busiest_definition(settings)
    print()
    print_lines([f"leaderboard for {definition} (`tracehouse leaderboard {definition}`):"])
    print_leaderboard(leaderboard(settings, definition), wide=False)
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    import difflib
    import textwrap

    from tracehouse.schemas import SETTING_TABLES, TABLES, VIEWS
    from tracehouse.serve import render
    from tracehouse.sql_files import sql_shown

    described: dict[str, tuple[str, list[tuple[str, str, str]]]] = {}
    for table in TABLES.values():
        described[table.name] = (
            f"{table.name}: {table.doc}",
            [(c.name, str(c.type), c.doc) for c in table.columns],
        )
    for view in VIEWS.values():
        described[view.name] = (
            f"{view.name} (view, {sql_shown(view.name)}): {view.doc}",
            [(c.name, "", c.doc) for c in view.columns],
        )
    for relation in SETTING_TABLES.values():
        described[relation.name] = (
            f"{relation.name} (table, {sql_shown(relation.name)}): {relation.doc}",
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
        from tracehouse.publish.iceberg.catalog import publication_lines

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
    print_rows(args.format, columns, values, args.wide)
    return 0


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
    print_rows(args.format, columns, values, args.wide)
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
    print_lines(
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
        print_lines([f"generation {target.name} is already current"])
        return 0
    print_lines(
        [
            f"current generation is now {target.name} (was "
            f"{previous.name if previous else 'none'}); the next `tracehouse build` rebuilds "
            "from its source"
        ]
    )
    return 0
