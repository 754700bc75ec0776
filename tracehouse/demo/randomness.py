"""Deterministic randomness: every draw comes from a `random.Random` seeded from `(seed, name)`
with SHA-256, so the same arguments always produce byte-identical files.
"""

from __future__ import annotations

import hashlib
import random
import struct
import uuid


def seeded_rng(seed: int, *parts: object) -> random.Random:
    digest = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def random_hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def uuid4(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def f32(x: float) -> float:
    """Round to float32 like values that come out of CUDA timers / torch tensors."""
    return struct.unpack("f", struct.pack("f", x))[0]
