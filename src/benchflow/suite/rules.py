"""The suite's rules for one job: dtype, batch size, and whether to skip it.

Applied as PyTorch/XLA's experiment runner applies torchbench.yaml (seed 003), with
the dynamo benchmarks' per-backend skip lists (docs/suites.md, docs/huggingface-timm.md,
docs/compiler-settings.md). An explicit dtype= from the user always wins. Nothing here
imports torch.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchflow.config.schema import SuiteConfig

TEST_KEY = {"train": "training", "eval": "inference"}

# The dtype rule a report states (report/render.py definitions), in words.
DTYPE_RULE = (
    "eval in bfloat16 (float16 for the models the suite lists; AMP for others it lists, "
    "off a CPU), training in float32 on a CPU and in AMP off one, float32 for the suite's "
    "only_fp32 models and the built-in suite; dtype= given wins"
)
# Training on a CPU: float32, as the experiment runner (it never autocasts on a CPU) and
# PyTorch's CPU dashboards; AMP's speed there depends on AVX-512 BF16 (dtype=amp asks).
TRAINING_ON_CPU = "float32"


@dataclass(frozen=True)
class SuiteDecision:
    dtype: str
    dtype_source: str  # user | suite | model
    batch_size: int | None  # None: the model's own default, decided in the child
    batch_size_source: str  # user | suite | model
    skip: str | None  # why the job must not run, naming the list


def listed(rules: dict[str, Any], path: str, model: str) -> bool:
    """Is `model` in the list at dotted `path` (e.g. skip.device.cpu) of the suite's rules?"""
    node: Any = rules
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return isinstance(node, list) and model in node


def skip_reason(
    suite: SuiteConfig, model: str, test: str, accelerator: str, lists: Sequence[str] = ()
) -> str | None:
    """Why the suite's lists skip the job (None: they do not); `lists`: those its
    backend and settings add (skip.export_not_supported, skip.freezing.cpu)."""
    rules = suite.rules
    if suite.fast:
        for key in ("very_slow", "slow"):
            if listed(rules, key, model):
                return f"suite.fast=true and {model} is listed in `{key}`"
    if not suite.skip_lists:
        return None
    aarch64 = accelerator == "cpu" and platform.machine() in ("aarch64", "arm64")
    devices = [accelerator] + (["cpu_aarch64"] if aarch64 else [])
    candidates = ["skip.all", f"skip.test.{TEST_KEY[test]}", "skip.multiprocess"]
    candidates += [f"skip.device.{d}" for d in devices] + list(lists)
    for key in candidates:
        if listed(rules, key, model):
            return (
                f"{model} is listed in `{key}` of suite {suite.name} "
                "(suite.skip_lists=false runs it)"
            )
    return None


def decide(
    suite: SuiteConfig,
    model: str,
    test: str,
    accelerator: str,
    user_dtype: str | None,
    user_batch_size: int | None,
    lists: Sequence[str] = (),
) -> SuiteDecision:
    rules = suite.rules
    if user_dtype is not None:
        dtype, dtype_source = user_dtype, "user"
    elif suite.name == "builtin" or not rules:
        dtype, dtype_source = "float32", "model"
    elif listed(rules, "only_fp32", model):
        dtype, dtype_source = "float32", "suite"
    elif test == "train" and accelerator == "cpu":
        dtype, dtype_source = TRAINING_ON_CPU, "suite"
    elif test == "train":
        amp_bf16 = listed(rules, "dtype.amp_dtype_bfloat16", model)
        dtype, dtype_source = ("amp_bf16" if amp_bf16 else "amp"), "suite"
    elif accelerator != "cpu" and listed(rules, "dtype.force_amp_for_fp16_bf16_models", model):
        dtype, dtype_source = "amp", "suite"
    elif listed(rules, "dtype.force_fp16_for_bf16_models", model):
        dtype, dtype_source = "float16", "suite"
    else:
        dtype, dtype_source = "bfloat16", "suite"

    suite_batch = rules.get("batch_size", {}).get(TEST_KEY[test], {}) or {}
    if listed(rules, "dont_change_batch_size", model):
        batch, batch_source = None, "model"
    elif user_batch_size is not None:
        batch, batch_source = user_batch_size, "user"
    elif model in suite_batch:
        divisor = int((rules.get("batch_size", {}).get("divisors") or {}).get(model, 1))
        batch, batch_source = max(int(suite_batch[model]) // divisor, 1), "suite"
    else:
        batch, batch_source = None, "model"
    return SuiteDecision(
        dtype,
        dtype_source,
        batch,
        batch_source,
        skip_reason(suite, model, test, accelerator, lists),
    )


def rules_for(rules: dict[str, Any], model: str) -> dict[str, Any]:
    """The part of a suite's rules that names `model` (what `--cfg job` shows): each list
    that holds it, as [model], and each table's entry for it."""
    found = _naming(rules, model)
    return found if isinstance(found, dict) else {}


def _naming(node: Any, model: str) -> Any:
    if isinstance(node, list):
        return [model] if model in node else None
    if not isinstance(node, dict):
        return None  # another model's entry in a table
    if model in node:
        return {model: node[model]}
    inner = {k: v for k, v in ((k, _naming(v, model)) for k, v in node.items()) if v is not None}
    return inner or None
