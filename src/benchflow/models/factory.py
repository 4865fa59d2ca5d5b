"""A user's own model from a factory function (`model.target=module:function`).

The factory builds on the host and returns ``(module, example_inputs)`` or
``(module, example_inputs, loss_fn)``; no subclassing. It may take any of the
keyword parameters ``batch_size``, ``test`` (eval | train) and ``size`` (model.size):
benchflow passes those its signature names. Inputs are a tuple or list (positional),
a dict (keyword arguments) or one tensor. ``loss_fn(outputs)`` makes the training
step's scalar loss; without one, the outputs are reduced as the dynamo benchmarks do.

Behind it is the interface every model has (models/base.py), so the timed step, every
backend, verify, profiling and IR treat it as they treat a built-in model.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from benchflow.models.base import moved
from benchflow.models.step import split_inputs
from benchflow.models.target import load

log = logging.getLogger(__name__)

PARAMETERS = ("batch_size", "test", "size")  # what a factory may ask for, by name


class FactoryModel:
    def __init__(
        self,
        target: str,
        name: str,
        test: str,
        device: torch.device,
        batch_size: int | None,
        size: str,
        dtype: torch.dtype | None,
    ) -> None:
        build = load(target)
        takes = inspect.signature(build).parameters
        if batch_size is not None and "batch_size" not in takes:
            raise ValueError(
                f"model.target={target!r}: batch_size={batch_size} was asked for, but "
                f"{build.__name__}() has no batch_size parameter; allowed: add one, or "
                "leave batch_size unset (null) with a suite that sets none for this model"
            )
        given = {"batch_size": batch_size, "test": test, "size": size}
        made = build(**{k: v for k, v in given.items() if k in takes and v is not None})
        module, inputs, self.compute_loss = _unpack(target, made)
        self.name, self.test = name, test
        args, kwargs = split_inputs(name, inputs)
        self.batch_size = batch_size or _default_batch(takes) or _leading_dim(args, kwargs)
        self.model: nn.Module = moved(module, device, dtype)
        self.model.train(test == "train")
        self.example_inputs = moved(inputs, device, dtype)
        self.args, self.kwargs = split_inputs(name, self.example_inputs)
        # The model's own train() (model.step=torchbench): SGD, as the built-in models.
        self.optimizer = (
            torch.optim.SGD(self.model.parameters(), lr=1e-3) if test == "train" else None
        )

    def get_module(self) -> tuple[nn.Module, Any]:
        return self.model, self.example_inputs

    def set_module(self, module: nn.Module) -> None:
        self.model = module

    def eval(self) -> Any:
        with torch.no_grad():
            return self.model(*self.args, **self.kwargs)

    def train(self) -> torch.Tensor:
        from benchflow.models.step import reduce_to_scalar_loss

        assert self.optimizer is not None, "train() on a model built for eval"
        self.optimizer.zero_grad(set_to_none=True)
        outputs = self.model(*self.args, **self.kwargs)
        loss = (self.compute_loss or reduce_to_scalar_loss)(outputs)
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def _unpack(target: str, made: Any) -> tuple[nn.Module, Any, Callable[[Any], Any] | None]:
    if isinstance(made, tuple) and len(made) in (2, 3):
        module, inputs, *rest = made
        loss = rest[0] if rest else None
        if isinstance(module, nn.Module) and (loss is None or callable(loss)):
            return module, inputs, loss
    raise TypeError(
        f"model.target={target!r} returned {type(made).__name__}; allowed: "
        "(nn.Module, example_inputs) or (nn.Module, example_inputs, loss_fn)"
    )


def _default_batch(takes: Any) -> int | None:
    param = takes.get("batch_size")
    default = getattr(param, "default", inspect.Parameter.empty)
    return default if isinstance(default, int) and not isinstance(default, bool) else None


def _leading_dim(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Without a batch_size parameter: the first input tensor's leading dimension."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            return int(value.shape[0])
    return 1
