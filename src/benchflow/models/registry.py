"""Build the model a job names, in the child: benchflow's built-in one, TorchBench's, a
suite's (huggingface, timm), or the user's own from a factory (model.target), looked up
by `model.source`."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchflow.config.schema import BenchConfig
from benchflow.models.base import BenchModel

log = logging.getLogger(__name__)

Loader = Callable[[BenchConfig, torch.device, "torch.dtype | None"], Any]


def _torchbench(cfg: BenchConfig, device: torch.device, dtype: torch.dtype | None) -> Any:
    from benchflow.models.torchbench import TorchBenchModel

    assert cfg.suite.torchbench_root, "validation resolves the TorchBench root"
    return TorchBenchModel(
        Path(cfg.suite.torchbench_root),
        cfg.model.name,
        cfg.test.name,
        device,
        cfg.accelerator.name,
        cfg.batch_size,
        dtype,
    )


def _builtin(cfg: BenchConfig, device: torch.device, dtype: torch.dtype | None) -> Any:
    m = cfg.model
    assert m.builtin, f"model {m.name!r} has no built-in implementation"
    module_name, _, class_name = m.builtin.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, BenchModel)):
        raise TypeError(f"model.builtin={m.builtin!r} is not a BenchModel subclass")
    return cls(
        test=cfg.test.name, device=device, batch_size=cfg.batch_size, size=m.size, dtype=dtype
    )


def _factory(cfg: BenchConfig, device: torch.device, dtype: torch.dtype | None) -> Any:
    from benchflow.models.factory import build

    m = cfg.model
    assert m.target, "validation requires model.target for model.source=factory"
    return build(m.target, m.name, cfg.test.name, device, cfg.batch_size, m.size, dtype)


def _in(module: str) -> Loader:
    """The `load` function of a suite's model module, imported when a job needs it (it
    imports transformers or timm)."""

    def load(cfg: BenchConfig, device: torch.device, dtype: torch.dtype | None) -> Any:
        return importlib.import_module(module).load(cfg, device, dtype)

    return load


# model.source (resolved by validation: never `auto` here) -> what builds the model
LOADERS: dict[str, Loader] = {
    "builtin": _builtin,
    "torchbench": _torchbench,
    "factory": _factory,
    "huggingface": _in("benchflow.models.huggingface"),
    "timm": _in("benchflow.models.timm_models"),
}


def load_model(cfg: BenchConfig, device: torch.device, dtype: torch.dtype | None) -> Any:
    m = cfg.model
    log.info("model %s from %s, batch size %s, dtype %s", m.name, m.source, cfg.batch_size, dtype)
    return LOADERS[m.source](cfg, device, dtype)
