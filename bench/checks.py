"""Issue 9's targets as acceptance checks over a benchmark report, scaling across sizes included.

Every check is a dict ``{check, rule, value, unit, status, note}``; ``status`` is PASS, FAIL,
SKIP (a leg or an earlier result it needs is missing; the note says which) or INFO (a ratio
the issue reports without a target). The checks read leg summaries, the same dicts the JSON
report holds, so earlier result files of other sizes are read the same way as this run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The targets, as issue 9 states them.
COLD_VS_DUCKDB_TARGET = 1.0
COLD_VS_DUCKDB_MUST = 1.5
# Against the floor probe (../shared/floor/lean_loop.py), issue 26.
COLD_VS_FLOOR_TARGET = 1.6
COLD_VS_FLOOR_MUST = 2.5
# A cold build of the corpus with one line in ten odd (bench/odd_corpus.py) against the clean one.
ODD_VS_CLEAN_TARGET = 1.2
ODD_VS_CLEAN_MUST = 1.5
TRACESET_SPEEDUP_MIN = 10.0
CHANGED_MAX_SHARE_OF_COLD = 0.10
WARM_MAX_SHARE_OF_COLD = 0.02
BUILD_PEAK_MAX_MIB = 600.0
SCALING_FACTOR = 4  # "at 4x ..."
LARGE_LINES = 1_000_000  # "... and at 1,000,000 lines"
SCALING_PEAK_MAX_RATIO = 1.2  # "no more than 1.2x the 1x figure"
LARGE_COLD_MAX_S = 30.0

BUILD_LEGS: tuple[str, ...] = ("cold", "warm", "changed")


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


def _check(
    name: str,
    rule: str,
    value: float | None,
    ok: bool | None,
    note: str = "",
    *,
    unit: str = "x",
    info: bool = False,
) -> dict[str, Any]:
    if value is None:
        status = "SKIP"
    elif info:
        status = "INFO"
    else:
        status = "PASS" if ok else "FAIL"
    return {
        "check": name,
        "rule": rule,
        "value": value,
        "unit": unit,
        "status": status,
        "note": note,
    }


# --------------------------------------------------------------------------------------------
# Figures of one run
# --------------------------------------------------------------------------------------------


def _ok_samples(legs: dict[str, Any], names: Iterable[str]) -> list[dict[str, Any]]:
    return [
        sample
        for name in names
        if name in legs
        for sample in legs[name].get("samples", ())
        if sample.get("returncode") == 0
    ]


def median_of(legs: dict[str, Any], name: str, figure: str) -> float | None:
    leg = legs.get(name)
    if not leg or not leg.get("ok"):
        return None
    return leg["median"].get(figure)


def build_peaks(legs: dict[str, Any]) -> tuple[float | None, float | None]:
    """(sampled process-tree RSS, largest single process) peaks over every build run, in MiB."""
    samples = _ok_samples(legs, BUILD_LEGS)
    tree = [s["peak_tree_rss_mib"] for s in samples if s.get("peak_tree_rss_mib") is not None]
    single = [s["peak_rss_mib"] for s in samples if s.get("peak_rss_mib") is not None]
    return (max(tree) if tree else None, max(single) if single else None)


def _missing_note(legs: dict[str, Any], names: Iterable[str]) -> str:
    """Why a check over `names` has no value: a leg not selected, skipped, or failed."""
    reasons = []
    for name in names:
        leg = legs.get(name)
        if leg is None:
            reasons.append(f"{name} not run")
        elif leg.get("skipped"):
            reasons.append(f"{name} {leg['skipped']}")
        elif not leg.get("ok"):
            reasons.append(f"{name} failed (non-zero exit)")
    return "; ".join(reasons)


def _failed_legs(legs: dict[str, Any], names: Iterable[str]) -> list[str]:
    return [
        name
        for name in names
        if name in legs
        and not legs[name].get("skipped")
        and legs[name].get("runs")
        and not legs[name].get("ok")
    ]


# --------------------------------------------------------------------------------------------
# Checks on this run's legs
# --------------------------------------------------------------------------------------------


def leg_checks(legs: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets one run measures by itself: speed against the readers, incrementality, RSS."""

    def wall(name: str) -> float | None:
        return median_of(legs, name, "wall_s")

    def cpu_note(numerator: str, denominator: str) -> str:
        ratio = _ratio(median_of(legs, numerator, "cpu_s"), median_of(legs, denominator, "cpu_s"))
        return "" if ratio is None else f"same ratio by CPU time: {ratio:.3f}"

    def ratio_check(
        name: str,
        numerator: str,
        denominator: str,
        rule: str,
        passes: Callable[[float], bool] | None,  # None: the ratio is reported, no target
    ) -> dict[str, Any]:
        value = _ratio(wall(numerator), wall(denominator))
        needed = (numerator, denominator)
        if value is None:
            return _check(name, rule, None, None, _missing_note(legs, needed))
        failed = _failed_legs(legs, needed)
        check = _check(
            name,
            rule,
            value,
            None if passes is None else passes(value),
            cpu_note(numerator, denominator),
            info=passes is None,
        )
        if failed:  # some runs of a leg failed: the median of the rest proves nothing
            check["status"] = "FAIL"
            check["note"] = f"{', '.join(failed)} failed in some runs (non-zero exit)"
        return check

    checks = [
        ratio_check(
            "cold build vs DuckDB read_json (target)",
            "cold",
            "duckdb",
            f"cold <= {COLD_VS_DUCKDB_TARGET:g} x duckdb",
            lambda v: v <= COLD_VS_DUCKDB_TARGET,
        ),
        ratio_check(
            "cold build vs DuckDB read_json (must)",
            "cold",
            "duckdb",
            f"cold <= {COLD_VS_DUCKDB_MUST:g} x duckdb",
            lambda v: v <= COLD_VS_DUCKDB_MUST,
        ),
        ratio_check(
            "cold build vs lean_loop.py floor (target)",
            "cold",
            "floor",
            f"cold <= {COLD_VS_FLOOR_TARGET:g} x floor",
            lambda v: v <= COLD_VS_FLOOR_TARGET,
        ),
        ratio_check(
            "cold build vs lean_loop.py floor (must)",
            "cold",
            "floor",
            f"cold <= {COLD_VS_FLOOR_MUST:g} x floor",
            lambda v: v <= COLD_VS_FLOOR_MUST,
        ),
        ratio_check(
            "cold build vs Polars read", "cold", "polars", "cold / polars (reported)", None
        ),
    ]
    speedup = ratio_check(
        "cold build vs TraceSet.from_path",
        "traceset",
        "cold",
        f"traceset / cold >= {TRACESET_SPEEDUP_MIN:g}",
        lambda v: v >= TRACESET_SPEEDUP_MIN,
    )
    checks.append(speedup)
    checks.append(
        ratio_check(
            "build after one file changed",
            "changed",
            "cold",
            f"changed <= {CHANGED_MAX_SHARE_OF_COLD:.0%} of cold",
            lambda v: v <= CHANGED_MAX_SHARE_OF_COLD,
        )
    )
    for strength, limit in (("target", ODD_VS_CLEAN_TARGET), ("must", ODD_VS_CLEAN_MUST)):
        checks.append(
            ratio_check(
                f"cold build, 10% odd lines vs clean ({strength})",
                "odd",
                "cold",
                f"odd <= {limit:g} x cold",
                lambda v, limit=limit: v <= limit,
            )
        )
    checks.append(
        ratio_check(
            "warm build, no change",
            "warm",
            "cold",
            f"warm <= {WARM_MAX_SHARE_OF_COLD:.0%} of cold",
            lambda v: v <= WARM_MAX_SHARE_OF_COLD,
        )
    )
    tree, single = build_peaks(legs)
    rule = f"sampled process-tree RSS, max over build runs <= {BUILD_PEAK_MAX_MIB:.0f} MiB"
    if tree is None:
        note = _missing_note(legs, BUILD_LEGS) or "process-tree RSS not sampled (--no-tree-rss)"
        peak = _check("build peak RSS", rule, None, None, note, unit="MiB")
    else:
        peak = _check(
            "build peak RSS",
            rule,
            tree,
            tree <= BUILD_PEAK_MAX_MIB,
            "the tree sum counts pages shared by processes once per process"
            + (
                f"; largest single process (ru_maxrss) {single:.0f} MiB"
                if single is not None
                else ""
            ),
            unit="MiB",
        )
        failed = _failed_legs(legs, BUILD_LEGS)
        if failed:
            peak["status"] = "FAIL"
            peak["note"] = f"{', '.join(failed)} failed in some runs (non-zero exit)"
    checks.append(peak)
    return checks


# --------------------------------------------------------------------------------------------
# Scaling across sizes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeResult:
    """The figures scaling compares, from one run at one ``--lines`` size."""

    lines: int  # the --lines parameter: the size's name
    trace_lines: int | None  # what the generator wrote
    traces_mb: float | None
    cold_wall_s: float | None
    cold_cpu_s: float | None
    build_peak_tree_rss_mib: float | None
    build_peak_rss_mib: float | None  # largest single process
    started: str | None
    commit: str | None
    origin: str  # "this run" or the result file it was read from

    @classmethod
    def from_report(cls, report: dict[str, Any], origin: str) -> SizeResult:
        legs = report.get("legs") or {}
        dataset = report.get("dataset") or {}
        tree, single = build_peaks(legs)
        traces_bytes = (dataset.get("bytes") or {}).get("traces")
        return cls(
            lines=int(report["parameters"]["lines"]),
            trace_lines=dataset.get("trace_lines"),
            traces_mb=traces_bytes / 1e6 if traces_bytes is not None else None,
            cold_wall_s=median_of(legs, "cold", "wall_s"),
            cold_cpu_s=median_of(legs, "cold", "cpu_s"),
            build_peak_tree_rss_mib=tree,
            build_peak_rss_mib=single,
            started=report.get("started"),
            commit=(report.get("machine") or {}).get("git_commit"),
            origin=origin,
        )


def result_path(out: Path, lines: int) -> Path:
    """Where a run of `lines` writes its JSON report (one file per size, the latest run)."""
    return out / f"bench_{lines}.json"


def earlier_results(out: Path, current_lines: int) -> tuple[list[SizeResult], list[str]]:
    """The latest result of every other size in `out`, and a note per unreadable file."""
    results: list[SizeResult] = []
    notes: list[str] = []
    for path in sorted(out.glob("bench_*.json")) if out.is_dir() else ():
        try:
            report = json.loads(path.read_text())
            result = SizeResult.from_report(report, path.name)
        except (OSError, ValueError, KeyError, TypeError) as error:
            notes.append(f"{path.name} not readable as a result: {type(error).__name__}: {error}")
            continue
        if result.lines != current_lines:
            results.append(result)
    return results, notes


def _peak_pair(base: SizeResult, other: SizeResult) -> tuple[float | None, float | None, str]:
    """The two peaks to compare: tree RSS when both runs sampled it, else ru_maxrss of both."""
    if base.build_peak_tree_rss_mib is not None and other.build_peak_tree_rss_mib is not None:
        return base.build_peak_tree_rss_mib, other.build_peak_tree_rss_mib, "process-tree RSS"
    return base.build_peak_rss_mib, other.build_peak_rss_mib, "largest single process"


def scaling_checks(
    sizes: dict[int, SizeResult], base_lines: int, large_lines: int, out: Path
) -> list[dict[str, Any]]:
    """Peak RSS at SCALING_FACTOR x and at `large_lines` against `base_lines`; the large build time."""
    checks = []
    base = sizes.get(base_lines)
    for lines, label in (
        (SCALING_FACTOR * base_lines, f"{SCALING_FACTOR}x"),
        (large_lines, f"{large_lines:,} lines"),
    ):
        name = f"build peak RSS at {label} vs 1x"
        rule = f"peak({lines:,}) <= {SCALING_PEAK_MAX_RATIO:g} x peak({base_lines:,})"
        other = sizes.get(lines)
        missing = [n for n, r in ((base_lines, base), (lines, other)) if r is None]
        if base is None or other is None:
            note = "no result at " + " and ".join(
                f"{n:,} lines ({result_path(out, n)})" for n in missing
            )
            checks.append(_check(name, rule, None, None, note))
            continue
        base_peak, other_peak, figure = _peak_pair(base, other)
        value = _ratio(other_peak, base_peak)
        note = (
            f"{figure}: {_mib(other_peak)} at {lines:,} ({other.origin}) vs "
            f"{_mib(base_peak)} at {base_lines:,} ({base.origin})"
        )
        if base.commit != other.commit:
            note += f"; different commits {other.commit} vs {base.commit}"
        if value is None:
            note = f"no successful build run with a peak in one of them; {note}"
        checks.append(
            _check(
                name, rule, value, None if value is None else value <= SCALING_PEAK_MAX_RATIO, note
            )
        )
    large = sizes.get(large_lines)
    name = f"cold build at {large_lines:,} lines"
    rule = f"cold wall <= {LARGE_COLD_MAX_S:g} s"
    if large is None:
        checks.append(
            _check(
                name,
                rule,
                None,
                None,
                f"no result at {large_lines:,} lines ({result_path(out, large_lines)})",
                unit="s",
            )
        )
    else:
        wall = large.cold_wall_s
        checks.append(
            _check(
                name,
                rule,
                wall,
                None if wall is None else wall <= LARGE_COLD_MAX_S,
                f"{large.origin}"
                + (f", CPU {large.cold_cpu_s:.1f} s" if large.cold_cpu_s is not None else "")
                + ("" if wall is not None else "; no successful cold build in it"),
                unit="s",
            )
        )
    return checks


def _mib(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f} MiB"


def scaling_rows(sizes: dict[int, SizeResult], base_lines: int) -> list[dict[str, Any]]:
    """One row per size, smallest first, each peak also as a multiple of the 1x peak."""
    base = sizes.get(base_lines)
    rows = []
    for lines in sorted(sizes):
        result = sizes[lines]
        ratio = None
        if base is not None:
            base_peak, peak, _ = _peak_pair(base, result)
            ratio = _ratio(peak, base_peak)
        rows.append(
            {
                "lines": lines,
                "trace_lines": result.trace_lines,
                "traces_mb": result.traces_mb,
                "cold_wall_s": result.cold_wall_s,
                "cold_cpu_s": result.cold_cpu_s,
                "build_peak_tree_rss_mib": result.build_peak_tree_rss_mib,
                "build_peak_rss_mib": result.build_peak_rss_mib,
                "peak_vs_1x": ratio,
                "started": result.started,
                "commit": result.commit,
                "origin": result.origin,
            }
        )
    return rows
