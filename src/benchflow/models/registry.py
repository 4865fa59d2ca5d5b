"""Build the model a job names, in the child: benchflow's built-in one, TorchBench's, a
suite's (huggingface, timm), or the user's own from a factory (model.target), looked up
by `model.source`."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from benchflow.config.schema import BenchConfig
from benchflow.models.base import BenchModel


class Built(Protocol):
    """A model as built (seeded, on the host, or on CUDA for TorchBench on cuda), before
    its dtype and device: `place` casts and moves it, and returns the model a job runs."""

    def place(self, device: torch.device, dtype: torch.dtype | None) -> Any: ...


Builder = Callable[[BenchConfig], Built]


def _torchbench(cfg: BenchConfig) -> Built:
    from benchflow.models.torchbench import TorchBenchModel

    assert cfg.suite.torchbench_root, "validation resolves the TorchBench root"
    return TorchBenchModel(
        Path(cfg.suite.torchbench_root),
        cfg.model.name,
        cfg.test.name,
        cfg.accelerator.name,
        cfg.batch_size,
    )


def _builtin(cfg: BenchConfig) -> Built:
    m = cfg.model
    assert m.builtin, f"model {m.name!r} has no built-in implementation"
    module_name, _, class_name = m.builtin.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, BenchModel)):
        raise TypeError(f"model.builtin={m.builtin!r} is not a BenchModel subclass")
    return cls.on_host(test=cfg.test.name, batch_size=cfg.batch_size, size=m.size)


def _factory(cfg: BenchConfig) -> Built:
    from benchflow.models.factory import build

    m = cfg.model
    assert m.target, "validation requires model.target for model.source=factory"
    return build(m.target, m.name, cfg.test.name, cfg.batch_size, m.size)


def _in(module: str) -> Builder:
    """A suite's model module's `load`, imported only when a job needs it (transformers, timm)."""

    def load(cfg: BenchConfig) -> Built:
        built: Built = importlib.import_module(module).load(cfg)
        return built

    return load


# model.source (resolved by validation: never `auto` here) -> what builds the model
BUILDERS: dict[str, Builder] = {
    "builtin": _builtin,
    "torchbench": _torchbench,
    "factory": _factory,
    "huggingface": _in("benchflow.models.huggingface"),
    "timm": _in("benchflow.models.timm_models"),
}


def build_model(cfg: BenchConfig) -> Built:
    """The job's model as built, before its dtype and device (seed first), on one thread
    wherever it is built, so that every job of a build key gets the same bits whatever
    its thread count (a process that forks jobs after a build must never have run a
    parallel region on more: harness/prebuilt.py)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return BUILDERS[cfg.model.source](cfg)
    finally:
        torch.set_num_threads(threads)  # the job's steps run on its own count
