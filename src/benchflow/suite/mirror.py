"""Turn an upstream torchbench.yaml into benchflow's mirror, conf/suite/torchbench.yaml.

Upstream uses YAML anchors and lists nested inside lists (`- *DETECTRON2_MODELS`);
the mirror holds the same data with every list flattened and every empty list
written as ``[]``, so Hydra reads it as plain data. Keys benchflow does not know
are kept in the mirror and reported, never dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# Key paths benchflow applies (rules.py) or knowingly passes through. A path
# covers everything beneath it.
KNOWN = {
    "batch_size.training",
    "batch_size.inference",
    "dont_change_batch_size",
    "tolerance",
    "require_larger_multiplier_for_smaller_tensor",
    "very_slow",
    "slow",
    "non_deterministic",
    "disable_cudagraph",
    "dtype.force_amp_for_fp16_bf16_models",
    "dtype.force_fp16_for_bf16_models",
    "dtype.amp_dtype_bfloat16",
    "canary_models",
    "detectron2_models",
    "only_training",
    "trt_not_yet_working",
    "skip.all",
    "skip.device",
    "skip.test",
    "skip.control_flow",
    "skip.export_not_supported",
    "skip.multiprocess",
    "skip.freezing",
    "accuracy.skip",
    "accuracy.max_batch_size",
}

HEADER = """\
# PyTorch's benchmarks/dynamo/torchbench.yaml as benchflow config: the same data,
# anchors resolved and nested lists flattened. GENERATED, do not edit by hand:
#   python -m benchflow.suite sync PATH/TO/torchbench.yaml
# Select it with suite=torchbench (the default). Rules applied: benchflow/suite/rules.py.
"""


def flatten(value: Any) -> Any:
    """Lists inside lists become one list; None where a list is expected becomes []."""
    if isinstance(value, dict):
        return {str(k): flatten(v) for k, v in value.items()}
    if isinstance(value, list):
        out: list[Any] = []
        for item in value:
            if isinstance(item, list):
                out.extend(flatten(item))
            elif item is not None:
                out.append(flatten(item))
        return out
    return value


def load_upstream(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a torchbench.yaml (top level is not a mapping)")
    flat = flatten(data)
    # Keys with no value upstream (`very_slow: &VERY_SLOW_MODELS`) hold lists of models.
    return {k: ([] if v is None else v) for k, v in flat.items()}


def unknown_paths(data: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted key paths in `data` that no KNOWN path covers."""
    found = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if path in KNOWN:
            continue
        if isinstance(value, dict) and any(k.startswith(path + ".") for k in KNOWN):
            found += unknown_paths(value, path + ".")
        else:
            found.append(path)
    return found


def render(rules: dict[str, Any]) -> str:
    body = yaml.safe_dump({"name": "torchbench", "rules": rules}, sort_keys=False, width=100)
    return HEADER + body


def sync(upstream: Path, out: Path) -> list[str]:
    """Write the mirror; return the unknown key paths it kept."""
    rules = load_upstream(upstream)
    out.write_text(render(rules))
    return unknown_paths(rules)
