"""bench/line_probe.py, the probe of where a parser worker's time goes (issue 26): its rules leg
does the product's per-line work (its values equal the product's runs rows), and a bad argument
is one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def probe(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.line_probe", "--data-root", str(tmp_path), *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_rules_leg_computes_the_product_rows_and_every_leg_is_timed(tmp_path: Path) -> None:
    done = probe(tmp_path, "--lines", "300", "--every", "1", "--rounds", "1", "--check")
    assert done.returncode == 0, done.stderr
    checked = re.search(r"^checked: ([\d,]+) runs of the rules leg equal", done.stdout, re.M)
    assert checked is not None, done.stdout
    summary = re.search(r"^\d+ trace files, ([\d,]+) lines \(0 not repeats", done.stdout, re.M)
    assert summary is not None, done.stdout
    # Every line of the generated corpus is a valid run, and every run was compared.
    assert int(checked[1].replace(",", "")) == int(summary[1].replace(",", "")) > 200
    legs = re.findall(r"^  (\S+) +[\d.]+ s +[\d.]+ us a line", done.stdout, re.M)
    assert legs[:3] == ["product", "rules", "rules+parquet"], done.stdout


def test_a_bad_argument_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = probe(tmp_path, "--every", "0")
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["bench.line_probe: --every 0: at least 1"]
    assert done.stdout == "" and not list(tmp_path.iterdir())
