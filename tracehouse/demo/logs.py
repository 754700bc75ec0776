"""Evaluation logs as the harness writes them: compiler and runtime errors, timings, sites."""

from __future__ import annotations

import random
from dataclasses import dataclass

from tracehouse.demo.family import Family
from tracehouse.demo.hardware import Hardware
from tracehouse.demo.randomness import random_hex, seeded_rng
from tracehouse.demo.solutions import Solution, ext_name

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


def site_of(seed: int, author: str, hardware: str) -> _Site:
    rng = seeded_rng(seed, "site", author, hardware)
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


def _registry_build_frames(site: _Site) -> str:
    """The harness frames every build failure passes through: worker, registry, builder."""
    return (
        "Traceback (most recent call last):\n"
        f'  File "{site.fib}/flashinfer_bench/bench/runner/isolated_runner.py", line 214, in _worker_main\n'
        "    runnable = registry.build(defn, sol)\n"
        "               ^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f'  File "{site.fib}/flashinfer_bench/compile/registry.py", line 72, in build\n'
        "    return builder.build(defn, sol)\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^^^\n"
    )


class Logs:
    """Builds `evaluation.log` strings for one definition; sizes scale with `log_scale`."""

    def __init__(self, seed: int, fam: Family, log_scale: float) -> None:
        self.seed = seed
        self.fam = fam
        self.scale = log_scale
        rng = seeded_rng(seed, "tensor-rows")
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
    def build(self, sol: Solution, hw: Hardware, site: _Site, warnings: bool) -> str:
        key = ("build", sol.name, hw.name, site.cache, str(warnings))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        ext = ext_name(sol.name, sol.ext_hex)
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

    def cupti(self, hw: Hardware, site: _Site) -> str:
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
        self, rng: random.Random, sol: Solution, hw: Hardware, site: _Site, first: bool
    ) -> str:
        if sol.language in ("cuda", "cpp"):
            if first:
                return self.build(sol, hw, site, rng.random() < 0.3) + self.cupti(hw, site)
            return "ninja: no work to do.\n" + self.cupti(hw, site)
        if sol.language == "triton" and first and rng.random() < 0.5:
            return f"Triton autotuning for function _{self.fam.name}_kernel finished after {rng.uniform(0.4, 9):.2f}s; best config selected: BLOCK: {rng.choice((128, 256, 512))}, num_warps: {rng.choice((4, 8))}, num_ctas: 1, num_stages: {rng.choice((2, 3, 4))};\n"
        return self.cupti(hw, site) if rng.random() < 0.5 else ""

    def mismatch(self, rng: random.Random, sol: Solution, status: str, axes: dict[str, int]) -> str:
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

    def compile_error(self, rng: random.Random, sol: Solution, hw: Hardware, site: _Site) -> str:
        target = self._target(rng, 7300, 12000)
        ext = ext_name(sol.name, sol.ext_hex)
        key = ("compile", sol.name, hw.name, site.cache)
        text = self._cache.get(key)
        if text is None:
            srng = seeded_rng(self.seed, "compile-log", sol.name, hw.name)
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
        self, rng: random.Random, sol: Solution, hw: Hardware, site: _Site, ext: str
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
            + _registry_build_frames(site)
            + f'  File "{site.fib}/flashinfer_bench/compile/builders/torch_builder.py", line 171, in _build\n'
            f"    raise BuildError(f\"Torch build failed for solution '{{sol.name}}': {{e}}\") from e\n"
            f"flashinfer_bench.compile.builder.BuildError: Torch build failed for solution '{sol.name}': "
            f"Error building extension '{ext}'\n"
        )

    def _python_build_failure(self, rng: random.Random, sol: Solution, site: _Site) -> str:
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
            _registry_build_frames(site)
            + f'  File "{site.fib}/flashinfer_bench/compile/builders/{sol.language if sol.language != "python" else "python"}_builder.py", line 96, in _build\n'
            "    module = importlib.import_module(module_name)\n"
            f'  File "{site.env}/lib/python3.11/importlib/__init__.py", line 126, in import_module\n'
            "    return _bootstrap._gcd_import(name[level:], package, level)\n"
            + cause
            + f"flashinfer_bench.compile.builder.BuildError: {sol.language.capitalize()} build failed for solution '{sol.name}'\n"
        )

    def runtime_error(
        self,
        rng: random.Random,
        sol: Solution,
        hw: Hardware,
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
                    f"=========     at {self.fam.name}_kernel(const void *, void *, long, float)+0x{random_hex(rng, 4)}\n"
                    f"=========     by thread ({rng.randint(0, 255)},0,0) in block ({rng.randint(0, 4095)},0,0)\n"
                    f"=========     Address 0x7f{random_hex(rng, 10)} is out of bounds\n"
                )
            parts.append(chunk)
            size += len(chunk)
            trial += 1
        return "".join(parts)

    def timeout(self, rng: random.Random, sol: Solution, hw: Hardware, site: _Site) -> str:
        target = self._target(rng, 2400, 8600)
        parts = []
        if sol.language in ("cuda", "cpp"):
            parts.append(self.build(sol, hw, site, False))
        parts.append(self.cupti(hw, site))
        parts.append(
            "Fatal Python error: Aborted\n\nThread 0x00007f"
            + random_hex(rng, 10)
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
