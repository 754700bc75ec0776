"""Attention definition families: paged and ragged GQA, paged MLA, DeepSeek sparse attention."""

from __future__ import annotations

import math
import random
from typing import Any

from tracehouse.demo.family import Family, const, lognormal_lengths, tensor, var
from tracehouse.demo.randomness import random_hex


class GqaPaged(Family):
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
            {"batch_size": var("Total number of query tokens.")}
            if self.stage == "decode"
            else {"total_q": var("Total number of query tokens.")}
        )
        return {
            **first,
            "num_qo_heads": const(self.hq),
            "num_kv_heads": const(self.hkv),
            "head_dim": const(self.d),
            "num_pages": var(),
            "page_size": const(self.ps),
            "len_indptr": var("Length of kv_indptr array."),
            "num_kv_indices": var("Total number of KV page indices."),
        }

    def constraints(self) -> list[str]:
        if self.stage == "decode":
            return ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"]
        return ["total_q == qo_indptr[-1].item()", "num_kv_indices == kv_indptr[-1].item()"]

    def inputs(self) -> dict[str, Any]:
        rows = "batch_size" if self.stage == "decode" else "total_q"
        cache = ["num_pages", "page_size", "num_kv_heads", "head_dim"]
        inputs = {
            "q": tensor([rows, "num_qo_heads", "head_dim"], "bfloat16"),
            "k_cache": tensor(cache, "bfloat16"),
            "v_cache": tensor(cache, "bfloat16"),
        }
        if self.stage == "prefill":
            inputs["qo_indptr"] = tensor(
                ["len_indptr"], "int32", "Query offsets for each sequence."
            )
        inputs["kv_indptr"] = tensor(["len_indptr"], "int32", "KV page offsets for each sequence.")
        inputs["kv_indices"] = tensor(["num_kv_indices"], "int32", "Page IDs for KV cache lookups.")
        inputs["sm_scale"] = tensor(
            None, "float32", f"Softmax scale. Default is (1/sqrt(head_dim)) = 1/sqrt({self.d})."
        )
        return inputs

    def outputs(self) -> dict[str, Any]:
        rows = "batch_size" if self.stage == "decode" else "total_q"
        return {
            "output": tensor([rows, "num_qo_heads", "head_dim"], "bfloat16"),
            "lse": tensor(
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
        kv_lens = lognormal_lengths(rng, batch, 700.0, 1.3, 32768)
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


class GqaRagged(Family):
    op_type = "gqa_ragged"
    fi_api = "flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper"
    reference_python_loop = True

    def __init__(self, hq: int, hkv: int, d: int, model: str) -> None:
        super().__init__(f"gqa_ragged_prefill_causal_h{hq}_kv{hkv}_d{d}")
        self.hq, self.hkv, self.d, self.model = hq, hkv, d, model

    def axes(self) -> dict[str, Any]:
        return {
            "total_q": var(),
            "total_kv": var(),
            "num_qo_heads": const(self.hq),
            "num_kv_heads": const(self.hkv),
            "head_dim": const(self.d),
            "len_indptr": var(),
        }

    def constraints(self) -> list[str]:
        return ["total_q == qo_indptr[-1].item()", "total_kv == kv_indptr[-1].item()"]

    def inputs(self) -> dict[str, Any]:
        return {
            "q": tensor(["total_q", "num_qo_heads", "head_dim"], "bfloat16"),
            "k": tensor(["total_kv", "num_kv_heads", "head_dim"], "bfloat16"),
            "v": tensor(["total_kv", "num_kv_heads", "head_dim"], "bfloat16"),
            "qo_indptr": tensor(["len_indptr"], "int32"),
            "kv_indptr": tensor(["len_indptr"], "int32"),
            "sm_scale": tensor(None, "float32"),
        }

    def outputs(self) -> dict[str, Any]:
        return {
            "output": tensor(["total_q", "num_qo_heads", "head_dim"], "bfloat16"),
            "lse": tensor(["total_q", "num_qo_heads"], "float32"),
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
        kv = lognormal_lengths(rng, batch, 900.0, 1.0, 16384)
        q = [max(1, min(n, int(rng.lognormvariate(math.log(300), 1.0)))) for n in kv]
        return {"total_q": sum(q), "total_kv": sum(kv), "len_indptr": batch + 1}

    def batch(self, axes: dict[str, int]) -> int:
        return axes["len_indptr"] - 1

    def cost(self, axes: dict[str, int]) -> tuple[float, float]:
        b = max(1, self.batch(axes))
        flops = 4.0 * axes["total_q"] * (axes["total_kv"] / b) * self.hq * self.d * 0.6
        nbytes = (axes["total_q"] * self.hq + 2 * axes["total_kv"] * self.hkv) * self.d * 2.0
        return flops, nbytes


class MlaPaged(Family):
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
        axes: dict[str, Any] = {self.rows(): var()}
        axes["num_qo_heads"] = const(
            self.heads,
            f"Number of query heads after tensor parallel split (128/{self.tp}={self.heads}).",
        )
        axes["head_dim_ckv"] = const(512)
        axes["head_dim_kpe"] = const(64)
        axes["page_size"] = const(self.ps)
        axes["num_pages"] = var("Total number of allocated pages in the KV cache.")
        axes["len_indptr"] = var("Length of kv_indptr array.")
        axes["num_kv_indices"] = var("Total number of KV page indices.")
        return axes

    def constraints(self) -> list[str]:
        if self.stage == "decode":
            return ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"]
        return ["total_q == qo_indptr[-1].item()", "num_kv_indices == kv_indptr[-1].item()"]

    def inputs(self) -> dict[str, Any]:
        r = self.rows()
        inputs = {
            "q_nope": tensor(
                [r, "num_qo_heads", "head_dim_ckv"],
                "bfloat16",
                "Query tensor without positional encoding component.",
            ),
            "q_pe": tensor(
                [r, "num_qo_heads", "head_dim_kpe"],
                "bfloat16",
                "Query positional encoding component.",
            ),
            "ckv_cache": tensor(
                ["num_pages", "page_size", "head_dim_ckv"],
                "bfloat16",
                "Compressed key-value cache.",
            ),
            "kpe_cache": tensor(
                ["num_pages", "page_size", "head_dim_kpe"],
                "bfloat16",
                "Key positional encoding cache.",
            ),
        }
        if self.stage == "prefill":
            inputs["qo_indptr"] = tensor(
                ["len_indptr"], "int32", "Query offsets for each sequence."
            )
        inputs["kv_indptr"] = tensor(["len_indptr"], "int32", "KV page offsets for each sequence.")
        inputs["kv_indices"] = tensor(
            ["num_kv_indices"], "int32", "Page indices for KV cache lookups."
        )
        inputs["sm_scale"] = tensor(
            None,
            "float32",
            "Softmax scale. Default is (1/sqrt(128 + 64) = 1/sqrt(192)), based on head dimensions before matrix absorption.",
        )
        return inputs

    def outputs(self) -> dict[str, Any]:
        r = self.rows()
        return {
            "output": tensor([r, "num_qo_heads", "head_dim_ckv"], "bfloat16"),
            "lse": tensor(
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
        return (
            f"./blob/workloads/{self.op_type}/{self.name}/{stem}_{random_hex(rng, 32)}.safetensors"
        )

    def sample_axes(self, rng: random.Random) -> dict[str, int]:
        batch = rng.choice((1, 1, 1, 2, 4, 8, 16, 32, 64, 128))
        kv = lognormal_lengths(rng, batch, 400.0, 1.4, 65536)
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


class DsaSparseAttention(Family):
    op_type = "dsa_paged"
    fi_api = "flashinfer.sparse.dsa_sparse_attention"
    reference_python_loop = True

    def __init__(self) -> None:
        super().__init__("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64")

    def axes(self) -> dict[str, Any]:
        return {
            "num_tokens": var(),
            "num_qo_heads": const(16),
            "head_dim_ckv": const(512),
            "head_dim_kpe": const(64),
            "page_size": const(64),
            "topk": const(2048),
            "num_pages": var(),
        }

    def inputs(self) -> dict[str, Any]:
        return {
            "q_nope": tensor(["num_tokens", "num_qo_heads", "head_dim_ckv"], "bfloat16"),
            "q_pe": tensor(["num_tokens", "num_qo_heads", "head_dim_kpe"], "bfloat16"),
            "ckv_cache": tensor(["num_pages", "page_size", "head_dim_ckv"], "bfloat16"),
            "kpe_cache": tensor(["num_pages", "page_size", "head_dim_kpe"], "bfloat16"),
            "sparse_indices": tensor(
                ["num_tokens", "topk"], "int32", "Top-k token indices selected by the indexer."
            ),
            "sm_scale": tensor(None, "float32"),
        }

    def outputs(self) -> dict[str, Any]:
        return {
            "output": tensor(["num_tokens", "num_qo_heads", "head_dim_ckv"], "bfloat16"),
            "lse": tensor(["num_tokens", "num_qo_heads"], "float32"),
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
