"""A corpus with many solutions per definition, grown from the real KernelIndex golden dataset:
its definitions, workloads and baseline solutions and runs are copied as they are, and every
baseline run is repeated for each generated candidate solution with a scaled latency (some
candidates fail one run). Written as JSONL directly, so a 100k-line corpus takes seconds."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from tests.shared_data import GOLDEN_DIR

# Real definitions with one baseline solution each: 129 and 43 baseline runs (3 and 1 per workload).
DEFINITIONS = ("gemm_n5120_k17408", "gemm_n6144_k4096")
OP_FOLDER = "gemm"
AUTHORS = 50


def write_many_solutions(root: Path, solutions_per_definition: int, seed: int = 25) -> int:
    """Write the corpus under ``root``; returns its number of trace lines."""
    golden = GOLDEN_DIR / "dataset"
    rng = random.Random(seed)
    lines = 0
    for definition in DEFINITIONS:
        for kind, suffix in (("definitions", ".json"), ("workloads", ".jsonl")):
            target = root / kind / OP_FOLDER / f"{definition}{suffix}"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(golden / kind / OP_FOLDER / f"{definition}{suffix}", target)
        baseline_dir = golden / "solutions" / "baseline" / OP_FOLDER / definition
        (baseline_file,) = baseline_dir.glob("*.json")
        target = root / "solutions" / "baseline" / OP_FOLDER / definition / baseline_file.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(baseline_file, target)
        template = json.loads(baseline_file.read_text())
        baseline_traces = golden / "traces" / "baseline" / OP_FOLDER / f"{definition}.jsonl"
        target = root / "traces" / "baseline" / OP_FOLDER / f"{definition}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(baseline_traces, target)
        runs = [json.loads(line) for line in baseline_traces.read_text().splitlines() if line]
        lines += len(runs)
        by_author: dict[str, list[str]] = {}
        for number in range(solutions_per_definition):
            author = f"author{number % AUTHORS:02d}"
            name = f"{author}_{definition}_{number:04d}"
            solution = dict(template, name=name, author=author)
            solution["description"] = "generated candidate of a real baseline"
            folder = root / "solutions" / author / OP_FOLDER / definition
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.json").write_text(json.dumps(solution))
            failing = rng.random() < 0.1
            speed = rng.uniform(0.5, 2.0)
            out = by_author.setdefault(author, [])
            for index, run in enumerate(runs):
                evaluation = run["evaluation"]
                line = dict(run, solution=name)
                if failing and index == 0 or evaluation["status"] != "PASSED":
                    line["evaluation"] = dict(
                        evaluation, status="RUNTIME_ERROR", correctness=None, performance=None
                    )
                else:
                    performance = dict(evaluation["performance"])
                    performance["latency_ms"] *= speed * rng.uniform(0.95, 1.05)
                    line["evaluation"] = dict(evaluation, performance=performance)
                out.append(json.dumps(line))
        for author, author_lines in by_author.items():
            target = root / "traces" / author / OP_FOLDER / f"{definition}.jsonl"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(author_lines) + "\n")
            lines += len(author_lines)
    return lines
