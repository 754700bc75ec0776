"""A hostile FlashInfer-Trace dataset, written into a temporary folder, with the expected fate of
every record in it.

The corpus uses the current ("v3") layout with one valid definition and one valid solution, so
valid records import. Each JSONL line is declared together with what must happen to it:
imported as a run, imported as a workload, rejected with an exact reason, or ignored (blank).
Files that are refused as a whole (binary, empty ``.json``, a folder named like a data file, a
symbolic link leading outside the source) are declared as file-level rejects.

``build_corpus(root)`` writes the dataset to ``root/dataset`` and a folder *outside* it
(``root/outside``) that a symbolic link inside the dataset points to; nothing from there may
ever be imported.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFINITION = "gemm_n4_k4"
SOLUTION = "alice_gemm_v1"
AUTHOR = "alice"
OUTSIDE_SOLUTION = "OUTSIDE_MARKER_SOLUTION"
OUTSIDE_UUID = "outside-uuid-must-never-appear"
BIG_LOG_BYTES = 6 * 1024 * 1024
DEEP_NESTING = 200_000

RUN = "run"  # an evaluated trace: one row in runs
WORKLOAD = "workload"  # a workload-only record: one row in workloads
BLANK = "blank"  # ignored, never counted as a record


def definition_object(name: str = DEFINITION) -> dict[str, Any]:
    return {
        "name": name,
        "op_type": "gemm",
        "description": "C = A @ B.T",
        "tags": ["status:verified"],
        "axes": {
            "M": {"type": "var"},
            "N": {"type": "const", "value": 4},
            "K": {"type": "const", "value": 4},
        },
        "inputs": {
            "A": {"shape": ["M", "K"], "dtype": "float16"},
            "B": {"shape": ["N", "K"], "dtype": "float16"},
        },
        "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}},
        "reference": "import torch\n\ndef run(A, B):\n    return torch.matmul(A, B.T)\n",
    }


def solution_object(
    name: str = SOLUTION,
    author: str = AUTHOR,
    definition: str = DEFINITION,
    content: str = "def run(A, B, C):\n    C.copy_(A @ B.T)\n",
) -> dict[str, Any]:
    return {
        "name": name,
        "definition": definition,
        "author": author,
        "spec": {
            "language": "python",
            "target_hardware": ["NVIDIA_B200"],
            "entry_point": "main.py::run",
            "dependencies": ["torch"],
        },
        "sources": [{"path": "main.py", "content": content}],
        "description": "a test solution",
    }


def workload_object(uuid: str, m: int = 8) -> dict[str, Any]:
    return {
        "axes": {"M": m},
        "inputs": {"A": {"type": "random"}, "B": {"type": "random"}},
        "uuid": uuid,
    }


def trace_object(
    uuid: str,
    *,
    definition: str = DEFINITION,
    solution: str | None = SOLUTION,
    status: str = "PASSED",
    latency: Any = 0.5,
    log: str = "",
) -> dict[str, Any]:
    passed = status.upper() == "PASSED"
    return {
        "definition": definition,
        "workload": workload_object(uuid),
        "solution": solution,
        "evaluation": {
            "status": status,
            "environment": {
                "hardware": "NVIDIA B200",
                "libs": {"torch": "2.9.1+cu130", "cuda": "13.0"},
            },
            "timestamp": "2026-03-17T14:20:40.993273",
            "log": log,
            "correctness": {"max_relative_error": 0.01, "max_absolute_error": 0.001, "extra": None}
            if status.upper() in ("PASSED", "INCORRECT_NUMERICAL")
            else None,
            "performance": {
                "latency_ms": latency,
                "reference_latency_ms": 1.0,
                "speedup_factor": 2.0,
            }
            if passed
            else None,
        },
    }


def workload_record(uuid: str, definition: str = DEFINITION) -> dict[str, Any]:
    return {
        "definition": definition,
        "solution": None,
        "workload": workload_object(uuid),
        "evaluation": None,
    }


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


@dataclass
class Expect:
    """The fate of one record: RUN, WORKLOAD, BLANK, or a reject reason code."""

    name: str
    file: str
    line: int
    index: int
    fate: str
    uuid: str | None = None
    checks: dict[str, Any] = field(default_factory=dict)  # column -> value in runs


@dataclass
class FileReject:
    """A whole file or folder refused (line is None in rejects), or a .json document rejected."""

    name: str
    file: str
    line: int | None
    reason: str


@dataclass
class Corpus:
    root: Path  # the dataset folder (what `tracehouse build --source` gets)
    outside: Path  # a folder beside it that a symbolic link inside points to
    records: list[Expect]
    file_rejects: list[FileReject]
    jsonl_files: list[str]  # text JSONL files whose lines are records (for counting)
    definitions: list[str]  # definition names that must import
    solutions: list[str]  # solution names that must import

    @property
    def cases(self) -> list[Expect]:
        return [r for r in self.records if r.fate != BLANK]

    def expected_rejects(self) -> set[tuple[str, int | None, str]]:
        found = {(r.file, r.line, r.fate) for r in self.cases if r.fate not in (RUN, WORKLOAD)}
        return found | {(f.file, f.line, f.reason) for f in self.file_rejects}


class _Lines:
    """Builds one JSONL file line by line, recording what each line must become."""

    def __init__(self, corpus: Corpus, rel: str, newline: bytes = b"\n") -> None:
        self.corpus = corpus
        self.rel = rel
        self.newline = newline
        self.chunks: list[bytes] = []
        self.uuid_counter = 0

    def uuid(self, name: str) -> str:
        self.uuid_counter += 1
        return f"{self.rel.rsplit('/', 1)[-1]}-{self.uuid_counter}-{name}"

    @property
    def next_line(self) -> int:
        return len(self.chunks) + 1

    def raw(
        self, name: str, data: bytes, fate: str, uuid: str | None = None, **checks: Any
    ) -> None:
        line = self.next_line
        self.chunks.append(data)
        self.corpus.records.append(Expect(name, self.rel, line, 0, fate, uuid, checks))

    def multi(self, name: str, data: bytes, fates: list[tuple[str, str | None]]) -> None:
        """Several objects on one line (`}{`): one expectation per object."""
        line = self.next_line
        self.chunks.append(data)
        for index, (fate, uuid) in enumerate(fates):
            self.corpus.records.append(
                Expect(f"{name}[{index}]", self.rel, line, index, fate, uuid)
            )

    def trace(self, name: str, value: dict[str, Any], fate: str, **checks: Any) -> None:
        uuid = (
            value.get("workload", {}).get("uuid")
            if isinstance(value.get("workload"), dict)
            else None
        )
        self.raw(name, dumps(value), fate, uuid, **checks)

    def blank(self, data: bytes = b"") -> None:
        self.raw("blank", data, BLANK)

    def write(self, root: Path, *, final_newline: bool = True, prefix: bytes = b"") -> None:
        path = root / self.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body = self.newline.join(self.chunks) + (self.newline if final_newline else b"")
        path.write_bytes(prefix + body)
        self.corpus.jsonl_files.append(self.rel)


def _write_json(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def build_corpus(base: Path) -> Corpus:
    """Write the hostile dataset under ``base`` and return what must happen to each record."""
    root = base / "dataset"
    outside = base / "outside"
    root.mkdir(parents=True)
    outside.mkdir(parents=True)
    corpus = Corpus(root, outside, [], [], [], [DEFINITION], [SOLUTION])

    # -- the valid definition and solution, and hostile .json documents ---------------------
    _write_json(
        root / "definitions/gemm" / f"{DEFINITION}.json",
        json.dumps(definition_object(), indent=2).encode(),
    )
    solution_dir = root / "solutions" / AUTHOR / "gemm" / DEFINITION
    _write_json(solution_dir / f"{SOLUTION}.json", json.dumps(solution_object(), indent=2).encode())
    hostile_json = [
        (
            "definition_truncated",
            "definitions/gemm/broken_def.json",
            b'{"name": "broken", "axes": {',
            1,
            "invalid_json",
        ),
        (
            "definition_not_json",
            "definitions/gemm/words.json",
            b"this is not json\n",
            1,
            "invalid_json",
        ),
        (
            "definition_invalid_utf8",
            "definitions/gemm/latin1.json",
            b'{"name": "caf\xe9"}',
            1,
            "invalid_utf8",
        ),
        ("definition_empty", "definitions/gemm/empty.json", b"", None, "empty_file"),
        ("definition_whitespace", "definitions/gemm/blank.json", b"  \n\n", None, "empty_file"),
        (
            "definition_binary",
            "definitions/gemm/binary.json",
            b"\x00\x01\x02\xff" * 64,
            None,
            "binary_file",
        ),
        ("definition_array", "definitions/gemm/array.json", b"[1, 2, 3]", 1, "not_an_object"),
        (
            "solution_truncated",
            f"solutions/{AUTHOR}/gemm/{DEFINITION}/broken_sol.json",
            b'{"name": "x", "spec": {"lang',
            1,
            "invalid_json",
        ),
        (
            "solution_unknown_shape",
            f"solutions/{AUTHOR}/gemm/{DEFINITION}/odd.json",
            b'{"hello": "world"}',
            1,
            "unrecognized_record",
        ),
        (
            "solution_no_name",
            f"solutions/{AUTHOR}/gemm/{DEFINITION}/noname.json",
            dumps({**solution_object(), "name": ""}),
            1,
            "missing_field",
        ),
    ]
    for name, rel, data, line, reason in hostile_json:
        _write_json(root / rel, data)
        corpus.file_rejects.append(FileReject(name, rel, line, reason))
    # A definition file with a BOM and CRLF endings is still a definition.
    bom_def = "gemm_bom_def"
    corpus.definitions.append(bom_def)
    _write_json(
        root / "definitions/gemm" / f"{bom_def}.json",
        b"\xef\xbb\xbf"
        + json.dumps(definition_object(bom_def), indent=2).replace("\n", "\r\n").encode(),
    )

    # -- the main hostile trace file ------------------------------------------------------
    main = _Lines(corpus, f"traces/{AUTHOR}/gemm/{DEFINITION}.jsonl")
    u = main.uuid
    main.trace(
        "valid_passed", trace_object(u("ok")), RUN, status="PASSED", latency_ms=0.5, author=AUTHOR
    )
    main.blank()
    main.blank(b"   \t  ")
    main.raw("truncated", dumps(trace_object(u("trunc")))[:57], "invalid_json")
    main.raw("not_json", b"hello, world", "invalid_json")
    main.raw("array", dumps([trace_object(u("arr"))]), "not_an_object")
    main.raw("number", b"42", "not_an_object")
    main.raw("string", b'"a string"', "not_an_object")
    main.raw("null", b"null", "not_an_object")
    main.raw("empty_object", b"{}", "unrecognized_record")
    t = trace_object(u("nodef"))
    del t["definition"]
    main.trace("missing_definition_key", t, "unrecognized_record")
    t = trace_object(u("nulldef"))
    t["definition"] = None
    main.trace("null_definition", t, "missing_field")
    t = trace_object(u("noaxes"))
    del t["workload"]["axes"]
    main.trace("missing_axes", t, "missing_field")
    t = trace_object(u("nullworkload"))
    t["workload"] = None
    main.trace("null_workload", t, "missing_field")
    t = trace_object(u("nostatus"))
    del t["evaluation"]["status"]
    main.trace("missing_status", t, "missing_field")
    t = trace_object(u("noenv"))
    del t["evaluation"]["environment"]
    main.trace("missing_environment", t, "missing_field")
    t = trace_object(u("nohw"))
    t["evaluation"]["environment"] = {"libs": {}}
    main.trace("missing_hardware", t, "missing_field")
    t = trace_object(u("nots"))
    del t["evaluation"]["timestamp"]
    main.trace("missing_timestamp", t, "missing_field")
    main.trace("unknown_status", trace_object(u("maybe"), status="MAYBE"), "unknown_status")
    main.trace(
        "lowercase_status",
        trace_object(u("lower"), status="passed"),
        RUN,
        status="PASSED",
        status_raw="passed",
    )
    t = trace_object(u("noperf"))
    t["evaluation"]["performance"] = None
    main.trace("passed_without_performance", t, "status_field_mismatch")
    t = trace_object(u("rtperf"), status="RUNTIME_ERROR")
    t["evaluation"]["performance"] = {"latency_ms": 1.0}
    main.trace("runtime_error_with_performance", t, "status_field_mismatch")
    main.trace(
        "valid_runtime_error",
        trace_object(u("rt"), status="RUNTIME_ERROR"),
        RUN,
        status="RUNTIME_ERROR",
        latency_ms=None,
    )
    for name, latency in [
        ("negative", -1.0),
        ("zero", 0),
        ("zero_float", 0.0),
        ("true", True),
        ("false", False),
        ("string", "0.5"),
    ]:
        main.trace(
            f"latency_{name}", trace_object(u(f"lat-{name}"), latency=latency), "invalid_latency"
        )
    # A PASSED run whose latency is not a finite number is kept, as FlashInfer-Bench keeps it
    # (+inf even serialises as null): latency_ms null, the reason in latency_special.
    for name, latency, special in [
        ("nan_string", "NaN", "NaN"),
        ("inf_string", "Infinity", "Infinity"),
        ("null", None, "absent"),
    ]:
        main.trace(
            f"latency_{name}",
            trace_object(u(f"lat-{name}"), latency=latency),
            RUN,
            status="PASSED",
            latency_ms=None,
            latency_ns=None,
            latency_special=special,
        )
    for name, token, special in [
        ("bare_nan", b"NaN", "NaN"),
        ("bare_infinity", b"Infinity", "Infinity"),
        ("1e400", b"1e400", "Infinity"),
        ("minus_1e400", b"-1e400", "-Infinity"),
    ]:
        uuid = u(f"lat-{name}")
        base = dumps(trace_object(uuid, latency=12345.5))
        main.raw(
            f"latency_{name}",
            base.replace(b"12345.5", token),
            RUN,
            uuid,
            latency_ms=None,
            latency_special=special,
        )

    def with_errors(
        uuid: str, relative: Any, absolute: Any, status: str = "INCORRECT_NUMERICAL"
    ) -> dict[str, Any]:
        value = trace_object(uuid, status=status)
        value["evaluation"]["correctness"] = {
            "max_relative_error": relative,
            "max_absolute_error": absolute,
            "extra": None,
        }
        return value

    main.trace(
        "correctness_nan_infinity_strings",
        with_errors(u("nanstr"), "NaN", "Infinity"),
        RUN,
        status="INCORRECT_NUMERICAL",
    )
    uuid = u("nanbare")
    base = dumps(with_errors(uuid, 111.25, 222.25))
    main.raw(
        "correctness_bare_nan_infinity",
        base.replace(b"111.25", b"NaN").replace(b"222.25", b"Infinity"),
        RUN,
        uuid,
        status="INCORRECT_NUMERICAL",
    )
    uuid = u("err1e400")
    base = dumps(with_errors(uuid, 111.25, 0.5, status="PASSED"))
    main.raw("correctness_1e400", base.replace(b"111.25", b"1e400"), RUN, uuid, status="PASSED")
    main.trace("correctness_negative", with_errors(u("errneg"), -0.5, 0.5), "invalid_error_bound")
    main.trace("correctness_boolean", with_errors(u("errbool"), True, 0.5), "invalid_error_bound")
    main.trace(
        "correctness_minus_infinity_string",
        with_errors(u("errneginf"), "-Infinity", 0.5),
        "invalid_error_bound",
    )
    main.trace("correctness_word", with_errors(u("errword"), "large", 0.5), "invalid_error_bound")
    # A timestamp that is not an ISO date-time never costs the run: the text is kept,
    # observed_at is filled where unambiguous, and identity_error says KernelIndex refuses it.
    for name, text, observed in [
        ("words", "yesterday afternoon", None),
        ("date_only", "2026-03-17", dt.datetime(2026, 3, 17, tzinfo=dt.UTC)),
        ("epoch_seconds", "1710684040", dt.datetime(2024, 3, 17, 14, 0, 40, tzinfo=dt.UTC)),
        (
            "epoch_milliseconds",
            "1710684040123",
            dt.datetime(2024, 3, 17, 14, 0, 40, 123000, tzinfo=dt.UTC),
        ),
        ("ctime", "Tue Mar 17 14:20:40 2026", None),
        ("unknown", "unknown", None),
    ]:
        t = trace_object(u(f"ts-{name}"))
        t["evaluation"]["timestamp"] = text
        main.trace(
            f"timestamp_{name}",
            t,
            RUN,
            timestamp_raw=text,
            observed_at=observed,
            identity_error="bad_timestamp",
            latency_ms=0.5,
        )
    # FlashInfer-Bench's "skipped after N failures" records: kept, flagged not evaluated.
    main.trace(
        "skipped_after_failures",
        trace_object(
            u("skipped"),
            status="COMPILE_ERROR",
            log="Solution skipped after 3 failures. Last error: nvcc exited with 1\n",
        ),
        RUN,
        status="COMPILE_ERROR",
        evaluated=False,
    )
    main.trace(
        "compile_error_evaluated",
        trace_object(u("compile"), status="COMPILE_ERROR", log="error: nvcc exited with 1\n"),
        RUN,
        status="COMPILE_ERROR",
        evaluated=True,
    )
    t = trace_object(u("axisbig"))
    t["workload"]["axes"]["M"] = 123.5
    main.raw("axis_1e400", dumps(t).replace(b"123.5", b"1e400"), "invalid_field")
    t = trace_object(u("axisneg"))
    t["workload"]["axes"]["M"] = -3
    main.trace("axis_negative", t, "invalid_field")
    t = trace_object(u("axisstr"))
    t["workload"]["axes"]["M"] = "8"
    main.trace("axis_string", t, "invalid_field")
    # Integers beyond 64 bits: parsed as floats, as the strict parser does, so not an axis size.
    t = trace_object(u("axishuge"))
    main.raw(
        "axis_beyond_64_bits",
        dumps(t).replace(b'"M": 8', b'"M": 123456789012345678901234567890'),
        "invalid_field",
    )
    # The same in a line that needs the lenient parser (a bare NaN elsewhere).
    t = with_errors(u("axishuge-lenient"), 111.25, 0.5)
    data = (
        dumps(t)
        .replace(b'"M": 8', b'"M": 123456789012345678901234567890')
        .replace(b"111.25", b"NaN")
    )
    main.raw("axis_beyond_64_bits_lenient", data, "invalid_field")
    big_log = "x" * BIG_LOG_BYTES + "\n\n[log truncated]\n"
    main.trace(
        "six_mb_log_passed",
        trace_object(u("biglog"), log=big_log),
        RUN,
        log_truncated=True,
        log_bytes=len(big_log),
    )
    main.trace(
        "six_mb_log_bad_latency",
        trace_object(u("biglog-bad"), log=big_log, latency=-2.0),
        "invalid_latency",
    )
    main.raw("deep_arrays", b"[" * DEEP_NESTING + b"]" * DEEP_NESTING, "too_deeply_nested")
    main.raw(
        "deep_objects", b'{"a":' * DEEP_NESTING + b"1" + b"}" * DEEP_NESTING, "too_deeply_nested"
    )
    t = trace_object(u("deep-extra"))
    t["nested_extra"] = 1
    depth = 600  # parses, but deeper than the warehouse can store as JSON
    main.raw(
        "deep_extra_field",
        dumps(t).replace(b'"nested_extra": 1', b'"nested_extra": ' + b"[" * depth + b"]" * depth),
        "too_deeply_nested",
    )
    uuid = u("dupkey")
    data = b'{"definition": "no_such_definition", ' + dumps(trace_object(uuid))[1:]
    main.raw("duplicate_keys_last_wins", data, RUN, uuid, definition=DEFINITION)
    data = dumps(trace_object(u("utf8"), log="caf\u00e9"))
    main.raw("invalid_utf8", data.replace(b"caf\\u00e9", b"caf\xe9"), "invalid_utf8")
    data = dumps(trace_object(u("surrogate"), log="SURROGATE"))
    main.raw("lone_surrogate_escape", data.replace(b"SURROGATE", b"\\ud800"), "invalid_json")
    main.raw("bom_mid_file", b"\xef\xbb\xbf" + dumps(trace_object(u("midbom"))), "invalid_json")
    main.trace(
        "unknown_definition",
        trace_object(u("nodefn"), definition="no_such_definition"),
        "unknown_definition",
    )
    main.trace(
        "dangling_solution",
        trace_object(u("ghost"), solution="ghost_solution"),
        RUN,
        solution="ghost_solution",
        author=None,
    )
    main.trace("workload_only_in_trace_file", workload_record(u("wl-in-traces")), WORKLOAD)
    uuid_a, uuid_b = u("concat-a"), u("concat-b")
    main.multi(
        "concatenated_valid",
        dumps(trace_object(uuid_a)) + dumps(trace_object(uuid_b)),
        [(RUN, uuid_a), (RUN, uuid_b)],
    )
    uuid_c = u("concat-c")
    main.multi(
        "concatenated_mixed",
        dumps(trace_object(uuid_c)) + dumps(trace_object(u("concat-d"), latency=-1)),
        [(RUN, uuid_c), ("invalid_latency", None)],
    )
    main.blank(b"\r")
    main.trace("valid_last_line_no_newline", trace_object(u("last")), RUN)
    main.write(root, final_newline=False)

    # -- workloads file ---------------------------------------------------------------------
    workloads = _Lines(corpus, f"workloads/gemm/{DEFINITION}.jsonl")
    w = workloads.uuid
    workloads.trace("workload_valid", workload_record(w("w1")), WORKLOAD)
    workloads.trace("workload_valid_2", workload_record(w("w2")), WORKLOAD)
    workloads.blank()
    workloads.trace(
        "workload_unknown_definition",
        workload_record(w("w3"), definition="no_such_definition"),
        "unknown_definition",
    )
    bad = workload_record(w("w4"))
    del bad["workload"]["axes"]
    workloads.trace("workload_missing_axes", bad, "missing_field")
    legacy = workload_record(w("w5"))
    legacy["solution"], legacy["evaluation"] = "", {}
    workloads.trace("workload_legacy_empty_evaluation", legacy, WORKLOAD)
    workloads.write(root)

    # -- CRLF, BOM, empty, binary ------------------------------------------------------------
    crlf = _Lines(corpus, f"traces/{AUTHOR}/gemm/crlf.jsonl", newline=b"\r\n")
    crlf.trace("crlf_1", trace_object(crlf.uuid("c1")), RUN)
    crlf.blank()
    crlf.trace("crlf_2", trace_object(crlf.uuid("c2")), RUN)
    crlf.raw("crlf_bad", b'{"definition": ', "invalid_json")
    crlf.write(root)

    bom = _Lines(corpus, f"traces/{AUTHOR}/gemm/bom.jsonl")
    bom.trace("bom_first_line", trace_object(bom.uuid("b1")), RUN)
    bom.trace("bom_second_line", trace_object(bom.uuid("b2")), RUN)
    bom.write(root, prefix=b"\xef\xbb\xbf")

    blanks = _Lines(corpus, f"traces/{AUTHOR}/gemm/only_blank_lines.jsonl")
    blanks.blank()
    blanks.blank(b"  ")
    blanks.blank(b"\t")
    blanks.write(root)

    (root / f"traces/{AUTHOR}/gemm/empty.jsonl").write_bytes(b"")
    corpus.jsonl_files.append(f"traces/{AUTHOR}/gemm/empty.jsonl")

    binary_rel = f"traces/{AUTHOR}/gemm/binary.jsonl"
    (root / binary_rel).write_bytes(bytes(range(256)) * 64)
    corpus.file_rejects.append(FileReject("binary_jsonl", binary_rel, None, "binary_file"))

    # A folder named like a data file: refused as a file, but its contents are still read.
    folder_rel = f"traces/{AUTHOR}/gemm/x.jsonl"
    corpus.file_rejects.append(
        FileReject("folder_named_jsonl", folder_rel, None, "unreadable_file")
    )
    inner = _Lines(corpus, f"{folder_rel}/inner.jsonl")
    inner.trace("inside_folder_named_jsonl", trace_object(inner.uuid("in")), RUN)
    inner.write(root)

    # -- symbolic links leading outside the source -----------------------------------------
    secret = outside / "secret.jsonl"
    secret.write_bytes(dumps(trace_object(OUTSIDE_UUID, solution=OUTSIDE_SOLUTION)) + b"\n")
    _write_json(
        outside / "definitions" / "leak.json",
        json.dumps(definition_object("outside_definition")).encode(),
    )
    link_rel = f"traces/{AUTHOR}/gemm/linked.jsonl"
    os.symlink(secret, root / link_rel)
    corpus.file_rejects.append(
        FileReject("symlink_file_outside", link_rel, None, "symlink_outside_source")
    )
    os.symlink(outside, root / "traces" / "evil")
    corpus.file_rejects.append(
        FileReject("symlink_dir_outside", "traces/evil", None, "symlink_outside_source")
    )
    os.symlink(outside / "definitions" / "leak.json", root / "definitions" / "gemm" / "leak.json")
    corpus.file_rejects.append(
        FileReject(
            "symlink_definition_outside",
            "definitions/gemm/leak.json",
            None,
            "symlink_outside_source",
        )
    )
    return corpus


# -- helpers shared by the issue-6 tests ---------------------------------------------------------

CLI = (sys.executable, "-m", "tracehouse.cli")
TABLE_NAMES = (
    "definitions",
    "implementations",
    "workloads",
    "environments",
    "protocols",
    "runs",
    "correctness",
    "rejects",
    "source_snapshots",
    "run_rankings",
)


def run_cli(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`tracehouse ARGS` in a fresh process (what a user runs), captured."""
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def build(
    source: Path, warehouse: Path, *extra: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "build", "--source", str(source), "--warehouse", str(warehouse), *extra, timeout=timeout
    )


def current_tables(warehouse: Path) -> dict[str, Any]:
    """Every table of the published generation as a pyarrow Table (read straight from Parquet)."""
    from tracehouse.warehouse import read_table

    folder = (warehouse / "current").resolve()
    return {name: read_table(folder, name) for name in TABLE_NAMES}


# Table names are our own constants, never data.
_COUNTS = ", ".join(f"(SELECT count(*) FROM {t}) AS {t}" for t in TABLE_NAMES)  # noqa: S608
COUNTS_SQL = (
    f"SELECT {_COUNTS}, (SELECT bit_xor(hash(run_id, latency_ms)) FROM runs) AS runs_digest"  # noqa: S608
)


def reader_counts(warehouse: Path) -> dict[str, Any]:
    """What a fresh reader sees: `tracehouse query` in its own process, counting every table.

    Returns {"counts": {table: n}}, {"error": "missing"} when there is no warehouse yet, or
    {"error": "failed", ...} for anything else (a partial warehouse, a traceback).
    """
    result = run_cli(
        "query", COUNTS_SQL, "--format", "json", "--warehouse", str(warehouse), timeout=120
    )
    if result.returncode == 0:
        return {"counts": json.loads(result.stdout)[0]}
    if (
        result.returncode == 2
        and "no warehouse at" in result.stderr
        and "Traceback" not in result.stderr
    ):
        return {"error": "missing"}
    return {"error": "failed", "returncode": result.returncode, "stderr": result.stderr[-3000:]}


def write_plain_dataset(root: Path, variant: str, *, files: int = 12, lines: int = 300) -> None:
    """A valid dataset in two variants, "A" and "B", written into ``root`` in place.

    B differs from A the ways a real dataset update does: every trace file gains a line, one
    gains many, one is deleted, one is new, and a second solution appears. Switching ``root`` between the variants rewrites only
    what differs. A few invalid lines make ``rejects`` non-empty in both.
    """
    folder = root / "traces" / AUTHOR / "gemm"
    folder.mkdir(parents=True, exist_ok=True)
    (root / "definitions/gemm").mkdir(parents=True, exist_ok=True)
    (root / "definitions/gemm" / f"{DEFINITION}.json").write_text(json.dumps(definition_object()))
    solutions = root / "solutions" / AUTHOR / "gemm" / DEFINITION
    solutions.mkdir(parents=True, exist_ok=True)
    (solutions / f"{SOLUTION}.json").write_text(json.dumps(solution_object()))
    second = solutions / "alice_gemm_v2.json"
    wanted = {f"part{i:03d}.jsonl" for i in range(files)}
    if variant == "B":
        wanted = (wanted - {"part001.jsonl"}) | {"part_new.jsonl"}
        second.write_text(json.dumps(solution_object(name="alice_gemm_v2")))
    else:
        second.unlink(missing_ok=True)
    for path in folder.iterdir():
        if path.name not in wanted:
            path.unlink()
    for name in sorted(wanted):
        count = lines + (lines // 2 if variant == "B" and name == "part000.jsonl" else 0)
        chunks = []
        if variant == "B":  # every file changes, so every file is parsed again
            chunks.append(json.dumps(trace_object(f"{name}-b-only", latency=0.25)))
        for i in range(count):
            latency = 0.05 + (i % 97) / 10
            value = trace_object(f"{name}-{i}", latency=latency, log="step ok\n" * 10)
            if i % 5 == 0:
                value["solution"] = "alice_gemm_v2"
            chunks.append(json.dumps(value))
        chunks.append('{"definition": "gemm_n4_k4", "truncated')
        chunks.append(json.dumps(trace_object(f"{name}-bad", latency=-1)))
        data = ("\n".join(chunks) + "\n").encode()
        path = folder / name
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
