"""The timed step: the work one iteration of a job does (`model.step`, docs/timed-step.md).

``module`` (the default) calls ``get_module()``'s module on its example inputs as
PyTorch/XLA's experiment runner and the dynamo benchmarks do, the whole step function
compiled as they compile their ``model_iter_fn``; ``torchbench`` calls the model's own
``eval()`` / ``train()``. Built in the job's child; nothing here runs in the parent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from benchflow.config.schema import STEP_CHOICES
from benchflow.models.errors import ModelSkipped

# TorchBench models whose eval differentiates inside its forward (maml's inner loop
# calls torch.autograd.grad): both references run their eval with grad enabled (the
# runner's pick_grad, PyTorch's torchbench.py), where every other eval runs under no_grad.
EVAL_WITH_GRAD = frozenset({"maml"})

# TorchBench models the experiment runner trains with SGD instead of Adam (its
# TRAIN_WITH_SGD: Adam's state might not fit).
SGD_MODELS = frozenset(
    {
        "BERT_pytorch",
        "LearningToPaint",
        "alexnet",
        "dcgan",
        "demucs",
        "densenet121",
        "dlrm",
        "fastNLP_Bert",
        "mobilenet_v2",
        "phlippe_densenet",
        "phlippe_resnet",
        "pytorch_stargan",
        "resnet18",
        "shufflenet_v2_x1_0",
        "speech_transformer",
        "squeezenet1_1",
        "stable_diffusion_text_encoder",
        "timm_efficientdet",
        "timm_nfnet",
        "timm_regnet",
        "timm_vision_transformer",
        "timm_vovnet",
        "vgg16",
        "hf_T5",
        "llama_v2_7b_16h",
    }
)
LEARNING_RATE = 0.01  # the experiment runner's, for either optimizer

# What the references do with each kind of example inputs, for docs/timed-step.md's table:
# a tuple or list is unpacked, a dict passed as keywords, a lone tensor passed alone.
Inputs = tuple[tuple[Any, ...], dict[str, Any]]  # (positional, keyword)
Prepare = Callable[[Any], Any]  # the backend's: a callable (or module) as it runs it


def split_inputs(name: str, inputs: Any) -> Inputs:
    """The example inputs of `get_module()` as call arguments."""
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}
    raise ModelSkipped(
        f"{name}: get_module() returned example inputs of type {type(inputs).__name__}, "
        "not a tuple, list, dict or tensor; model.step=torchbench times its own step"
    )


def reduce_to_scalar_loss(out: Any) -> torch.Tensor:
    """The dynamo benchmarks' training loss, here so a job need not import torch._dynamo."""
    from torch._dynamo.testing import reduce_to_scalar_loss as reduce

    return reduce(out)  # type: ignore[no-any-return]


def step_function(
    module: Any, optimizer: torch.optim.Optimizer | None, loss: Callable[[Any], torch.Tensor]
) -> Callable[[tuple[Any, ...], dict[str, Any]], Any]:
    """The function a backend compiles, the inputs its arguments, as the references'
    model_iter_fn takes them: an eval step, or a train step with `optimizer`. It holds the
    module, not the TimedStep: a step no longer used is freed at once, with its model,
    where a cycle through it would wait for the collector (a model copy of the accuracy
    check's held while the next one is made; docs/accuracy.md)."""
    if optimizer is None:

        def eval_step(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            return module(*args, **kwargs)

        return eval_step

    def train_step(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        optimizer.zero_grad(set_to_none=True)
        out = loss(module(*args, **kwargs))
        out.backward()
        optimizer.step()
        return out

    return train_step


class TimedStep:
    """One job's step: call it for one iteration. `kind` is `model.step`."""

    def __init__(
        self,
        model: Any,
        *,
        name: str,
        kind: str,
        test: str,
        prepare: Prepare | None,
        exports: bool = False,
    ) -> None:
        self.model, self.name, self.kind, self.test = model, name, kind, test
        self.batch_size = int(model.batch_size)
        self.optimizer: torch.optim.Optimizer | None = None
        # A model may bring its own training loss (a suite's runner's, a factory's).
        self.loss: Callable[[Any], torch.Tensor] = (
            getattr(model, "compute_loss", None) or reduce_to_scalar_loss
        )
        self._eager_module: Any = None  # model.step=torchbench: its module, before `prepare`
        if kind == "torchbench":
            if prepare is not None:
                self._eager_module, _ = model.get_module()
                model.set_module(prepare(self._eager_module))
            return
        if kind != "module":
            raise ValueError(f"model.step={kind!r}; allowed values: {', '.join(STEP_CHOICES)}")
        self.module, self.args, self.kwargs = self._module_and_inputs(model)
        if test == "train":
            if not isinstance(self.module, nn.Module):
                raise ModelSkipped(
                    f"{name}: get_module() returned a {type(self.module).__name__}, not an "
                    "nn.Module with parameters to train it; model.step=torchbench runs its own "
                    "train()"
                )
            self.module.train()
            opt = torch.optim.SGD if name in SGD_MODELS else torch.optim.Adam
            self.optimizer = opt(self.module.parameters(), lr=LEARNING_RATE)
        elif isinstance(self.module, nn.Module):
            self.module.eval()
        if prepare is not None and exports:  # the compiled model, called on the inputs
            compiled = prepare(self.module)
            self._fn = lambda args, kwargs: compiled(*args, **kwargs)
        else:
            fn = step_function(self.module, self.optimizer, self.loss)
            self._fn = prepare(fn) if prepare is not None else fn

    def _module_and_inputs(self, model: Any) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
        try:
            module, inputs = model.get_module()
        except NotImplementedError as exc:
            raise ModelSkipped(
                f"{self.name} has no get_module() ({exc}); model.step=torchbench times "
                "its own eval()/train()"
            ) from exc
        if not callable(module):
            raise ModelSkipped(
                f"{self.name}: get_module() returned a {type(module).__name__}, which cannot "
                "be called; model.step=torchbench times its own eval()/train()"
            )
        args, kwargs = split_inputs(self.name, inputs)
        return module, args, kwargs

    def eval_grad(self) -> Any:
        """The grad mode an eval step runs in: no_grad, but for EVAL_WITH_GRAD's models."""
        return torch.enable_grad() if self.name in EVAL_WITH_GRAD else torch.no_grad()

    def __call__(self) -> Any:
        if self.kind == "torchbench":
            return self.model.train() if self.test == "train" else self.model.eval()
        if self.test == "train":
            loss = self._fn(self.args, self.kwargs)
            return loss.detach() if isinstance(loss, torch.Tensor) else loss
        with self.eval_grad():
            return self._fn(self.args, self.kwargs)

    def mark_batch_dynamic(self) -> None:
        """dynamo.dynamic_batch=true: each input's first batch-sized dimension marked dynamic,
        as --dynamic-batch-only does; a model without one, or a batch of 1, is skipped."""
        import torch._dynamo
        from torch.utils._pytree import tree_leaves

        why = "dynamo.dynamic_batch=true marks the batch dimension dynamic"
        if self.batch_size < 2:
            raise ModelSkipped(
                f"{why}, but {self.name} runs a batch of {self.batch_size}, whose size "
                "dynamo keeps static; allowed: batch_size=2 or more"
            )
        inputs = (self.args, self.kwargs) if self.kind == "module" else self.model.get_module()[1]
        marked = 0
        for leaf in tree_leaves(inputs):
            if isinstance(leaf, torch.Tensor) and self.batch_size in leaf.shape:
                torch._dynamo.maybe_mark_dynamic(leaf, list(leaf.shape).index(self.batch_size))
                marked += 1
        if not marked:
            raise ModelSkipped(
                f"{why}, but no input of {self.name} has a dimension of its batch size "
                f"{self.batch_size}"
            )

    def eager(self) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
        """The eager module and the inputs the step calls it on, uncompiled (harness/flops.py
        counts them); model.step=torchbench: get_module()'s, which its own eval() and
        train() call."""
        if self.kind == "module":
            return self.module, self.args, self.kwargs
        module, args, kwargs = self._module_and_inputs(self.model)
        return (module if self._eager_module is None else self._eager_module), args, kwargs

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The parameters the step trains (their gradients are what verify compares)."""
        module = self.module if self.kind == "module" else self.model.get_module()[0]
        return iter(module.parameters()) if isinstance(module, nn.Module) else iter(())
