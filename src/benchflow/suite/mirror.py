"""Turn a suite's upstream files into benchflow's mirror, suite/mirrors/<suite>.yaml.

Upstream's anchors, nested lists and `- ~` become flat lists and ``[]``: plain data;
unknown keys are kept and reported, never dropped. A suite's models list (one batch size
per model) is written into ``batch_size.training`` and ``.inference``, where rules.py
reads torchbench's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from benchflow.config.schema import read_yaml
from benchflow.suite.suites import Suite

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
    # huggingface.yaml and timm_models.yaml
    "batch_size.divisors",
    "only_fp32",
    "only_inference",
    "scaled_compute_loss",
}

HEADER = """\
# PyTorch's benchmarks/dynamo/{upstream}: the same data, anchors resolved and nested
# lists flattened. GENERATED, do not edit by hand:
#   python -m benchflow.suite sync PATH/TO/{upstream}
# suite={name}{default} gives each job these rules when it is planned (suite.rules);
# benchflow/suite/rules.py applies them.{with_list}
"""
WITH_LIST = """
# batch_size.training and .inference: {models_list}'s batch sizes (the runner uses
# the list's for both tests)."""


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
    data = read_yaml(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a suite file (top level is not a mapping)")
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


def load_models_list(path: Path, separator: str) -> dict[str, int]:
    """`name<separator>batch size` per line (huggingface_models_list.txt, timm_models_list.txt)."""
    sizes: dict[str, int] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        name, sep, size = line.partition(separator)
        if not sep or not size.strip().isdigit():
            raise ValueError(f"{path}:{number}: {line!r} is not `name{separator}batch size`")
        sizes[name.strip()] = int(size)
    return sizes


def render(rules: dict[str, Any], suite: Suite) -> str:
    body = yaml.safe_dump({"name": suite.name, "rules": rules}, sort_keys=False, width=100)
    with_list = WITH_LIST.format(models_list=suite.models_list) if suite.models_list else ""
    default = " (the default)" if suite.name == "torchbench" else ""
    header = HEADER.format(
        upstream=suite.upstream, name=suite.name, with_list=with_list, default=default
    )
    return header + body


def sync(upstream: Path, out: Path, suite: Suite, models_list: Path | None = None) -> list[str]:
    """Write the mirror; return the unknown key paths it kept."""
    rules = load_upstream(upstream)
    if suite.models_list:
        if models_list is None or suite.list_separator is None:
            raise ValueError(f"suite {suite.name} needs its {suite.models_list}")
        sizes = load_models_list(models_list, suite.list_separator)
        # under batch_size.training and .inference (upstream's own batch_size keys, such as
        # divisors, stay beside them); two dicts, so that the YAML holds no alias
        batch = rules.get("batch_size") or {}
        rules = rules | {"batch_size": batch | {"training": sizes, "inference": dict(sizes)}}
    out.write_text(render(rules, suite))
    return unknown_paths(rules)
