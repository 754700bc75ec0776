"""Writing the dataset: one file per definition, workload set, solution and trace file."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tracehouse.demo.catalog import CATALOG_SIZE, catalog
from tracehouse.demo.hardware import DEFAULT_HARDWARE, hardware_profile
from tracehouse.demo.logs import Logs
from tracehouse.demo.planning import plan_for_target
from tracehouse.demo.randomness import seeded_rng
from tracehouse.demo.solutions import Solution, assign_profiles, make_solutions
from tracehouse.demo.traces import STATUSES, make_workloads, trace_file_lines

KINDS: tuple[str, ...] = ("definitions", "workloads", "solutions", "traces")


_JSON_PRETTY = orjson.OPT_INDENT_2


@dataclass(frozen=True)
class GeneratedDataset:
    """What `generate_dataset` wrote. Counts are of objects; `files`/`bytes` are per kind."""

    root: Path
    seed: int
    definitions: int
    workloads: int  # workload-only lines in workloads/**.jsonl (= distinct workloads)
    solutions: int
    trace_lines: int
    files: dict[str, int]  # kind -> number of files written
    bytes: dict[str, int]  # kind -> bytes written
    status_counts: dict[str, int]
    parameters: dict[str, Any]  # effective definitions/workloads/solutions/runs/hardware/log_scale
    write_seconds: float = field(compare=False)

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())

    @property
    def total_files(self) -> int:
        return sum(self.files.values())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["root"] = str(self.root)
        data["total_bytes"] = self.total_bytes
        data["total_files"] = self.total_files
        return data


class _Writer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = dict.fromkeys(KINDS, 0)
        self.bytes = dict.fromkeys(KINDS, 0)

    def write(self, kind: str, rel: str, data: bytes) -> None:
        path = self.root / kind / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.files[kind] += 1
        self.bytes[kind] += len(data)


def generate_dataset(
    root: Path,
    *,
    seed: int = 7,
    definitions: int = 12,
    workloads_per_definition: int = 8,
    solutions_per_definition: int = 5,
    runs_per_workload: int = 1,
    hardware: Sequence[str] = DEFAULT_HARDWARE,
    target_trace_lines: int | None = None,
    log_scale: float = 1.0,
    overwrite: bool = False,
) -> GeneratedDataset:
    """Write a FlashInfer-Trace dataset under `root` and return what was written.

    `solutions_per_definition` counts the baseline solution too (so >= 2 means at least one
    agent solution). With `target_trace_lines`, definitions / workloads / solutions are derived
    from the target (`plan_for_target`) and the explicit counts are ignored. `overwrite` removes
    existing `definitions/ workloads/ solutions/ traces/` folders under `root` first; without it a
    non-empty dataset folder is an error.
    """
    started = time.perf_counter()
    root = Path(root)
    hardware = tuple(hardware)
    if not hardware:
        raise ValueError("hardware must name at least one device")
    if runs_per_workload < 1:
        raise ValueError("runs_per_workload must be >= 1")
    if target_trace_lines is not None:
        definitions, workloads_per_definition, solutions_per_definition = plan_for_target(
            target_trace_lines, hardware_count=len(hardware), runs_per_workload=runs_per_workload
        )
    if not 1 <= definitions <= CATALOG_SIZE:
        raise ValueError(f"definitions must be between 1 and {CATALOG_SIZE}")
    if workloads_per_definition < 1 or solutions_per_definition < 1:
        raise ValueError("workloads_per_definition and solutions_per_definition must be >= 1")

    existing = [root / kind for kind in KINDS if (root / kind).exists()]
    if existing and not overwrite:
        raise FileExistsError(
            f"{root} already holds a dataset ({existing[0].name}/); pass overwrite=True"
        )
    for path in existing:
        shutil.rmtree(path)
    root.mkdir(parents=True, exist_ok=True)

    families = catalog()[:definitions]
    hw_profiles = [hardware_profile(h) for h in hardware]
    agents_per_def = solutions_per_definition - 1
    profiles = assign_profiles(seeded_rng(seed, "profiles"), agents_per_def * definitions)
    writer = _Writer(root)
    status_counts = dict.fromkeys(STATUSES, 0)
    trace_lines = 0
    baseline_names: set[str] = set()

    for d_index, fam in enumerate(families):
        rng = seeded_rng(seed, "definition", fam.name)
        doc = fam.document()
        writer.write(
            "definitions", f"{fam.op_type}/{fam.name}.json", orjson.dumps(doc, option=_JSON_PRETTY)
        )

        workloads = make_workloads(rng, fam, workloads_per_definition, hw_profiles)
        writer.write(
            "workloads",
            f"{fam.op_type}/{fam.name}.jsonl",
            b"".join(
                b'{"definition":'
                + orjson.dumps(fam.name)
                + b',"workload":'
                + w.json
                + b',"solution":null,"evaluation":null}\n'
                for w in workloads
            ),
        )

        solutions = make_solutions(
            rng,
            fam,
            hw_profiles,
            profiles[d_index * agents_per_def : (d_index + 1) * agents_per_def],
            baseline_names,
        )
        for sol in solutions:
            writer.write(
                "solutions",
                f"{sol.author}/{fam.op_type}/{fam.name}/{sol.name}.json",
                orjson.dumps(sol.document, option=_JSON_PRETTY),
            )

        logs = Logs(seed, fam, log_scale)
        by_author: dict[str, list[Solution]] = {}
        for sol in solutions:
            by_author.setdefault(sol.author, []).append(sol)
        for author in sorted(by_author):
            lines = trace_file_lines(
                seed,
                fam,
                by_author[author],
                author,
                workloads,
                hw_profiles,
                runs_per_workload,
                logs,
                status_counts,
            )
            trace_lines += len(lines)
            writer.write("traces", f"{author}/{fam.op_type}/{fam.name}.jsonl", b"".join(lines))

    return GeneratedDataset(
        root=root,
        seed=seed,
        definitions=len(families),
        workloads=len(families) * workloads_per_definition,
        solutions=writer.files["solutions"],
        trace_lines=trace_lines,
        files=dict(writer.files),
        bytes=dict(writer.bytes),
        status_counts=status_counts,
        parameters={
            "definitions": len(families),
            "workloads_per_definition": workloads_per_definition,
            "solutions_per_definition": solutions_per_definition,
            "runs_per_workload": runs_per_workload,
            "hardware": list(hardware),
            "target_trace_lines": target_trace_lines,
            "log_scale": log_scale,
        },
        write_seconds=time.perf_counter() - started,
    )
