"""Run with FlashInfer-Bench's own Python (a separate environment, not tracehouse's):

    python tests/fib_compare.py ORIGINAL EXPORTED

Loads both dataset folders with ``TraceSet.from_path`` and prints one JSON object: the counts
of each kind of record, every difference found (at most a few per kind), and whether
``summary()`` and the rankings (``get_best_trace`` and ``filter_traces`` per definition, and
``rank_authors`` / ``get_solution_score`` where the installed version has them) agree. Imports
nothing of tracehouse: it is FlashInfer-Bench's view only.

Records are compared with the models' own ``==`` (pydantic: same type, same field values).
Two values pydantic never finds equal to themselves, NaN error bounds, are compared by the
models' JSON (``model_dump_json``), which writes them as ``"NaN"``. Within one definition,
workloads and traces are compared as multisets: the export writes one file per author where
the original may have had another layout, and FlashInfer-Bench lists a definition's records in
file path order.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from typing import Any

from flashinfer_bench.data import TraceSet

MAX_SHOWN = 5
ULP = 2.0**-52


def same(a: Any, b: Any) -> bool:
    return a == b or a.model_dump_json() == b.model_dump_json()


def same_value(a: Any, b: Any) -> bool:
    """Equal, floats within 4 ulp (sums over a different record order may differ in the last
    bits), NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= 4 * ULP * max(abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def compare_named(kind: str, left: dict[str, Any], right: dict[str, Any], problems: list[str]):
    for name in sorted(set(left) | set(right)):
        if name not in right:
            problems.append(f"{kind} {name!r}: missing from the export")
        elif name not in left:
            problems.append(f"{kind} {name!r}: only in the export")
        elif not same(left[name], right[name]):
            problems.append(f"{kind} {name!r}: differs")


def compare_lists(kind: str, left: dict[str, list], right: dict[str, list], problems: list[str]):
    for definition in sorted(set(left) | set(right)):
        a = Counter(t.model_dump_json() for t in left.get(definition, []))
        b = Counter(t.model_dump_json() for t in right.get(definition, []))
        if a != b:
            missing = sum((a - b).values())
            extra = sum((b - a).values())
            problems.append(
                f"{kind} of {definition!r}: {missing} missing from the export, {extra} only in it"
            )
            continue
        # the same JSON; the models' own equality as well (NaN aside)
        for x, y in zip(
            sorted(left.get(definition, []), key=lambda t: t.model_dump_json()),
            sorted(right.get(definition, []), key=lambda t: t.model_dump_json()),
            strict=True,
        ):
            if not same(x, y):
                problems.append(f"{kind} of {definition!r}: a record differs")
                break


def outcome(call: Any) -> Any:
    try:
        return ["ok", call()]
    except Exception as error:  # the same failure on both sides is agreement
        return ["error", type(error).__name__]


def rankings(ts: TraceSet) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in sorted(ts.definitions):
        best = ts.get_best_trace(name)
        found[f"best_trace {name}"] = (
            None
            if best is None
            else [best.solution, best.workload.uuid, best.evaluation.performance.speedup_factor]
        )
        found[f"filter_traces {name}"] = len(ts.filter_traces(name))
    if hasattr(ts, "rank_authors"):
        found["rank_authors"] = outcome(lambda: [list(r) for r in ts.rank_authors()])
    if hasattr(ts, "get_solution_score"):
        for solutions in ts.solutions.values():
            for s in solutions:
                found[f"score {s.name}"] = outcome(lambda s=s: repr(ts.get_solution_score(s.name)))
    return found


def main(original: str, exported: str) -> dict[str, Any]:
    a = TraceSet.from_path(original)
    b = TraceSet.from_path(exported)
    problems: list[str] = []
    compare_named("definition", a.definitions, b.definitions, problems)
    compare_named(
        "solution",
        {s.name: s for v in a.solutions.values() for s in v},
        {s.name: s for v in b.solutions.values() for s in v},
        problems,
    )
    compare_lists("workloads", a.workloads, b.workloads, problems)
    compare_lists("traces", a.traces, b.traces, problems)
    summary_a, summary_b = outcome(a.summary), outcome(b.summary)
    if not same_value(summary_a, summary_b):
        problems.append(f"summary(): original {summary_a}, export {summary_b}")
    ranks_a, ranks_b = rankings(a), rankings(b)
    for key in sorted(set(ranks_a) | set(ranks_b)):
        if not same_value(ranks_a.get(key), ranks_b.get(key)):
            problems.append(f"{key}: original {ranks_a.get(key)}, export {ranks_b.get(key)}")
    return {
        "definitions": len(a.definitions),
        "solutions": sum(len(v) for v in a.solutions.values()),
        "workloads": sum(len(v) for v in a.workloads.values()),
        "traces": sum(len(v) for v in a.traces.values()),
        "exported_traces": sum(len(v) for v in b.traces.values()),
        "summary": summary_a,
        "rankings_compared": len(ranks_a),
        "problems": problems,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2]), default=str))
