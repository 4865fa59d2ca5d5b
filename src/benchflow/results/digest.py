"""A small digest of a job's first output, and whether a rerun reproduced it.

The child summarizes the first step's output, with no extra model run: the shape,
dtype and a few float64 statistics of its first MAX_LEAVES tensors. A rerun reproduced
it when shapes and dtypes match and every statistic is within the suite's tolerance,
as `allclose` judges; else it says which facts differ (results/environment.py).
"""

from __future__ import annotations

import math
from typing import Any

from benchflow.results.child import Digest

MAX_LEAVES = 8
STATS = ("mean", "abs_mean", "rms", "min", "max")

REPRODUCED = "reproduced"
DIFFERS = "differs"
NOT_RECORDED = "not recorded"
OTHER_CONFIG = "not compared: the rerun changed the configuration (a new fingerprint)"


def digest(tensors: list[Any], of: str) -> Digest:
    """The digest of an output's tensors (host tensors, as accuracy.leaves gives them)."""
    leaves = []
    for t in tensors[:MAX_LEAVES]:
        leaf: dict[str, Any] = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
        x = t.detach()
        x = (x.abs() if x.is_complex() else x).double()  # a complex value by its modulus
        finite = x.isfinite()
        leaf["nonfinite"] = int((~finite).sum())
        x = x[finite]
        if x.numel():
            leaf |= {
                "mean": float(x.mean()),
                "abs_mean": float(x.abs().mean()),
                "rms": float(x.square().mean().sqrt()),
                "min": float(x.min()),
                "max": float(x.max()),
            }
        leaves.append(leaf)
    return {"of": of, "tensors": len(tensors), "leaves": leaves}


def check(old: Digest | None, new: Digest | None, tol: float) -> str:
    """REPRODUCED, NOT_RECORDED (either side has none), or 'differs: <first difference>'."""
    if not old or not new:
        return NOT_RECORDED
    if old.get("tensors") != new.get("tensors"):
        return f"{DIFFERS}: {old.get('tensors')} output tensors, now {new.get('tensors')}"
    for i, (a, b) in enumerate(zip(old.get("leaves", []), new.get("leaves", []), strict=False)):
        for key in ("shape", "dtype", "nonfinite"):
            if a.get(key) != b.get(key):
                return f"{DIFFERS}: tensor {i} {key} {a.get(key)}, now {b.get(key)}"
        for stat in STATS:
            x, y = a.get(stat), b.get(stat)
            if x is None or y is None:
                if x != y:
                    return f"{DIFFERS}: tensor {i} {stat} {x}, now {y}"
                continue
            if not math.isclose(y, x, rel_tol=0.0, abs_tol=tol * (1 + abs(x))):
                return f"{DIFFERS}: tensor {i} {stat} {x:.6g}, now {y:.6g} (tolerance {tol:g})"
    return REPRODUCED
