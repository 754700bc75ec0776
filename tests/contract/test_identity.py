"""KernelIndex identity derivation: every test vector of docs/kernelindex-identity.md §14, its
worked examples (§3.2, §4.5, §5.2, §7, §8.2, §9.6, §10.2, §12) and its quirks.

Most inputs are written inline (they reproduce the doc's digests); the real solution file of
`flashinfer_wrapper_74a870` and the golden trace lines come from ../shared (skipped without it).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.shared_data import GOLDEN_DIR, requires_shared
from tracehouse import kernelindex as ki
from tracehouse.kernelindex import canonical_json, manifest_digest
from tracehouse.kernelindex.workload import _icu_sort_key as icu_sort_key

REVISION = "da915083d4c7c5e61aa3005e3d17ae488e0fc71c"
PROTOCOL = "sha256:7d44d206ad086b4bece35ce31f6531ebb11f07e0d9dcfb74c75be86d3ec02095"
NO_TOLERANCE = "sha256:64fb869e75555adddfd46fa334a41102014261853dbb526ae1b7f724f4511f46"
OP_RMSNORM = "sha256:b28db409e15dc71e859a5c34624d6914398788b9ba4a89f2b79a826b3ab1da7e"
OP_GEMM = "sha256:b416884bdd26526cff8c9080b35e639f45176465511ef9fc773acf776389ff07"
OP_MLA = "sha256:ebddbfc76cb7ba67e53801655a9f6205dcf2fd44983a72208d42e09bbb601634"
WL_RMSNORM = "sha256:da6158f061b76f71c74e65da2aef0c8d5581fbd74b5dc3bb87721cff79c091e8"
WL_GEMM = "sha256:656d1daffcbe97094c06b63dbdcbbbb8ed49570b4cc5a6afef78841f91e0dfe7"
WL_MLA = "sha256:e8dda69aa7a1f340ea0da43a0830157a1b509ed018a1b89c3f434ffe28e975bd"
ENV_B200_280 = "sha256:f4292a8be127b7230cd3995c1d605fb6c644e2c2f94566e1d28cc1be766ca5d5"
IMPL_74A870 = "sha256:79278567a15eac7d7c781ebcfa7d8e307243a6e86e9efe02f3bf209e944419b2"
IMPL_EA3787 = "sha256:bcc5e6b5c47e98f95a4c85f871621f8a2976c0963b289e9e14d9d10f13604c8b"
ENVELOPE = '{"apiVersion":"kernelindex.dev/v1alpha1","kind":"%s","spec":%s}'

BF16 = "bfloat16"
LIBS_280 = {"torch": "2.8.0+cu128", "triton": "3.4.0", "cuda": "12.8"}


def rmsnorm_definition() -> dict[str, Any]:
    """definitions/rmsnorm/fused_add_rmsnorm_h2048.json (reference text shortened)."""
    return {
        "name": "fused_add_rmsnorm_h2048",
        "op_type": "rmsnorm",
        "description": "Fused Add + RMSNorm with hidden_size=2048 for Qwen3-30B-A3B. Epsilon is fixed at 1e-6.",
        "tags": [
            "status:verified",
            "model:qwen3-30b-a3b",
            "fused",
            "fi_api:flashinfer.norm.fused_add_rmsnorm",
        ],
        "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 2048}},
        "inputs": {
            "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": BF16},
            "residual": {"shape": ["batch_size", "hidden_size"], "dtype": BF16},
            "weight": {"shape": ["hidden_size"], "dtype": BF16},
        },
        "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": BF16}},
        "reference": "import torch\n\ndef run(hidden_states, residual, weight): ...",
    }


def gemm_definition() -> dict[str, Any]:
    """gemm_n4096_k4096 as §3.2 describes it (upper-case names)."""
    return {
        "name": "gemm_n4096_k4096",
        "op_type": "gemm",
        "axes": {
            "M": {"type": "var"},
            "N": {"type": "const", "value": 4096},
            "K": {"type": "const", "value": 4096},
        },
        "inputs": {
            "A": {"shape": ["M", "K"], "dtype": "float16"},
            "B": {"shape": ["N", "K"], "dtype": "float16"},
        },
        "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}},
        "reference": "def run(A, B):\n    return A @ B.T\n",
    }


def mla_definition() -> dict[str, Any]:
    """mla_paged_prefill_causal_h16_ckv512_kpe64_ps1 as §12.1 describes it."""
    return {
        "name": "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1",
        "op_type": "mla_paged",
        "axes": {
            "num_qo_heads": {"type": "const", "value": 16},
            "head_dim_ckv": {"type": "const", "value": 512},
            "head_dim_kpe": {"type": "const", "value": 64},
            "page_size": {"type": "const", "value": 1},
            "total_q": {"type": "var"},
            "num_pages": {"type": "var"},
            "len_indptr": {"type": "var"},
            "num_kv_indices": {"type": "var"},
        },
        "inputs": {
            "q_nope": {"shape": ["total_q", "num_qo_heads", "head_dim_ckv"], "dtype": BF16},
            "q_pe": {"shape": ["total_q", "num_qo_heads", "head_dim_kpe"], "dtype": BF16},
            "ckv_cache": {"shape": ["num_pages", "page_size", "head_dim_ckv"], "dtype": BF16},
            "kpe_cache": {"shape": ["num_pages", "page_size", "head_dim_kpe"], "dtype": BF16},
            "qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
            "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
            "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
            "sm_scale": {"shape": None, "dtype": "float32"},
        },
        "outputs": {
            "output": {"shape": ["total_q", "num_qo_heads", "head_dim_ckv"], "dtype": BF16},
            "lse": {"shape": ["total_q", "num_qo_heads"], "dtype": "float32"},
        },
        "reference": "def run(...): ...",
    }


# §9.6, verbatim.
RMSNORM_LINE = (
    '{"definition":"fused_add_rmsnorm_h2048","workload":{"axes":{"batch_size":6},"inputs":{"hidden_states":'
    '{"type":"random"},"residual":{"type":"random"},"weight":{"type":"random"}},"uuid":"906efdc6-aa3b-4b4f-a291-'
    '3a2be509d354"},"solution":"flashinfer_wrapper_74a870","evaluation":{"status":"PASSED","environment":'
    '{"hardware":"NVIDIA B200","libs":{"torch":"2.8.0+cu128","triton":"3.4.0","cuda":"12.8"}},"timestamp":'
    '"2025-10-21T13:37:42.930971","log":"","correctness":{"max_relative_error":0.0,"max_absolute_error":0.0,'
    '"extra":null},"performance":{"latency_ms":0.007666674151122668,"reference_latency_ms":0.055197691422457264,'
    '"speedup_factor":7.199691852610483}}}'
)

# §12.1, verbatim.
_MLA_BLOB = "./blob/workloads/mla_paged/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1/mla_prefill_meta_a67df3e402b37716e89d44367b181db9.safetensors"
MLA_LINE = json.dumps(
    {
        "definition": "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1",
        "workload": {
            "axes": {
                "total_q": 1954,
                "num_pages": 989669,
                "len_indptr": 29,
                "num_kv_indices": 2044,
            },
            "inputs": {
                "q_nope": {"type": "random"},
                "q_pe": {"type": "random"},
                "ckv_cache": {"type": "random"},
                "kpe_cache": {"type": "random"},
                "sm_scale": {"type": "scalar", "value": 0.1352337747812271},
                "qo_indptr": {"type": "safetensors", "path": _MLA_BLOB, "tensor_key": "qo_indptr"},
                "kv_indptr": {"type": "safetensors", "path": _MLA_BLOB, "tensor_key": "kv_indptr"},
                "kv_indices": {
                    "type": "safetensors",
                    "path": _MLA_BLOB,
                    "tensor_key": "kv_indices",
                },
            },
            "uuid": "892d1b8f-f6fe-40ad-aa3f-b6d391753bd3",
        },
        "solution": "flashinfer_wrapper_ea3787",
        "evaluation": {
            "status": "PASSED",
            "environment": {"hardware": "NVIDIA B200", "libs": LIBS_280},
            "timestamp": "2025-10-21T08:01:30.954000",
            "log": "",
            "correctness": {
                "max_relative_error": 24207.900390625,
                "max_absolute_error": 0.03125,
                "extra": None,
            },
            "performance": {
                "latency_ms": 0.06885697687169566,
                "reference_latency_ms": 272.56801350911456,
                "speedup_factor": 3958.466169913369,
            },
        },
    }
)

# §10.2: gemm_n4096_k4096 × torch_matmul_254647 × 2e90109a, RUNTIME_ERROR.
GEMM_FAILED_LINE = {
    "definition": "gemm_n4096_k4096",
    "workload": {
        "axes": {"M": 248},
        "inputs": {"A": {"type": "random"}, "B": {"type": "random"}},
        "uuid": "2e90109a-282e-484f-b94b-61f49e72fde2",
    },
    "solution": "torch_matmul_254647",
    "evaluation": {
        "status": "RUNTIME_ERROR",
        "environment": {"hardware": "NVIDIA B200", "libs": LIBS_280},
        "timestamp": "2025-10-16T01:19:10.058000",
        "log": "",
        "correctness": None,
        "performance": None,
    },
}


def rmsnorm_line() -> dict[str, Any]:
    return json.loads(RMSNORM_LINE)


def identify(
    trace: dict[str, Any], definition: dict[str, Any] | None = None, **kwargs: Any
) -> ki.TraceIdentity:
    definition = definition if definition is not None else rmsnorm_definition()
    kwargs.setdefault("implementation_digest", IMPL_74A870)
    return ki.identify_trace_line(
        trace, definition=definition, operation_digest=ki.operation_digest(definition), **kwargs
    )


def error_code(function: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ki.IdentityError) as raised:
        function(*args, **kwargs)
    assert raised.value.code in ki.IDENTITY_REASON_CODES
    return raised.value.code


# -- constants ---------------------------------------------------------------------------------


def test_constants():
    assert ki.API_VERSION == "kernelindex.dev/v1alpha1"
    assert ki.PROTOCOL_DIGEST == PROTOCOL
    assert ki.NO_TOLERANCE_CORRECTNESS_KEY == NO_TOLERANCE
    assert ki.PROTOCOL_METADATA == {
        "name": "flashinfer-bench-trace",
        "title": "FlashInfer-Bench trace harness",
    }
    assert canonical_json(
        {"apiVersion": ki.API_VERSION, "kind": "BenchmarkProtocol", "spec": ki.PROTOCOL_SPEC}
    ) == (
        b'{"apiVersion":"kernelindex.dev/v1alpha1","kind":"BenchmarkProtocol","spec":{"comparability":{"family":'
        b'"flashinfer_bench_trace"},"correctness":{"comparator":"flashinfer_bench_eval","reference":"definition '
        b'reference implementation"},"harness":{"name":"flashinfer-bench","repository":"https://github.com/'
        b'flashinfer-ai/flashinfer-bench"},"measurement":{"primaryStatistic":"mean","timer":"harness_reported"}}}'
    )


def test_reason_codes_are_documented():
    assert all(code and description for code, description in ki.IDENTITY_REASON_CODES.items())
    with pytest.raises(ValueError):
        ki.IdentityError("not_a_code", "x")


# -- §1.3 shared transformations -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mla_paged", "mla-paged"),
        (
            "sol-trace-NVIDIA B200-2.8.0+cu128-3.4.0-12.8",
            "sol-trace-nvidia-b200-2-8-0-cu128-3-4-0-12-8",
        ),
        ("__A  b__", "a-b"),
        ("x" * 150, "x" * 100),
        ("", ""),
    ],
)
def test_kebab(text, expected):
    assert ki.kebab(text) == expected


def test_keys_and_dimensions():
    assert ki.axis_key("M") == "m"
    assert ki.axis_key("total_q") == "total_q"
    assert ki.argument_key("A") == "a"
    assert ki.argument_key("2nd") == "x_2nd"
    assert ki.argument_key("q-pe") == "q_pe"
    assert ki.argument_key("_x") == "x__x"
    assert ki.dimension("2") == 2
    assert ki.dimension("M") == "m"
    assert ki.dimension(7) == 7
    assert ki.dimension(7.0) == 7


@pytest.mark.parametrize(
    ("name", "token"),
    [
        ("bfloat16", "bf16"),
        ("float16", "fp16"),
        ("half", "fp16"),
        ("float32", "fp32"),
        ("float", "fp32"),
        ("float64", "fp64"),
        ("double", "fp64"),
        ("float8_e4m3fn", "fp8_e4m3"),
        ("float8_e4m3", "fp8_e4m3"),
        ("float8_e5m2", "fp8_e5m2"),
        ("nvfp4", "nvfp4"),
        ("float4_e2m1", "fp4_e2m1"),
        ("float4_e2m1fn_x2", "float4_e2m1fn_x2"),
        ("int32", "int32"),
        ("uint8", "uint8"),
        ("bool", "bool"),
        ("Float-X", "float_x"),
    ],
)
def test_dtype_tokens(name, token):
    assert ki.dtype_token(name) == token


@pytest.mark.parametrize(
    ("name", "token"),
    [
        ("python", "python"),
        ("cuda_cpp", "cuda"),
        ("cpp", "cpp"),
        ("Triton", "triton"),
        ("pytorch", "pytorch"),
        ("CUDA", "cuda"),
        ("c++", "c__"),
    ],
)
def test_language_tokens(name, token):
    assert ki.language_token(name) == token


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("B200", ("nvidia", "NVIDIA B200", "sm_100")),
        ("NVIDIA_B200", ("nvidia", "NVIDIA B200", "sm_100")),
        ("GB200", ("nvidia", "NVIDIA GB200", "sm_100")),
        ("H200", ("nvidia", "NVIDIA H200", "sm_90")),
        ("H100", ("nvidia", "NVIDIA H100", "sm_90")),
        ("NVIDIA_H100", ("nvidia", "NVIDIA H100", "sm_90")),
        ("A100", ("nvidia", "NVIDIA A100", "sm_80")),
        # Quirk: torch's device name is not a table key.
        ("NVIDIA B200", ("nvidia", "NVIDIA B200", "unknown")),
        ("NVIDIA GB200", ("nvidia", "NVIDIA GB200", "unknown")),
        ("NVIDIA_H200", ("nvidia", "NVIDIA H200", "unknown")),
        ("AMD_Instinct_MI300X", ("nvidia", "AMD Instinct MI300X", "unknown")),
    ],
)
def test_hardware(name, expected):
    assert ki.hardware_identity(name) == expected


def test_set_like():
    assert ki.set_like(["sm_90", "sm_100", "sm_90"]) == ["sm_100", "sm_90"]
    assert ki.set_like(["b", "B", "_", "a"]) == ["B", "_", "a", "b"]
    assert ki.set_like(["\ufb01", "\U0001f600"]) == ["\U0001f600", "\ufb01"]  # UTF-16 order


def test_text_digest():
    assert (
        ki.text_digest("import torch\n")
        == "sha256:b91a3bc5e2064d025a8ae122555c96948ec5b4895d53d809c4b66b71a4915133"
    )


# -- §3 operations ------------------------------------------------------------------------------


def test_operation_rmsnorm_canonical_body():
    spec = ki.operation_spec(rmsnorm_definition())
    assert canonical_json(
        {"apiVersion": ki.API_VERSION, "kind": "OperationSpec", "spec": spec}
    ) == (
        b'{"apiVersion":"kernelindex.dev/v1alpha1","kind":"OperationSpec","spec":{"axes":{"batch_size":{"role":'
        b'"variable","type":"integer"},"hidden_size":{"role":"constant","type":"integer","value":2048}},"family":'
        b'"rmsnorm","inputs":[{"name":"hidden_states","tensor":{"dtype":"bf16","shape":["batch_size","hidden_size"]}}'
        b',{"name":"residual","tensor":{"dtype":"bf16","shape":["batch_size","hidden_size"]}},{"name":"weight",'
        b'"tensor":{"dtype":"bf16","shape":["hidden_size"]}}],"outputs":[{"name":"output","tensor":{"dtype":"bf16",'
        b'"shape":["batch_size","hidden_size"]}}],"reference":{"language":"python"},"semantics":{"determinism":'
        b'"unspecified","mutation":"none"}}}'
    )
    assert ki.operation_digest(rmsnorm_definition()) == OP_RMSNORM


def test_operation_gemm_upper_case_names():
    assert canonical_json(ki.operation_spec(gemm_definition())) == (
        b'{"axes":{"k":{"role":"constant","type":"integer","value":4096},"m":{"role":"variable","type":"integer"},'
        b'"n":{"role":"constant","type":"integer","value":4096}},"family":"gemm","inputs":[{"name":"a","tensor":'
        b'{"dtype":"fp16","shape":["m","k"]}},{"name":"b","tensor":{"dtype":"fp16","shape":["n","k"]}}],"outputs":'
        b'[{"name":"c","tensor":{"dtype":"fp16","shape":["m","n"]}}],"reference":{"language":"python"},"semantics":'
        b'{"determinism":"unspecified","mutation":"none"}}'
    )
    assert ki.operation_digest(gemm_definition()) == OP_GEMM


def test_operation_mla_scalar_input():
    spec = ki.operation_spec(mla_definition())
    assert spec["inputs"][-1] == {"name": "sm_scale", "scalar": {"dtype": "fp32"}}
    assert ki.operation_digest(mla_definition()) == OP_MLA


def test_operation_ignores_metadata():
    definition = rmsnorm_definition()
    definition.update(
        name="renamed", description="other", tags=["x"], constraints=["batch_size > 0"], extra=1
    )
    definition["axes"]["batch_size"]["description"] = "rows"
    definition["reference"] = "something else entirely"
    assert ki.operation_digest(definition) == OP_RMSNORM


def test_operation_family_fallbacks():
    definition = rmsnorm_definition()
    del definition["op_type"]
    definition["tags"] = ["L1", "model:llama", "FlashInfer-Bench", "Stage: Prefill"]
    assert ki.operation_spec(definition)["family"] == "stage-prefill"
    definition["tags"] = ["L2", "model:x"]
    assert ki.operation_spec(definition)["family"] == "uncategorized"
    definition["op_type"] = ""
    definition["tags"] = None
    assert ki.operation_spec(definition)["family"] == "uncategorized"
    definition["op_type"] = "__"
    assert error_code(ki.operation_spec, definition) == "empty_family"


def test_operation_reference_absent_when_empty():
    definition = rmsnorm_definition()
    definition["reference"] = ""
    assert "reference" not in ki.operation_spec(definition)
    definition["reference"] = None
    assert "reference" not in ki.operation_spec(definition)


def test_operation_axis_collision_and_expr():
    definition = gemm_definition()
    definition["axes"] = {
        "M": {"type": "var"},
        "m": {"type": "const", "value": 3},  # collides after lower-casing: the later one wins
        "N": {"type": "const", "value": 4096},
        "K": {"type": "const", "value": 4096},
        "MN": {"type": "expr", "expression": "M * (N // 2) % 7"},
    }
    axes = ki.operation_spec(definition)["axes"]
    assert axes["m"] == {"role": "constant", "type": "integer", "value": 3}
    assert axes["mn"] == {"role": "derived", "type": "integer", "expression": "m * (n // 2) % 7"}


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda d: d["axes"]["hidden_size"].pop("value"), "missing_const_value"),
        (lambda d: d["axes"].update({"2x": {"type": "var"}}), "invalid_name"),
        (
            lambda d: d["axes"].update({"e": {"type": "expr", "expression": "a ^ 2"}}),
            "invalid_expression",
        ),
        (
            lambda d: d["axes"].update({"e": {"type": "expr", "expression": None}}),
            "invalid_expression",
        ),
        (lambda d: d["axes"].update({"e": {"type": "weird"}}), "invalid_field_type"),
        (lambda d: d["inputs"]["weight"].update(dtype="8bit"), "invalid_name"),
        (lambda d: d["inputs"]["weight"].update(shape=[-1]), "invalid_shape"),
        (lambda d: d["inputs"]["weight"].update(shape=["bad-name"]), "invalid_name"),
        (lambda d: d["inputs"]["weight"].update(shape=[2.5]), "non_integer_value"),
        (lambda d: d.update(outputs={}), "missing_arguments"),
        (lambda d: d.update(inputs={}), "missing_arguments"),
        (lambda d: d.update(name="n" * 201), "title_too_long"),
        (lambda d: d.update(description="d" * 2001), "description_too_long"),
        (lambda d: d.update(name=5), "invalid_field_type"),
        (lambda d: d["axes"]["hidden_size"].update(value=2**53), "integer_out_of_range"),
        (lambda d: d["axes"]["hidden_size"].update(value=True), "invalid_field_type"),
    ],
)
def test_operation_violations(mutate, code):
    definition = rmsnorm_definition()
    mutate(definition)
    assert error_code(ki.operation_spec, definition) == code


# -- §4 workloads -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("axes", "key"),
    [
        ({"M": 6}, "0656be253bc5"),
        ({"batch_size": 7}, "6efb14cba55b"),
        (
            {"total_q": 1954, "num_pages": 989669, "len_indptr": 29, "num_kv_indices": 2044},
            "be5a35e5d2f3",
        ),
        ({"M": 1, "K": 2, "b_plus_1": 3, "B": 4, "a": 5}, "e4523e6e0f12"),
    ],
)
def test_workload_key_without_uuid(axes, key):
    assert ki.workload_key({"axes": axes}) == key
    assert ki.workload_key({"axes": dict(reversed(list(axes.items()))), "uuid": None}) == key
    assert ki.workload_key({"axes": axes, "uuid": ""}) == key


def test_workload_key_collation_rules():
    def order(*names: str) -> list[str]:
        return [
            item[0]
            for item in sorted(((n, 0) for n in names), key=lambda item: icu_sort_key(item[0]))
        ]

    assert order("b_plus_1", "B", "a", "K", "M") == ["a", "B", "b_plus_1", "K", "M"]
    assert order("a1", "a_1") == ["a_1", "a1"]  # punctuation before digits
    assert order("a1", "aa") == ["a1", "aa"]  # digits before letters
    assert order("Ab", "ab") == ["ab", "Ab"]  # equal ignoring case: lowercase first
    assert order("aB", "Ab") == ["aB", "Ab"]  # first position where case differs
    assert order("abc", "ab") == ["ab", "abc"]  # prefix first
    assert order("B", "a", "C") == ["a", "B", "C"]  # case-insensitive letters
    # Axes text: compact JSON, original names, integers without a decimal point.
    assert ki.workload_key({"axes": {"M": 6.0}}) == "0656be253bc5"


def test_workload_key_uses_uuid_verbatim():
    assert ki.workload_key({"uuid": "Free Text", "axes": {"M": 1}}) == "Free Text"
    assert ki.workload_key({"uuid": "abcd" * 8, "axes": {}}) == "abcd" * 8


def test_workload_rmsnorm_canonical_body():
    trace = rmsnorm_line()
    spec = ki.workload_case_spec(trace["workload"], rmsnorm_definition(), OP_RMSNORM)
    assert canonical_json({"apiVersion": ki.API_VERSION, "kind": "WorkloadCase", "spec": spec}) == (
        b'{"apiVersion":"kernelindex.dev/v1alpha1","kind":"WorkloadCase","spec":{"axes":{"batch_size":6},'
        b'"correctness":{"comparator":"sol_execbench_eval"},"operationSpecDigest":"sha256:b28db409e15dc71e859a5c3'
        b'4624d6914398788b9ba4a89f2b79a826b3ab1da7e","tensors":{"hidden_states":{"data":{"generator":"random"},'
        b'"dtype":"bf16","shape":[6,2048]},"residual":{"data":{"generator":"random"},"dtype":"bf16","shape":'
        b'[6,2048]},"weight":{"data":{"generator":"random"},"dtype":"bf16","shape":[2048]}}}}'
    )
    assert ki.workload_digest(trace["workload"], rmsnorm_definition(), OP_RMSNORM) == WL_RMSNORM
    assert ki.correctness_key(spec) == NO_TOLERANCE


def test_workload_gemm():
    spec = ki.workload_case_spec(GEMM_FAILED_LINE["workload"], gemm_definition(), OP_GEMM)
    assert spec["axes"] == {"m": 248}
    assert spec["tensors"]["a"]["shape"] == [248, 4096]
    assert spec["tensors"]["b"]["shape"] == [4096, 4096]
    assert manifest_digest("WorkloadCase", spec) == WL_GEMM


def test_workload_mla_canonical_body():
    workload = json.loads(MLA_LINE)["workload"]
    spec = ki.workload_case_spec(workload, mla_definition(), OP_MLA)
    assert canonical_json(
        {"apiVersion": ki.API_VERSION, "kind": "WorkloadCase", "spec": spec}
    ).decode() == (
        '{"apiVersion":"kernelindex.dev/v1alpha1","kind":"WorkloadCase","spec":{"axes":{"len_indptr":29,'
        '"num_kv_indices":2044,"num_pages":989669,"total_q":1954},"correctness":{"comparator":"sol_execbench_eval"},'
        '"operationSpecDigest":"sha256:ebddbfc76cb7ba67e53801655a9f6205dcf2fd44983a72208d42e09bbb601634","scalars":'
        '{"sm_scale":{"dtype":"fp32","value":0.1352337747812271}},"tensors":{"ckv_cache":{"data":{"generator":'
        '"random"},"dtype":"bf16","shape":[989669,1,512]},"kpe_cache":{"data":{"generator":"random"},"dtype":"bf16",'
        '"shape":[989669,1,64]},"kv_indices":{"data":{"generator":"safetensors"},"dtype":"int32","shape":[2044]},'
        '"kv_indptr":{"data":{"generator":"safetensors"},"dtype":"int32","shape":[29]},"q_nope":{"data":{"generator":'
        '"random"},"dtype":"bf16","shape":[1954,16,512]},"q_pe":{"data":{"generator":"random"},"dtype":"bf16",'
        '"shape":[1954,16,64]},"qo_indptr":{"data":{"generator":"safetensors"},"dtype":"int32","shape":[29]}}}}'
    )
    assert manifest_digest("WorkloadCase", spec) == WL_MLA
    # safetensors paths and the uuid do not count
    other = copy.deepcopy(workload)
    other["uuid"] = "elsewhere"
    for name in ("qo_indptr", "kv_indptr", "kv_indices"):
        other["inputs"][name]["path"] = "/x.safetensors"
    other["baseline_latency_ms"] = 1.0
    other["sol_ms"] = None
    assert ki.workload_digest(other, mla_definition(), OP_MLA) == WL_MLA


def test_workload_tolerance_correctness():
    workload = rmsnorm_line()["workload"]
    workload["tolerance"] = {"max_atol": 0.01, "max_rtol": 1.0}
    spec = ki.workload_case_spec(workload, rmsnorm_definition(), OP_RMSNORM)
    assert canonical_json(spec["correctness"]) == (
        b'{"comparator":"sol_execbench_eval","maxAbsoluteError":0.01,"maxRelativeError":1}'
    )
    assert (
        ki.correctness_key(spec)
        == "sha256:0f74b987f3b2bb29d589272cb8d35b9a0a576d8174cfabab2d64313d0eede300"
    )
    workload["tolerance"] = {"max_atol": -0.1}
    assert (
        error_code(ki.workload_case_spec, workload, rmsnorm_definition(), OP_RMSNORM)
        == "negative_tolerance"
    )


def test_quirk_const_overrides_workload_axis():
    workload = {"axes": {"M": 2, "N": 7}, "inputs": {}, "uuid": "u1"}
    spec = ki.workload_case_spec(workload, gemm_definition(), OP_GEMM)
    assert spec["axes"] == {"m": 2, "n": 7}  # the workload's own axes stay as written
    assert spec["tensors"]["b"]["shape"] == [
        4096,
        4096,
    ]  # but the definition's const binds the shape
    assert "data" not in spec["tensors"]["a"]  # no descriptor: no data member


def test_quirk_scalar_descriptor_beats_tensor_shape_and_bool_is_not_numeric():
    definition = mla_definition()
    workload = json.loads(MLA_LINE)["workload"]
    workload["inputs"]["q_pe"] = {"type": "scalar", "value": 2}
    spec = ki.workload_case_spec(workload, definition, OP_MLA)
    assert spec["scalars"]["q_pe"] == {"dtype": "bf16", "value": 2}
    assert "q_pe" not in spec["tensors"]

    workload["inputs"]["sm_scale"] = {"type": "scalar", "value": True}  # a boolean: not a scalar
    workload["inputs"]["q_pe"] = {"type": "scalar", "value": True}  # falls back to its tensor shape
    spec = ki.workload_case_spec(workload, definition, OP_MLA)
    assert "scalars" not in spec
    assert spec["tensors"]["q_pe"]["data"] == {"generator": "random"}

    workload["inputs"]["sm_scale"] = {"type": "scalar"}  # no value: dropped
    assert "sm_scale" not in ki.workload_case_spec(workload, definition, OP_MLA).get("scalars", {})
    workload["inputs"]["sm_scale"] = {"type": "random"}
    spec = ki.workload_case_spec(workload, definition, OP_MLA)
    assert "sm_scale" not in spec["tensors"] and "scalars" not in spec


def test_workload_axis_lower_casing_collision():
    spec = ki.workload_case_spec({"axes": {"M": 1, "m": 2}}, gemm_definition(), OP_GEMM)
    assert spec["axes"] == {"m": 2}  # the later member wins
    assert spec["tensors"]["a"]["shape"] == [2, 4096]


def test_quirk_descriptor_lookup_is_case_sensitive():
    workload = {
        "axes": {"M": 2},
        "inputs": {"a": {"type": "safetensors"}, "B": {"type": "safetensors"}},
    }
    spec = ki.workload_case_spec(workload, gemm_definition(), OP_GEMM)
    assert "data" not in spec["tensors"]["a"]
    assert spec["tensors"]["b"]["data"] == {"generator": "safetensors"}


def test_expr_axes_floor_division_and_remainder():
    definition = {
        "name": "expr_demo",
        "op_type": "demo",
        "axes": {
            "N": {"type": "var"},
            "half": {"type": "expr", "expression": "N // 2"},
            "rest": {"type": "expr", "expression": "(N - 10) % 4"},
            "mix": {"type": "expr", "expression": "half * 2 + 1 - rest"},
            "pos": {"type": "expr", "expression": "(0 - N) // 4 + 5"},
        },
        "inputs": {"x": {"shape": ["half", "mix", "pos"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
    }
    op = ki.operation_digest(definition)
    spec = ki.workload_case_spec({"axes": {"N": 7}, "inputs": {}}, definition, op)
    # 7 // 2 = 3; (7 - 10) % 4 = -3 (sign of the dividend, not Python's 1); 3 * 2 + 1 - (-3) = 10;
    # (0 - 7) // 4 = -2 (floor, not truncation) + 5 = 3
    assert spec["tensors"]["x"]["shape"] == [3, 10, 3]
    assert spec["axes"] == {"n": 7}  # derived axes are bindings only


def test_expr_axes_negative_remainder_rejects_shape():
    definition = {
        "name": "expr_demo",
        "op_type": "demo",
        "axes": {"N": {"type": "var"}, "r": {"type": "expr", "expression": "(N - 10) % 4"}},
        "inputs": {"x": {"shape": ["r"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
    }
    op = ki.operation_digest(definition)
    assert ki.workload_case_spec({"axes": {"N": 15}}, definition, op)["tensors"]["x"]["shape"] == [
        1
    ]
    assert (
        error_code(ki.workload_case_spec, {"axes": {"N": 7}}, definition, op) == "invalid_shape"
    )  # -3
    definition["axes"]["r"]["expression"] = "N // 2 //"
    assert (
        error_code(ki.workload_case_spec, {"axes": {"N": 7}}, definition, op)
        == "invalid_expression"
    )
    definition["axes"]["r"]["expression"] = "N 2"
    assert (
        error_code(ki.workload_case_spec, {"axes": {"N": 7}}, definition, op)
        == "invalid_expression"
    )
    definition["axes"]["r"]["expression"] = "Q + 1"
    assert error_code(ki.workload_case_spec, {"axes": {"N": 7}}, definition, op) == "unbound_axis"
    definition["axes"]["r"]["expression"] = "N // 0"
    assert (
        error_code(ki.workload_case_spec, {"axes": {"N": 7}}, definition, op)
        == "invalid_expression"
    )


def test_expr_axis_already_bound_by_workload_is_not_evaluated():
    definition = {
        "name": "expr_demo",
        "op_type": "demo",
        "axes": {"N": {"type": "var"}, "h": {"type": "expr", "expression": "n // 2"}},
        "inputs": {"x": {"shape": ["h"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
    }
    op = ki.operation_digest(definition)
    assert ki.workload_case_spec({"axes": {"N": 8, "H": 5}}, definition, op)["tensors"]["x"][
        "shape"
    ] == [5]


@pytest.mark.parametrize(
    ("workload", "code"),
    [
        ({"axes": {}, "inputs": {}}, "unbound_axis"),  # batch_size is not bound
        ({"axes": {"batch_size": -1}}, "invalid_shape"),
        ({"axes": {"batch_size": 1, "2x": 1}}, "invalid_name"),
        ({"axes": {"batch_size": 1}, "uuid": "ABCDEF12-0000"}, "invalid_name"),  # workload name
        ({"axes": {"batch_size": 1}, "uuid": "abc def"}, "invalid_name"),
        ({"axes": {"batch_size": 1.5}}, "non_integer_value"),
        ({"axes": {"batch_size": True}}, "invalid_field_type"),
        ({"axes": {"batch_size": 2**53}}, "integer_out_of_range"),
        (
            {"axes": {"batch_size": 1}, "inputs": {"weight": {"type": "scalar", "value": None}}},
            "invalid_field_type",
        ),
        ({"axes": {"batch_size": 1}, "inputs": {"weight": {"value": 1}}}, "missing_field"),
        (
            {"axes": {"batch_size": 1}, "inputs": {"weight": {"type": "x", "path": None}}},
            "invalid_field_type",
        ),
        ({"axes": {"batch_size": 1}, "tolerance": {"max_rtol": None}}, "invalid_field_type"),
        ({"axes": {"batch_size": 1}, "tolerance": 3}, "invalid_field_type"),
        ({"inputs": {}}, "missing_field"),
    ],
)
def test_workload_violations(workload, code):
    assert error_code(ki.workload_case_spec, workload, rmsnorm_definition(), OP_RMSNORM) == code


def test_big_integers():
    assert ki.workload_case_spec(
        {"axes": {"batch_size": 2**53 - 1}}, rmsnorm_definition(), OP_RMSNORM
    )
    # A number field (not an integer field) keeps JavaScript's double.
    workload = json.loads(MLA_LINE)["workload"]
    workload["inputs"]["sm_scale"]["value"] = 2**60
    spec = ki.workload_case_spec(workload, mla_definition(), OP_MLA)
    assert (
        canonical_json(spec["scalars"]["sm_scale"])
        == b'{"dtype":"fp32","value":1152921504606847000}'
    )


# -- §5 environments ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hardware", "libs", "expected"),
    [
        ("NVIDIA B200", LIBS_280, ENV_B200_280),
        (
            "NVIDIA B200",
            {"torch": "2.9.1+cu128", "triton": "3.5.1", "cuda": "12.8"},
            "sha256:af7cb68a0bb0eb9671092a620668c2600f0431301fc46a71807ea75fb7de8bce",
        ),
        (
            "NVIDIA B200",
            {"torch": "2.11.0+cu130", "triton": "3.6.0", "cuda": "13.0"},
            "sha256:83c9b6e78d493927f18878d57448d9a0d2221a70840b562455b2665a2897ba19",
        ),
        (
            "NVIDIA GB200",
            {"torch": "2.9.1+cu130", "triton": "3.3.0", "cuda": "13.0"},
            "sha256:1766500d1b1ecc9787a211f3c98e76bf311671f443544a305252cb4d9564be8b",
        ),
        (
            "B200",
            LIBS_280,
            "sha256:fab66b2432c871c87741ae811fa74968ffdd7c5815702ec5fe0defda117ec563",
        ),
        (
            "NVIDIA B200",
            {},
            "sha256:b1986fc3857033cdf69b3bfa45ed8e9a510b7aaa2f2cbb13b82caab68602bc8e",
        ),
        (
            "NVIDIA B200",
            {"torch": "2.8.0+cu128", "cuda": "12.8"},
            "sha256:28b918ab38be520b125767e4a05ee7666e42b7c005f44e4dbfca3bcb15912fa5",
        ),
    ],
)
def test_environment_digests(hardware, libs, expected):
    assert ki.environment_digest({"hardware": hardware, "libs": libs}) == expected


def test_environment_canonical_body():
    spec = ki.environment_spec(
        {"hardware": "NVIDIA B200", "libs": LIBS_280, "hardware_id": "ignored"}
    )
    assert canonical_json(
        {"apiVersion": ki.API_VERSION, "kind": "ExecutionEnvironment", "spec": spec}
    ) == (
        b'{"apiVersion":"kernelindex.dev/v1alpha1","kind":"ExecutionEnvironment","spec":{"hardware":{"architecture":'
        b'"unknown","product":"NVIDIA B200","vendor":"nvidia"},"software":{"cudaToolkit":"12.8","framework":{"name":'
        b'"pytorch","version":"2.8.0+cu128"},"libraries":{"triton":"3.4.0"}}}}'
    )
    assert ki.environment_spec({"hardware": "NVIDIA B200", "libs": {}})["software"] == {}


def test_environment_libs_key_mapping():
    software = ki.environment_spec(
        {
            "hardware": "H100",
            "libs": {
                "cuda_cpp": "1",
                "CUDA": "2",
                "pytorch": "3",
                "Triton": "4",
                "torch": "",
                "cuda": "",
            },
        }
    )["software"]
    # cuda_cpp and CUDA both map to "cuda" (the later wins); only exact "cuda"/"torch" are special.
    assert software == {
        "cudaToolkit": "",
        "libraries": {"cuda": "2", "pytorch": "3", "triton": "4"},
    }


@pytest.mark.parametrize(
    ("environment", "code"),
    [
        ({"hardware": "B200", "libs": {"torch": 2.8}}, "numeric_lib_version"),
        ({"hardware": "B200", "libs": {"torch": None}}, "invalid_field_type"),
        ({"hardware": "B200", "libs": {"3rdparty": "1"}}, "invalid_name"),
        ({"hardware": "B200", "libs": {"triton": "x" * 101}}, "value_too_long"),
        ({"hardware": "B200"}, "missing_field"),
        ({"device": "B200", "libs": {}}, "missing_field"),
        ({"hardware": "x" * 201, "libs": {}}, "value_too_long"),
    ],
)
def test_environment_violations(environment, code):
    assert error_code(ki.environment_spec, environment) == code


def test_environment_metadata_and_summary():
    environment = {"hardware": "NVIDIA B200", "libs": LIBS_280}
    assert ki.environment_metadata(environment) == {
        "name": "sol-trace-nvidia-b200-2-8-0-cu128-3-4-0-12-8",
        "title": "NVIDIA B200 (trace-reported software)",
    }
    spec = ki.environment_spec(environment)
    assert ki.environment_summary(spec) == "CUDA 12.8 · pytorch 2.8.0+cu128 · flashinfer-bench"
    assert (
        ki.environment_summary(ki.environment_spec({"hardware": "B200", "libs": {}}))
        == "flashinfer-bench"
    )
    assert ki.gpu_display(spec) == "NVIDIA B200 (unknown)"
    assert ki.cuda_major(spec) == 12
    assert ki.cuda_major(ki.environment_spec({"hardware": "B200", "libs": {"cuda": "V13"}})) is None
    assert ki.cuda_major(ki.environment_spec({"hardware": "B200", "libs": {}})) is None


# -- §7 correctness key -------------------------------------------------------------------------


def test_correctness_keys():
    assert ki.correctness_key({"correctness": {"comparator": "sol_execbench_eval"}}) == NO_TOLERANCE
    assert ki.digest({"correctness": {"comparator": "sol_execbench_eval"}}) == NO_TOLERANCE
    assert (
        ki.WORKLOAD_COMPARATOR == ki.RUN_COMPARATOR == "sol_execbench_eval"
    )  # comparator-string quirk
    assert ki.PROTOCOL_SPEC["correctness"]["comparator"] == "flashinfer_bench_eval"


# -- §8 implementations -------------------------------------------------------------------------


def solution_74a870() -> dict[str, Any]:
    path = (
        GOLDEN_DIR
        / "dataset/solutions/baseline/rmsnorm/fused_add_rmsnorm_h2048/flashinfer_wrapper_74a870.json"
    )
    return json.loads(path.read_text(encoding="utf-8"))


@requires_shared
def test_implementation_74a870():
    spec = ki.implementation_spec(solution_74a870(), rmsnorm_definition(), OP_RMSNORM, REVISION)
    assert canonical_json(
        {"apiVersion": ki.API_VERSION, "kind": "ImplementationRevision", "spec": spec}
    ) == (
        b'{"apiVersion":"kernelindex.dev/v1alpha1","kind":"ImplementationRevision","spec":{"callable":{"language":'
        b'"python","path":"main.py","symbol":"run"},"licensing":{"concluded":"Apache-2.0","declared":"Apache-2.0"},'
        b'"operation":{"specDigest":"sha256:b28db409e15dc71e859a5c34624d6914398788b9ba4a89f2b79a826b3ab1da7e"},'
        b'"projectRevision":{"commit":"da915083d4c7c5e61aa3005e3d17ae488e0fc71c","repository":"https://huggingface.co'
        b'/datasets/flashinfer-ai/flashinfer-trace"},"source":{"contentDigest":"sha256:02873435d0ae77c2e69f74a8450aac2'
        b'b4bc93f197ef06afc22060c310eae4958","fileName":"main.py","sizeBytes":411},"support":{"dtypes":["bf16"],'
        b'"hardwareArchitectures":["unknown"],"productsTested":["NVIDIA A100","NVIDIA B200","NVIDIA GeForce RTX 4090",'
        b'"NVIDIA H100","NVIDIA H20","NVIDIA H200"]}}}'
    )
    assert (
        ki.implementation_digest(solution_74a870(), rmsnorm_definition(), OP_RMSNORM, REVISION)
        == IMPL_74A870
    )
    placeholder = "sha256:" + "1" * 64
    assert (
        ki.implementation_digest(solution_74a870(), rmsnorm_definition(), placeholder, REVISION)
        == "sha256:635f4b7b595c62b00c85f9d65a660f8357ecb5bbe06fbfdda8d5d83c3876eacd"
    )


@requires_shared
def test_implementation_ignores_metadata_but_not_revision():
    solution = solution_74a870()
    solution.update(name="renamed", author="someone", description="x", extra=[1])
    solution["spec"]["dependencies"] = []
    solution["sources"].append({"path": "other.py", "content": "pass\n"})
    assert (
        ki.implementation_digest(solution, rmsnorm_definition(), OP_RMSNORM, REVISION)
        == IMPL_74A870
    )
    assert (
        ki.implementation_digest(solution, rmsnorm_definition(), OP_RMSNORM, "0" * 40)
        != IMPL_74A870
    )
    assert (
        error_code(ki.implementation_spec, solution, rmsnorm_definition(), OP_RMSNORM, "HEAD")
        == "invalid_revision"
    )


def test_implementation_variants():
    solution = {
        "name": "s",
        "definition": "fused_add_rmsnorm_h2048",
        "spec": {
            "language": "cuda_cpp",
            "target_hardware": ["LOCAL", "B200", "H100", "NVIDIA_B200"],
            "entry_point": "k.cu",
        },
        "sources": [{"path": "a.cu", "content": ""}, {"path": "k.cu", "content": "é"}],
    }
    spec = ki.implementation_spec(solution, mla_definition(), OP_MLA, REVISION)
    assert spec["callable"] == {"language": "cuda", "path": "k.cu"}  # no "::": no symbol
    assert spec["support"] == {
        "hardwareArchitectures": ["sm_100", "sm_90"],
        "productsTested": ["NVIDIA B200", "NVIDIA H100"],
        "dtypes": ["bf16", "fp32", "int32"],  # inputs only
    }
    assert spec["source"] == {
        "contentDigest": ki.text_digest("é"),
        "fileName": "k.cu",
        "sizeBytes": 2,
    }

    solution["spec"] = {"target_hardware": ["LOCAL"], "entry_point": "missing.py::run"}
    spec = ki.implementation_spec(solution, mla_definition(), OP_MLA, REVISION)
    # entry path not found: the first source is primary; its content is empty, so no source.
    assert spec["callable"] == {"language": "unknown", "path": "a.cu", "symbol": "run"}
    assert spec["support"]["hardwareArchitectures"] == ["unknown"]
    assert spec["support"]["productsTested"] == []
    assert "source" not in spec

    solution["sources"] = None
    solution["spec"] = None
    spec = ki.implementation_spec(solution, mla_definition(), OP_MLA, REVISION)
    assert spec["callable"] == {"language": "unknown"}
    assert "source" not in spec


# -- §9 runs ------------------------------------------------------------------------------------


@requires_shared
def test_run_rmsnorm_line_one():
    trace = rmsnorm_line()
    spec = ki.run_spec(
        trace,
        implementation_digest=IMPL_74A870,
        workload_digest=WL_RMSNORM,
        environment_digest=ENV_B200_280,
    )
    assert canonical_json({"apiVersion": ki.API_VERSION, "kind": "BenchmarkRun", "spec": spec}) == (
        b'{"apiVersion":"kernelindex.dev/v1alpha1","kind":"BenchmarkRun","spec":{"correctness":{"comparator":'
        b'"sol_execbench_eval","maximumAbsoluteError":0,"maximumRelativeError":0},"environmentDigest":"sha256:f4292a8b'
        b'e127b7230cd3995c1d605fb6c644e2c2f94566e1d28cc1be766ca5d5","implementationDigest":"sha256:79278567a15eac7d7c'
        b'781ebcfa7d8e307243a6e86e9efe02f3bf209e944419b2","observedAt":"2025-10-21T13:37:42.930Z","protocolDigest":'
        b'"sha256:7d44d206ad086b4bece35ce31f6531ebb11f07e0d9dcfb74c75be86d3ec02095","sourceNative":{"benchmark":'
        b'"fused_add_rmsnorm_h2048","metrics":{"latency_ms":0.007666674151122668,"reference_latency_ms":'
        b'0.055197691422457264,"speedup_factor":7.199691852610483},"source":"flashinfer-bench"},"status":"passed",'
        b'"timing":{"latencyNs":{"mean":7667},"primaryStatistic":"mean"},"workloadDigest":"sha256:da6158f061b76f71c7'
        b'4e65da2aef0c8d5581fbd74b5dc3bb87721cff79c091e8"}}'
    )
    implementation = ki.implementation_digest(
        solution_74a870(), rmsnorm_definition(), OP_RMSNORM, REVISION
    )
    found = identify(trace, implementation_digest=implementation)
    assert (
        found.run_digest
        == "sha256:3415d6d944b99ec302fdeff8e83a3cdaa5ab1bdf56f3cba6d0da2514fe348ea9"
    )
    assert (
        found.comparison_key
        == "sha256:78598469f9a31306480b1ceab43991bd99a95b837a309d2bc7bda80ba703dcf6"
    )
    assert found.workload_digest == WL_RMSNORM
    assert found.operation_digest == OP_RMSNORM
    assert found.environment_digest == ENV_B200_280
    assert found.protocol_digest == PROTOCOL
    assert found.correctness_key == NO_TOLERANCE
    assert (found.ki_status, found.latency_ns, found.observed_at) == (
        "passed",
        7667,
        "2025-10-21T13:37:42.930Z",
    )
    assert found.eligibility_reasons == ()
    assert found.evidence_level == "reported"
    assert (
        found.external_id == "trace/flashinfer_wrapper_74a870/906efdc6-aa3b-4b4f-a291-3a2be509d354"
    )
    assert (found.max_absolute_error, found.max_relative_error) == (0, 0)


def test_run_log_adds_evidence():
    trace = rmsnorm_line()
    trace["evaluation"]["log"] = "hello\n"
    found = identify(trace)
    log_digest = ki.text_digest("hello\n")
    assert log_digest.startswith("sha256:5891b5b5")
    assert (
        found.run_digest
        == "sha256:1cbb86fb7762e064bd76cf2f06d02cef0a2459568211d4e2398cfb89571aaf64"
    )
    assert found.evidence_level == "reproducible"
    assert found.log_digest == log_digest
    spec = ki.run_spec(
        trace,
        implementation_digest=IMPL_74A870,
        workload_digest=WL_RMSNORM,
        environment_digest=ENV_B200_280,
    )
    assert spec["evidence"] == {
        "logs": {"uri": f"kernelindex:artifact/{log_digest}", "digest": log_digest}
    }
    # the comparison key does not depend on the log
    assert found.comparison_key == identify(rmsnorm_line()).comparison_key


def test_missing_log_equals_empty_log():
    base = identify(rmsnorm_line())
    for log in (None, "", "absent"):
        trace = rmsnorm_line()
        if log == "absent":
            del trace["evaluation"]["log"]
        else:
            trace["evaluation"]["log"] = log
        found = identify(trace)
        assert (found.run_digest, found.evidence_level) == (base.run_digest, "reported")
    assert ki.evidence_level(None) == ki.evidence_level("") == "reported"
    assert ki.evidence_level("x") == "reproducible"


def test_failed_line():
    found = identify(
        GEMM_FAILED_LINE, gemm_definition(), implementation_digest="sha256:" + "2" * 64
    )
    assert (
        found.comparison_key
        == "sha256:90fc60014f77d68ce227c1b030b6e46d6d72c081f24c23a3ae5d2121ecb9fc09"
    )
    assert found.workload_digest == WL_GEMM
    assert found.operation_digest == OP_GEMM
    assert (found.ki_status, found.latency_ns, found.has_timing, found.metric_key) == (
        "runtime_error",
        None,
        False,
        "none",
    )
    assert found.eligibility_reasons == ("STATUS_RUNTIME_ERROR", "MISSING_PRIMARY_METRIC")
    assert (found.max_absolute_error, found.max_relative_error) == (None, None)
    spec = ki.run_spec(
        GEMM_FAILED_LINE, implementation_digest="i", workload_digest="w", environment_digest="e"
    )
    assert spec == {
        "implementationDigest": "i",
        "workloadDigest": "w",
        "protocolDigest": PROTOCOL,
        "environmentDigest": "e",
        "status": "runtime_error",
        "sourceNative": {"source": "flashinfer-bench", "benchmark": "gemm_n4096_k4096"},
        "observedAt": "2025-10-16T01:19:10.058Z",
    }
    assert canonical_json(
        {
            "correctness": NO_TOLERANCE,
            "environment": ENV_B200_280,
            "metric": "none",
            "operation": OP_GEMM,
            "protocol": PROTOCOL,
            "v": 1,
            "workload": WL_GEMM,
        }
    ) == canonical_json(
        {
            "v": 1,
            "operation": OP_GEMM,
            "workload": WL_GEMM,
            "protocol": PROTOCOL,
            "environment": ENV_B200_280,
            "correctness": NO_TOLERANCE,
            "metric": "none",
        }
    )


@pytest.mark.parametrize(("status", "ki_status"), list(ki.STATUS_MAP.items()))
def test_status_map(status, ki_status):
    trace = rmsnorm_line()
    trace["evaluation"]["status"] = status
    found = identify(trace)
    assert found.ki_status == ki_status
    expected_reasons = () if ki_status == "passed" else ("STATUS_" + ki_status.upper(),)
    assert found.eligibility_reasons == expected_reasons


def test_status_map_values():
    assert ki.STATUS_MAP["REWARD_HACK"] == "suspected_reward_hack"
    assert ki.eligibility_reasons("suspected_reward_hack", True) == ["STATUS_SUSPECTED_REWARD_HACK"]
    assert ki.eligibility_reasons("passed", False) == ["MISSING_PRIMARY_METRIC"]
    assert ki.eligibility_reasons("passed", True) == []
    assert ki.eligibility_reasons(
        "timeout", False, published=False, retracted=True, superseded=True
    ) == ["UNPUBLISHED", "STATUS_TIMEOUT", "RETRACTED", "SUPERSEDED", "MISSING_PRIMARY_METRIC"]


@pytest.mark.parametrize("status", ["INCORRECT", "passed", "Passed", "PASSED ", ""])
def test_unknown_status(status):
    trace = rmsnorm_line()
    trace["evaluation"]["status"] = status
    assert error_code(identify, trace) == "unknown_status"


@pytest.mark.parametrize(
    ("relative", "absolute", "expected"),
    [
        (0.0, "Infinity", {"comparator": "sol_execbench_eval", "maximumRelativeError": 0}),
        ("NaN", 0.5, {"comparator": "sol_execbench_eval", "maximumAbsoluteError": 0.5}),
        ("Infinity", "NaN", {"comparator": "sol_execbench_eval"}),
        (
            math.nan,
            math.inf,
            {"comparator": "sol_execbench_eval"},
        ),  # from a lenient parser: no bound
        (
            1,
            2**60,
            {
                "comparator": "sol_execbench_eval",
                "maximumAbsoluteError": float(2**60),
                "maximumRelativeError": 1,
            },
        ),
    ],
)
def test_error_bounds(relative, absolute, expected):
    trace = rmsnorm_line()
    trace["evaluation"]["correctness"] = {
        "max_relative_error": relative,
        "max_absolute_error": absolute,
        "extra": None,
    }
    spec = ki.run_spec(
        trace, implementation_digest="i", workload_digest="w", environment_digest="e"
    )
    assert spec["correctness"] == expected
    found = identify(trace)
    assert found.max_relative_error == expected.get("maximumRelativeError")
    assert found.max_absolute_error == expected.get("maximumAbsoluteError")


def test_error_bound_example_from_corpus():
    trace = rmsnorm_line()
    trace["evaluation"]["correctness"] = {
        "max_relative_error": 0.0,
        "max_absolute_error": "Infinity",
        "extra": None,
    }
    spec = ki.run_spec(
        trace, implementation_digest="i", workload_digest="w", environment_digest="e"
    )
    assert (
        canonical_json(spec["correctness"])
        == b'{"comparator":"sol_execbench_eval","maximumRelativeError":0}'
    )


def test_bare_nan_tokens_do_not_crash():
    text = RMSNORM_LINE.replace('"max_relative_error":0.0', '"max_relative_error":NaN').replace(
        '"max_absolute_error":0.0', '"max_absolute_error":-Infinity'
    )
    found = identify(json.loads(text))
    assert (found.max_absolute_error, found.max_relative_error) == (None, None)


@pytest.mark.parametrize(
    ("correctness", "code"),
    [
        ({"max_relative_error": -1e-9, "max_absolute_error": 0}, "negative_error_bound"),
        ({"max_relative_error": 0, "max_absolute_error": -1}, "negative_error_bound"),
        ({"max_relative_error": 0}, "missing_field"),
        ({"max_relative_error": 0, "max_absolute_error": None}, "invalid_field_type"),
        ({"max_relative_error": 0, "max_absolute_error": "inf"}, "invalid_field_type"),
        ({"max_relative_error": 0, "max_absolute_error": True}, "invalid_field_type"),
        ({"max_relative_error": 0, "max_absolute_error": 0, "has_nan": 1}, "invalid_field_type"),
        ("bad", "invalid_field_type"),
    ],
)
def test_error_bound_violations(correctness, code):
    trace = rmsnorm_line()
    trace["evaluation"]["correctness"] = correctness
    assert error_code(identify, trace) == code


def test_negative_zero_bound_is_not_negative():
    trace = rmsnorm_line()
    trace["evaluation"]["correctness"] = {"max_relative_error": -0.0, "max_absolute_error": 0}
    assert identify(trace).run_digest == identify(rmsnorm_line()).run_digest


def _ms_for_product(product: float) -> float:
    """A latency_ms whose IEEE product with 1e6 is exactly `product`."""
    candidate = product / 1e6
    for _ in range(64):
        if candidate * 1e6 == product:
            return candidate
        candidate = math.nextafter(candidate, math.inf if candidate * 1e6 < product else -math.inf)
    raise AssertionError(f"no double maps to {product!r}")


@pytest.mark.parametrize(
    ("latency_ms", "ns"),
    [
        (0.06885697687169566, 68857),
        (0.007666674151122668, 7667),
        (0.0000025, 3),  # 2.5 exactly: half up (Python's round gives 2)
        (0.0000035, 4),
        (0.0000045, 5),  # Python's round gives 4
        (1e-12, 0),  # positive, but rounds to 0
        (_ms_for_product(1.5), 2),
        (_ms_for_product(math.nextafter(2.5, 0)), 2),
        (2, 2_000_000),
    ],
)
def test_latency_ns(latency_ms, ns):
    assert ki.latency_ns(latency_ms) == ns


@pytest.mark.parametrize(
    ("value", "rounded"),
    [
        (0.49999999999999994, 0),
        (0.5, 1),
        (2.5, 3),
        (3.5, 4),
        (2.4999999999999996, 2),
        (68856.97687169566, 68857),
        (0.0, 0),
    ],
)
def test_js_round(value, rounded):
    # No double latency_ms × 1e6 lands exactly on 0.49999999999999994, so test the rounding itself.
    assert ki.js_round(value) == rounded
    assert math.floor(0.49999999999999994 + 0.5) == 1  # why floor(x + 0.5) is wrong


@pytest.mark.parametrize(
    ("latency", "code"),
    [
        (0, "nonpositive_latency"),
        (-1.0, "nonpositive_latency"),
        (True, "invalid_field_type"),
        (None, "missing_field"),
        ("1", "invalid_field_type"),
        (math.nan, "non_finite_number"),
    ],
)
def test_latency_violations(latency, code):
    trace = rmsnorm_line()
    trace["evaluation"]["performance"]["latency_ms"] = latency
    assert error_code(identify, trace) == code


def test_source_native_metrics():
    trace = rmsnorm_line()
    performance = trace["evaluation"]["performance"]
    performance["reference_latency_ms"] = None
    performance["speedup_factor"] = 0
    spec = ki.run_spec(
        trace, implementation_digest="i", workload_digest="w", environment_digest="e"
    )
    assert spec["sourceNative"]["metrics"] == {
        "latency_ms": 0.007666674151122668,
        "speedup_factor": 0,
    }
    del performance["speedup_factor"]
    spec = ki.run_spec(
        trace, implementation_digest="i", workload_digest="w", environment_digest="e"
    )
    assert spec["sourceNative"]["metrics"] == {"latency_ms": 0.007666674151122668}
    assert "externalId" not in spec["sourceNative"]


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        ("2025-10-21T08:01:30.954000", "2025-10-21T08:01:30.954Z"),
        ("2025-10-21T13:37:42.930971", "2025-10-21T13:37:42.930Z"),
        ("2025-10-21T13:37:42.9999999", "2025-10-21T13:37:42.999Z"),
        ("2025-10-21T13:37:42", "2025-10-21T13:37:42.000Z"),
        ("2025-10-21 13:37:42", "2025-10-21T13:37:42.000Z"),
        ("2026-03-17T14:19:52.543776Z", "2026-03-17T14:19:52.543Z"),
        ("2025-10-21T13:37:42.5+02:00", "2025-10-21T11:37:42.500Z"),
        ("2025-10-21T13:37", "2025-10-21T13:37:00.000Z"),
        ("2025-10-21T00:30:00-01:30", "2025-10-21T02:00:00.000Z"),
        ("2025-01-01T00:30:00+01:00", "2024-12-31T23:30:00.000Z"),
        ("2025-10-21T13:37:42.1z", "2025-10-21T13:37:42.100Z"),
    ],
)
def test_observed_at(timestamp, expected):
    assert ki.observed_at(timestamp) == expected


@pytest.mark.parametrize(
    "timestamp",
    [
        "",
        "yesterday",
        "2025-10-21",
        "2025-13-01T00:00:00",
        "2025-02-30T00:00:00",
        "2025-10-21T24:00:00",
        "2025-10-21T13:37:42.",
        "2025-10-21T13:37:42+0200",
        " 2025-10-21T13:37:42",
        "2025-10-21T13:37:42+24:00",
    ],
)
def test_bad_timestamps(timestamp):
    assert error_code(ki.observed_at, timestamp) == "bad_timestamp"
    trace = rmsnorm_line()
    trace["evaluation"]["timestamp"] = timestamp
    assert error_code(identify, trace) == "bad_timestamp"


def test_the_timestamp_memo_answers_only_for_the_same_object():
    """plain_timestamp remembers the last valid timestamp it saw (a line asks three times):
    another string, of the same text or not, is checked afresh, in any order."""
    from tracehouse.kernelindex.run import plain_timestamp

    valid = "2025-10-21T13:37:42.930971"
    same_text = "".join(valid)  # equal, another object
    assert plain_timestamp(valid) is True and plain_timestamp(valid) is True
    assert plain_timestamp("2025-02-30T00:00:00") is False
    assert plain_timestamp(same_text) is True and plain_timestamp(valid) is True
    assert plain_timestamp(None) is None and plain_timestamp("2025-10-21 13:37:42") is None
    assert ki.observed_at(valid) == "2025-10-21T13:37:42.930Z"
    assert error_code(ki.observed_at, "2025-10-21T24:00:00") == "bad_timestamp"


def test_run_digest_sensitivity():
    base = identify(rmsnorm_line())

    def changed(mutate: Any) -> ki.TraceIdentity:
        trace = rmsnorm_line()
        mutate(trace)
        return identify(trace)

    same = [
        lambda t: t["evaluation"]["correctness"].update(
            extra={"x": 1}, has_nan=False, has_inf=None
        ),
        lambda t: t["evaluation"].update(timestamp="2025-10-21T13:37:42.930999"),
        lambda t: t["workload"]["inputs"]["weight"].update(path="p"),
        lambda t: t.update(extra="ignored"),
    ]
    for mutate in same:
        assert changed(mutate).run_digest == base.run_digest
    different = [
        lambda t: t["evaluation"].update(timestamp="2025-10-21T13:37:42.931"),
        lambda t: t["evaluation"]["performance"].update(latency_ms=0.007666674151122669),
        lambda t: t["evaluation"]["performance"].update(speedup_factor=7.2),
        lambda t: t["evaluation"]["correctness"].update(max_relative_error=1e-3),
    ]
    for mutate in different:
        found = changed(mutate)
        assert found.run_digest != base.run_digest
        assert found.comparison_key == base.comparison_key


def test_big_integer_axis_rejects_line():
    trace = rmsnorm_line()
    trace["workload"]["axes"]["batch_size"] = 2**53
    assert error_code(identify, trace) == "integer_out_of_range"
    assert error_code(ki.validate_trace_line, trace) == "integer_out_of_range"


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda t: t.update(definition=None), "missing_field"),
        (lambda t: t.update(definition=1), "invalid_field_type"),
        (lambda t: t.update(solution=1), "invalid_field_type"),
        (lambda t: t.update(workload=None), "missing_field"),
        (lambda t: t["workload"].update(uuid=5), "invalid_field_type"),
        (lambda t: t["workload"].update(axes=[]), "invalid_field_type"),
        (lambda t: t["workload"].update(inputs=[]), "invalid_field_type"),
        (lambda t: t["workload"].update(baseline_latency_ms="1"), "invalid_field_type"),
        (lambda t: t.update(evaluation=[]), "invalid_field_type"),
        (lambda t: t["evaluation"].update(status=None), "missing_field"),
        (lambda t: t["evaluation"].update(log=1), "invalid_field_type"),
        (lambda t: t["evaluation"].pop("timestamp"), "missing_field"),
        (lambda t: t["evaluation"].pop("environment"), "missing_field"),
        (lambda t: t["evaluation"]["environment"].update(hardware=1), "invalid_field_type"),
        (
            lambda t: t["evaluation"]["environment"].update(libs={"cuda": 12.8}),
            "numeric_lib_version",
        ),
        (
            lambda t: t["evaluation"]["performance"].update(reference_latency_ms="x"),
            "invalid_field_type",
        ),
        (lambda t: t["evaluation"].update(performance=1), "invalid_field_type"),
    ],
)
def test_trace_line_field_checks(mutate, code):
    trace = rmsnorm_line()
    mutate(trace)
    assert error_code(ki.validate_trace_line, trace) == code
    assert error_code(identify, trace) == code


def test_valid_optional_nulls():
    trace = rmsnorm_line()
    trace["solution"] = None
    trace["workload"].update(inputs=None, tolerance=None, baseline_latency_ms=None, sol_ms=0.5)
    trace["evaluation"].update(log=None)
    trace["evaluation"]["performance"].update(reference_latency_ms=None, speedup_factor=None)
    ki.validate_trace_line(trace)


def test_lookup_failures():
    trace = rmsnorm_line()
    assert (
        error_code(
            ki.identify_trace_line,
            trace,
            definition=None,
            operation_digest=None,
            implementation_digest=None,
        )
        == "unknown_definition"
    )
    trace["evaluation"] = None
    assert error_code(identify, trace) == "missing_evaluation"
    del trace["evaluation"]
    assert error_code(identify, trace) == "missing_evaluation"


def test_without_implementation():
    found = identify(rmsnorm_line(), implementation_digest=None)
    assert found.run_digest is None
    assert found.kernelindex_skip_reason == "unknown_solution"
    assert (
        found.comparison_key
        == "sha256:78598469f9a31306480b1ceab43991bd99a95b837a309d2bc7bda80ba703dcf6"
    )
    found = ki.identify_trace_line(
        rmsnorm_line(),
        definition=rmsnorm_definition(),
        operation_digest=None,
        implementation_digest=None,
    )
    assert found.operation_digest == OP_RMSNORM


def test_run_title_limit():
    trace = rmsnorm_line()
    trace["solution"] = "s" * 200
    assert error_code(identify, trace) == "title_too_long"
    trace["solution"] = "s" * (200 - len(" · fused_add_rmsnorm_h2048"))
    assert identify(trace).run_title.startswith("sss")


# -- §2.4 step 4: first line wins ---------------------------------------------------------------


def test_first_line_wins_override():
    first = identify(rmsnorm_line())
    other = rmsnorm_line()
    other["workload"]["axes"]["batch_size"] = 99  # same uuid, other axes
    own = identify(other)
    assert own.workload_digest != first.workload_digest
    reused = identify(other, workload_digest_override=first.workload)
    assert reused.workload_digest == WL_RMSNORM
    assert reused.comparison_key == first.comparison_key
    assert reused.workload is first.workload
    assert identify(other, workload_digest_override=WL_RMSNORM).workload_digest == WL_RMSNORM


def test_first_line_wins_across_definitions():
    """A uuid reused by another definition attaches the first definition's case (and operation)."""
    first = identify(rmsnorm_line())
    trace = copy.deepcopy(GEMM_FAILED_LINE)
    trace["workload"]["uuid"] = rmsnorm_line()["workload"]["uuid"]
    trace["workload"]["axes"] = {"M": 3}  # would be unbound for rmsnorm: not rebuilt, not rejected
    found = identify(trace, gemm_definition(), workload_digest_override=first.workload)
    assert found.operation_digest == OP_RMSNORM
    assert found.workload_digest == WL_RMSNORM


def test_error_after_workload_carries_the_workload():
    trace = rmsnorm_line()
    trace["evaluation"]["status"] = "INCORRECT"
    with pytest.raises(ki.IdentityError) as raised:
        identify(trace)
    assert raised.value.workload is not None
    assert raised.value.workload.workload_digest == WL_RMSNORM
    trace["workload"]["axes"] = {}
    with pytest.raises(ki.IdentityError) as raised:
        identify(trace)
    assert raised.value.code == "unbound_axis"
    assert raised.value.workload is None


@settings(max_examples=100, deadline=None)
@given(
    st.permutations(["hidden_states", "residual", "weight"]),
    st.integers(min_value=0, max_value=2**40),
)
def test_key_order_never_matters(order, batch):
    trace = rmsnorm_line()
    trace["workload"]["axes"]["batch_size"] = batch
    shuffled = copy.deepcopy(trace)
    shuffled["workload"]["inputs"] = {name: trace["workload"]["inputs"][name] for name in order}
    shuffled["evaluation"] = dict(reversed(list(trace["evaluation"].items())))
    a, b = identify(trace), identify(shuffled)
    assert (a.run_digest, a.comparison_key) == (b.run_digest, b.comparison_key)
    # and the cached path agrees with the uncached one
    assert a.workload_digest == ki.workload_digest(
        trace["workload"], rmsnorm_definition(), OP_RMSNORM
    )


run_variants = st.fixed_dictionaries(
    {
        "definition": st.text(min_size=1, max_size=30),
        "solution": st.one_of(st.none(), st.text(max_size=20)),
        "status": st.sampled_from(list(ki.STATUS_MAP)),
        "log": st.one_of(st.none(), st.text(max_size=20)),
        "timestamp": st.sampled_from(["2025-10-21T13:37:42.930971", "2026-03-17T14:19:52Z"]),
        "correctness": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {
                    "max_relative_error": st.one_of(
                        st.floats(min_value=0, allow_infinity=False),
                        st.sampled_from(["Infinity", "NaN"]),
                        st.integers(0, 2**60),
                    ),
                    "max_absolute_error": st.one_of(
                        st.floats(min_value=0, allow_infinity=False),
                        st.sampled_from(["Infinity", "NaN"]),
                    ),
                }
            ),
        ),
        "performance": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"latency_ms": st.floats(min_value=1e-9, max_value=1e6)},
                optional={
                    "reference_latency_ms": st.one_of(
                        st.none(), st.floats(min_value=0, max_value=1e9)
                    ),
                    "speedup_factor": st.one_of(
                        st.none(),
                        st.floats(allow_nan=False, allow_infinity=False),
                        st.integers(-5, 5),
                    ),
                },
            ),
        ),
    }
)


@settings(max_examples=400, deadline=None)
@given(run_variants)
def test_run_writer_matches_generic_canonical_json(variant):
    trace = rmsnorm_line()
    trace["definition"] = variant["definition"]
    trace["solution"] = variant["solution"]
    evaluation = trace["evaluation"]
    for name in ("status", "log", "timestamp", "correctness", "performance"):
        evaluation[name] = variant[name]
    digests = {
        "implementation_digest": "sha256:i\u00e9",
        "workload_digest": WL_RMSNORM,
        "environment_digest": ENV_B200_280,
    }
    spec = ki.run_spec(trace, **digests)
    assert ki.run_digest(trace, **digests) == manifest_digest("BenchmarkRun", spec)


def test_run_body_template():
    import hashlib

    found = identify(rmsnorm_line(), implementation_digest=None, run_body_template=True)
    assert found.run_digest is None
    template = found.run_body_template
    assert template is not None and template.count(ki.RUN_TEMPLATE_SLOT) == 2
    head, middle, tail = template.split(chr(0))
    body = head + IMPL_74A870 + middle + WL_RMSNORM + tail
    assert (
        "sha256:" + hashlib.sha256(body.encode()).hexdigest() == identify(rmsnorm_line()).run_digest
    )
    trace = rmsnorm_line()
    trace["definition"] = "has\x00nul"  # escaped as \u0000 in the body: never a slot
    spec = ki.run_spec(
        trace, implementation_digest="i", workload_digest="w", environment_digest="e"
    )
    assert ki.run_body_template(spec).count(chr(0)) == 2
    assert identify(rmsnorm_line()).run_body_template is None


def test_fast_trace_identity_constructor_equals_the_dataclass():
    import dataclasses

    found = identify(rmsnorm_line())
    fields = {field.name: getattr(found, field.name) for field in dataclasses.fields(found)}
    assert ki.TraceIdentity(**fields) == found
    assert set(vars(found)) == set(fields)
    assert hash(found) == hash(ki.TraceIdentity(**fields))
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.run_digest = "x"  # type: ignore[misc]


def test_orjson_and_json_inputs_agree():
    assert identify(orjson.loads(RMSNORM_LINE)) == identify(json.loads(RMSNORM_LINE))


# -- §11, §12 the stored record and its display -------------------------------------------------

RECORD_12_3 = """
{
  "run": {
    "apiVersion": "kernelindex.dev/v1alpha1",
    "kind": "BenchmarkRun",
    "metadata": {
      "name": "sol-trace-mla-paged-prefill-causal-h16-ckv512-kpe64-ps1-892d1b8f",
      "title": "flashinfer_wrapper_ea3787 · mla_paged_prefill_causal_h16_ckv512_kpe64_ps1"
    },
    "spec": {
      "implementationDigest": "sha256:bcc5e6b5c47e98f95a4c85f871621f8a2976c0963b289e9e14d9d10f13604c8b",
      "workloadDigest": "sha256:e8dda69aa7a1f340ea0da43a0830157a1b509ed018a1b89c3f434ffe28e975bd",
      "protocolDigest": "sha256:7d44d206ad086b4bece35ce31f6531ebb11f07e0d9dcfb74c75be86d3ec02095",
      "environmentDigest": "sha256:f4292a8be127b7230cd3995c1d605fb6c644e2c2f94566e1d28cc1be766ca5d5",
      "status": "passed",
      "correctness": {"comparator": "sol_execbench_eval", "maximumAbsoluteError": 0.03125, "maximumRelativeError": 24207.900390625},
      "timing": {"primaryStatistic": "mean", "latencyNs": {"mean": 68857}},
      "sourceNative": {
        "source": "flashinfer-bench",
        "benchmark": "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1",
        "metrics": {"latency_ms": 0.06885697687169566, "reference_latency_ms": 272.56801350911456, "speedup_factor": 3958.466169913369}
      },
      "observedAt": "2025-10-21T08:01:30.954Z"
    }
  },
  "protocol": {
    "apiVersion": "kernelindex.dev/v1alpha1",
    "kind": "BenchmarkProtocol",
    "metadata": {"name": "flashinfer-bench-trace", "title": "FlashInfer-Bench trace harness"},
    "spec": {
      "harness": {"name": "flashinfer-bench", "repository": "https://github.com/flashinfer-ai/flashinfer-bench"},
      "measurement": {"timer": "harness_reported", "primaryStatistic": "mean"},
      "correctness": {"reference": "definition reference implementation", "comparator": "flashinfer_bench_eval"},
      "comparability": {"family": "flashinfer_bench_trace"}
    }
  },
  "environment": {
    "apiVersion": "kernelindex.dev/v1alpha1",
    "kind": "ExecutionEnvironment",
    "metadata": {"name": "sol-trace-nvidia-b200-2-8-0-cu128-3-4-0-12-8", "title": "NVIDIA B200 (trace-reported software)"},
    "spec": {
      "hardware": {"vendor": "nvidia", "product": "NVIDIA B200", "architecture": "unknown"},
      "software": {"cudaToolkit": "12.8", "framework": {"name": "pytorch", "version": "2.8.0+cu128"}, "libraries": {"triton": "3.4.0"}}
    }
  }
}
"""


def test_end_to_end_record_12():
    trace = json.loads(MLA_LINE)
    found = identify(trace, mla_definition(), implementation_digest=IMPL_EA3787)
    assert (
        found.run_digest
        == "sha256:bdb410a7a9f8a6240d35fd3ab09f6fb4fd2574676254d2147916a1d7ccb30170"
    )
    assert (
        found.comparison_key
        == "sha256:04ea3f7140e33a224bf6eb0850cd25eac0ff008365448e7b65534897eebd1d6d"
    )
    assert (found.operation_digest, found.workload_digest) == (OP_MLA, WL_MLA)
    assert (found.environment_digest, found.protocol_digest, found.correctness_key) == (
        ENV_B200_280,
        PROTOCOL,
        NO_TOLERANCE,
    )
    assert (found.latency_ns, found.observed_at, found.evidence_level) == (
        68857,
        "2025-10-21T08:01:30.954Z",
        "reported",
    )
    assert (
        found.external_id == "trace/flashinfer_wrapper_ea3787/892d1b8f-f6fe-40ad-aa3f-b6d391753bd3"
    )

    environment = trace["evaluation"]["environment"]
    run_spec = ki.run_spec(
        trace,
        implementation_digest=IMPL_EA3787,
        workload_digest=WL_MLA,
        environment_digest=ENV_B200_280,
    )
    assert manifest_digest("BenchmarkRun", run_spec) == found.run_digest
    record = ki.record_manifest(
        run_spec,
        ki.run_metadata(trace["definition"], trace["solution"], found.workload_key),
        ki.environment_spec(environment),
        ki.environment_metadata(environment),
    )
    expected = json.loads(RECORD_12_3)
    assert record == expected
    assert list(record) == ["run", "protocol", "environment"]
    assert (found.run_name, found.run_title) == (
        expected["run"]["metadata"]["name"],
        expected["run"]["metadata"]["title"],
    )


def test_display_12_4():
    trace = json.loads(MLA_LINE)
    found = identify(trace, mla_definition(), implementation_digest=IMPL_EA3787)
    assert ki.format_latency_ns(found.latency_ns or 0) == "68.9 µs"
    assert ki.rank_line(1, found.observed_at, list(found.eligibility_reasons)) == (
        "Rank 1 in its comparison group · source-native comparison · observed 2025-10-21"
    )
    assert (
        ki.source_native_line(trace["evaluation"]["performance"]["speedup_factor"])
        == "3958.47× reference"
    )
    spec = ki.workload_case_spec(trace["workload"], mla_definition(), OP_MLA)
    assert ki.workload_display(spec, trace["workload"]["axes"]) == (
        "total_q = 1954 · num_pages = 989669 · len_indptr = 29 · num_kv_indices = 2044 · bf16"
    )
    assert ki.workload_metadata(trace["definition"], trace["workload"]) == {
        "name": "mla-paged-prefill-causal-h16-ckv512-kpe64-ps1-892d1b8f",
        "title": "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1 · total_q=1954, num_pages=989669, len_indptr=29, num_kv_indices=2044",
    }
    assert (
        ki.operation_metadata(mla_definition())["name"]
        == "mla-paged-prefill-causal-h16-ckv512-kpe64-ps1"
    )
    assert ki.implementation_metadata(
        {"name": "flashinfer_wrapper_ea3787", "author": "baseline"}, "baseline"
    ) == {
        "name": "flashinfer-wrapper-ea3787",
        "title": "flashinfer_wrapper_ea3787",
        "authors": ["baseline"],
        "labels": {"role": "baseline"},
    }
    assert (
        ki.implementation_slug("flashinfer_wrapper_ea3787")
        == "flashinfer-flashinfer-wrapper-ea3787"
    )
    assert (ki.project_slug("baseline"), ki.project_name("baseline")) == (
        "flashinfer-baseline",
        "FlashInfer-Bench baselines",
    )
    assert ki.rank_line(
        None, found.observed_at, ["STATUS_RUNTIME_ERROR", "MISSING_PRIMARY_METRIC"]
    ) == ("Not eligible to rank: STATUS_RUNTIME_ERROR, MISSING_PRIMARY_METRIC")
    assert ki.operation_tags(
        [
            "L1",
            "stage:prefill",
            "model:DeepSeek V3",
            "fi_api:flashinfer.mla.BatchMLAPagedAttentionWrapper",
            "tp:8",
            "tp:8",
        ]
    ) == [
        "stage-prefill",
        "model:deepseek-v3",
        "fi-api-flashinfer-mla-batchmlapagedattentionwrapper",
        "tp-8",
    ]


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0 ns"),
        (999, "999 ns"),
        (1000, "1.00 µs"),
        (7667, "7.67 µs"),
        (68857, "68.9 µs"),
        (1125, "1.13 µs"),
        (999_999, "1000.0 µs"),
        (1_500_000, "1.50 ms"),
        (12_345_678_901, "12.3 s"),
    ],
)
def test_format_latency(ns, text):
    assert ki.format_latency_ns(ns) == text


def test_workload_title_truncation():
    axes = {f"axis_{i}": i for i in range(40)}
    title = ki.workload_metadata("d", {"axes": axes, "uuid": "u"})["title"]
    assert len(title) == 200 and title.endswith("…")


def test_external_ids():
    assert ki.run_external_id(
        "flashinfer_wrapper_ea3787", "892d1b8f-f6fe-40ad-aa3f-b6d391753bd3"
    ) == ("trace/flashinfer_wrapper_ea3787/892d1b8f-f6fe-40ad-aa3f-b6d391753bd3")
    assert ki.run_external_id(None, "0656be253bc5") == "trace/unknown/0656be253bc5"
    assert ki.run_metadata("d", None, "0656be253bc5")["title"] == "unknown solution · d"


# -- golden files cross-checks ------------------------------------------------------------------


@requires_shared
def test_inline_fixtures_match_the_golden_files():
    root = GOLDEN_DIR / "dataset"
    for path, expected in [
        ("definitions/rmsnorm/fused_add_rmsnorm_h2048.json", OP_RMSNORM),
        ("definitions/gemm/gemm_n4096_k4096.json", OP_GEMM),
        ("definitions/mla_paged/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1.json", OP_MLA),
    ]:
        assert (
            ki.operation_digest(json.loads((root / path).read_text(encoding="utf-8"))) == expected
        )
    lines = (
        (root / "traces/baseline/rmsnorm/fused_add_rmsnorm_h2048.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    assert json.loads(lines[0]) == rmsnorm_line()
    mla = (
        root / "traces/baseline/mla_paged/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1.jsonl"
    ).read_text(encoding="utf-8")
    assert json.loads(MLA_LINE) in [json.loads(line) for line in mla.splitlines()]
    gemm = (root / "traces/baseline/gemm/gemm_n4096_k4096.jsonl").read_text(encoding="utf-8")
    assert GEMM_FAILED_LINE in [json.loads(line) for line in gemm.splitlines()]


@requires_shared
def test_quirk_cross_definition_solution():
    """§2.4: torch_matmul_254647 lines in gemm_n4096_k4096 get the k14336 implementation."""
    root = GOLDEN_DIR / "dataset"
    k14336 = json.loads(
        (root / "definitions/gemm/gemm_n4096_k14336.json").read_text(encoding="utf-8")
    )
    solution_path = root / "solutions/baseline/gemm/gemm_n4096_k14336/torch_matmul_254647.json"
    solution = json.loads(solution_path.read_text(encoding="utf-8"))
    assert solution["definition"] == "gemm_n4096_k14336"
    implementation_spec = ki.implementation_spec(
        solution, k14336, ki.operation_digest(k14336), REVISION
    )
    assert implementation_spec["operation"]["specDigest"] == ki.operation_digest(k14336) != OP_GEMM
    found = identify(
        GEMM_FAILED_LINE,
        gemm_definition(),
        implementation_digest=manifest_digest("ImplementationRevision", implementation_spec),
    )
    assert found.operation_digest == OP_GEMM  # workload and comparison key from gemm_n4096_k4096
    assert (
        found.comparison_key
        == "sha256:90fc60014f77d68ce227c1b030b6e46d6d72c081f24c23a3ae5d2121ecb9fc09"
    )


def test_comparison_key_text_equals_the_generic_serializer() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from tracehouse.kernelindex import PROTOCOL_DIGEST, comparison_key, metric_key
    from tracehouse.kernelindex import digest as generic_digest

    @given(st.text(), st.text(), st.text(), st.text(), st.booleans())
    def check(
        operation: str, workload: str, environment: str, correctness: str, timing: bool
    ) -> None:
        expected = generic_digest(
            {
                "v": 1,
                "operation": operation,
                "workload": workload,
                "protocol": PROTOCOL_DIGEST,
                "environment": environment,
                "correctness": correctness,
                "metric": metric_key(timing),
            }
        )
        assert comparison_key(operation, workload, environment, correctness, timing) == expected

    check()
