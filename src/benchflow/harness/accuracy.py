"""Comparing a backend's results with eager and with a float64 eager reference, by the rule
of PyTorch's dynamo benchmarks (`same`; docs/accuracy.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from benchflow.suite.tolerance import tolerance

__all__ = ["Comparison", "compare", "leaves", "tolerance"]


def leaves(value: Any) -> list[torch.Tensor]:
    """Every tensor in a nested output, in a stable order, on the host."""
    if isinstance(value, torch.Tensor):
        return [value.detach().cpu()]
    if isinstance(value, dict):
        return [t for k in sorted(value, key=str) for t in leaves(value[k])]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in leaves(v)]
    for attr in ("logits", "loss"):  # model-output objects
        if hasattr(value, attr):
            return leaves(getattr(value, attr))
    return []


@dataclass
class Comparison:
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    min_cosine_similarity: float = 1.0
    rmse_vs_fp64: float = 0.0  # the backend under test
    eager_rmse_vs_fp64: float = 0.0  # eager at the job's dtype: the noise floor
    failures: list[str] = field(default_factory=list)  # none: the result passed

    @property
    def passed(self) -> bool:
        return not self.failures

    def metrics(self) -> dict[str, float]:
        return {
            "accuracy_max_abs_error": self.max_abs_error,
            "accuracy_max_rel_error": self.max_rel_error,
            "accuracy_cosine_similarity": self.min_cosine_similarity,
            "accuracy_rmse_vs_fp64": self.rmse_vs_fp64,
            "accuracy_eager_rmse_vs_fp64": self.eager_rmse_vs_fp64,
        }


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return math.sqrt(torch.mean((a.double() - b.double()) ** 2).item()) if a.numel() else 0.0


def compare(
    result: list[torch.Tensor],
    eager: list[torch.Tensor],
    fp64: list[torch.Tensor] | None,
    tol: float,
    cosine: bool,
    larger_multiplier: bool = False,
) -> Comparison:
    c = Comparison()
    if len(result) != len(eager):
        c.failures.append(f"{len(result)} result tensors against {len(eager)} from eager")
        return c
    for i, (res, ref) in enumerate(zip(result, eager, strict=True)):
        if res.shape != ref.shape:
            c.failures.append(f"leaf {i}: shape {tuple(res.shape)} != eager {tuple(ref.shape)}")
            continue
        if not ref.is_floating_point():
            if not torch.equal(res, ref):
                c.failures.append(f"leaf {i}: non-float values differ")
            continue
        r64, e64 = res.double(), ref.double()
        diff = (r64 - e64).abs()
        c.max_abs_error = max(c.max_abs_error, diff.max().item() if diff.numel() else 0.0)
        rel = diff / (e64.abs() + 1e-12)
        c.max_rel_error = max(c.max_rel_error, rel.max().item() if rel.numel() else 0.0)
        cos = torch.nn.functional.cosine_similarity(r64.flatten(), e64.flatten(), dim=0, eps=1e-12)
        c.min_cosine_similarity = min(c.min_cosine_similarity, cos.item())
        ok = torch.allclose(r64, e64, atol=tol, rtol=tol, equal_nan=True)
        if not ok and cosine:
            ok = cos.item() > 0.99
        if fp64 is not None:
            ref_err, res_err = _rmse(fp64[i], ref), _rmse(fp64[i], res)
            c.rmse_vs_fp64 = max(c.rmse_vs_fp64, res_err)
            c.eager_rmse_vs_fp64 = max(c.eager_rmse_vs_fp64, ref_err)
            if not ok and not cosine:
                multiplier = 3.0 if res.dtype in (torch.float16, torch.bfloat16) else 2.0
                if larger_multiplier and ref.numel() <= 10:
                    multiplier = 10.0
                ok = res_err <= multiplier * ref_err + tol / 10.0
        if not ok:
            c.failures.append(
                f"leaf {i}: max abs error {diff.max().item():.3g} (tolerance {tol:g})"
            )
    return c
