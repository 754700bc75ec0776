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

Used by the demo warehouse, the tests and the benchmark (`bench/run.py`, `target_trace_lines`).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import shutil
import struct
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "AGENT_AUTHORS",
    "BASELINE_AUTHOR",
    "DEFAULT_HARDWARE",
    "STATUSES",
    "GeneratedDataset",
    "generate_dataset",
    "main",
    "plan_for_target",
]

BASELINE_AUTHOR = "baseline"
AGENT_AUTHORS: tuple[str, ...] = (
    "gpt-5",
    "gpt-5.2",
    "Qwen3.5-27B",
    "claude-opus-4",
    "gpt-o3",
    "gemini-2.5-pro",
)
DEFAULT_HARDWARE: tuple[str, ...] = (
    "NVIDIA B200",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA A800-SXM4-80GB",
)
STATUSES: tuple[str, ...] = (
    "PASSED",
    "INCORRECT_NUMERICAL",
    "INCORRECT_SHAPE",
    "INCORRECT_DTYPE",
    "RUNTIME_ERROR",
    "COMPILE_ERROR",
    "TIMEOUT",
)
KINDS: tuple[str, ...] = ("definitions", "workloads", "solutions", "traces")

# Share of (solution, hardware) evaluation sessions that are re-run later on part of their
# workloads (the files are append-only, so re-runs become extra lines with later timestamps).
_RERUN_SESSION_SHARE = 0.04
_RERUN_WORKLOAD_SHARE = 0.5
_EPOCH = datetime(2026, 3, 2, 9, 0, 0, 117_283)

_JSON_PRETTY = orjson.OPT_INDENT_2


# --------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Deterministic randomness helpers
# --------------------------------------------------------------------------------------------


def _rng(seed: int, *parts: object) -> random.Random:
    digest = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def _hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def _uuid4(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _f32(x: float) -> float:
    """Round to float32 like values that come out of CUDA timers / torch tensors."""
    return struct.unpack("f", struct.pack("f", x))[0]


# --------------------------------------------------------------------------------------------
# Hardware as torch names it, with a crude roofline
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hardware:
    name: str
    arch: str  # nvcc compute capability suffix
    tflops: float  # dense bf16
    tbps: float  # HBM bandwidth
    launch_ms: float
    libs: dict[str, str]
    cuda_home: str
    cupti: bool  # False -> the "CUPTI is not installed" warning appears in logs


_KNOWN_HARDWARE: dict[str, _Hardware] = {
    "NVIDIA B200": _Hardware(
        "NVIDIA B200",
        "100a",
        2250.0,
        8.0,
        0.0042,
        {"torch": "2.9.1+cu130", "triton": "3.5.1", "tilelang": "0.1.6.post2", "cuda": "13.0"},
        "/usr/local/cuda-13.0",
        True,
    ),
    "NVIDIA H100 80GB HBM3": _Hardware(
        "NVIDIA H100 80GB HBM3",
        "90a",
        989.0,
        3.35,
        0.0051,
        {"torch": "2.8.0+cu128", "triton": "3.4.0", "cuda": "12.8"},
        "/usr/local/cuda-12.8",
        True,
    ),
    "NVIDIA A800-SXM4-80GB": _Hardware(
        "NVIDIA A800-SXM4-80GB",
        "80",
        312.0,
        2.0,
        0.0063,
        {"torch": "2.9.1+cu130", "triton": "3.5.1", "cuda": "13.0"},
        "/usr/local/cuda-12.4",
        False,
    ),
}


def _hardware(name: str) -> _Hardware:
    known = _KNOWN_HARDWARE.get(name)
    if known is not None:
        return known
    rng = _rng(0, "hardware", name)
    return _Hardware(
        name,
        rng.choice(["80", "89", "90a"]),
        rng.uniform(150.0, 1000.0),
        rng.uniform(0.9, 3.4),
        rng.uniform(0.004, 0.008),
        {"torch": "2.9.1+cu128", "triton": "3.5.1", "cuda": "12.8"},
        "/usr/local/cuda-12.8",
        rng.random() < 0.5,
    )


# --------------------------------------------------------------------------------------------
# Definition families
# --------------------------------------------------------------------------------------------


def _tensor(shape: list[str] | None, dtype: str, description: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"shape": shape, "dtype": dtype}
    if description is not None:
        spec["description"] = description
    return spec


def _const(value: int, description: str | None = None) -> dict[str, Any]:
    axis: dict[str, Any] = {"type": "const", "value": value}
    if description is not None:
        axis["description"] = description
    return axis


def _var(description: str | None = None) -> dict[str, Any]:
    axis: dict[str, Any] = {"type": "var"}
    if description is not None:
        axis["description"] = description
    return axis


def _lens(rng: random.Random, n: int, median: float, sigma: float, hi: int) -> list[int]:
    return [max(1, min(hi, int(rng.lognormvariate(math.log(median), sigma)))) for _ in range(n)]


class _Family:
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


# ---- gemm ---------------------------------------------------------------------------------

_GEMM_SHAPES: tuple[tuple[int, int, str, str], ...] = (
    (128, 2048, "qwen3-30b-a3b", "moe.gate"),
    (2048, 4096, "llama-3.1-8b", "o_proj (tp=2)"),
    (4096, 4096, "llama-3.1-8b", "o_proj"),
    (6144, 4096, "llama-3.1-8b", "qkv_proj"),
    (28672, 4096, "llama-3.1-8b", "gate_up_proj"),
    (4096, 14336, "llama-3.1-8b", "down_proj"),
    (256, 7168, "deepseek-v3", "moe.gate"),
    (5120, 2048, "qwen3-30b-a3b", "qkv_proj"),
    (2048, 5120, "qwen3-30b-a3b", "o_proj"),
    (1536, 7168, "deepseek-v3", "q_a_proj"),
    (24576, 1536, "deepseek-v3", "q_b_proj"),
    (7168, 2048, "deepseek-v3", "shared_experts.down_proj"),
    (4096, 2048, "deepseek-v3", "shared_experts.gate_up_proj"),
    (8192, 8192, "llama-3.1-70b", "o_proj"),
    (10240, 8192, "llama-3.1-70b", "qkv_proj (tp=1)"),
    (57344, 8192, "llama-3.1-70b", "gate_up_proj"),
    (8192, 28672, "llama-3.1-70b", "down_proj"),
    (3072, 4096, "qwen3-8b", "qkv_proj (tp=2)"),
    (12288, 4096, "qwen3-8b", "gate_up_proj (tp=2)"),
    (4096, 6144, "qwen3-8b", "down_proj (tp=2)"),
    (151936, 4096, "qwen3-8b", "lm_head"),
    (128256, 4096, "llama-3.1-8b", "lm_head"),
    (576, 7168, "deepseek-v3", "kv_a_proj_with_mqa"),
    (32768, 512, "deepseek-v3", "kv_b_proj"),
)
_GEMM_M = (1, 1, 2, 4, 6, 8, 16, 17, 32, 34, 64, 80, 128, 256, 512, 1024, 2048, 4096, 8192)


class _Gemm(_Family):
    op_type = "gemm"
    baseline_kind = "torch_matmul"
    fi_api = "torch.matmul"

    def __init__(self, n: int, k: int, model: str, module: str, dtype: str) -> None:
        super().__init__(f"gemm_n{n}_k{k}")
        self.n, self.k, self.model, self.module, self.dtype = n, k, model, module, dtype

    def axes(self) -> dict[str, Any]:
        return {"M": _var(), "N": _const(self.n), "K": _const(self.k)}

    def inputs(self) -> dict[str, Any]:
        return {"A": _tensor(["M", "K"], self.dtype), "B": _tensor(["N", "K"], self.dtype)}

    def outputs(self) -> dict[str, Any]:
        return {"C": _tensor(["M", "N"], self.dtype)}

    def reference(self) -> str:
        return "import torch\n\ndef run(A, B):\n    C = torch.matmul(A, B.T)\n    return C"

    def tags(self) -> list[str]:
        return ["status:verified", f"model:{self.model}"]

    def description(self) -> str:
        return (
            f"General matrix multiply (GEMM) C = A @ B.T. Captured from {self.model} {self.module}."
        )

    def sample_axes(self, rng: random.Random) -> dict[str, int]:
        m = rng.choice(_GEMM_M) if rng.random() < 0.8 else rng.randint(1, 8192)
        return {"M": m}

    def batch(self, axes: dict[str, int]) -> int:
        return axes["M"]

    def cost(self, axes: dict[str, int]) -> tuple[float, float]:
        m, n, k = axes["M"], self.n, self.k
        return 2.0 * m * n * k, 2.0 * (m * k + n * k + m * n)

    def reference_ms(self, axes: dict[str, int], baseline_ms: float, rng: random.Random) -> float:
        return baseline_ms * rng.uniform(0.92, 1.12)  # the reference *is* torch.matmul


# ---- rmsnorm -------------------------------------------------------------------------------

_RMSNORM_SIZES: tuple[tuple[int, str], ...] = (
    (4096, "llama-3.1-8b"),
    (2048, "qwen3-30b-a3b"),
    (7168, "deepseek-v3"),
    (8192, "llama-3.1-70b"),
    (5120, "qwen3-32b"),
    (1536, "deepseek-v3"),
    (512, "deepseek-v3"),
    (3584, "qwen2.5-7b"),
)


class _RmsNorm(_Family):
    op_type = "rmsnorm"
    fi_api = "flashinfer.norm.rmsnorm"

    def __init__(self, hidden: int, model: str, fused: bool) -> None:
        prefix = "fused_add_rmsnorm" if fused else "rmsnorm"
        super().__init__(f"{prefix}_h{hidden}")
        self.hidden, self.model, self.fused = hidden, model, fused
        if fused:
            self.fi_api = "flashinfer.norm.fused_add_rmsnorm"

    def axes(self) -> dict[str, Any]:
        return {"batch_size": _var(), "hidden_size": _const(self.hidden)}

    def inputs(self) -> dict[str, Any]:
        inputs = {"hidden_states": _tensor(["batch_size", "hidden_size"], "bfloat16")}
        if self.fused:
            inputs["residual"] = _tensor(["batch_size", "hidden_size"], "bfloat16")
        inputs["weight"] = _tensor(["hidden_size"], "bfloat16")
        if self.fused:
            inputs["eps"] = _tensor(None, "float32", "Epsilon added to the mean square.")
        return inputs

    def outputs(self) -> dict[str, Any]:
        outputs = {"output": _tensor(["batch_size", "hidden_size"], "bfloat16")}
        if self.fused:
            outputs["residual_out"] = _tensor(
                ["batch_size", "hidden_size"], "bfloat16", "hidden_states + residual."
            )
        return outputs

    def reference(self) -> str:
        if self.fused:
            return (
                "import torch\n\n@torch.no_grad()\ndef run(hidden_states, residual, weight, eps):\n"
                "    batch_size, hidden_size = hidden_states.shape\n"
                f"    assert hidden_size == {self.hidden}\n\n"
                "    x = hidden_states.to(torch.float32) + residual.to(torch.float32)\n"
                "    residual_out = x.to(hidden_states.dtype)\n"
                "    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)\n"
                "    y = (x * inv_rms) * weight.to(torch.float32)\n"
                "    return y.to(hidden_states.dtype), residual_out"
            )
        return (
            "import torch\n\n@torch.no_grad()\ndef run(hidden_states, weight):\n"
            "    batch_size, hidden_size = hidden_states.shape\n    # Check constants\n"
            f"    assert hidden_size == {self.hidden}\n\n    EPS = 1e-5\n\n"
            "    x = hidden_states.to(torch.float32)\n"
            "    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)\n"
            "    y = (x * inv_rms) * weight.to(torch.float32)\n"
            "    return y.to(hidden_states.dtype)"
        )

    def tags(self) -> list[str]:
        tags = ["status:verified", f"model:{self.model}", f"fi_api:{self.fi_api}"]
        return [*tags, "fused"] if self.fused else tags

    def description(self) -> str:
        if self.fused:
            return (
                f"Fused residual add + RMSNorm with hidden_size={self.hidden}. "
                f"Captured from {self.model}."
            )
        return (
            f"Root Mean Square Normalization with hidden_size={self.hidden}. "
            f"Captured from {self.model}. Epsilon is fixed at 1e-5."
        )

    def scalar_inputs(self) -> dict[str, int | float]:
        return {"eps": 1e-6 if self.model.startswith("qwen") else 1e-5} if self.fused else {}

    def sample_axes(self, rng: random.Random) -> dict[str, int]:
        choice = rng.choice((1, 1, 2, 4, 7, 8, 15, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384))
        return {"batch_size": choice}

    def batch(self, axes: dict[str, int]) -> int:
        return axes["batch_size"]

    def cost(self, axes: dict[str, int]) -> tuple[float, float]:
        elems = axes["batch_size"] * self.hidden
        return 4.0 * elems, (8.0 if self.fused else 4.0) * elems + 2.0 * self.hidden


# ---- paged / ragged attention ------------------------------------------------------------------


class _GqaPaged(_Family):
    op_type = "gqa_paged"

    def __init__(self, hq: int, hkv: int, d: int, ps: int, stage: str, model: str, tp: int) -> None:
        causal = "_causal" if stage == "prefill" else ""
        super().__init__(f"gqa_paged_{stage}{causal}_h{hq}_kv{hkv}_d{d}_ps{ps}")
        self.hq, self.hkv, self.d, self.ps, self.stage, self.model, self.tp = (
            hq,
            hkv,
            d,
            ps,
            stage,
            model,
            tp,
        )
        self.reference_python_loop = True
        self.fi_api = (
            "flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper"
            if stage == "decode"
            else "flashinfer.prefill.BatchPrefillWithPagedKVCacheWrapper"
        )

    def axes(self) -> dict[str, Any]:
        first = (
            {"batch_size": _var("Total number of query tokens.")}
            if self.stage == "decode"
            else {"total_q": _var("Total number of query tokens.")}
        )
        return {
            **first,
            "num_qo_heads": _const(self.hq),
            "num_kv_heads": _const(self.hkv),
            "head_dim": _const(self.d),
            "num_pages": _var(),
            "page_size": _const(self.ps),
            "len_indptr": _var("Length of kv_indptr array."),
            "num_kv_indices": _var("Total number of KV page indices."),
        }

    def constraints(self) -> list[str]:
        if self.stage == "decode":
            return ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"]
        return ["total_q == qo_indptr[-1].item()", "num_kv_indices == kv_indptr[-1].item()"]

    def inputs(self) -> dict[str, Any]:
        rows = "batch_size" if self.stage == "decode" else "total_q"
        cache = ["num_pages", "page_size", "num_kv_heads", "head_dim"]
        inputs = {
            "q": _tensor([rows, "num_qo_heads", "head_dim"], "bfloat16"),
            "k_cache": _tensor(cache, "bfloat16"),
            "v_cache": _tensor(cache, "bfloat16"),
        }
        if self.stage == "prefill":
            inputs["qo_indptr"] = _tensor(
                ["len_indptr"], "int32", "Query offsets for each sequence."
            )
        inputs["kv_indptr"] = _tensor(["len_indptr"], "int32", "KV page offsets for each sequence.")
        inputs["kv_indices"] = _tensor(
            ["num_kv_indices"], "int32", "Page IDs for KV cache lookups."
        )
        inputs["sm_scale"] = _tensor(
            None, "float32", f"Softmax scale. Default is (1/sqrt(head_dim)) = 1/sqrt({self.d})."
        )
        return inputs

    def outputs(self) -> dict[str, Any]:
        rows = "batch_size" if self.stage == "decode" else "total_q"
        return {
            "output": _tensor([rows, "num_qo_heads", "head_dim"], "bfloat16"),
            "lse": _tensor(
                [rows, "num_qo_heads"], "float32", "The 2-based log-sum-exp of attention logits."
            ),
        }

    def reference(self) -> str:
        rows = "batch_size" if self.stage == "decode" else "total_q"
        return (
            "import torch\nimport math\n\n\n@torch.no_grad()\n"
            f"def run({', '.join(self.inputs())}):\n"
            f"    {rows}, num_qo_heads, head_dim = q.shape\n"
            "    _, page_size, num_kv_heads, _ = k_cache.shape\n\n    # Check constants\n"
            f"    assert num_qo_heads == {self.hq}\n    assert num_kv_heads == {self.hkv}\n"
            f"    assert head_dim == {self.d}\n    assert page_size == {self.ps}\n\n"
            "    device = q.device\n"
            f"    output = torch.zeros(({rows}, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device)\n"
            f'    lse = torch.full(({rows}, num_qo_heads), -float("inf"), dtype=torch.float32, device=device)\n'
            "    gqa_ratio = num_qo_heads // num_kv_heads\n"
            "    k_flat = k_cache.reshape(-1, num_kv_heads, head_dim).to(torch.float32)\n"
            "    v_flat = v_cache.reshape(-1, num_kv_heads, head_dim).to(torch.float32)\n"
            "    for b in range(kv_indptr.shape[0] - 1):\n"
            "        ps, pe = int(kv_indptr[b].item()), int(kv_indptr[b + 1].item())\n"
            "        idx = kv_indices[ps:pe].to(torch.long)\n"
            "        tok = (idx[:, None] * page_size + torch.arange(page_size, device=device)).reshape(-1)\n"
            "        k = k_flat[tok].permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)\n"
            "        v = v_flat[tok].permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)\n"
            "        logits = torch.einsum('hd,htd->ht', q[b].to(torch.float32), k) * sm_scale\n"
            "        lse[b] = torch.logsumexp(logits, dim=-1) / math.log(2.0)\n"
            "        attn = torch.softmax(logits, dim=-1)\n"
            "        output[b] = torch.einsum('ht,htd->hd', attn, v).to(torch.bfloat16)\n\n"
            "    return output, lse"
        )

    def tags(self) -> list[str]:
        return [
            f"stage:{self.stage}",
            "status:verified",
            f"model:{self.model}",
            f"fi_api:{self.fi_api}",
            f"tp:{self.tp}",
        ]

    def description(self) -> str:
        what = "decode" if self.stage == "decode" else "causal prefill"
        return (
            f"Batched Grouped Query Attention {what} with a paged KV cache. "
            f"Captured from {self.model}."
        )

    def scalar_inputs(self) -> dict[str, int | float]:
        return {"sm_scale": 1.0 / math.sqrt(self.d)}

    def blob_inputs(self) -> tuple[str, ...]:
        return ("qo_indptr", "kv_indptr", "kv_indices")

    def sample_axes(self, rng: random.Random) -> dict[str, int]:
        batch = rng.choice((1, 1, 2, 4, 8, 16, 32, 64, 128, 256))
        kv_lens = _lens(rng, batch, 700.0, 1.3, 32768)
        pages = sum(-(-n // self.ps) for n in kv_lens)
        pool = max(pages, rng.choice((pages + rng.randint(0, 4096), 9316, 63_000, 131_072)))
        if self.stage == "decode":
            return {
                "batch_size": batch,
                "num_pages": pool,
                "len_indptr": batch + 1,
                "num_kv_indices": pages,
            }
        q_lens = [max(1, min(n, int(rng.lognormvariate(math.log(180), 1.1)))) for n in kv_lens]
        return {
            "total_q": sum(q_lens),
            "num_pages": pool,
            "len_indptr": batch + 1,
            "num_kv_indices": pages,
        }

    def batch(self, axes: dict[str, int]) -> int:
        return axes["len_indptr"] - 1

    def cost(self, axes: dict[str, int]) -> tuple[float, float]:
        kv_tokens = axes["num_kv_indices"] * self.ps
        q = axes.get("batch_size", axes.get("total_q", 1))
        kv_bytes = kv_tokens * self.hkv * self.d * 2 * 2.0
        if self.stage == "decode":
            return 4.0 * kv_tokens * self.hq * self.d, kv_bytes + q * self.hq * self.d * 4.0
        avg_kv = kv_tokens / max(1, self.batch(axes))
        return 4.0 * q * avg_kv * self.hq * self.d * 0.6, kv_bytes + q * self.hq * self.d * 4.0


class _GqaRagged(_Family):
    op_type = "gqa_ragged"
    fi_api = "flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper"
    reference_python_loop = True

    def __init__(self, hq: int, hkv: int, d: int, model: str) -> None:
        super().__init__(f"gqa_ragged_prefill_causal_h{hq}_kv{hkv}_d{d}")
        self.hq, self.hkv, self.d, self.model = hq, hkv, d, model

    def axes(self) -> dict[str, Any]:
        return {
            "total_q": _var(),
            "total_kv": _var(),
            "num_qo_heads": _const(self.hq),
            "num_kv_heads": _const(self.hkv),
            "head_dim": _const(self.d),
            "len_indptr": _var(),
        }

    def constraints(self) -> list[str]:
        return ["total_q == qo_indptr[-1].item()", "total_kv == kv_indptr[-1].item()"]

    def inputs(self) -> dict[str, Any]:
        return {
            "q": _tensor(["total_q", "num_qo_heads", "head_dim"], "bfloat16"),
            "k": _tensor(["total_kv", "num_kv_heads", "head_dim"], "bfloat16"),
            "v": _tensor(["total_kv", "num_kv_heads", "head_dim"], "bfloat16"),
            "qo_indptr": _tensor(["len_indptr"], "int32"),
            "kv_indptr": _tensor(["len_indptr"], "int32"),
            "sm_scale": _tensor(None, "float32"),
        }

    def outputs(self) -> dict[str, Any]:
        return {
            "output": _tensor(["total_q", "num_qo_heads", "head_dim"], "bfloat16"),
            "lse": _tensor(["total_q", "num_qo_heads"], "float32"),
        }

    def reference(self) -> str:
        return (
            "import torch\nimport math\n\n\n@torch.no_grad()\n"
            "def run(q, k, v, qo_indptr, kv_indptr, sm_scale):\n"
            "    total_q, num_qo_heads, head_dim = q.shape\n"
            f"    assert num_qo_heads == {self.hq}\n    assert k.shape[1] == {self.hkv}\n"
            f"    assert head_dim == {self.d}\n"
            "    output = torch.zeros_like(q)\n"
            '    lse = torch.full((total_q, num_qo_heads), -float("inf"), dtype=torch.float32, device=q.device)\n'
            f"    gqa_ratio = num_qo_heads // {self.hkv}\n"
            "    for b in range(qo_indptr.shape[0] - 1):\n"
            "        qs, qe = int(qo_indptr[b]), int(qo_indptr[b + 1])\n"
            "        ks, ke = int(kv_indptr[b]), int(kv_indptr[b + 1])\n"
            "        qb = q[qs:qe].to(torch.float32)\n"
            "        kb = k[ks:ke].to(torch.float32).repeat_interleave(gqa_ratio, dim=1)\n"
            "        vb = v[ks:ke].to(torch.float32).repeat_interleave(gqa_ratio, dim=1)\n"
            "        logits = torch.einsum('qhd,khd->hqk', qb, kb) * sm_scale\n"
            "        mask = torch.ones(qe - qs, ke - ks, dtype=torch.bool, device=q.device).tril(ke - ks - (qe - qs))\n"
            "        logits = logits.masked_fill(~mask, -float('inf'))\n"
            "        lse[qs:qe] = (torch.logsumexp(logits, dim=-1) / math.log(2.0)).T\n"
            "        output[qs:qe] = torch.einsum('hqk,khd->qhd', torch.softmax(logits, -1), vb).to(q.dtype)\n"
            "    return output, lse"
        )

    def tags(self) -> list[str]:
        return [
            "stage:prefill",
            "status:verified",
            f"model:{self.model}",
            f"fi_api:{self.fi_api}",
            "tp:1",
        ]

    def description(self) -> str:
        return f"Causal ragged prefill attention (GQA). Captured from {self.model}."

    def scalar_inputs(self) -> dict[str, int | float]:
        return {"sm_scale": 1.0 / math.sqrt(self.d)}

    def blob_inputs(self) -> tuple[str, ...]:
        return ("qo_indptr", "kv_indptr")

    def sample_axes(self, rng: random.Random) -> dict[str, int]:
        batch = rng.choice((1, 1, 2, 4, 8, 16, 32))
        kv = _lens(rng, batch, 900.0, 1.0, 16384)
        q = [max(1, min(n, int(rng.lognormvariate(math.log(300), 1.0)))) for n in kv]
        return {"total_q": sum(q), "total_kv": sum(kv), "len_indptr": batch + 1}

    def batch(self, axes: dict[str, int]) -> int:
        return axes["len_indptr"] - 1

    def cost(self, axes: dict[str, int]) -> tuple[float, float]:
        b = max(1, self.batch(axes))
        flops = 4.0 * axes["total_q"] * (axes["total_kv"] / b) * self.hq * self.d * 0.6
        nbytes = (axes["total_q"] * self.hq + 2 * axes["total_kv"] * self.hkv) * self.d * 2.0
        return flops, nbytes


class _MlaPaged(_Family):
    op_type = "mla_paged"
    fi_api = "flashinfer.mla.BatchMLAPagedAttentionWrapper"
    reference_python_loop = True

    def __init__(self, heads: int, ps: int, stage: str, tp: int) -> None:
        causal = "_causal" if stage == "prefill" else ""
        super().__init__(f"mla_paged_{stage}{causal}_h{heads}_ckv512_kpe64_ps{ps}")
        self.heads, self.ps, self.stage, self.tp = heads, ps, stage, tp

    def rows(self) -> str:
        return "batch_size" if self.stage == "decode" else "total_q"

    def axes(self) -> dict[str, Any]:
        axes: dict[str, Any] = {self.rows(): _var()}
        axes["num_qo_heads"] = _const(
            self.heads,
            f"Number of query heads after tensor parallel split (128/{self.tp}={self.heads}).",
        )
        axes["head_dim_ckv"] = _const(512)
        axes["head_dim_kpe"] = _const(64)
        axes["page_size"] = _const(self.ps)
        axes["num_pages"] = _var("Total number of allocated pages in the KV cache.")
        axes["len_indptr"] = _var("Length of kv_indptr array.")
        axes["num_kv_indices"] = _var("Total number of KV page indices.")
        return axes

    def constraints(self) -> list[str]:
        if self.stage == "decode":
            return ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"]
        return ["total_q == qo_indptr[-1].item()", "num_kv_indices == kv_indptr[-1].item()"]

    def inputs(self) -> dict[str, Any]:
        r = self.rows()
        inputs = {
            "q_nope": _tensor(
                [r, "num_qo_heads", "head_dim_ckv"],
                "bfloat16",
                "Query tensor without positional encoding component.",
            ),
            "q_pe": _tensor(
                [r, "num_qo_heads", "head_dim_kpe"],
                "bfloat16",
                "Query positional encoding component.",
            ),
            "ckv_cache": _tensor(
                ["num_pages", "page_size", "head_dim_ckv"],
                "bfloat16",
                "Compressed key-value cache.",
            ),
            "kpe_cache": _tensor(
                ["num_pages", "page_size", "head_dim_kpe"],
                "bfloat16",
                "Key positional encoding cache.",
            ),
        }
        if self.stage == "prefill":
            inputs["qo_indptr"] = _tensor(
                ["len_indptr"], "int32", "Query offsets for each sequence."
            )
        inputs["kv_indptr"] = _tensor(["len_indptr"], "int32", "KV page offsets for each sequence.")
        inputs["kv_indices"] = _tensor(
            ["num_kv_indices"], "int32", "Page indices for KV cache lookups."
        )
        inputs["sm_scale"] = _tensor(
            None,
            "float32",
            "Softmax scale. Default is (1/sqrt(128 + 64) = 1/sqrt(192)), based on head dimensions before matrix absorption.",
        )
        return inputs

    def outputs(self) -> dict[str, Any]:
        r = self.rows()
        return {
            "output": _tensor([r, "num_qo_heads", "head_dim_ckv"], "bfloat16"),
            "lse": _tensor(
                [r, "num_qo_heads"], "float32", "The 2-based log-sum-exp of attention logits."
            ),
        }

    def reference(self) -> str:
        r = self.rows()
        return (
            "import math\nimport torch\n\n\n@torch.no_grad()\n"
            f"def run({', '.join(self.inputs())}):\n"
            f"    {r}, num_qo_heads, head_dim_ckv = q_nope.shape\n"
            "    head_dim_kpe = q_pe.shape[-1]\n    page_size = ckv_cache.shape[1]\n\n"
            f"    # Check constants\n    assert num_qo_heads == {self.heads}\n"
            "    assert head_dim_ckv == 512\n    assert head_dim_kpe == 64\n"
            f"    assert page_size == {self.ps}\n\n"
            "    device = q_nope.device\n"
            "    Kc_all = ckv_cache.reshape(-1, head_dim_ckv).to(torch.float32)\n"
            "    Kp_all = kpe_cache.reshape(-1, head_dim_kpe).to(torch.float32)\n"
            f"    output = torch.zeros(({r}, num_qo_heads, head_dim_ckv), dtype=torch.bfloat16, device=device)\n"
            f'    lse = torch.full(({r}, num_qo_heads), -float("inf"), dtype=torch.float32, device=device)\n'
            "    for b in range(kv_indptr.shape[0] - 1):\n"
            "        page_beg, page_end = int(kv_indptr[b].item()), int(kv_indptr[b + 1].item())\n"
            "        if page_beg >= page_end:\n            continue\n"
            "        tok_idx = kv_indices[page_beg:page_end].to(torch.long)\n"
            "        Kc, Kp = Kc_all[tok_idx], Kp_all[tok_idx]\n"
            "        qn, qp = q_nope[b].to(torch.float32), q_pe[b].to(torch.float32)\n"
            "        logits = (qn @ Kc.T) + (qp @ Kp.T)\n"
            "        logits_scaled = logits * sm_scale\n"
            "        lse[b] = torch.logsumexp(logits_scaled, dim=-1) / math.log(2.0)\n"
            "        attn = torch.softmax(logits_scaled, dim=-1)\n"
            "        output[b] = (attn @ Kc).to(torch.bfloat16)\n\n"
            "    return output, lse"
        )

    def tags(self) -> list[str]:
        return [
            f"stage:{self.stage}",
            "status:verified",
            "model:deepseek-v3",
            "model:deepseek-r1",
            f"fi_api:{self.fi_api}",
            f"tp:{self.tp}",
        ]

    def description(self) -> str:
        what = "decode" if self.stage == "decode" else "causal prefill"
        return (
            f"Batched Multi-head Latent Attention {what} with a paged KV cache. "
            f"Captured from DeepSeek-V3 with tensor parallel size {self.tp}."
        )

    def scalar_inputs(self) -> dict[str, int | float]:
        return {"sm_scale": 0.1352337747812271}

    def blob_inputs(self) -> tuple[str, ...]:
        return ("qo_indptr", "kv_indptr", "kv_indices")

    def blob_path(self, rng: random.Random, workload_uuid: str) -> str:
        stem = "mla_meta" if self.stage == "decode" else "mla_prefill_meta"
        return f"./blob/workloads/{self.op_type}/{self.name}/{stem}_{_hex(rng, 32)}.safetensors"

    def sample_axes(self, rng: random.Random) -> dict[str, int]:
        batch = rng.choice((1, 1, 1, 2, 4, 8, 16, 32, 64, 128))
        kv = _lens(rng, batch, 400.0, 1.4, 65536)
        pages = sum(-(-n // self.ps) for n in kv)
        pool = max(pages, rng.choice((989_669, 524_288, pages + rng.randint(0, 1024))))
        if self.stage == "decode":
            return {
                "batch_size": batch,
                "num_pages": pool,
                "len_indptr": batch + 1,
                "num_kv_indices": pages,
            }
        q = sum(max(1, min(n, int(rng.lognormvariate(math.log(120), 1.2)))) for n in kv)
        return {"total_q": q, "num_pages": pool, "len_indptr": batch + 1, "num_kv_indices": pages}

    def batch(self, axes: dict[str, int]) -> int:
        return axes["len_indptr"] - 1

    def cost(self, axes: dict[str, int]) -> tuple[float, float]:
        kv_tokens = axes["num_kv_indices"] * self.ps
        q = axes.get("batch_size", axes.get("total_q", 1))
        per_q_kv = kv_tokens / max(1, self.batch(axes))
        qk = q * per_q_kv if self.stage == "prefill" else kv_tokens
        flops = 2.0 * qk * self.heads * (576 + 512)
        return flops, kv_tokens * 576 * 2.0 + q * self.heads * 1152 * 2.0


class _DsaSparseAttention(_Family):
    op_type = "dsa_paged"
    fi_api = "flashinfer.sparse.dsa_sparse_attention"
    reference_python_loop = True

    def __init__(self) -> None:
        super().__init__("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64")

    def axes(self) -> dict[str, Any]:
        return {
            "num_tokens": _var(),
            "num_qo_heads": _const(16),
            "head_dim_ckv": _const(512),
            "head_dim_kpe": _const(64),
            "page_size": _const(64),
            "topk": _const(2048),
            "num_pages": _var(),
        }

    def inputs(self) -> dict[str, Any]:
        return {
            "q_nope": _tensor(["num_tokens", "num_qo_heads", "head_dim_ckv"], "bfloat16"),
            "q_pe": _tensor(["num_tokens", "num_qo_heads", "head_dim_kpe"], "bfloat16"),
            "ckv_cache": _tensor(["num_pages", "page_size", "head_dim_ckv"], "bfloat16"),
            "kpe_cache": _tensor(["num_pages", "page_size", "head_dim_kpe"], "bfloat16"),
            "sparse_indices": _tensor(
                ["num_tokens", "topk"], "int32", "Top-k token indices selected by the indexer."
            ),
            "sm_scale": _tensor(None, "float32"),
        }

    def outputs(self) -> dict[str, Any]:
        return {
            "output": _tensor(["num_tokens", "num_qo_heads", "head_dim_ckv"], "bfloat16"),
            "lse": _tensor(["num_tokens", "num_qo_heads"], "float32"),
        }

    def reference(self) -> str:
        return (
            "import math\nimport torch\n\n\n@torch.no_grad()\n"
            "def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):\n"
            "    num_tokens, num_qo_heads, head_dim_ckv = q_nope.shape\n"
            "    assert num_qo_heads == 16 and head_dim_ckv == 512\n"
            "    Kc_all = ckv_cache.reshape(-1, 512).to(torch.float32)\n"
            "    Kp_all = kpe_cache.reshape(-1, 64).to(torch.float32)\n"
            "    output = torch.zeros_like(q_nope)\n"
            '    lse = torch.full((num_tokens, 16), -float("inf"), dtype=torch.float32, device=q_nope.device)\n'
            "    for t in range(num_tokens):\n"
            "        idx = sparse_indices[t]\n        idx = idx[idx >= 0].to(torch.long)\n"
            "        logits = (q_nope[t].float() @ Kc_all[idx].T + q_pe[t].float() @ Kp_all[idx].T) * sm_scale\n"
            "        lse[t] = torch.logsumexp(logits, dim=-1) / math.log(2.0)\n"
            "        output[t] = (torch.softmax(logits, -1) @ Kc_all[idx]).to(torch.bfloat16)\n"
            "    return output, lse"
        )

    def tags(self) -> list[str]:
        return ["stage:decode", "status:verified", "model:deepseek-v3.2", "sparse:topk", "tp:8"]

    def description(self) -> str:
        return "DeepSeek sparse attention (DSA) over top-2048 selected tokens, paged MLA cache."

    def scalar_inputs(self) -> dict[str, int | float]:
        return {"sm_scale": 0.1352337788608801}

    def blob_inputs(self) -> tuple[str, ...]:
        return ("sparse_indices",)

    def sample_axes(self, rng: random.Random) -> dict[str, int]:
        return {
            "num_tokens": rng.choice((1, 1, 2, 4, 8, 16, 32, 64)),
            "num_pages": rng.randint(2000, 12000),
        }

    def batch(self, axes: dict[str, int]) -> int:
        return axes["num_tokens"]

    def cost(self, axes: dict[str, int]) -> tuple[float, float]:
        t = axes["num_tokens"]
        return 2.0 * t * 2048 * 16 * 1088, t * 2048 * 576 * 2.0


# ---- moe -----------------------------------------------------------------------------------


class _Moe(_Family):
    op_type = "moe"
    fi_api = "flashinfer.fused_moe.trtllm_fp8_block_scale_moe"

    def __init__(self, local_experts: int, hidden: int, inter: int) -> None:
        super().__init__(
            f"moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e{local_experts}_h{hidden}_i{inter}"
        )
        self.e, self.h, self.i = local_experts, hidden, inter

    def axes(self) -> dict[str, Any]:
        return {
            "seq_len": _var("Sequence length (number of tokens)"),
            "num_experts": _const(256, "Total number of experts."),
            "num_local_experts": _const(
                self.e, f"Number of local experts with EP size {256 // self.e}."
            ),
            "hidden_size": _const(self.h, "Hidden dimension size."),
            "intermediate_size": _const(self.i, "MoE intermediate layer size."),
            "gemm1_out_size": _const(
                2 * self.i, "Output size of the first GEMM (W13). Should be 2 * intermediate_size"
            ),
            "num_hidden_blocks": _const(self.h // 128),
            "num_intermediate_blocks": _const(self.i // 128),
            "num_gemm1_out_blocks": _const(2 * self.i // 128),
        }

    def inputs(self) -> dict[str, Any]:
        return {
            "routing_logits": _tensor(["seq_len", "num_experts"], "float32"),
            "routing_bias": _tensor(["num_experts"], "bfloat16"),
            "hidden_states": _tensor(["seq_len", "hidden_size"], "float8_e4m3fn"),
            "hidden_states_scale": _tensor(["num_hidden_blocks", "seq_len"], "float32"),
            "gemm1_weights": _tensor(
                ["num_local_experts", "gemm1_out_size", "hidden_size"], "float8_e4m3fn"
            ),
            "gemm1_weights_scale": _tensor(
                ["num_local_experts", "num_gemm1_out_blocks", "num_hidden_blocks"], "float32"
            ),
            "gemm2_weights": _tensor(
                ["num_local_experts", "hidden_size", "intermediate_size"], "float8_e4m3fn"
            ),
            "gemm2_weights_scale": _tensor(
                ["num_local_experts", "num_hidden_blocks", "num_intermediate_blocks"], "float32"
            ),
            "local_expert_offset": _tensor(
                None, "int32", "Offset of local experts in global expert space."
            ),
            "routed_scaling_factor": _tensor(
                None, "float32", "Scaling factor for routing weights."
            ),
        }

    def outputs(self) -> dict[str, Any]:
        return {
            "output": _tensor(["seq_len", "hidden_size"], "bfloat16", "Final MoE output tensor")
        }

    def reference(self) -> str:
        return (
            "import torch\n\n\n@torch.no_grad()\ndef run(\n"
            "    routing_logits, routing_bias, hidden_states, hidden_states_scale,\n"
            "    gemm1_weights, gemm1_weights_scale, gemm2_weights, gemm2_weights_scale,\n"
            "    local_expert_offset: int, routed_scaling_factor: float,\n):\n"
            f"    H = {self.h}\n    I = {self.i}\n    E_local = gemm1_weights.shape[0]\n"
            "    BLOCK = 128\n    T = routing_logits.shape[0]\n"
            f'    assert E_local == {self.e}, "num_local_experts must be {self.e}"\n'
            "    TOP_K, N_GROUP, TOPK_GROUP = 8, 8, 4\n"
            "    A = hidden_states.to(torch.float32) * hidden_states_scale.T.repeat_interleave(BLOCK, dim=1)\n"
            "    s = torch.sigmoid(routing_logits.to(torch.float32))\n"
            "    s_with_bias = s + routing_bias.to(torch.float32)\n"
            "    grouped = s_with_bias.view(T, N_GROUP, -1)\n"
            "    group_scores = grouped.topk(2, dim=2).values.sum(dim=2)\n"
            "    group_idx = group_scores.topk(TOPK_GROUP, dim=1).indices\n"
            "    mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1.0)\n"
            "    mask = mask.unsqueeze(2).expand_as(grouped).reshape(T, -1)\n"
            "    topk_idx = s_with_bias.masked_fill(mask == 0, torch.finfo(torch.float32).min).topk(TOP_K, dim=1).indices\n"
            "    weights = torch.zeros_like(s).scatter_(1, topk_idx, 1.0) * s\n"
            "    weights = weights / (weights.sum(dim=1, keepdim=True) + 1e-20) * routed_scaling_factor\n"
            "    output = torch.zeros((T, H), dtype=torch.float32, device=hidden_states.device)\n"
            "    for le in range(E_local):\n"
            "        ge = int(local_expert_offset) + le\n"
            "        sel = (topk_idx == ge).any(dim=1)\n"
            "        if not sel.any():\n            continue\n"
            "        tok = torch.nonzero(sel).squeeze(1)\n"
            "        W13 = gemm1_weights[le].float() * gemm1_weights_scale[le].repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)\n"
            "        W2 = gemm2_weights[le].float() * gemm2_weights_scale[le].repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)\n"
            "        G1 = A[tok] @ W13.T\n"
            "        C = torch.nn.functional.silu(G1[:, I:]) * G1[:, :I]\n"
            "        output.index_add_(0, tok, (C @ W2.T) * weights[tok, ge].unsqueeze(1))\n"
            "    return output.to(torch.bfloat16)"
        )

    def tags(self) -> list[str]:
        return [
            "status:verified",
            "model:deepseek-v3",
            "model:deepseek-r1",
            "quantization:float8_e4m3fn",
            f"fi_api:{self.fi_api}",
            f"ep:{256 // self.e}",
        ]

    def description(self) -> str:
        return "FP8 block scale MoE operation. Routing and two grouped-GEMM included."

    def scalar_inputs(self) -> dict[str, int | float]:
        return {"routed_scaling_factor": 2.5}

    def blob_inputs(self) -> tuple[str, ...]:
        return ("routing_logits", "routing_bias")

    def blob_path(self, rng: random.Random, workload_uuid: str) -> str:
        return (
            f"./blob/workloads/{self.op_type}/{self.name}/{self.name}_{_hex(rng, 32)}.safetensors"
        )

    def workload_inputs(
        self, rng: random.Random, axes: dict[str, int], workload_uuid: str
    ) -> dict[str, Any]:
        inputs = super().workload_inputs(rng, axes, workload_uuid)
        inputs["local_expert_offset"] = {
            "type": "scalar",
            "value": self.e * rng.randrange(256 // self.e),
        }
        return inputs

    def sample_axes(self, rng: random.Random) -> dict[str, int]:
        return {"seq_len": rng.choice((1, 1, 7, 16, 32, 52, 80, 128, 256, 901, 1024, 4096, 11948))}

    def batch(self, axes: dict[str, int]) -> int:
        return axes["seq_len"]

    def cost(self, axes: dict[str, int]) -> tuple[float, float]:
        t = axes["seq_len"]
        experts_hit = min(self.e, max(1.0, t * 8 * self.e / 256))
        flops = 2.0 * t * (8 * self.e / 256) * 3 * self.h * self.i
        return flops, experts_hit * 3 * self.h * self.i + t * self.h * 3.0

    def reference_ms(self, axes: dict[str, int], baseline_ms: float, rng: random.Random) -> float:
        return baseline_ms * rng.uniform(40.0, 120.0) + 3.0  # dequantises every expert in fp32

    def correctness_extra(self, rng: random.Random, passed: bool) -> dict[str, Any] | None:
        ratio = rng.uniform(0.9995, 1.0) if passed else rng.uniform(0.62, 0.985)
        return {"matched_ratio": _f32(ratio)}


# ---- sampling ------------------------------------------------------------------------------

_VOCABS: tuple[tuple[int, str], ...] = (
    (128256, "llama-3.1-8b"),
    (151936, "qwen3-8b"),
    (129280, "deepseek-v3"),
)


class _Sampling(_Family):
    op_type = "sampling"
    reference_python_loop = True

    def __init__(self, kind: str, vocab: int, model: str) -> None:
        super().__init__(f"{kind}_sampling_from_probs_v{vocab}")
        self.kind, self.vocab, self.model = kind, vocab, model
        self.fi_api = f"flashinfer.sampling.{kind}_sampling_from_probs"

    def axes(self) -> dict[str, Any]:
        return {
            "batch_size": _var("Number of sequences to sample from"),
            "vocab_size": _const(self.vocab, f"Size of the vocabulary for {self.model}"),
        }

    def inputs(self) -> dict[str, Any]:
        inputs = {
            "probs": _tensor(
                ["batch_size", "vocab_size"], "float32", "Probability distributions (after softmax)"
            )
        }
        if "top_k" in self.kind:
            inputs["top_k"] = _tensor(
                ["batch_size"],
                "int32",
                "Number of top tokens to consider for sampling per sequence",
            )
        if "top_p" in self.kind:
            inputs["top_p"] = _tensor(["batch_size"], "float32", "Cumulative probability threshold")
        return inputs

    def outputs(self) -> dict[str, Any]:
        return {"samples": _tensor(["batch_size"], "int64", "Sampled token indices")}

    def reference(self) -> str:
        args = ", ".join(self.inputs())
        body = (
            "import torch\n\n@torch.no_grad()\n"
            f"def run({args}):\n"
            "    batch_size, vocab_size = probs.shape\n    device = probs.device\n\n"
            f"    # Check constants\n    assert vocab_size == {self.vocab}\n\n"
            "    probs = probs.to(torch.float32)\n"
            "    samples = torch.empty(batch_size, dtype=torch.int64, device=device)\n\n"
            "    for i in range(batch_size):\n        row = probs[i]\n"
        )
        if "top_k" in self.kind:
            body += (
                "        k = int(top_k[i].item())\n        if 0 < k < vocab_size:\n"
                "            keep_idx = torch.argsort(row, descending=True)[:k]\n"
                "            filtered = torch.zeros_like(row)\n"
                "            filtered[keep_idx] = row[keep_idx]\n"
                "            row = filtered / filtered.sum()\n"
            )
        if "top_p" in self.kind:
            body += (
                "        p = float(top_p[i].item())\n"
                "        sorted_probs, idx = torch.sort(row, descending=True)\n"
                "        keep = torch.cumsum(sorted_probs, 0) - sorted_probs < p\n"
                "        filtered = torch.zeros_like(row)\n"
                "        filtered[idx[keep]] = row[idx[keep]]\n"
                "        row = filtered / filtered.sum()\n"
            )
        return body + (
            "\n        samples[i] = torch.multinomial(row, 1, replacement=True).squeeze(0)\n\n"
            "    return samples\n"
        )

    def tags(self) -> list[str]:
        return ["status:verified", f"model:{self.model}", f"fi_api:{self.fi_api}"]

    def description(self) -> str:
        return (
            f"{self.kind.replace('_', '-')} sampling from probabilities with vocab_size={self.vocab}. "
            f"Captured from {self.model}."
        )

    def blob_inputs(self) -> tuple[str, ...]:
        return ("top_k", "top_p")

    def sample_axes(self, rng: random.Random) -> dict[str, int]:
        return {"batch_size": rng.choice((1, 1, 2, 4, 8, 16, 32, 64, 128, 256))}

    def batch(self, axes: dict[str, int]) -> int:
        return axes["batch_size"]

    def cost(self, axes: dict[str, int]) -> tuple[float, float]:
        n = axes["batch_size"] * self.vocab
        return 8.0 * n, 4.0 * n * (2 if "top_p" in self.kind else 1)

    def reference_ms(self, axes: dict[str, int], baseline_ms: float, rng: random.Random) -> float:
        return baseline_ms * 3.0 + axes["batch_size"] * rng.uniform(0.15, 0.4)

    def correctness_extra(self, rng: random.Random, passed: bool) -> dict[str, Any] | None:
        n = rng.randint(1, 8)
        hi = 0.04 if passed else 0.6
        lo = 0.0 if passed else 0.08
        per_batch = [_f32(rng.uniform(lo, hi)) for _ in range(n)]
        return {"tvd": _f32(max(per_batch)), "tvds_per_batch": per_batch}


def _catalog() -> list[_Family]:
    """All definitions the generator knows, interleaved so every prefix mixes op types."""
    dtypes = ("float16", "bfloat16")
    gemm: list[_Family] = [
        _Gemm(n, k, model, module, dtypes[i % 2])
        for i, (n, k, model, module) in enumerate(_GEMM_SHAPES)
    ]
    norm: list[_Family] = []
    for hidden, model in _RMSNORM_SIZES:
        norm.append(_RmsNorm(hidden, model, fused=False))
        norm.append(_RmsNorm(hidden, model, fused=True))
    gqa: list[_Family] = []
    for hq, hkv, d, model, tp in (
        (32, 8, 128, "llama-3.1-8b", 1),
        (32, 4, 128, "qwen3-30b-a3b", 1),
        (64, 8, 128, "llama-3.1-70b", 1),
        (16, 2, 128, "llama-3.1-70b", 4),
        (32, 8, 64, "llama-3.2-3b", 1),
    ):
        for stage in ("decode", "prefill"):
            for ps in (1, 16):
                gqa.append(_GqaPaged(hq, hkv, d, ps, stage, model, tp))
    ragged: list[_Family] = [
        _GqaRagged(32, 8, 128, "llama-3.1-8b"),
        _GqaRagged(32, 4, 128, "qwen3-30b-a3b"),
        _GqaRagged(64, 8, 128, "llama-3.1-70b"),
        _GqaRagged(16, 2, 128, "llama-3.1-70b"),
    ]
    mla: list[_Family] = [
        _MlaPaged(heads, ps, stage, 128 // heads)
        for heads in (16, 128, 32)
        for ps in (1, 64)
        for stage in ("decode", "prefill")
    ]
    moe: list[_Family] = [_Moe(32, 7168, 2048), _Moe(64, 7168, 2048), _Moe(16, 7168, 2048)]
    sampling: list[_Family] = [
        _Sampling(kind, vocab, model)
        for vocab, model in _VOCABS
        for kind in ("top_k", "top_p", "top_k_top_p")
    ]
    dsa: list[_Family] = [_DsaSparseAttention()]
    groups = [gemm, norm, gqa, mla, moe, sampling, ragged, dsa]
    out: list[_Family] = []
    for i in range(max(len(g) for g in groups)):
        out.extend(g[i] for g in groups if i < len(g))
    names = [f.name for f in out]
    assert len(set(names)) == len(names), "definition names must be unique"
    return out


CATALOG_SIZE = len(_catalog())


# --------------------------------------------------------------------------------------------
# Solutions
# --------------------------------------------------------------------------------------------

_LANG_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("cuda", 0.5),
    ("triton", 0.25),
    ("cpp", 0.08),
    ("tilelang", 0.1),
    ("python", 0.07),
)

# Agent solution behaviour classes: (class, share of agent solutions).
_PROFILE_SHARES: tuple[tuple[str, float], ...] = (
    ("numerics", 0.13),
    ("compile", 0.09),
    ("runtime", 0.08),
    ("shape", 0.025),
    ("dtype", 0.025),
    ("timeout", 0.03),
    ("transient", 0.02),
)
_TRANSIENT_SHARE = dict(_PROFILE_SHARES)["transient"]


@dataclass
class _Solution:
    name: str
    author: str
    language: str
    binding: str | None
    profile: str  # "baseline", "good" or one of _PROFILE_SHARES
    speed: float  # latency multiplier vs the baseline (baseline: ~1)
    hw_speed: dict[str, float]
    compiles_on: frozenset[str]  # hardware names where it builds (compile profile)
    ext_hex: str
    document: dict[str, Any]


def _ext_name(solution_name: str, ext_hex: str) -> str:
    cleaned = "".join(ch if ch.isalnum() else "_" for ch in solution_name)
    return f"torch_{cleaned}_{ext_hex}"


def _cuda_sources(fam: _Family, sol: str, rng: random.Random) -> list[dict[str, str]]:
    guard = f"{fam.name.upper()}_KERNEL_H_"
    block = rng.choice((128, 256, 512))
    vec = rng.choice((4, 8))
    stages = rng.choice((2, 3, 4))
    args = list(fam.inputs()) + list(fam.outputs())
    params = ",\n                          ".join(f"void* {a}" for a in args)
    header = (
        f"#ifndef {guard}\n#define {guard}\n\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
        "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include <stdint.h>\n\n"
        "#ifndef CHECK_CUDA\n#define CHECK_CUDA(call)                                         \\\n"
        "  do {                                                           \\\n"
        "    cudaError_t err__ = (call);                                  \\\n"
        "    if (err__ != cudaSuccess) {                                  \\\n"
        '      printf("CUDA error %s at %s:%d\\n", cudaGetErrorString(err__), __FILE__, __LINE__); \\\n'
        "    }                                                            \\\n  } while (0)\n#endif\n\n"
        f"// Kernel launcher (C++ callable)\nvoid {fam.name}_launch({params},\n"
        "                          int64_t n, cudaStream_t stream);\n\n"
        f"#endif  // {guard}"
    )
    loops = []
    for i in range(rng.randint(3, 7)):
        loops.append(
            f"  // stage {i}: {rng.choice(['load tile', 'reduce', 'rescale', 'accumulate', 'store'])}\n"
            f"  #pragma unroll\n  for (int it = 0; it < {vec * (i + 1)}; ++it) {{\n"
            f"    const int idx = (blockIdx.x * {block} + threadIdx.x) * {vec} + it;\n"
            f"    if (idx < n) {{\n      float v = acc[it % {vec}] * {rng.uniform(0.5, 2):.6f}f;\n"
            f"      acc[it % {vec}] = fmaf(v, scale, acc[(it + 1) % {vec}]);\n    }}\n  }}\n"
            "  __syncthreads();\n"
        )
    kernel = (
        '#include "kernel.h"\n\n#include <cuda_pipeline.h>\n#include <mma.h>\n\n'
        f"constexpr int kBlock = {block};\nconstexpr int kVec = {vec};\n"
        f"constexpr int kStages = {stages};\n\n"
        "__device__ __forceinline__ float warp_reduce_sum(float v) {\n"
        "#pragma unroll\n  for (int offset = 16; offset > 0; offset >>= 1) {\n"
        "    v += __shfl_xor_sync(0xffffffff, v, offset);\n  }\n  return v;\n}\n\n"
        f"__global__ void __launch_bounds__(kBlock) {fam.name}_kernel(const void* __restrict__ in,\n"
        "    void* __restrict__ out, int64_t n, float scale) {\n"
        "  __shared__ float smem[kStages][kBlock * kVec];\n  float acc[kVec] = {0.f};\n"
        + "".join(loops)
        + "  float s = warp_reduce_sum(acc[0]);\n  if ((threadIdx.x & 31) == 0) smem[0][threadIdx.x >> 5] = s;\n}\n\n"
        f"void {fam.name}_launch({', '.join(f'void* {a}' for a in args)}, int64_t n, cudaStream_t stream) {{\n"
        "  dim3 grid((n + kBlock * kVec - 1) / (kBlock * kVec));\n"
        f"  {fam.name}_kernel<<<grid, kBlock, 0, stream>>>({args[0]}, {args[-1]}, n, 1.0f);\n"
        "  CHECK_CUDA(cudaGetLastError());\n}\n"
    )
    checks = "".join(
        f'  TORCH_CHECK({a}.is_cuda(), "{a} must be a CUDA tensor");\n'
        f'  TORCH_CHECK({a}.is_contiguous(), "{a} must be contiguous");\n'
        for a in fam.inputs()
        if fam.inputs()[a]["shape"] is not None
    )
    main = (
        '#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n#include "kernel.h"\n\n'
        f"std::vector<torch::Tensor> run({', '.join(f'torch::Tensor {a}' for a in fam.inputs())}) {{\n"
        + checks
        + "  auto stream = at::cuda::getCurrentCUDAStream();\n"
        f"  auto out = torch::empty_like({args[0]});\n"
        f"  {fam.name}_launch({', '.join(f'{a}.data_ptr()' for a in fam.inputs())}, out.data_ptr(), out.numel(), stream);\n"
        "  return {out};\n}\n\n"
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n  m.def("run", &run, "' + sol + '");\n}\n'
    )
    return [
        {"path": "kernel.h", "content": header},
        {"path": "kernel.cu", "content": kernel},
        {"path": "main.cpp", "content": main},
    ]


def _python_source(fam: _Family, language: str, rng: random.Random) -> str:
    args = ", ".join(fam.inputs())
    block = rng.choice((64, 128, 256))
    if language == "triton":
        body = "".join(
            f"    x{i} = tl.load(ptr_in + offs * {i + 1}, mask=mask, other=0.0).to(tl.float32)\n"
            f"    acc += x{i} * {rng.uniform(0.1, 1.0):.5f}\n"
            for i in range(rng.randint(4, 10))
        )
        return (
            "import torch\nimport triton\nimport triton.language as tl\n\n\n"
            "@triton.autotune(\n    configs=[\n"
            + "".join(
                f"        triton.Config({{'BLOCK': {b}}}, num_warps={w}, num_stages={s}),\n"
                for b, w, s in ((block, 4, 2), (block * 2, 8, 3), (block * 4, 8, 4))
            )
            + "    ],\n    key=['n'],\n)\n@triton.jit\n"
            f"def _{fam.name}_kernel(ptr_in, ptr_out, n, BLOCK: tl.constexpr):\n"
            "    pid = tl.program_id(0)\n    offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
            "    mask = offs < n\n    acc = tl.zeros([BLOCK], dtype=tl.float32)\n"
            + body
            + "    tl.store(ptr_out + offs, acc, mask=mask)\n\n\n"
            f"def run({args}):\n"
            f"    first = {next(iter(fam.inputs()))}\n    out = torch.empty_like(first)\n"
            "    n = first.numel()\n    grid = lambda meta: (triton.cdiv(n, meta['BLOCK']),)\n"
            f"    _{fam.name}_kernel[grid](first, out, n)\n    return out\n"
        )
    if language == "tilelang":
        return (
            "import tilelang\nimport tilelang.language as T\nimport torch\n\n\n"
            f"@tilelang.jit(out_idx=[-1])\ndef _kernel(n, block={block}, threads=128):\n"
            "    @T.prim_func\n    def main(A: T.Tensor((n,), 'bfloat16'), C: T.Tensor((n,), 'bfloat16')):\n"
            "        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:\n"
            "            A_shared = T.alloc_shared((block,), 'bfloat16')\n"
            "            T.copy(A[bx * block], A_shared)\n"
            "            for i in T.Parallel(block):\n"
            "                C[bx * block + i] = A_shared[i]\n"
            "    return main\n\n\n"
            f"def run({args}):\n    first = {next(iter(fam.inputs()))}\n"
            "    return _kernel(first.numel())(first.reshape(-1)).view_as(first)\n"
        )
    return (
        "import torch\nimport torch.nn.functional as F\n\n\n@torch.no_grad()\n"
        f"def run({args}):\n"
        f"    first = {next(iter(fam.inputs()))}\n"
        "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "        out = torch.compile(lambda t: t * 1.0, mode='max-autotune-no-cudagraphs')(first)\n"
        "    return out\n"
    )


def _agent_document(
    fam: _Family, name: str, author: str, language: str, binding: str | None, rng: random.Random
) -> dict[str, Any]:
    if language == "cuda":
        sources = _cuda_sources(fam, name, rng)
        entry = "main.cpp::run"
    elif language == "cpp":
        sources = [s for s in _cuda_sources(fam, name, rng) if s["path"] != "kernel.cu"]
        entry = "main.cpp::run"
    else:
        sources = [{"path": "main.py", "content": _python_source(fam, language, rng)}]
        entry = "main.py::run"
    spec: dict[str, Any] = {
        "language": language,
        "target_hardware": [rng.choice(("B200", "NVIDIA_H100", "A800", "NVIDIA_B200"))],
        "entry_point": entry,
    }
    if language in ("triton", "tilelang"):
        spec["dependencies"] = [
            "torch",
            "triton >= 3.3.0" if language == "triton" else "tilelang >= 0.1.6",
        ]
    spec["destination_passing_style"] = False
    if binding is not None:
        spec["binding"] = binding
    return {
        "name": name,
        "definition": fam.name,
        "author": author,
        "spec": spec,
        "sources": sources,
        "description": (
            f"Optimized {language} implementation of {fam.name} generated by {author}: "
            f"{rng.choice(['vectorized loads', 'warp-specialized pipeline', 'split-k reduction', 'persistent CTA schedule', 'fused epilogue'])}, "
            f"{rng.choice(['cp.async double buffering', 'shared-memory tiling', 'register blocking', 'online softmax', 'tensor cores (mma.sync)'])}."
        ),
    }


def _baseline_document(fam: _Family, name: str) -> dict[str, Any]:
    args = ", ".join(fam.inputs())
    if fam.baseline_kind == "torch_matmul":
        content = "import torch\n\n\ndef run(A, B):\n    return torch.matmul(A, B.T)\n"
        deps = ["torch"]
    else:
        module, _, fn = fam.fi_api.rpartition(".")
        content = (
            f"import torch\nimport {module.split('.')[0]}\nfrom {module} import {fn}\n\n\n"
            "_workspace = None\n\n\n"
            f"def run({args}):\n"
            "    global _workspace\n"
            "    if _workspace is None:\n"
            "        _workspace = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device='cuda')\n"
            f"    return {fn}({args})\n"
        )
        deps = ["torch", "flashinfer >= 0.2.8"]
    return {
        "name": name,
        "definition": fam.name,
        "author": BASELINE_AUTHOR,
        "spec": {
            "language": "python",
            "target_hardware": ["NVIDIA_B200", "NVIDIA_H100", "NVIDIA_A100"],
            "entry_point": "main.py::run",
            "dependencies": deps,
            "destination_passing_style": False,
        },
        "sources": [{"path": "main.py", "content": content}],
        "description": f"Baseline wrapping {fam.fi_api}.",
    }


# --------------------------------------------------------------------------------------------
# Logs
# --------------------------------------------------------------------------------------------

_USERS = ("airulan", "kzhang", "jlin", "fib-ci", "ubuntu", "mlsys")


@dataclass(frozen=True)
class _Site:
    """Where an (author, hardware) pair ran: user paths that show up in logs."""

    fib: str  # flashinfer-bench checkout
    env: str  # conda env prefix
    cache: str  # torch extension build cache

    @property
    def site_packages(self) -> str:
        return f"{self.env}/lib/python3.11/site-packages"


def _site(seed: int, author: str, hardware: str) -> _Site:
    rng = _rng(seed, "site", author, hardware)
    user = rng.choice(_USERS)
    base = rng.choice((f"/data1/workspace/{user}", f"/home/{user}", f"/scratch/{user}"))
    return _Site(
        fib=f"{base}/bench/flashinfer-bench",
        env=rng.choice(
            (f"/data/workspace/{user}/conda_envs/fib", f"{base}/.venv", "/opt/conda/envs/fib")
        ),
        cache=f"/home/{user}/.cache/flashinfer_bench/cache/torch",
    )


_NVCC_ERRORS: tuple[str, ...] = (
    '{kpath}({line}): error: no instance of overloaded function "atomicMax" matches the argument list\n'
    "            argument types are: (float *, float)\n"
    "                  float old_val = atomicMax(&shared_topk_vals[k], score);\n"
    "                                  ^\n"
    '{cuda}/include/sm_32_atomic_functions.h(101): note #3326-D: function "atomicMax(unsigned long long *, unsigned long long)" does not match because argument #1 does not match parameter\n'
    "  static __inline__ __attribute__((device)) unsigned long long atomicMax(unsigned long long *address, unsigned long long val) {{ }}\n"
    "                                                               ^\n"
    '{cuda}/include/device_atomic_functions.h(109): note #3326-D: function "atomicMax(unsigned int *, unsigned int)" does not match because argument #1 does not match parameter\n'
    "  static __inline__ __attribute__((device)) unsigned int atomicMax(unsigned int *address, unsigned int val) {{ }}\n"
    "                                                         ^\n"
    '{cuda}/include/device_atomic_functions.h(107): note #3326-D: function "atomicMax(int *, int)" does not match because argument #1 does not match parameter\n'
    "  static __inline__ __attribute__((device)) int atomicMax(int *address, int val) {{ }}\n"
    "                                                ^\n\n",
    '{kpath}({line}): error: no suitable conversion function from "__nv_bfloat16" to "float" exists\n'
    "        float x = hidden_states[row * kHidden + col];\n"
    "                  ^\n\n"
    '{kpath}({line2}): error: no suitable constructor exists to convert from "float" to "__nv_bfloat16"\n'
    "        output[row * kHidden + col] = x * inv_rms * w;\n"
    "                                      ^\n\n",
    '{kpath}({line}): error: identifier "__nv_fp8_e4m3" is undefined\n'
    "      const __nv_fp8_e4m3* a_fp8 = reinterpret_cast<const __nv_fp8_e4m3*>(hidden_states);\n"
    "            ^\n\n"
    '{kpath}({line2}): error: identifier "__nv_cvt_fp8_to_halfraw" is undefined\n'
    "      __half_raw h = __nv_cvt_fp8_to_halfraw(a_fp8[i].__x, __NV_E4M3);\n"
    "                     ^\n\n",
    "{kpath}({line}): error: expression must have a constant value\n"
    "    __shared__ float smem[kStages][num_tokens * kVec];\n"
    "                                   ^\n"
    '{kpath}({line}): note #2689-D: the value of parameter "num_tokens" (declared at line {line2}) cannot be used as a constant\n'
    "    __shared__ float smem[kStages][num_tokens * kVec];\n"
    "                                   ^\n\n",
    "{kpath}({line}): error: too many initializer values\n"
    "      float4 frag = {{a.x, a.y, a.z, a.w, b.x}};\n"
    "                                       ^\n\n"
    '{kpath}({line2}): warning #177-D: variable "lane" was declared but never referenced\n'
    "        const int lane = threadIdx.x & 31;\n"
    "                  ^\n\n"
    'Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"\n\n',
    "ptxas error   : Entry function '_Z{line}{name_mangled}_kernelPKvPvlf' uses too much shared data (0x3a000 bytes, 0xc000 max)\n"
    "ptxas error   : Feature 'tcgen05.mma' requires .target sm_100a\n"
    "ptxas fatal   : Ptx assembly aborted due to errors\n",
)

_RUNTIME_ERRORS: tuple[str, ...] = (
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
    "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
    "RuntimeError: CUDA error: misaligned address\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 233472, Hardware limit: 232448. "
    "Reducing block sizes or `num_stages` may help.\n",
    "RuntimeError: CUDA error: too many resources requested for launch\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n",
    "ValueError: too many values to unpack (expected 2)\n",
)


class _Logs:
    """Builds `evaluation.log` strings for one definition; sizes scale with `log_scale`."""

    def __init__(self, seed: int, fam: _Family, log_scale: float) -> None:
        self.seed = seed
        self.fam = fam
        self.scale = log_scale
        rng = _rng(seed, "tensor-rows")
        self.rows = [
            "         ["
            + ", ".join(f"{rng.gauss(0, 1):7.4f}" for _ in range(3))
            + ",  ..., "
            + ", ".join(f"{rng.gauss(0, 1):7.4f}" for _ in range(3))
            + "],\n"
            for _ in range(48)
        ]
        self._cache: dict[tuple[str, ...], str] = {}

    def _target(self, rng: random.Random, lo: float, hi: float) -> int:
        return int(rng.uniform(lo, hi) * self.scale)

    # -- building blocks -----------------------------------------------------------------
    def build(self, sol: _Solution, hw: _Hardware, site: _Site, warnings: bool) -> str:
        key = ("build", sol.name, hw.name, site.cache, str(warnings))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        ext = _ext_name(sol.name, sol.ext_hex)
        d = f"{site.cache}/{ext}"
        inc = (
            f"-DTORCH_EXTENSION_NAME={ext} -DTORCH_API_INCLUDE_EXTENSION_H -I{d} "
            f"-isystem {site.site_packages}/torch/include "
            f"-isystem {site.site_packages}/torch/include/torch/csrc/api/include "
            f"-isystem {hw.cuda_home}/include -isystem {site.env}/include/python3.11"
        )
        arch = hw.arch
        nvcc = (
            f"{hw.cuda_home}/bin/nvcc --generate-dependencies-with-compile --dependency-output kernel.cuda.o.d "
            f"{inc} -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ "
            "-D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr "
            f"-gencode=arch=compute_{arch},code=compute_{arch} -gencode=arch=compute_{arch},code=sm_{arch} "
            f"--compiler-options '-fPIC' -O3 -std=c++17 -c {d}/kernel.cu -o kernel.cuda.o \n"
        )
        cxx = f"c++ -MMD -MF main.o.d {inc} -fPIC -std=c++17 -c {d}/main.cpp -o main.o \n"
        link = (
            f"c++ kernel.cuda.o main.o -shared -L{site.site_packages}/torch/lib -lc10 -lc10_cuda "
            f"-ltorch_cpu -ltorch_cuda -ltorch -ltorch_python -L{hw.cuda_home}/lib64 -lcudart -o {ext}.so\n"
        )
        text = f"[1/3] {nvcc}"
        if warnings:
            text += (
                f'{d}/kernel.cu(7): warning #177-D: function "bf16_to_f32" was declared but never referenced\n'
                "                                   float bf16_to_f32(__nv_bfloat16 x) {\n"
                "                                         ^\n\n"
                'Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"\n\n'
            )
        text += f"[2/3] {cxx}[3/3] {link}"
        self._cache[key] = text
        return text

    def cupti(self, hw: _Hardware, site: _Site) -> str:
        if hw.cupti:
            return ""
        return (
            f"{site.fib}/flashinfer_bench/bench/timing.py:74: UserWarning: CUPTI is not installed. "
            "Try 'pip install -U cupti-python'. Falling back to CUDA events for benchmarking.\n"
            "  times = bench_gpu_time_with_cupti(\n"
        )

    def _traceback_head(self, site: _Site) -> str:
        return (
            "Traceback (most recent call last):\n"
            f'  File "{site.fib}/flashinfer_bench/bench/evaluators/default.py", line 111, in check_correctness\n'
            "    sol_runnable(*inp, *out)\n"
            f'  File "{site.fib}/flashinfer_bench/compile/runnable.py", line 95, in __call__\n'
            "    ret = self._callable(*args)\n"
            "          ^^^^^^^^^^^^^^^^^^^^^\n"
        )

    def _tensor_dump(self, rng: random.Random, dtype: str) -> str:
        rows = rng.choices(self.rows, k=rng.randint(4, 9))
        return (
            "tensor([[["
            + rows[0][10:]
            + "".join(rows[1:-1])
            + "         ...,\n"
            + rows[-1][:-2]
            + f"]]],\n       device='cuda:0', dtype=torch.{dtype})"
        )

    # -- per-status logs -------------------------------------------------------------------
    def passed(
        self, rng: random.Random, sol: _Solution, hw: _Hardware, site: _Site, first: bool
    ) -> str:
        if sol.language in ("cuda", "cpp"):
            if first:
                return self.build(sol, hw, site, rng.random() < 0.3) + self.cupti(hw, site)
            return "ninja: no work to do.\n" + self.cupti(hw, site)
        if sol.language == "triton" and first and rng.random() < 0.5:
            return f"Triton autotuning for function _{self.fam.name}_kernel finished after {rng.uniform(0.4, 9):.2f}s; best config selected: BLOCK: {rng.choice((128, 256, 512))}, num_warps: {rng.choice((4, 8))}, num_ctas: 1, num_stages: {rng.choice((2, 3, 4))};\n"
        return self.cupti(hw, site) if rng.random() < 0.5 else ""

    def mismatch(
        self, rng: random.Random, sol: _Solution, status: str, axes: dict[str, int]
    ) -> str:
        prefix = "ninja: no work to do.\n" if sol.language in ("cuda", "cpp") else ""
        name, shape, dtype = rng.choice(self.fam.output_shapes(axes))
        if status == "INCORRECT_SHAPE":
            wrong = tuple(reversed(shape)) if len(shape) > 1 else (*shape, 1)
            return prefix + (
                f"Output '{name}' shape mismatch: expected torch.Size({list(shape)}), "
                f"got torch.Size({list(wrong)})\n"
            )
        if status == "INCORRECT_DTYPE":
            got = "bfloat16" if dtype != "bfloat16" else "float32"
            return (
                prefix
                + f"Output '{name}' dtype mismatch: expected torch.{dtype}, got torch.{got}\n"
            )
        return prefix

    def compile_error(self, rng: random.Random, sol: _Solution, hw: _Hardware, site: _Site) -> str:
        target = self._target(rng, 7300, 12000)
        ext = _ext_name(sol.name, sol.ext_hex)
        key = ("compile", sol.name, hw.name, site.cache)
        text = self._cache.get(key)
        if text is None:
            srng = _rng(self.seed, "compile-log", sol.name, hw.name)
            if sol.language in ("cuda", "cpp"):
                text = self._nvcc_failure(srng, sol, hw, site, ext)
            else:
                text = self._python_build_failure(srng, sol, site)
            self._cache[key] = text
        # Identical failure on every workload, apart from the retries the worker made.
        while len(text) < target:
            text += (
                f"\n[worker {rng.randint(0, 7)}] retrying build of '{sol.name}' "
                f"(attempt {rng.randint(2, 3)}/3)\n" + text[: min(len(text), target - len(text))]
            )
        return text

    def _nvcc_failure(
        self, rng: random.Random, sol: _Solution, hw: _Hardware, site: _Site, ext: str
    ) -> str:
        d = f"{site.cache}/{ext}"
        build = self.build(sol, hw, site, warnings=False)
        nvcc_line = build.split("\n", 1)[0][6:]
        errors = rng.sample(_NVCC_ERRORS, k=rng.randint(1, 3))
        body = "".join(
            e.format(
                kpath=f"{d}/kernel.cu",
                line=rng.randint(20, 400),
                line2=rng.randint(20, 400),
                cuda=hw.cuda_home,
                name_mangled=len(self.fam.name),
            )
            for e in errors
        )
        n_err = sum(e.count("error:") for e in errors) or 1
        cxx = build.split("[2/3] ", 1)[1].split("[3/3]", 1)[0]
        return (
            f"[1/3] {nvcc_line}\nFAILED: [code=2] kernel.cuda.o \n{nvcc_line}\n{body}"
            f'{n_err} error{"s" if n_err > 1 else ""} detected in the compilation of "{d}/kernel.cu".\n'
            f"[2/3] {cxx}ninja: build stopped: subcommand failed.\n"
            f"BuildError: Torch build failed for solution '{sol.name}': Error building extension '{ext}'\n\n"
            "Traceback:\nTraceback (most recent call last):\n"
            f'  File "{site.site_packages}/torch/utils/cpp_extension.py", line 2597, in _run_ninja_build\n'
            "    subprocess.run(\n"
            f'  File "{site.env}/lib/python3.11/subprocess.py", line 571, in run\n'
            "    raise CalledProcessError(retcode, process.args,\n"
            "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 2.\n\n"
            "The above exception was the direct cause of the following exception:\n\n"
            "Traceback (most recent call last):\n"
            f'  File "{site.fib}/flashinfer_bench/compile/builders/torch_builder.py", line 164, in _build\n'
            "    module = load(\n"
            "             ^^^^^\n"
            f'  File "{site.site_packages}/torch/utils/cpp_extension.py", line 1681, in load\n'
            "    return _jit_compile(\n"
            "           ^^^^^^^^^^^^^\n"
            f'  File "{site.site_packages}/torch/utils/cpp_extension.py", line 2138, in _jit_compile\n'
            "    _write_ninja_file_and_build_library(\n"
            f'  File "{site.site_packages}/torch/utils/cpp_extension.py", line 2290, in _write_ninja_file_and_build_library\n'
            "    _run_ninja_build(\n"
            f'  File "{site.site_packages}/torch/utils/cpp_extension.py", line 2614, in _run_ninja_build\n'
            "    raise RuntimeError(message) from e\n"
            f"RuntimeError: Error building extension '{ext}'\n\n"
            "The above exception was the direct cause of the following exception:\n\n"
            "Traceback (most recent call last):\n"
            f'  File "{site.fib}/flashinfer_bench/bench/runner/isolated_runner.py", line 214, in _worker_main\n'
            "    runnable = registry.build(defn, sol)\n"
            "               ^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            f'  File "{site.fib}/flashinfer_bench/compile/registry.py", line 72, in build\n'
            "    return builder.build(defn, sol)\n"
            "           ^^^^^^^^^^^^^^^^^^^^^^^^\n"
            f'  File "{site.fib}/flashinfer_bench/compile/builders/torch_builder.py", line 171, in _build\n'
            f"    raise BuildError(f\"Torch build failed for solution '{{sol.name}}': {{e}}\") from e\n"
            f"flashinfer_bench.compile.builder.BuildError: Torch build failed for solution '{sol.name}': "
            f"Error building extension '{ext}'\n"
        )

    def _python_build_failure(self, rng: random.Random, sol: _Solution, site: _Site) -> str:
        line = rng.randint(12, 80)
        if sol.language == "triton":
            cause = (
                f"triton.compiler.errors.CompilationError: at {line}:16:\n"
                "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
                "    mask = offs < n\n"
                "    acc = tl.zeros([BLOCK, BLOCK_K], dtype=tl.float32)\n"
                "    x = tl.load(ptr_in + offs, mask=mask, other=0.0)\n"
                "    acc += tl.dot(x, w)\n"
                "           ^\n"
                "ValueError('Cannot make_shape_compatible: incompatible dimensions at index 1: 64 and 128')\n"
            )
        elif sol.language == "tilelang":
            cause = (
                "tvm.error.InternalError: Traceback (most recent call last):\n"
                "  3: tvm::tl::LayoutInferencer::VisitStmt_(tvm::tir::ForNode const*)\n"
                "  2: tvm::tl::ParallelOp::InferLayout(tvm::tl::LayoutInferArgs const&, tvm::tl::InferLevel)\n"
                "  1: tvm::tl::Fragment::Fragment(...)\n"
                "  0: tvm::runtime::detail::LogFatal::Entry::Finalize()\n"
                '  File "src/op/parallel.cc", line 238\n'
                "InternalError: Check failed: (loop_vars_.size() == 1) is false: Layout infer conflict\n"
            )
        else:
            cause = (
                f'  File "main.py", line {line}\n'
                "    out = torch.compile(lambda t: t * 1.0, mode='max-autotune-no-cudagraphs')(first\n"
                "                                                                             ^\n"
                "SyntaxError: '(' was never closed\n"
            )
        return (
            "Traceback (most recent call last):\n"
            f'  File "{site.fib}/flashinfer_bench/bench/runner/isolated_runner.py", line 214, in _worker_main\n'
            "    runnable = registry.build(defn, sol)\n"
            "               ^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            f'  File "{site.fib}/flashinfer_bench/compile/registry.py", line 72, in build\n'
            "    return builder.build(defn, sol)\n"
            "           ^^^^^^^^^^^^^^^^^^^^^^^^\n"
            f'  File "{site.fib}/flashinfer_bench/compile/builders/{sol.language if sol.language != "python" else "python"}_builder.py", line 96, in _build\n'
            "    module = importlib.import_module(module_name)\n"
            f'  File "{site.env}/lib/python3.11/importlib/__init__.py", line 126, in import_module\n'
            "    return _bootstrap._gcd_import(name[level:], package, level)\n"
            + cause
            + f"flashinfer_bench.compile.builder.BuildError: {sol.language.capitalize()} build failed for solution '{sol.name}'\n"
        )

    def runtime_error(
        self,
        rng: random.Random,
        sol: _Solution,
        hw: _Hardware,
        site: _Site,
    ) -> str:
        target = self._target(rng, 8200, 21600)
        parts: list[str] = []
        if sol.language in ("cuda", "cpp"):
            parts.append(self.build(sol, hw, site, rng.random() < 0.3))
        parts.append(self.cupti(hw, site))
        parts.append(self._traceback_head(site))
        if sol.language in ("cuda", "cpp") and rng.random() < 0.6:
            n_args = len(self.fam.inputs()) + len(self.fam.outputs())
            parts.append(
                "TypeError: run(): incompatible function arguments. The following argument types are supported:\n"
                f"    1. ({', '.join(f'arg{i}: torch.Tensor' for i in range(n_args - 1))}) -> list[torch.Tensor]\n\n"
                "Invoked with: "
            )
            size = sum(len(p) for p in parts)
            dumps: list[str] = []
            while size < target:
                dump = self._tensor_dump(rng, rng.choice(("bfloat16", "bfloat16", "float32")))
                dumps.append(dump)
                size += len(dump) + 2
            parts.append(", ".join(dumps) + "\n")
            return "".join(parts)
        choices = (
            _RUNTIME_ERRORS
            if sol.language == "triton"
            else _RUNTIME_ERRORS[:2] + _RUNTIME_ERRORS[3:]
        )
        error = rng.choice(choices)
        parts.append(error)
        size = sum(len(p) for p in parts)
        trial = 1
        while size < target:
            chunk = (
                f"\n[trial {trial}] re-running after device reset\n"
                + self._traceback_head(site)
                + error
            )
            if rng.random() < 0.5:
                chunk += (
                    "\n========= COMPUTE-SANITIZER\n"
                    f"========= Invalid __global__ read of size {rng.choice((2, 4, 16))} bytes\n"
                    f"=========     at {self.fam.name}_kernel(const void *, void *, long, float)+0x{_hex(rng, 4)}\n"
                    f"=========     by thread ({rng.randint(0, 255)},0,0) in block ({rng.randint(0, 4095)},0,0)\n"
                    f"=========     Address 0x7f{_hex(rng, 10)} is out of bounds\n"
                )
            parts.append(chunk)
            size += len(chunk)
            trial += 1
        return "".join(parts)

    def timeout(self, rng: random.Random, sol: _Solution, hw: _Hardware, site: _Site) -> str:
        target = self._target(rng, 2400, 8600)
        parts = []
        if sol.language in ("cuda", "cpp"):
            parts.append(self.build(sol, hw, site, False))
        parts.append(self.cupti(hw, site))
        parts.append(
            "Fatal Python error: Aborted\n\nThread 0x00007f"
            + _hex(rng, 10)
            + " (most recent call first):\n"
        )
        frames = (
            f'  File "{site.fib}/flashinfer_bench/bench/timing.py", line 74 in bench_gpu_time\n'
            f'  File "{site.fib}/flashinfer_bench/bench/evaluators/default.py", line 164 in eval_performance\n'
            f'  File "{site.fib}/flashinfer_bench/bench/runner/isolated_runner.py", line 241 in _worker_main\n'
            f'  File "{site.env}/lib/python3.11/multiprocessing/process.py", line 108 in run\n'
        )
        size = sum(len(p) for p in parts)
        while size < target - 120:
            parts.append(frames)
            size += len(frames)
        parts.append(
            f"Evaluation of solution '{sol.name}' timed out after 300.0 s; worker terminated.\n"
        )
        return "".join(parts)


# --------------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------------


def plan_for_target(
    target_trace_lines: int, *, hardware_count: int = 3, runs_per_workload: int = 1
) -> tuple[int, int, int]:
    """(definitions, workloads_per_definition, solutions_per_definition) for about N trace lines."""
    if target_trace_lines <= 0:
        raise ValueError("target_trace_lines must be positive")
    growth = 1 + (_RERUN_SESSION_SHARE + _TRANSIENT_SHARE) * _RERUN_WORKLOAD_SHARE
    per_hw = target_trace_lines / (max(1, hardware_count) * max(1, runs_per_workload) * growth)
    root = per_hw ** (1 / 3)
    definitions = max(2, min(CATALOG_SIZE, round(root * 1.3)))
    preferred = max(2, min(48, round(root * 0.65)))
    best: tuple[float, int, int] | None = None
    for workloads in range(max(2, preferred - 4), preferred + 5):
        solutions = max(2, round(per_hw / (definitions * workloads)))
        error = abs(definitions * workloads * solutions - per_hw) + abs(workloads - preferred)
        if best is None or error < best[0]:
            best = (error, workloads, solutions)
    assert best is not None
    return definitions, best[1], best[2]


def _assign_profiles(rng: random.Random, count: int) -> list[str]:
    """Profiles for `count` agent solutions: each failure class at least once when possible."""
    profiles: list[str] = []
    for name, share in _PROFILE_SHARES:
        n = round(share * count)
        if n == 0 and count >= 2 * len(_PROFILE_SHARES):
            n = 1
        profiles.extend([name] * n)
    profiles = profiles[:count]
    profiles.extend(["good"] * (count - len(profiles)))
    rng.shuffle(profiles)
    return profiles


# --------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------


@dataclass
class _Workload:
    uuid: str
    axes: dict[str, int]
    base_ms: dict[str, float]  # hardware -> baseline latency
    ref_ms: dict[str, float]  # hardware -> PyTorch reference latency
    size_rank: float  # 0 (smallest) .. 1 (largest) within the definition
    json: bytes  # compact `{"axes":...,"inputs":...,"uuid":...}`


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

    families = _catalog()[:definitions]
    hw_profiles = [_hardware(h) for h in hardware]
    agents_per_def = solutions_per_definition - 1
    profiles = _assign_profiles(_rng(seed, "profiles"), agents_per_def * definitions)
    writer = _Writer(root)
    status_counts = dict.fromkeys(STATUSES, 0)
    trace_lines = 0
    baseline_names: set[str] = set()

    for d_index, fam in enumerate(families):
        rng = _rng(seed, "definition", fam.name)
        doc = fam.document()
        writer.write(
            "definitions", f"{fam.op_type}/{fam.name}.json", orjson.dumps(doc, option=_JSON_PRETTY)
        )

        workloads = _make_workloads(rng, fam, workloads_per_definition, hw_profiles)
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

        solutions = _make_solutions(
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

        logs = _Logs(seed, fam, log_scale)
        by_author: dict[str, list[_Solution]] = {}
        for sol in solutions:
            by_author.setdefault(sol.author, []).append(sol)
        for author in sorted(by_author):
            lines = _trace_file_lines(
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


def _make_workloads(
    rng: random.Random, fam: _Family, count: int, hw_profiles: list[_Hardware]
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
        wid = _uuid4(rng)
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


def _make_solutions(
    rng: random.Random,
    fam: _Family,
    hw_profiles: list[_Hardware],
    profiles: list[str],
    baseline_names: set[str],
) -> list[_Solution]:
    hw_names = [hw.name for hw in hw_profiles]
    while True:
        base_name = f"{fam.baseline_kind}_{_hex(rng, 6)}"
        if base_name not in baseline_names:
            baseline_names.add(base_name)
            break
    solutions = [
        _Solution(
            name=base_name,
            author=BASELINE_AUTHOR,
            language="python",
            binding=None,
            profile="baseline",
            speed=1.0,
            hw_speed={h: rng.lognormvariate(0.0, 0.02) for h in hw_names},
            compiles_on=frozenset(hw_names),
            ext_hex=_hex(rng, 6),
            document=_baseline_document(fam, base_name),
        )
    ]
    authors = list(AGENT_AUTHORS)
    rng.shuffle(authors)
    used: set[str] = set()
    languages = [lang for lang, _ in _LANG_WEIGHTS]
    weights = [w for _, w in _LANG_WEIGHTS]
    for i, profile in enumerate(profiles):
        author = authors[i % len(authors)]
        language = rng.choices(languages, weights)[0]
        effort = "_high" if author.startswith("gpt-5") and rng.random() < 0.7 else ""
        round_no = rng.randint(1, 12)
        cand = 0
        while True:
            name = f"{author}_{fam.name}_{language}_optimized_r{round_no}_c{cand}{effort}"
            if name not in used:
                break
            cand += 1
        used.add(name)
        binding = None
        if language in ("cuda", "cpp"):
            binding = "torch" if rng.random() < 0.7 else "tvm-ffi"
        compiles_on = frozenset(hw_names)
        if profile == "compile":
            # Often written for one architecture (e.g. tcgen05 on B200) and only builds there.
            compiles_on = frozenset([rng.choice(hw_names)]) if rng.random() < 0.4 else frozenset()
        skill = rng.lognormvariate(0.12, 0.45)
        solutions.append(
            _Solution(
                name=name,
                author=author,
                language=language,
                binding=binding,
                profile=profile,
                speed=skill,
                hw_speed={h: rng.lognormvariate(0.0, 0.12) for h in hw_names},
                compiles_on=compiles_on,
                ext_hex=_hex(rng, 6),
                document=_agent_document(fam, name, author, language, binding, rng),
            )
        )
    return solutions


def _status_for(
    rng: random.Random, sol: _Solution, hw: _Hardware, w: _Workload, w_index: int, rerun: bool
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


def _correctness(rng: random.Random, fam: _Family, status: str) -> dict[str, Any]:
    if status == "PASSED":
        if rng.random() < 0.3:
            rel, abs_ = 0.0, 0.0
        else:
            abs_ = rng.choice(_ABS_ERRORS[:7])
            rel = _f32(abs_ * rng.lognormvariate(-2.5, 1.5)) if abs_ else 0.0
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
        rel = _f32(abs_ * rng.lognormvariate(4.0, 4.0))
    return {
        "max_relative_error": rel,
        "max_absolute_error": abs_,
        "extra": fam.correctness_extra(rng, passed=False),
    }


def _trace_file_lines(
    seed: int,
    fam: _Family,
    sols: list[_Solution],
    author: str,
    workloads: list[_Workload],
    hw_profiles: list[_Hardware],
    runs: int,
    logs: _Logs,
    status_counts: dict[str, int],
) -> list[bytes]:
    """All lines of traces/<author>/<op_type>/<definition>.jsonl, in append order."""
    rng = _rng(seed, "traces", fam.name, author)
    head = b'{"definition":' + orjson.dumps(fam.name) + b',"workload":'
    lines: list[bytes] = []
    clock = _EPOCH + timedelta(days=rng.uniform(0, 20), seconds=rng.uniform(0, 36_000))
    sites = {hw.name: _site(seed, author, hw.name) for hw in hw_profiles}
    envs = {hw.name: {"hardware": hw.name, "libs": hw.libs} for hw in hw_profiles}

    def session(sol: _Solution, hw: _Hardware, chosen: list[int], rerun: bool) -> None:
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
                lat = _f32(w.base_ms[hw.name] * sol.speed * sol.hw_speed[hw.name] * noise)
                if profile_reference:
                    ref = _f32(w.ref_ms[hw.name] * rng.lognormvariate(0.0, 0.03))
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
            if sol.profile == "transient" or rng.random() < _RERUN_SESSION_SHARE:
                k = max(1, round(len(workloads) * _RERUN_WORKLOAD_SHARE))
                session(sol, hw, sorted(rng.sample(all_workloads, k)), rerun=True)
    return lines


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.demo",
        description="Generate a seeded, realistic FlashInfer-Trace dataset (current layout).",
    )
    parser.add_argument("--out", type=Path, required=True, help="dataset root to write")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--target-trace-lines", type=int, default=None)
    parser.add_argument("--definitions", type=int, default=12)
    parser.add_argument("--workloads-per-definition", type=int, default=8)
    parser.add_argument("--solutions-per-definition", type=int, default=5)
    parser.add_argument("--runs-per-workload", type=int, default=1)
    parser.add_argument(
        "--hardware", action="append", default=None, help="device name (repeatable)"
    )
    parser.add_argument("--log-scale", type=float, default=1.0)
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing dataset under --out"
    )
    args = parser.parse_args(argv)
    result = generate_dataset(
        args.out,
        seed=args.seed,
        definitions=args.definitions,
        workloads_per_definition=args.workloads_per_definition,
        solutions_per_definition=args.solutions_per_definition,
        runs_per_workload=args.runs_per_workload,
        hardware=tuple(args.hardware) if args.hardware else DEFAULT_HARDWARE,
        target_trace_lines=args.target_trace_lines,
        log_scale=args.log_scale,
        overwrite=args.overwrite,
    )
    sys.stdout.write(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
