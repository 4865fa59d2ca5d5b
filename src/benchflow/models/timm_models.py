"""suite=timm: a timm model built offline, with inputs made as PyTorch's
benchmarks/dynamo/timm_models.py makes them: ``timm.create_model(pretrained=False)``
with the runner's arguments, one batch of random images of its input size, and the
runner's loss, scaled for ``scaled_compute_loss`` models (docs/huggingface-timm.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

from benchflow.config.schema import BenchConfig
from benchflow.models.held import DEFAULT_BATCH_SIZE, HeldModel
from benchflow.models.step import reduce_to_scalar_loss
from benchflow.suite.rules import listed

SCALED_LOSS_DIVISOR = 1000.0


def build_module(name: str) -> torch.nn.Module:
    timm = importlib.import_module("timm")
    return timm.create_model(  # type: ignore[no-any-return]
        name,
        pretrained=False,
        in_chans=3,
        scriptable=False,
        num_classes=None,
        drop_rate=0.0,
        drop_path_rate=None,
        drop_block_rate=None,
    )


def make_inputs(module: torch.nn.Module, batch: int, test: str) -> tuple[torch.Tensor]:
    from timm.data import resolve_data_config

    size = tuple(resolve_data_config({}, model=module, use_test_size=test != "train")["input_size"])
    images = torch.randint(256, (batch, *size)).to(torch.float32)
    return ((images - images.mean()) / images.std(),)


def loss_for(name: str, rules: dict[str, Any]) -> Callable[[Any], torch.Tensor]:
    scale = SCALED_LOSS_DIVISOR if listed(rules, "scaled_compute_loss", name) else 1.0

    def loss(outputs: Any) -> torch.Tensor:
        if isinstance(outputs, tuple):
            outputs = outputs[0]
        return reduce_to_scalar_loss(outputs) / scale

    return loss


def load(cfg: BenchConfig) -> HeldModel:
    """The job's model as built, in float32 (HeldModel.place casts and moves it)."""
    name = cfg.model.name
    module = build_module(name)
    batch = cfg.batch_size or DEFAULT_BATCH_SIZE
    inputs = make_inputs(module, batch, cfg.test.name)
    loss = loss_for(name, cfg.suite.rules)
    return HeldModel(name, cfg.test.name, module, inputs, loss, batch)
