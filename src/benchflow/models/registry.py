"""Resolve `model=<name>` to a loaded BenchModel, built-in or from TorchBench."""

from __future__ import annotations

import importlib
import importlib.util
import logging

import torch

from benchflow.config.schema import ModelConfig
from benchflow.models.base import BenchModel

log = logging.getLogger(__name__)


def torchbench_available() -> bool:
    return importlib.util.find_spec("torchbenchmark") is not None


def resolve_source(cfg: ModelConfig) -> str:
    """`auto` prefers the real TorchBench model when TorchBench is importable."""
    if cfg.source != "auto":
        return cfg.source
    if torchbench_available() and importlib.util.find_spec(f"torchbenchmark.models.{cfg.name}"):
        return "torchbench"
    return "builtin"


def load_model(
    cfg: ModelConfig,
    test: str,
    device: torch.device,
    batch_size: int | None,
    dtype: torch.dtype | None,
) -> tuple[BenchModel, str]:
    """Build the model on the host, move it to `device`; returns it and its source."""
    source = resolve_source(cfg)
    log.info("model %s from %s (model.source=%s)", cfg.name, source, cfg.source)
    if source == "torchbench":
        raise NotImplementedError(
            f"model {cfg.name!r}: loading from TorchBench is not supported yet; "
            "use model.source=builtin"
        )
    if not cfg.builtin:
        raise ValueError(f"model {cfg.name!r} has no built-in implementation (model.builtin)")
    module_name, _, class_name = cfg.builtin.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, BenchModel)):
        raise TypeError(f"model.builtin={cfg.builtin!r} is not a BenchModel subclass")
    model = cls(test=test, device=device, batch_size=batch_size, size=cfg.size, dtype=dtype)
    return model, source
