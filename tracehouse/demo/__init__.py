"""Seeded, deterministic generator of a realistic FlashInfer-Trace dataset.

The dataset is written in the current ("v3") layout of the Hugging Face dataset
`flashinfer-ai/flashinfer-trace`::

    definitions/<op_type>/<definition>.json
    workloads/<op_type>/<definition>.jsonl
    solutions/<author>/<op_type>/<definition>/<solution>.json
    traces/<author>/<op_type>/<definition>.jsonl

with the JSON style of the upstream writer (`flashinfer_bench.data.json_utils`): `.json` files are
pydantic `model_dump_json(indent=2, exclude_unset=True)` (two-space indent, no trailing newline),
`.jsonl` lines are compact with every field present (nulls included) in model field order
(`definition, workload{axes, inputs, uuid}, solution, evaluation{status, environment, timestamp,
log, correctness, performance}`), NaN/+inf correctness errors written as the strings `"NaN"` /
`"Infinity"`.

Everything is drawn from `random.Random` instances seeded from `(seed, name)` with SHA-256, so the
same arguments always produce byte-identical files. Blob files referenced by safetensors inputs are
*not* written (the warehouse only needs their paths).

Used by `tracehouse demo` (its one command line), the tests and the benchmark (`bench/run.py`,
`target_trace_lines`). One module per concern: `randomness`, `hardware`, definition families
(`family`, `attention`, `catalog`), `solutions`, `logs`, `traces` (workloads and trace lines),
`planning` (sizes for a target line count) and `generate` (writing the files).
"""

from __future__ import annotations

from tracehouse.demo.generate import GeneratedDataset, generate_dataset
from tracehouse.demo.hardware import DEFAULT_HARDWARE
from tracehouse.demo.planning import plan_for_target
from tracehouse.demo.solutions import AGENT_AUTHORS, BASELINE_AUTHOR
from tracehouse.demo.traces import STATUSES

__all__ = [
    "AGENT_AUTHORS",
    "BASELINE_AUTHOR",
    "DEFAULT_HARDWARE",
    "STATUSES",
    "GeneratedDataset",
    "generate_dataset",
    "plan_for_target",
]
