"""What a person sees of a ``tracehouse`` command besides its answer: an error as one line on
stderr, prose wrapped to the terminal, rows as a table, CSV or JSON, and a progress bar on a
terminal only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any


class UsageError(Exception):
    """A command line argparse cannot parse; reported in one line, exit 2."""


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


def _one_line(error: BaseException) -> str:
    from tracehouse.serve import render

    return render.message(str(error)) or type(error).__name__


def _print_error(line: str) -> None:
    """One line on stderr, whatever file name, typed value or SQL it quotes (render.message)."""
    from tracehouse.serve import render

    print(render.message(line), file=sys.stderr)
