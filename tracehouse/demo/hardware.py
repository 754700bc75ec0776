"""Hardware as torch names it, with a crude roofline for plausible latencies."""

from __future__ import annotations

from dataclasses import dataclass

from tracehouse.demo.randomness import seeded_rng

DEFAULT_HARDWARE: tuple[str, ...] = (
    "NVIDIA B200",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA A800-SXM4-80GB",
)


@dataclass(frozen=True)
class Hardware:
    name: str
    arch: str  # nvcc compute capability suffix
    tflops: float  # dense bf16
    tbps: float  # HBM bandwidth
    launch_ms: float
    libs: dict[str, str]
    cuda_home: str
    cupti: bool  # False -> the "CUPTI is not installed" warning appears in logs


_KNOWN_HARDWARE: dict[str, Hardware] = {
    "NVIDIA B200": Hardware(
        "NVIDIA B200",
        "100a",
        2250.0,
        8.0,
        0.0042,
        {"torch": "2.9.1+cu130", "triton": "3.5.1", "tilelang": "0.1.6.post2", "cuda": "13.0"},
        "/usr/local/cuda-13.0",
        True,
    ),
    "NVIDIA H100 80GB HBM3": Hardware(
        "NVIDIA H100 80GB HBM3",
        "90a",
        989.0,
        3.35,
        0.0051,
        {"torch": "2.8.0+cu128", "triton": "3.4.0", "cuda": "12.8"},
        "/usr/local/cuda-12.8",
        True,
    ),
    "NVIDIA A800-SXM4-80GB": Hardware(
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


def hardware_profile(name: str) -> Hardware:
    known = _KNOWN_HARDWARE.get(name)
    if known is not None:
        return known
    rng = seeded_rng(0, "hardware", name)
    return Hardware(
        name,
        rng.choice(["80", "89", "90a"]),
        rng.uniform(150.0, 1000.0),
        rng.uniform(0.9, 3.4),
        rng.uniform(0.004, 0.008),
        {"torch": "2.9.1+cu128", "triton": "3.5.1", "cuda": "12.8"},
        "/usr/local/cuda-12.8",
        rng.random() < 0.5,
    )
