"""A module held with its inputs and its loss, behind TorchBench's interface: a suite's
model (huggingface, timm) or a user's factory model (model.target).

Built on the host, seeded, in float32 (as PyTorch's runners build them), then cast and
moved; ``compute_loss`` is the model's own training loss, which the timed step uses in
place of the default reduction (benchflow.models.step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from benchflow.models.base import moved

# PyTorch's huggingface.py runs a model missing from its list at this batch size.
DEFAULT_BATCH_SIZE = 16
LEARNING_RATE = 0.01  # the own train() step's SGD, as the timed step's optimizers use

Loss = Callable[[Any], torch.Tensor]


class HeldModel:
    """One model for one job: the module, its example inputs (a dict of keyword
    arguments, or a tuple of positional ones), its loss."""

    def __init__(
        self,
        name: str,
        test: str,
        module: nn.Module,
        inputs: dict[str, Any] | tuple[Any, ...],
        loss: Loss,
        batch_size: int,
    ) -> None:
        """As built on the host, in float32; `place` casts and moves it."""
        self.name, self.test, self.batch_size = name, test, batch_size
        self.module: Any = module
        self.example_inputs = inputs
        self._loss = loss

    def place(self, device: torch.device, dtype: torch.dtype | None) -> HeldModel:
        """Cast to `dtype` and move to `device`; then the test's mode and optimizer."""
        self.module.train(self.test == "train")
        self.module = moved(self.module, device, dtype)
        self.example_inputs = moved(self.example_inputs, device, dtype)
        self.optimizer: torch.optim.Optimizer | None = (
            torch.optim.SGD(self.module.parameters(), lr=LEARNING_RATE)
            if self.test == "train"
            else None
        )
        return self

    def get_module(self) -> tuple[Any, Any]:
        return self.module, self.example_inputs

    def set_module(self, module: Any) -> None:
        self.module = module

    def compute_loss(self, outputs: Any) -> torch.Tensor:
        return self._loss(outputs)

    def _call(self) -> Any:
        if isinstance(self.example_inputs, dict):
            return self.module(**self.example_inputs)
        return self.module(*self.example_inputs)

    def eval(self) -> Any:
        with torch.no_grad():
            return self._call()

    def train(self) -> torch.Tensor:
        assert self.optimizer is not None, "train() on a model built for eval"
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.compute_loss(self._call())
        loss.backward()
        self.optimizer.step()
        return loss.detach()
