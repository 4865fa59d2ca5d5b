"""A user's own model from a factory function (`model.target=module:function`,
docs/your-code.md).

The factory returns ``(module, example_inputs[, loss_fn])``, no subclassing, and gets
whichever of ``batch_size``, ``test`` and ``size`` its signature names. It is held as a
suite's model is (models/held.py), so every stage treats it as a built-in model.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from benchflow.models.held import HeldModel
from benchflow.models.step import reduce_to_scalar_loss, split_inputs
from benchflow.models.target import load


def build(
    target: str,
    name: str,
    test: str,
    batch_size: int | None,
    size: str,
) -> HeldModel:
    """The factory's model for one job, held as built (models/held.py)."""
    fn = load(target)
    takes = inspect.signature(fn).parameters
    if batch_size is not None and "batch_size" not in takes:
        raise ValueError(
            f"model.target={target!r}: batch_size={batch_size} was asked for, but "
            f"{fn.__name__}() has no batch_size parameter; allowed: add one, or "
            "leave batch_size unset (null) with a suite that sets none for this model"
        )
    given = {"batch_size": batch_size, "test": test, "size": size}
    made = fn(**{k: v for k, v in given.items() if k in takes and v is not None})
    module, inputs, loss = _unpack(target, made)
    args, kwargs = split_inputs(name, inputs)
    batch = batch_size or _default_batch(takes) or _leading_dim(args, kwargs)
    return HeldModel(name, test, module, kwargs or args, loss or reduce_to_scalar_loss, batch)


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
