"""Compiler backends: wrap a model's module with torch.compile for `dynamo=<name>`."""

from __future__ import annotations

import torch

from benchflow.backends.catalog import BACKENDS
from benchflow.config.schema import DynamoConfig
from benchflow.models.base import BenchModel


def apply_compiler(model: BenchModel, dynamo: DynamoConfig) -> None:
    """Swap the model's module for its compiled form; `none` leaves it eager."""
    if not BACKENDS[dynamo.name].compiles:
        return
    if dynamo.name == "openxla":
        import torch_xla  # noqa: F401  registers the openxla dynamo backend

    module, _ = model.get_module()
    compiled = torch.compile(
        module, backend=dynamo.name, mode=dynamo.mode, fullgraph=dynamo.fullgraph
    )
    model.set_module(compiled)  # type: ignore[arg-type]
