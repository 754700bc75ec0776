"""What a definition family is: its definition document, workload axes and latency model."""

from __future__ import annotations

import math
import random
from typing import Any


def tensor(shape: list[str] | None, dtype: str, description: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"shape": shape, "dtype": dtype}
    if description is not None:
        spec["description"] = description
    return spec


def const(value: int, description: str | None = None) -> dict[str, Any]:
    axis: dict[str, Any] = {"type": "const", "value": value}
    if description is not None:
        axis["description"] = description
    return axis


def var(description: str | None = None) -> dict[str, Any]:
    axis: dict[str, Any] = {"type": "var"}
    if description is not None:
        axis["description"] = description
    return axis


def lognormal_lengths(
    rng: random.Random, n: int, median: float, sigma: float, hi: int
) -> list[int]:
    return [max(1, min(hi, int(rng.lognormvariate(math.log(median), sigma)))) for _ in range(n)]


class Family:
    """One kind of definition: its JSON document, workload sampler and cost model."""

    op_type = ""
    baseline_kind = "flashinfer_wrapper"
    fi_api = ""
    reference_python_loop = False  # the reference loops in Python over the batch (slow)

    def __init__(self, name: str) -> None:
        self.name = name

    # -- document ------------------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.name,
            "op_type": self.op_type,
            "axes": self.axes(),
            "inputs": self.inputs(),
            "outputs": self.outputs(),
            "reference": self.reference(),
            "tags": self.tags(),
            "description": self.description(),
        }
        constraints = self.constraints()
        if constraints:
            doc["constraints"] = constraints
        return doc

    def axes(self) -> dict[str, Any]:
        raise NotImplementedError

    def inputs(self) -> dict[str, Any]:
        raise NotImplementedError

    def outputs(self) -> dict[str, Any]:
        raise NotImplementedError

    def reference(self) -> str:
        raise NotImplementedError

    def tags(self) -> list[str]:
        return ["status:verified"]

    def description(self) -> str:
        return ""

    def constraints(self) -> list[str]:
        return []

    # -- workloads -----------------------------------------------------------------------
    def sample_axes(self, rng: random.Random) -> dict[str, int]:
        raise NotImplementedError

    def workload_inputs(
        self, rng: random.Random, axes: dict[str, int], workload_uuid: str
    ) -> dict[str, Any]:
        """Inputs in definition order: random tensors, safetensors index tensors, scalars."""
        blob = self.blob_path(rng, workload_uuid)
        result: dict[str, Any] = {}
        for input_name in self.inputs():
            if input_name in self.scalar_inputs():
                result[input_name] = {"type": "scalar", "value": self.scalar_inputs()[input_name]}
            elif input_name in self.blob_inputs():
                result[input_name] = {"type": "safetensors", "path": blob, "tensor_key": input_name}
            else:
                result[input_name] = {"type": "random"}
        return result

    def scalar_inputs(self) -> dict[str, int | float]:
        return {}

    def blob_inputs(self) -> tuple[str, ...]:
        return ()

    def blob_path(self, rng: random.Random, workload_uuid: str) -> str:
        stem = f"{self.name}_{workload_uuid.replace('-', '')}"
        return f"./blob/workloads/{self.op_type}/{self.name}/{stem}.safetensors"

    # -- cost model ----------------------------------------------------------------------
    def cost(self, axes: dict[str, int]) -> tuple[float, float]:
        """(flops, bytes moved) of one call."""
        raise NotImplementedError

    def batch(self, axes: dict[str, int]) -> int:
        return 1

    def reference_ms(self, axes: dict[str, int], baseline_ms: float, rng: random.Random) -> float:
        """Latency of the definition's PyTorch reference (the harness' speedup denominator)."""
        slow = rng.uniform(1.6, 4.0) * baseline_ms
        if self.reference_python_loop:
            slow += self.batch(axes) * rng.uniform(0.02, 0.06)
        return slow

    def correctness_extra(self, rng: random.Random, passed: bool) -> dict[str, Any] | None:
        return None

    def output_shapes(self, axes: dict[str, int]) -> list[tuple[str, tuple[int, ...], str]]:
        """(name, concrete shape, torch dtype) of outputs, for shape/dtype mismatch logs."""
        consts = {k: v["value"] for k, v in self.axes().items() if v["type"] == "const"}
        sizes = {**consts, **axes}
        return [
            (name, tuple(sizes.get(a, 1) for a in (spec["shape"] or [])), spec["dtype"])
            for name, spec in self.outputs().items()
        ]
