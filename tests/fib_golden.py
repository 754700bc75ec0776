"""FlashInfer-Bench's own leaderboard figures (../shared/golden/fib-metrics) and warehouses built
from the datasets they were computed on, for the tests that compare tracehouse's views with them.
"""

from __future__ import annotations

import csv
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.shared_data import SHARED

FIB_GOLDEN_DIR = (SHARED / "golden" / "fib-metrics") if SHARED is not None else Path("/nonexistent")
DEMO_DATASET = "tracehouse_demo_seed7"
DEMO_SEED = 7


@dataclass(frozen=True)
class GoldenDataset:
    name: str
    source: Path | None  # None: the demo, generated at test time
    baselines_file: Path | None  # the web map the golden's `web_map`/`fixture_map` rows used


def golden_datasets() -> list[GoldenDataset]:
    """Every dataset FlashInfer-Bench loaded (datasets.csv, fib_from_path = ok)."""
    if SHARED is None:
        return []
    web_map = SHARED / "samples" / "flashinfer-trace" / "web_baseline_config" / "baselines.json"
    found = []
    for row in read_csv("datasets.csv"):
        if row["fib_from_path"] != "ok":
            continue
        name = row["dataset"]
        if name == DEMO_DATASET:
            found.append(GoldenDataset(name, None, None))
        elif name.startswith("fixture_"):
            source = FIB_GOLDEN_DIR / "fixtures" / name
            found.append(GoldenDataset(name, source, source / "baselines.json"))
        else:
            found.append(GoldenDataset(name, SHARED / row["path"], web_map))
    return found


def read_csv(name: str) -> list[dict[str, str]]:
    with (FIB_GOLDEN_DIR / name).open(newline="") as handle:
        return list(csv.DictReader(handle))


def recorded_tree_sha256(dataset: str) -> str:
    return next(r["tree_sha256"] for r in read_csv("datasets.csv") if r["dataset"] == dataset)


def tree_sha256(root: Path) -> str:
    """The golden README's digest: sha256 over the lines `path<TAB>sha256(bytes)`, sorted by
    path components, each ending in a newline."""
    files = sorted(
        (p.relative_to(root) for p in root.rglob("*") if p.is_file()), key=lambda p: p.parts
    )
    text = "".join(
        f"{p.as_posix()}\t{hashlib.sha256((root / p).read_bytes()).hexdigest()}\n" for p in files
    )
    return hashlib.sha256(text.encode()).hexdigest()


ULP = 2.0**-52


def same_float(expected: float | None, actual: float | None, ulps: int = 4) -> bool:
    """The golden README's comparison: |a-b| ≤ 4·2⁻⁵²·max(|a|,|b|); NaN equals NaN."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    if math.isinf(expected) or math.isinf(actual):
        return expected == actual
    return abs(expected - actual) <= ulps * ULP * max(abs(expected), abs(actual))


def golden_float(text: str) -> float | None:
    return None if text == "" else float(text)


def golden_int(text: str) -> int | None:
    return None if text == "" else int(text)


ERROR_KINDS = {
    "No baseline solution": "no_baseline",
    "Multiple baseline solutions": "multiple_baselines",
    "invalid performance data": "invalid_performance",
}


def error_kind(message: str) -> str:
    """The kind of a FlashInfer-Bench exception message, as tracehouse's `reason` names it."""
    kinds = [kind for text, kind in ERROR_KINDS.items() if text in message]
    assert len(kinds) == 1, f"unknown FlashInfer-Bench error {message!r}"
    return kinds[0]


def compare_rows(
    label: str,
    expected: dict[Any, dict[str, Any]],
    actual: dict[Any, dict[str, Any]],
    float_columns: tuple[str, ...] = (),
) -> None:
    """Every golden row has exactly one warehouse row with equal values, and no more rows."""
    missing = sorted(map(str, set(expected) - set(actual)))[:5]
    extra = sorted(map(str, set(actual) - set(expected)))[:5]
    assert not missing and not extra, f"{label}: missing {missing}, extra {extra}"
    problems = []
    for key, want in expected.items():
        got = actual[key]
        for column, value in want.items():
            if column in float_columns:
                if not same_float(value, got[column]):
                    problems.append(f"{key} {column}: FIB {value!r}, tracehouse {got[column]!r}")
            elif value != got[column]:
                problems.append(f"{key} {column}: FIB {value!r}, tracehouse {got[column]!r}")
    assert not problems, f"{label}: {len(problems)} differences, e.g.\n" + "\n".join(problems[:10])


def require_shared() -> None:
    if SHARED is None:
        pytest.skip("../shared not found beside the checkout")
