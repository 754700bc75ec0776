"""The ``tracehouse`` command. Every subcommand is a thin wrapper over the same functions the
Dagster assets call; heavy libraries are imported only by the subcommands that need them, so
an up-to-date ``build`` returns in milliseconds.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.settings import Settings, load_settings

OUTPUT_FORMATS = ("table", "csv", "json")


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    return load_settings(warehouse=getattr(args, "warehouse", None), **extra)


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


def cmd_build(args: argparse.Namespace) -> int:
    from pipelines.build import build_warehouse

    settings = _settings(
        args,
        source=args.source,
        revision=args.revision,
        baselines_file=Path(args.baselines) if args.baselines else None,
        workers=args.workers,
        lock_timeout_s=0.0 if args.no_wait else args.wait,
        include_blobs=args.include_blobs or None,
        exact=args.exact,
    )
    result = build_warehouse(settings, progress=_progress_bar(), force=args.force)
    print("\n".join(result.summary_lines()))
    return 0


def _print_frame(frame: Any, output: str) -> None:
    import polars as pl

    if output == "csv":
        sys.stdout.write(frame.write_csv())
    elif output == "json":
        sys.stdout.write(frame.write_json() + "\n")
    else:
        with pl.Config(
            tbl_rows=200,
            tbl_cols=40,
            fmt_str_lengths=80,
            tbl_width_chars=240,
            tbl_hide_dataframe_shape=True,
        ):
            print(frame)


def cmd_query(args: argparse.Namespace) -> int:
    from pipelines.queries import fetch

    _print_frame(fetch(_settings(args), args.sql, user_sql=True), args.format)
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from pipelines.queries import leaderboard

    frame = leaderboard(_settings(args), args.definition, hardware=args.hardware)
    if frame.height == 0:
        print(f"no runs for definition {args.definition!r}", file=sys.stderr)
        return 1
    _print_frame(frame, args.format)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pipelines.report import report_summary_line, write_report

    result = write_report(_settings(args), Path(args.out))
    print(report_summary_line(result))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pipelines import export

    settings = _settings(args)
    if args.kernelindex:
        definition, out = args.kernelindex
        count = export.export_kernelindex(settings, definition, Path(out))
        print(f"wrote {count} runs of {definition} to {out}")
    if args.snapshot:
        manifest = export.export_snapshot(settings, Path(args.snapshot))
        print(f"exported {len(manifest['tables'])} tables to {args.snapshot}")
    if not args.kernelindex and not args.snapshot:
        print(
            "nothing to export: give --snapshot DIR and/or --kernelindex DEFINITION OUT",
            file=sys.stderr,
        )
        return 2
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    from pipelines import export

    settings = _settings(args)
    if args.json:
        sys.stdout.write(export.record_manifest_json(settings, args.id) + "\n")
    else:
        print(export.record_text(settings, args.id))
    return 0


def cmd_changes(args: argparse.Namespace) -> int:
    from pipelines import changes
    from pipelines.queries import connect

    settings = _settings(
        args,
        regression_min_history=args.min_history,
        regression_min_change=args.min_change,
        regression_z_threshold=args.z_threshold,
    )
    connection = connect(settings)
    try:
        report = changes.change_report(connection, settings, since=args.since, source=args.source)
    finally:
        connection.close()
    print(changes.report_json(report) if args.format == "json" else changes.report_text(report))
    if args.fail_on_regression and report.regressions.height > 0:
        return changes.EXIT_REGRESSIONS_FOUND
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from pipelines.build import build_warehouse
    from pipelines.demo import generate_dataset
    from pipelines.queries import leaderboard

    source = Path(args.source)
    if not (source / "traces").exists():
        generated = generate_dataset(source, seed=args.seed)
        print(
            f"generated a demo dataset in {source}: {generated.definitions} definitions, "
            f"{generated.solutions} solutions, {generated.trace_lines} trace lines (seed {args.seed})"
        )
    # Demo data has no upstream commit; a revision derived from the generator's seed keeps
    # implementation and run digests defined and stable.
    revision = (
        args.revision or hashlib.sha1(f"tracehouse-demo seed={args.seed}".encode()).hexdigest()
    )
    settings = _settings(args, source=str(source), revision=revision)
    result = build_warehouse(settings, progress=_progress_bar())
    print("\n".join(result.summary_lines()))
    from pipelines.queries import busiest_definition

    definition = busiest_definition(settings)
    print(f"\nleaderboard for {definition} (`tracehouse leaderboard {definition}`):")
    _print_frame(leaderboard(settings, definition), "table")
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    from pipelines.schemas import TABLES, VIEWS

    for table in TABLES.values():
        print(f"{table.name}: {table.doc}")
        for column in table.columns:
            print(f"  {column.name:<28} {str(column.type):<22} {column.doc}")
    for view in VIEWS.values():
        print(f"{view.name} (view, sql/{view.name}.sql): {view.doc}")
        for column in view.columns:
            print(f"  {column.name:<28} {column.doc}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracehouse",
        description="A warehouse for FlashInfer-Bench kernel benchmark results.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.add_argument(
            "--warehouse", help="warehouse folder (env TRACEHOUSE_WAREHOUSE; default ./warehouse)"
        )
        return command

    build = add("build", "Build or refresh the warehouse from a dataset folder or hf:// URI.")
    build.add_argument(
        "--source",
        help="dataset folder or hf://datasets/<org>/<name>[@rev] (env TRACEHOUSE_SOURCE)",
    )
    build.add_argument(
        "--revision",
        help="40-hex dataset revision for implementation digests (env TRACEHOUSE_REVISION)",
    )
    build.add_argument(
        "--baselines",
        help="baseline map JSON {definition: {default: solution}} (env TRACEHOUSE_BASELINES_FILE)",
    )
    build.add_argument(
        "--workers", type=int, help="parser processes (env TRACEHOUSE_WORKERS; default: cores)"
    )
    build.add_argument(
        "--wait",
        type=float,
        default=600.0,
        help="seconds to wait for a running build (default 600)",
    )
    build.add_argument(
        "--no-wait", action="store_true", help="refuse at once if another build is running"
    )
    build.add_argument(
        "--include-blobs", action="store_true", help="also mirror blob/ from the Hub"
    )
    build.add_argument("--force", action="store_true", help="rebuild even when nothing changed")
    build.add_argument(
        "--exact",
        action="store_true",
        default=None,
        help="take every record through the exact per-line reference path (env TRACEHOUSE_EXACT)",
    )
    build.set_defaults(handler=cmd_build)

    query = add("query", "Run one read-only SQL query against the warehouse.")
    query.add_argument("sql")
    query.add_argument("--format", choices=OUTPUT_FORMATS, default="table")
    query.set_defaults(handler=cmd_query)

    board = add("leaderboard", "Per-definition leaderboard, one block per hardware.")
    board.add_argument("definition")
    board.add_argument("--hardware", help="only this normalized hardware (e.g. B200)")
    board.add_argument("--format", choices=OUTPUT_FORMATS, default="table")
    board.set_defaults(handler=cmd_leaderboard)

    report = add(
        "report",
        "Write the static HTML report (overview + one page per definition) for offline viewing.",
    )
    report.add_argument("--out", required=True, help="folder to write the report into")
    report.set_defaults(handler=cmd_report)

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
    export.set_defaults(handler=cmd_export)

    record = add("record", "Show one run's KernelIndex record (by run id or external id).")
    record.add_argument("id")
    record.add_argument(
        "--json",
        action="store_true",
        help="print only the canonical manifest {run, protocol, environment}",
    )
    record.set_defaults(handler=cmd_record)

    changes = add(
        "changes",
        "New record holders (record_events) and regressions (regressions), for people and CI.",
    )
    changes.add_argument(
        "--since",
        metavar="WHEN",
        help="only changes observed at or after an ISO date/time (UTC), or since a revision "
        "or snapshot id the warehouse read",
    )
    changes.add_argument(
        "--source", help="only changes of this source (as given to `tracehouse build --source`)"
    )
    changes.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit with status 1 when a regression is listed (for CI); 2 stays a usage error",
    )
    changes.add_argument(
        "--min-history",
        type=int,
        help="earlier results needed to judge one (env TRACEHOUSE_REGRESSION_MIN_HISTORY; default 2)",
    )
    changes.add_argument(
        "--min-change",
        type=float,
        help="relative slowdown against their mean, 0.10 = 10%% "
        "(env TRACEHOUSE_REGRESSION_MIN_CHANGE; default 0.10)",
    )
    changes.add_argument(
        "--z-threshold",
        type=float,
        help="z-score against their distribution (env TRACEHOUSE_REGRESSION_Z_THRESHOLD; default 5)",
    )
    changes.add_argument("--format", choices=("table", "json"), default="table")
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

    tables = sub.add_parser("tables", help="Describe every table and view, column by column.")
    tables.set_defaults(handler=cmd_tables)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from pipelines.warehouse import WarehouseBusy, WarehouseMissing

    try:
        return int(args.handler(args))
    except BrokenPipeError:  # `tracehouse ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except (
        WarehouseBusy,
        WarehouseMissing,
        FileNotFoundError,
        ValueError,
        PermissionError,
        LookupError,
    ) as error:
        print(f"tracehouse {args.command}: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # a database error from user SQL is a message, not a traceback
        if type(error).__module__.startswith(("duckdb", "_duckdb")):
            print(f"tracehouse {args.command}: {error}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
