"""Solutions: the baseline and the agent-written ones (authors, languages, behaviour profiles,
sources).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from tracehouse.demo.family import Family
from tracehouse.demo.hardware import Hardware
from tracehouse.demo.randomness import random_hex

BASELINE_AUTHOR = "baseline"


AGENT_AUTHORS: tuple[str, ...] = (
    "gpt-5",
    "gpt-5.2",
    "Qwen3.5-27B",
    "claude-opus-4",
    "gpt-o3",
    "gemini-2.5-pro",
)


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


TRANSIENT_SHARE = dict(_PROFILE_SHARES)["transient"]


@dataclass
class Solution:
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


def ext_name(solution_name: str, ext_hex: str) -> str:
    cleaned = "".join(ch if ch.isalnum() else "_" for ch in solution_name)
    return f"torch_{cleaned}_{ext_hex}"


def _cuda_sources(fam: Family, sol: str, rng: random.Random) -> list[dict[str, str]]:
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


def _python_source(fam: Family, language: str, rng: random.Random) -> str:
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
    fam: Family, name: str, author: str, language: str, binding: str | None, rng: random.Random
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


def _baseline_document(fam: Family, name: str) -> dict[str, Any]:
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


def assign_profiles(rng: random.Random, count: int) -> list[str]:
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


def make_solutions(
    rng: random.Random,
    fam: Family,
    hw_profiles: list[Hardware],
    profiles: list[str],
    baseline_names: set[str],
) -> list[Solution]:
    hw_names = [hw.name for hw in hw_profiles]
    while True:
        base_name = f"{fam.baseline_kind}_{random_hex(rng, 6)}"
        if base_name not in baseline_names:
            baseline_names.add(base_name)
            break
    solutions = [
        Solution(
            name=base_name,
            author=BASELINE_AUTHOR,
            language="python",
            binding=None,
            profile="baseline",
            speed=1.0,
            hw_speed={h: rng.lognormvariate(0.0, 0.02) for h in hw_names},
            compiles_on=frozenset(hw_names),
            ext_hex=random_hex(rng, 6),
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
            Solution(
                name=name,
                author=author,
                language=language,
                binding=binding,
                profile=profile,
                speed=skill,
                hw_speed={h: rng.lognormvariate(0.0, 0.12) for h in hw_names},
                compiles_on=compiles_on,
                ext_hex=random_hex(rng, 6),
                document=_agent_document(fam, name, author, language, binding, rng),
            )
        )
    return solutions
