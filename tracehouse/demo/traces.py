"""Workloads and the trace lines of their evaluations: statuses, correctness, re-runs."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson

from tracehouse.demo.family import Family
from tracehouse.demo.hardware import Hardware
from tracehouse.demo.logs import Logs, site_of
from tracehouse.demo.randomness import f32, seeded_rng, uuid4
from tracehouse.demo.solutions import Solution

# The statuses the demo writes, in the order of GeneratedDataset.status_counts: a selection of
# the vocabulary in tracehouse/rejects.py (tests/unit/test_demo.py checks it stays one).
STATUSES: tuple[str, ...] = (
    "PASSED",
    "INCORRECT_NUMERICAL",
    "INCORRECT_SHAPE",
    "INCORRECT_DTYPE",
    "RUNTIME_ERROR",
    "COMPILE_ERROR",
    "TIMEOUT",
)


# Share of (solution, hardware) evaluation sessions that are re-run later on part of their
# workloads (the files are append-only, so re-runs become extra lines with later timestamps).
RERUN_SESSION_SHARE = 0.04


RERUN_WORKLOAD_SHARE = 0.5


_EPOCH = datetime(2026, 3, 2, 9, 0, 0, 117_283)


@dataclass
class _Workload:
    uuid: str
    axes: dict[str, int]
    base_ms: dict[str, float]  # hardware -> baseline latency
    ref_ms: dict[str, float]  # hardware -> PyTorch reference latency
    size_rank: float  # 0 (smallest) .. 1 (largest) within the definition
    json: bytes  # compact `{"axes":...,"inputs":...,"uuid":...}`


def make_workloads(
    rng: random.Random, fam: Family, count: int, hw_profiles: list[Hardware]
) -> list[_Workload]:
    raw: list[tuple[str, dict[str, int], dict[str, Any]]] = []
    seen_axes: set[tuple[tuple[str, int], ...]] = set()
    for _ in range(count):
        axes = fam.sample_axes(rng)
        for _retry in range(8):  # prefer distinct shapes, as real captured workloads are
            key = tuple(sorted(axes.items()))
            if key not in seen_axes:
                break
            axes = fam.sample_axes(rng)
        seen_axes.add(tuple(sorted(axes.items())))
        wid = uuid4(rng)
        raw.append((wid, axes, fam.workload_inputs(rng, axes, wid)))
    flops_order = sorted(range(count), key=lambda i: fam.cost(raw[i][1]))
    rank = {i: pos / max(1, count - 1) for pos, i in enumerate(flops_order)}
    baseline_eff = rng.uniform(0.45, 0.8)
    out: list[_Workload] = []
    for i, (wid, axes, inputs) in enumerate(raw):
        flops, nbytes = fam.cost(axes)
        base: dict[str, float] = {}
        ref: dict[str, float] = {}
        for hw in hw_profiles:
            compute_ms = flops / (hw.tflops * 1e12 * baseline_eff) * 1e3
            memory_ms = nbytes / (hw.tbps * 1e12 * baseline_eff) * 1e3
            ms = hw.launch_ms + max(compute_ms, memory_ms)
            base[hw.name] = ms
            ref[hw.name] = fam.reference_ms(axes, ms, rng)
        body = orjson.dumps({"axes": axes, "inputs": inputs, "uuid": wid})
        out.append(_Workload(wid, axes, base, ref, rank[i], body))
    return out


def _status_for(
    rng: random.Random, sol: Solution, hw: Hardware, w: _Workload, w_index: int, rerun: bool
) -> str:
    p = sol.profile
    if p == "baseline":
        x = rng.random()
        return "TIMEOUT" if x < 0.001 else "RUNTIME_ERROR" if x < 0.002 else "PASSED"
    if p == "compile" and hw.name not in sol.compiles_on:
        return "COMPILE_ERROR"
    if p == "transient":
        # A flaky build machine: fails to build on first run, passes on the re-run.
        return "PASSED" if rerun else "COMPILE_ERROR"
    if p == "shape":
        return "INCORRECT_SHAPE"
    if p == "dtype":
        return "INCORRECT_DTYPE"
    if p == "runtime" and (w_index == 0 or rng.random() < 0.75):
        return "RUNTIME_ERROR"
    if p == "timeout" and (w.size_rank >= 0.5 or rng.random() < 0.1):
        return "TIMEOUT"
    if p == "numerics" and (w.size_rank == 1.0 or rng.random() < 0.5):
        return "INCORRECT_NUMERICAL"
    x = rng.random()
    if x < 0.015:
        return "INCORRECT_NUMERICAL"
    if x < 0.018:
        return "TIMEOUT"
    if x < 0.022:
        return "RUNTIME_ERROR"
    return "PASSED"


_ABS_ERRORS = (
    0.0,
    0.0009765625,
    0.001953125,
    0.00390625,
    0.0078125,
    0.015625,
    0.03125,
    0.0625,
    0.125,
)


def _correctness(rng: random.Random, fam: Family, status: str) -> dict[str, Any]:
    if status == "PASSED":
        if rng.random() < 0.3:
            rel, abs_ = 0.0, 0.0
        else:
            abs_ = rng.choice(_ABS_ERRORS[:7])
            rel = f32(abs_ * rng.lognormvariate(-2.5, 1.5)) if abs_ else 0.0
        extra = fam.correctness_extra(rng, passed=True)
        return {"max_relative_error": rel, "max_absolute_error": abs_, "extra": extra}
    x = rng.random()
    rel: Any
    abs_: Any
    if x < 0.06:
        rel, abs_ = "NaN", "NaN"
    elif x < 0.1:
        rel, abs_ = "Infinity", "Infinity"
    elif x < 0.12:
        rel, abs_ = "Infinity", "NaN"
    else:
        abs_ = rng.choice(_ABS_ERRORS[5:]) * rng.choice((1, 1, 2, 4, 16, 64))
        rel = f32(abs_ * rng.lognormvariate(4.0, 4.0))
    return {
        "max_relative_error": rel,
        "max_absolute_error": abs_,
        "extra": fam.correctness_extra(rng, passed=False),
    }


def trace_file_lines(
    seed: int,
    fam: Family,
    sols: list[Solution],
    author: str,
    workloads: list[_Workload],
    hw_profiles: list[Hardware],
    runs: int,
    logs: Logs,
    status_counts: dict[str, int],
) -> list[bytes]:
    """All lines of traces/<author>/<op_type>/<definition>.jsonl, in append order."""
    rng = seeded_rng(seed, "traces", fam.name, author)
    head = b'{"definition":' + orjson.dumps(fam.name) + b',"workload":'
    lines: list[bytes] = []
    clock = _EPOCH + timedelta(days=rng.uniform(0, 20), seconds=rng.uniform(0, 36_000))
    sites = {hw.name: site_of(seed, author, hw.name) for hw in hw_profiles}
    envs = {hw.name: {"hardware": hw.name, "libs": hw.libs} for hw in hw_profiles}

    def session(sol: Solution, hw: Hardware, chosen: list[int], rerun: bool) -> None:
        nonlocal clock
        site = sites[hw.name]
        sol_bytes = b',"solution":' + orjson.dumps(sol.name) + b',"evaluation":'
        profile_reference = sol.profile == "baseline" or rng.random() > 0.05
        clock += timedelta(minutes=rng.uniform(1, 40))
        for position, w_index in enumerate(chosen):
            w = workloads[w_index]
            status = _status_for(rng, sol, hw, w, w_index, rerun)
            clock += timedelta(seconds=rng.uniform(0.35, 1.4) if status != "TIMEOUT" else 300.0)
            correctness: dict[str, Any] | None = None
            performance: dict[str, Any] | None = None
            if status == "PASSED":
                log = logs.passed(rng, sol, hw, site, first=position == 0)
                correctness = _correctness(rng, fam, status)
                noise = rng.lognormvariate(0.0, 0.04 if sol.profile == "baseline" else 0.08)
                lat = f32(w.base_ms[hw.name] * sol.speed * sol.hw_speed[hw.name] * noise)
                if profile_reference:
                    ref = f32(w.ref_ms[hw.name] * rng.lognormvariate(0.0, 0.03))
                    speedup = ref / lat
                else:
                    ref, speedup = 0.0, 0.0
                performance = {
                    "latency_ms": lat,
                    "reference_latency_ms": ref,
                    "speedup_factor": speedup,
                }
            elif status == "INCORRECT_NUMERICAL":
                log = logs.passed(rng, sol, hw, site, first=position == 0)
                correctness = _correctness(rng, fam, status)
            elif status in ("INCORRECT_SHAPE", "INCORRECT_DTYPE"):
                log = logs.mismatch(rng, sol, status, w.axes)
            elif status == "COMPILE_ERROR":
                log = logs.compile_error(rng, sol, hw, site)
            elif status == "RUNTIME_ERROR":
                log = logs.runtime_error(rng, sol, hw, site)
            else:
                log = logs.timeout(rng, sol, hw, site)
            evaluation = {
                "status": status,
                "environment": envs[hw.name],
                "timestamp": clock.isoformat(timespec="microseconds"),
                "log": log,
                "correctness": correctness,
                "performance": performance,
            }
            lines.append(head + w.json + sol_bytes + orjson.dumps(evaluation) + b"}\n")
            status_counts[status] += 1

    all_workloads = list(range(len(workloads)))
    for run in range(runs):
        if run:
            clock += timedelta(days=rng.uniform(1, 6))
        for sol in sols:
            for hw in hw_profiles:
                session(sol, hw, all_workloads, rerun=run > 0)
    # Later re-runs of some sessions (always for flaky builds), appended to the same file.
    clock += timedelta(days=rng.uniform(1, 9))
    for sol in sols:
        for hw in hw_profiles:
            if sol.profile == "transient" or rng.random() < RERUN_SESSION_SHARE:
                k = max(1, round(len(workloads) * RERUN_WORKLOAD_SHARE))
                session(sol, hw, sorted(rng.sample(all_workloads, k)), rerun=True)
    return lines
