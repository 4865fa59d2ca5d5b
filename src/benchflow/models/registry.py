"""Build the model a job names (in the child): benchflow's built-in one, TorchBench's,
or the user's own from a factory (model.target)."""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

import torch

from benchflow.config.schema import BenchConfig
from benchflow.models.base import BenchModel

log = logging.getLogger(__name__)


def load_model(cfg: BenchConfig, device: torch.device, dtype: torch.dtype | None) -> Any:
    """`cfg.model.source` is already resolved (builtin | torchbench) by validation."""
    m = cfg.model
    log.info("model %s from %s, batch size %s, dtype %s", m.name, m.source, cfg.batch_size, dtype)
    if m.source == "torchbench":
        from benchflow.models.torchbench import TorchBenchModel

        assert cfg.suite.torchbench_root, "validation resolves the TorchBench root"
        return TorchBenchModel(
            Path(cfg.suite.torchbench_root),
            m.name,
            cfg.test.name,
            device,
            cfg.accelerator.name,
            cfg.batch_size,
            dtype,
        )
    if m.source == "factory":
        from benchflow.models.factory import FactoryModel

        assert m.target, "validation requires model.target for model.source=factory"
        return FactoryModel(m.target, m.name, cfg.test.name, device, cfg.batch_size, m.size, dtype)
    assert m.builtin, f"model {m.name!r} has no built-in implementation"
    module_name, _, class_name = m.builtin.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, BenchModel)):
        raise TypeError(f"model.builtin={m.builtin!r} is not a BenchModel subclass")
    return cls(
        test=cfg.test.name, device=device, batch_size=cfg.batch_size, size=m.size, dtype=dtype
    )
