"""The shape every benchmarked model has, built-in or TorchBench.

It mirrors TorchBench's ``BenchmarkModel``; the harness never reaches inside a model,
it only swaps the module for a compiled one (:meth:`set_module`) and calls the step.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import torch
from torch import nn
from torch.utils._pytree import tree_leaves


class BenchModel(abc.ABC):
    """One benchmarkable workload: a module, its inputs and its step."""

    DEFAULT_TRAIN_BSIZE: ClassVar[int]
    DEFAULT_EVAL_BSIZE: ClassVar[int]
    # Size preset -> constructor hyper-parameters ("small", the default, keeps a CPU
    # sweep to minutes; larger ones approach the real architectures).
    SIZES: ClassVar[dict[str, dict[str, Any]]]

    def __init__(
        self,
        test: str,
        device: torch.device | str = "cpu",
        batch_size: int | None = None,
        size: str = "small",
        dtype: torch.dtype | None = None,
    ) -> None:
        self._build(test, batch_size, size)
        self.place(torch.device(device), dtype)

    @classmethod
    def on_host(cls, test: str, batch_size: int | None = None, size: str = "small") -> BenchModel:
        """Built on the host as ``__init__`` builds it, not yet cast or moved: `place`
        finishes it (a model built once for the jobs that share its build)."""
        self = cls.__new__(cls)
        self._build(test, batch_size, size)
        return self

    def _build(self, test: str, batch_size: int | None, size: str) -> None:
        if test not in ("train", "eval"):
            raise ValueError(f"test must be 'train' or 'eval', got {test!r}")
        if size not in self.SIZES:
            raise ValueError(
                f"model.size={size!r} is not a size of {type(self).__name__}; "
                f"allowed: {sorted(self.SIZES)}"
            )
        self.test = test
        self.size = size
        self.batch_size = batch_size or (
            self.DEFAULT_TRAIN_BSIZE if test == "train" else self.DEFAULT_EVAL_BSIZE
        )
        # Built on the host so that weights and inputs do not depend on the device's RNG.
        self.model: nn.Module = self.build_module(**self.SIZES[size])
        self.example_inputs: tuple[Any, ...] = self.make_inputs(self.model, self.batch_size)

    def place(self, device: torch.device, dtype: torch.dtype | None) -> BenchModel:
        """Cast to `dtype` and move to `device`; then the test's mode and optimizer."""
        self.device = device
        self.model = moved(self.model, device, dtype)
        self.example_inputs = moved(self.example_inputs, device, dtype)
        self.model.train(self.test == "train")
        # The optimizer is made after the move, so it holds the device parameters.
        self.optimizer: torch.optim.Optimizer | None = (
            torch.optim.SGD(self.model.parameters(), lr=1e-3) if self.test == "train" else None
        )
        return self

    # -- what each model defines -------------------------------------------------
    @abc.abstractmethod
    def build_module(self, *args: Any, **hparams: Any) -> nn.Module:
        """Build the module on the host from one ``SIZES`` preset."""

    @abc.abstractmethod
    def make_inputs(self, module: nn.Module, batch_size: int) -> tuple[Any, ...]:
        """Make one batch of example inputs on the host."""

    def loss(self, outputs: Any) -> torch.Tensor:
        """Scalar training loss; the default sums every floating output."""
        return _sum_floating(outputs)

    # -- the TorchBench-shaped interface ---------------------------------------
    def get_module(self) -> tuple[nn.Module, tuple[Any, ...]]:
        return self.model, self.example_inputs

    def set_module(self, module: nn.Module) -> None:
        """Swap in a wrapped module (a compiled one), sharing the same parameters."""
        self.model = module

    def train(self) -> torch.Tensor:
        """One training step: forward, backward, optimizer step. Returns the loss."""
        assert self.optimizer is not None, "train() on a model built for eval"
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(self.model(*self.example_inputs))
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def eval(self) -> Any:
        """One inference step. Returns the outputs."""
        with torch.no_grad():
            return self.model(*self.example_inputs)


def moved(value: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    """A tensor or module (floating parts cast to `dtype`) on `device`; a tuple, list or
    dict holding tensors, each moved; anything else as it is. A module moves in place."""
    if isinstance(value, torch.Tensor):
        if dtype is not None and value.is_floating_point():
            value = value.to(dtype)
        return value.to(device)
    if isinstance(value, nn.Module):
        if dtype is not None:
            value = value.to(dtype)
        return value.to(device)
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(moved(v, device, dtype) for v in value)
    if isinstance(value, dict) and any(isinstance(v, torch.Tensor) for v in value.values()):
        return {k: moved(v, device, dtype) for k, v in value.items()}  # keyword inputs
    return value


def _sum_floating(outputs: Any) -> torch.Tensor:
    if isinstance(outputs, torch.Tensor):
        return outputs.float().sum()
    if not isinstance(outputs, (dict, list, tuple)):
        raise TypeError(f"cannot build a loss from outputs of type {type(outputs).__name__}")
    leaves = tree_leaves(outputs)
    parts = [
        x.float().sum() for x in leaves if isinstance(x, torch.Tensor) and x.is_floating_point()
    ]
    if not parts:
        raise TypeError("model outputs hold no floating tensor to build a loss from")
    return torch.stack(parts).sum()
