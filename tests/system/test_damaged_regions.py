"""Issue 26, item 6: a damaged region costs only its lines; an out-of-range latency only its line.

One `tracehouse build` over two trace files made of real FlashInfer-Bench v3 lines (generated
ones when ../shared is absent):

* ``damaged``: good lines around a NUL region (inside the first 8 KiB, which once made the
  whole file ``binary_file``), a CR-only region (lines joined by bare CRs, once one
  ``invalid_json`` line swallowing its neighbours), a UTF-16LE region with CRLF line ends (what
  a Windows shell appends), a UTF-16BE line and lines cut mid-way. Every good line is imported at the line
  number an editor shows, byte for byte (its ``line_digest``); each bad line is one reject with
  file, line and reason.
* ``latencies``: copies of real lines whose ``latency_ms`` rounds to 0 ns, or whose nanoseconds
  lie beyond 2**53 - 1 (up to 2**63 and past it). A copy shares its original's workload, so it
  takes the columnar path, which once let 1e-7 through to an invariant that refused the whole
  source. Each is one ``invalid_latency`` reject; the smallest and the largest storable
  latencies are imported; the source is published (exit 0).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.hostile_corpus import (
    DEFINITION,
    definition_object,
    solution_object,
    trace_object,
)
from tests.fixtures.shared_data import SAMPLES_DIR, SHARED

pytestmark = [pytest.mark.integration, pytest.mark.slow]

V3 = SAMPLES_DIR / "hf_v3_layout"
V3_DEFINITION = "definitions/gemm/gemm_n2048_k4096.json"
V3_SOLUTION = (
    "solutions/gpt-5/gemm/gemm_n2048_k4096/gpt-5_gemm_n2048_k4096_cuda_optimized_r8_c0_high.json"
)
V3_TRACES = "traces/gpt-5/gemm/gemm_n2048_k4096.jsonl"
# Both named as KernelIndex reads them (traces/<author>/.../<definition>.jsonl).
DAMAGED = "traces/gpt-5/gemm/{definition}.jsonl"
LATENCIES = "traces/gpt-5-copies/gemm/{definition}.jsonl"
LATENCY = re.compile(rb'"latency_ms": ?[0-9.eE+-]+')
# latency_ms written as text: rounds to 0 ns, or beyond 2**53 - 1 ns (1e10 ms is 1e16 ns,
# 9.2e12 ms is just below 2**63 ns, 1e13 ms past it; 1e308 ms is an infinite product).
OUT_OF_RANGE = ("1e-7", "5e-324", "4.9e-7", "9007199254.740993", "1e10", "9.2e12", "1e13", "1e308")
# The smallest (1 ns) and the largest (2**53 - 2 ns, as the product rounds) storable latencies.
IN_RANGE = {"5e-7": 1, "9007199254.74099": 9007199254740990}


@dataclass
class Expected:
    """What the build must make of a file: good lines by number, rejects by number."""

    good: dict[int, bytes] = field(default_factory=dict)
    rejects: dict[int, str] = field(default_factory=dict)
    lines: list[bytes] = field(default_factory=list)  # each with its own line end

    def add(self, data: bytes, *, good: bool = False, reject: str | None = None) -> None:
        number = len(self.lines) + 1
        if good:
            self.good[number] = data.rstrip(b"\r\n")
        if reject is not None:
            self.rejects[number] = reject
        self.lines.append(data)


def source_lines(source: Path) -> tuple[str, list[bytes]]:
    """Real v3 trace lines with their definition and solution, or generated ones."""
    if SHARED is not None and (V3 / V3_TRACES).is_file():
        for rel in (V3_DEFINITION, V3_SOLUTION):
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(V3 / rel, source / rel)
        return Path(V3_DEFINITION).stem, (V3 / V3_TRACES).read_bytes().splitlines()
    (source / "definitions" / "gemm").mkdir(parents=True)
    (source / "definitions" / "gemm" / f"{DEFINITION}.json").write_text(
        json.dumps(definition_object())
    )
    (source / "solutions").mkdir()
    (source / "solutions" / "alice_gemm_v1.json").write_text(json.dumps(solution_object()))
    status = ("PASSED", "PASSED", "INCORRECT_NUMERICAL")
    return DEFINITION, [
        json.dumps(
            trace_object(f"00000000-0000-0000-0000-{i:012d}", status=status[i % 3], latency=0.1 + i)
        ).encode()
        for i in range(29)
    ]


def damaged_file(lines: list[bytes]) -> Expected:
    file = Expected()
    for line in lines[:2]:
        file.add(line + b"\n", good=True)
    file.add(b"\x00" * 700 + b"\n", reject="binary_line")  # a zero-filled region
    file.add(b"\x00" * 300 + b"\n", reject="binary_line")
    file.add(lines[2] + b"\n", good=True)
    for line in lines[3:6]:  # a CR-only region: a bare CR ends each line, as editors show it
        file.add(line + b"\r", good=True)
    file.add(lines[6][: len(lines[6]) // 2] + b"\r", reject="invalid_json")  # cut, in the region
    file.add(lines[7] + b"\r\n", good=True)
    for line in lines[8:11]:  # a UTF-16LE region with CRLF line ends
        file.add((line.decode() + "\r\n").encode("utf-16-le"), reject="binary_line")
    file.add(lines[11] + b"\n", good=True)  # the LF's second UTF-16 byte opens this read
    file.add((lines[12].decode() + "\n").encode("utf-16-be"), reject="binary_line")
    file.add(lines[13][:-40] + b"\n", reject="invalid_json")  # a line cut mid-way
    for line in lines[14:-1]:
        file.add(line + b"\n", good=True)
    file.add(lines[-1][:-1], reject="invalid_json")  # the last line cut, no final newline
    return file


def latencies_file(lines: list[bytes]) -> tuple[Expected, dict[int, int]]:
    passed = [line for line in lines if LATENCY.search(line)]
    file = Expected()
    for line in lines:
        file.add(line + b"\n", good=True)
    nanoseconds: dict[int, int] = {}
    for i, value in enumerate((*OUT_OF_RANGE, *IN_RANGE)):
        copy = LATENCY.sub(b'"latency_ms":' + value.encode(), passed[i % len(passed)], count=1)
        assert value.encode() in copy
        storable = value in IN_RANGE
        file.add(copy + b"\n", good=storable, reject=None if storable else "invalid_latency")
        if storable:
            nanoseconds[len(file.lines)] = IN_RANGE[value]
    return file, nanoseconds


@dataclass
class Built:
    warehouse: Path
    damaged_file: str
    latencies_file: str
    damaged: Expected
    latencies: Expected
    nanoseconds: dict[int, int]
    returncode: int
    stderr: str


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("damaged")
    source = root / "dataset"
    definition, lines = source_lines(source)
    damaged = damaged_file(lines)
    latencies, nanoseconds = latencies_file(lines)
    names = DAMAGED.format(definition=definition), LATENCIES.format(definition=definition)
    for name, file in zip(names, (damaged, latencies), strict=True):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes(b"".join(file.lines))
    assert b"\x00" in (source / names[0]).read_bytes()[:8192]
    result = run_cli("build", "--source", str(source), "--warehouse", str(root / "warehouse"))
    return Built(
        root / "warehouse",
        *names,
        damaged,
        latencies,
        nanoseconds,
        result.returncode,
        result.stderr,
    )


def rows(warehouse: Path, sql: str) -> list[dict[str, object]]:
    answer = run_cli("query", sql, "--format", "json", "--warehouse", str(warehouse))
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout)


def runs_of(built: Built, file: str) -> dict[object, dict[str, object]]:
    """The runs imported from ``file``, by line."""
    found = rows(
        built.warehouse,
        "SELECT source_file, source_line, line_digest, latency_ns, identity_error FROM runs",
    )
    return {r["source_line"]: r for r in found if r["source_file"] == file}


def rejects_of(built: Built, file: str) -> dict[object, dict[str, object]]:
    """The rejects of ``file``, by line."""
    found = rows(built.warehouse, "SELECT file, line, reason, message FROM rejects")
    return {r["line"]: r for r in found if r["file"] == file}


def digests(expected: Expected) -> dict[int, str]:
    return {number: hashlib.sha256(line).hexdigest() for number, line in expected.good.items()}


def test_a_damaged_region_costs_only_its_lines(built: Built) -> None:
    assert built.returncode == 0, built.stderr
    imported = runs_of(built, built.damaged_file)
    assert {n: r["line_digest"] for n, r in imported.items()} == digests(built.damaged)
    rejects = rejects_of(built, built.damaged_file)
    assert {n: r["reason"] for n, r in rejects.items()} == built.damaged.rejects
    assert "700 NUL bytes" in str(rejects[3]["message"])
    assert all("UTF-16LE text" in str(rejects[n]["message"]) for n in (11, 12, 13))
    assert "UTF-16BE text" in str(rejects[15]["message"])
    # KernelIndex splits on LF only: the CR-joined line is not JSON to it, so it reads no line of
    # this file (§2.2), and no run of it claims KernelIndex's identity.
    assert {r["identity_error"] for r in imported.values()} == {"file_not_strict_json"}


def test_each_unstorable_latency_is_one_reject_and_the_rest_publishes(built: Built) -> None:
    assert built.returncode == 0, built.stderr
    imported = runs_of(built, built.latencies_file)
    assert {n: r["line_digest"] for n, r in imported.items()} == digests(built.latencies)
    assert {n: imported[n]["latency_ns"] for n in built.nanoseconds} == built.nanoseconds
    rejects = rejects_of(built, built.latencies_file)
    assert {n: r["reason"] for n, r in rejects.items()} == built.latencies.rejects
    assert all("latency_ms" in str(r["message"]) for r in rejects.values())
    assert "file_not_strict_json" not in {r["identity_error"] for r in imported.values()}
