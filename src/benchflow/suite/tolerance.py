"""Accuracy tolerances of the suites whose runners define their own (PyTorch's
huggingface.py and timm_models.py), from the lists in their mirrors.

Each function returns (tolerance, cosine); torchbench's rule is `tolerance`'s own. Lists
read only under options benchflow lacks (max-autotune, freezing, xpu) are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchflow.suite.rules import listed

Rule = Callable[[dict[str, Any], str, str, str, str], tuple[float, bool]]


def huggingface(
    rules: dict[str, Any], model: str, test: str, dtype: str, device: str
) -> tuple[float, bool]:
    """huggingface.py: training 1e-2 (2e-2 for tolerance.higher_training); inference
    1e-3, 4e-3 for higher_inference, 5e-3 for higher_inference_cpu on the CPU."""
    cosine = listed(rules, "tolerance.cosine", model)
    if test == "train":
        return (2e-2 if listed(rules, "tolerance.higher_training", model) else 1e-2), cosine
    if device == "cpu" and listed(rules, "tolerance.higher_inference_cpu", model):
        return 5e-3, cosine
    if listed(rules, "tolerance.higher_inference", model):
        return 4e-3, cosine
    return 1e-3, cosine


def timm(
    rules: dict[str, Any], model: str, test: str, dtype: str, device: str
) -> tuple[float, bool]:
    """timm_models.py: inference 1e-3; training 1e-2, 4e-2 for tolerance.higher_training
    (and higher_amp under AMP), 8e-2 for even_higher, 16e-2 for highest_training."""
    cosine = listed(rules, "tolerance.cosine", model)
    if test != "train":
        return 1e-3, cosine
    if listed(rules, "tolerance.highest_training", model):
        return 16e-2, cosine
    if listed(rules, "tolerance.even_higher", model):
        return 8e-2, cosine
    amp = dtype.startswith("amp")
    if listed(rules, "tolerance.higher_training", model) or (
        amp and listed(rules, "tolerance.higher_amp", model)
    ):
        return 4e-2, cosine
    return 1e-2, cosine


RULES: dict[str, Rule] = {"huggingface": huggingface, "timm": timm}


def tolerance(
    rules: dict[str, Any], model: str, test: str, dtype: str, device: str, suite: str = ""
) -> tuple[float, bool]:
    """(tolerance, cosine) for a job, from the suite's `tolerance` lists: the suite's own
    rule where its runner has one (RULES above), else torchbench's."""
    own = RULES.get(suite)
    if own is not None:
        return own(rules, model, test, dtype, device)

    def on(key: str) -> bool:
        return listed(rules, f"tolerance.{key}", model)

    cosine = on("cosine")
    if dtype in ("float16", "amp", "amp_fp16", "amp_bf16"):
        tol = 1e-2 if on("higher_fp16") else 8e-2 if on("even_higher") else 1e-3
    elif dtype == "bfloat16":
        tol = 1e-2 if on("higher_bf16") else 8e-2 if on("even_higher") else 1e-3
    else:
        tol = 1e-4
    if test == "train" and device != "cpu":
        tol = max(tol, 8e-3 if on("even_higher") else 1e-3)
    elif on("higher"):
        tol = max(tol, 1e-3)
    elif on("even_higher"):
        tol = max(tol, 8e-3)
    return tol, cosine
