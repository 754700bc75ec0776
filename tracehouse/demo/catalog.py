"""GEMM, RMSNorm, MoE and sampling families, and the catalog of every definition the generator knows."""

from __future__ import annotations

import random
from typing import Any

from tracehouse.demo.attention import DsaSparseAttention, GqaPaged, GqaRagged, MlaPaged
from tracehouse.demo.family import Family, const, tensor, var
from tracehouse.demo.randomness import f32, random_hex

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


class _Gemm(Family):
    op_type = "gemm"
    baseline_kind = "torch_matmul"
    fi_api = "torch.matmul"

    def __init__(self, n: int, k: int, model: str, module: str, dtype: str) -> None:
        super().__init__(f"gemm_n{n}_k{k}")
        self.n, self.k, self.model, self.module, self.dtype = n, k, model, module, dtype

    def axes(self) -> dict[str, Any]:
        return {"M": var(), "N": const(self.n), "K": const(self.k)}

    def inputs(self) -> dict[str, Any]:
        return {"A": tensor(["M", "K"], self.dtype), "B": tensor(["N", "K"], self.dtype)}

    def outputs(self) -> dict[str, Any]:
        return {"C": tensor(["M", "N"], self.dtype)}

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


class _RmsNorm(Family):
    op_type = "rmsnorm"
    fi_api = "flashinfer.norm.rmsnorm"

    def __init__(self, hidden: int, model: str, fused: bool) -> None:
        prefix = "fused_add_rmsnorm" if fused else "rmsnorm"
        super().__init__(f"{prefix}_h{hidden}")
        self.hidden, self.model, self.fused = hidden, model, fused
        if fused:
            self.fi_api = "flashinfer.norm.fused_add_rmsnorm"

    def axes(self) -> dict[str, Any]:
        return {"batch_size": var(), "hidden_size": const(self.hidden)}

    def inputs(self) -> dict[str, Any]:
        inputs = {"hidden_states": tensor(["batch_size", "hidden_size"], "bfloat16")}
        if self.fused:
            inputs["residual"] = tensor(["batch_size", "hidden_size"], "bfloat16")
        inputs["weight"] = tensor(["hidden_size"], "bfloat16")
        if self.fused:
            inputs["eps"] = tensor(None, "float32", "Epsilon added to the mean square.")
        return inputs

    def outputs(self) -> dict[str, Any]:
        outputs = {"output": tensor(["batch_size", "hidden_size"], "bfloat16")}
        if self.fused:
            outputs["residual_out"] = tensor(
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


class _Moe(Family):
    op_type = "moe"
    fi_api = "flashinfer.fused_moe.trtllm_fp8_block_scale_moe"

    def __init__(self, local_experts: int, hidden: int, inter: int) -> None:
        super().__init__(
            f"moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e{local_experts}_h{hidden}_i{inter}"
        )
        self.e, self.h, self.i = local_experts, hidden, inter

    def axes(self) -> dict[str, Any]:
        return {
            "seq_len": var("Sequence length (number of tokens)"),
            "num_experts": const(256, "Total number of experts."),
            "num_local_experts": const(
                self.e, f"Number of local experts with EP size {256 // self.e}."
            ),
            "hidden_size": const(self.h, "Hidden dimension size."),
            "intermediate_size": const(self.i, "MoE intermediate layer size."),
            "gemm1_out_size": const(
                2 * self.i, "Output size of the first GEMM (W13). Should be 2 * intermediate_size"
            ),
            "num_hidden_blocks": const(self.h // 128),
            "num_intermediate_blocks": const(self.i // 128),
            "num_gemm1_out_blocks": const(2 * self.i // 128),
        }

    def inputs(self) -> dict[str, Any]:
        return {
            "routing_logits": tensor(["seq_len", "num_experts"], "float32"),
            "routing_bias": tensor(["num_experts"], "bfloat16"),
            "hidden_states": tensor(["seq_len", "hidden_size"], "float8_e4m3fn"),
            "hidden_states_scale": tensor(["num_hidden_blocks", "seq_len"], "float32"),
            "gemm1_weights": tensor(
                ["num_local_experts", "gemm1_out_size", "hidden_size"], "float8_e4m3fn"
            ),
            "gemm1_weights_scale": tensor(
                ["num_local_experts", "num_gemm1_out_blocks", "num_hidden_blocks"], "float32"
            ),
            "gemm2_weights": tensor(
                ["num_local_experts", "hidden_size", "intermediate_size"], "float8_e4m3fn"
            ),
            "gemm2_weights_scale": tensor(
                ["num_local_experts", "num_hidden_blocks", "num_intermediate_blocks"], "float32"
            ),
            "local_expert_offset": tensor(
                None, "int32", "Offset of local experts in global expert space."
            ),
            "routed_scaling_factor": tensor(None, "float32", "Scaling factor for routing weights."),
        }

    def outputs(self) -> dict[str, Any]:
        return {"output": tensor(["seq_len", "hidden_size"], "bfloat16", "Final MoE output tensor")}

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
        return f"./blob/workloads/{self.op_type}/{self.name}/{self.name}_{random_hex(rng, 32)}.safetensors"

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
        return {"matched_ratio": f32(ratio)}


_VOCABS: tuple[tuple[int, str], ...] = (
    (128256, "llama-3.1-8b"),
    (151936, "qwen3-8b"),
    (129280, "deepseek-v3"),
)


class _Sampling(Family):
    op_type = "sampling"
    reference_python_loop = True

    def __init__(self, kind: str, vocab: int, model: str) -> None:
        super().__init__(f"{kind}_sampling_from_probs_v{vocab}")
        self.kind, self.vocab, self.model = kind, vocab, model
        self.fi_api = f"flashinfer.sampling.{kind}_sampling_from_probs"

    def axes(self) -> dict[str, Any]:
        return {
            "batch_size": var("Number of sequences to sample from"),
            "vocab_size": const(self.vocab, f"Size of the vocabulary for {self.model}"),
        }

    def inputs(self) -> dict[str, Any]:
        inputs = {
            "probs": tensor(
                ["batch_size", "vocab_size"], "float32", "Probability distributions (after softmax)"
            )
        }
        if "top_k" in self.kind:
            inputs["top_k"] = tensor(
                ["batch_size"],
                "int32",
                "Number of top tokens to consider for sampling per sequence",
            )
        if "top_p" in self.kind:
            inputs["top_p"] = tensor(["batch_size"], "float32", "Cumulative probability threshold")
        return inputs

    def outputs(self) -> dict[str, Any]:
        return {"samples": tensor(["batch_size"], "int64", "Sampled token indices")}

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
        per_batch = [f32(rng.uniform(lo, hi)) for _ in range(n)]
        return {"tvd": f32(max(per_batch)), "tvds_per_batch": per_batch}


def catalog() -> list[Family]:
    """All definitions the generator knows, interleaved so every prefix mixes op types."""
    dtypes = ("float16", "bfloat16")
    gemm: list[Family] = [
        _Gemm(n, k, model, module, dtypes[i % 2])
        for i, (n, k, model, module) in enumerate(_GEMM_SHAPES)
    ]
    norm: list[Family] = []
    for hidden, model in _RMSNORM_SIZES:
        norm.append(_RmsNorm(hidden, model, fused=False))
        norm.append(_RmsNorm(hidden, model, fused=True))
    gqa: list[Family] = []
    for hq, hkv, d, model, tp in (
        (32, 8, 128, "llama-3.1-8b", 1),
        (32, 4, 128, "qwen3-30b-a3b", 1),
        (64, 8, 128, "llama-3.1-70b", 1),
        (16, 2, 128, "llama-3.1-70b", 4),
        (32, 8, 64, "llama-3.2-3b", 1),
    ):
        for stage in ("decode", "prefill"):
            for ps in (1, 16):
                gqa.append(GqaPaged(hq, hkv, d, ps, stage, model, tp))
    ragged: list[Family] = [
        GqaRagged(32, 8, 128, "llama-3.1-8b"),
        GqaRagged(32, 4, 128, "qwen3-30b-a3b"),
        GqaRagged(64, 8, 128, "llama-3.1-70b"),
        GqaRagged(16, 2, 128, "llama-3.1-70b"),
    ]
    mla: list[Family] = [
        MlaPaged(heads, ps, stage, 128 // heads)
        for heads in (16, 128, 32)
        for ps in (1, 64)
        for stage in ("decode", "prefill")
    ]
    moe: list[Family] = [_Moe(32, 7168, 2048), _Moe(64, 7168, 2048), _Moe(16, 7168, 2048)]
    sampling: list[Family] = [
        _Sampling(kind, vocab, model)
        for vocab, model in _VOCABS
        for kind in ("top_k", "top_p", "top_k_top_p")
    ]
    dsa: list[Family] = [DsaSparseAttention()]
    groups = [gemm, norm, gqa, mla, moe, sampling, ragged, dsa]
    out: list[Family] = []
    for i in range(max(len(g) for g in groups)):
        out.extend(g[i] for g in groups if i < len(g))
    names = [f.name for f in out]
    assert len(set(names)) == len(names), "definition names must be unique"
    return out


CATALOG_SIZE = len(catalog())
