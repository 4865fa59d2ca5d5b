"""The FLOPs of one step, counted by torch's own counter (torch.utils.flop_counter) on
the eager module: its forward in the eval step's grad mode, its forward and backward for
train, as the step runs them (docs/flops.md). No formula is written here: an operator
torch's counter has no formula for is named in the row (`uncounted`), never counted
as zero.

The child counts once its model is timed, profiled and verified (harness/child.py): the
count runs in no timed region and changes no timed number, whatever it leaves behind
(gradients, a model's state, an XLA device's pending graph, which nothing runs).
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from benchflow.results.flops import COUNTED, Flops

if TYPE_CHECKING:
    from benchflow.models.step import TimedStep

TOP = 5  # the operators with most FLOPs a row keeps
# Operators that do a matmul's, a convolution's or attention's arithmetic, by name: one
# of these that the counter has no formula for leaves the count incomplete. Elementwise
# operators and reductions are not counted by convention (nor by torch's counter).
ARITHMETIC = re.compile(
    r"mm|conv|attention|matmul|linear|einsum|tensordot|dot|addmv|\.mv$|lstm|gru|rnn|fft"
)


def count(step: TimedStep, autocast: AbstractContextManager[Any]) -> Flops:
    """The FLOPs of one call of `step`'s eager module on its inputs (under `autocast`,
    as the step runs); a Flops with `error` where the step cannot be counted."""
    from torch.utils.flop_counter import FlopCounterMode

    test = "train" if step.test == "train" else "eval"
    try:
        module, args, kwargs = step.eager()
        seen = _operators()
        # the observer first: the counter's mode, above it, hands it each operator it
        # runs after its own decompositions, so it sees what the counter counted or not
        with seen, FlopCounterMode(display=False, custom_mapping=_same_as()) as counter:
            if test == "train":
                with autocast:
                    loss = step.loss(module(*args, **kwargs))
                loss.backward()
            else:
                with step.eval_grad(), autocast:
                    module(*args, **kwargs)
    except Exception as exc:  # a row without FLOPs, never a failed job
        return Flops(per_step=None, counted=COUNTED[test], error=f"{type(exc).__name__}: {exc}")
    by_op = counter.get_flop_counts().get("Global", {})
    top = sorted(by_op.items(), key=lambda kv: -kv[1])[:TOP]
    uncounted = sorted(
        str(op) for op in seen.ops if op not in counter.flop_registry and ARITHMETIC.search(str(op))
    )
    total = counter.get_total_flops()
    return Flops(
        per_step=float(total) if total and not uncounted else None,
        counted=COUNTED[test],
        top={str(op): float(n) for op, n in top},
        uncounted=uncounted,
    )


def _operators() -> Any:
    """A dispatch mode that notes each operator's packet (aten.mm) and runs it as it is."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Operators(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: set[Any] = set()

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            self.ops.add(func._overloadpacket)
            return func(*args, **(kwargs or {}))

    return Operators()


def _same_as() -> dict[Any, Any]:
    """Operators torch's counter has no entry for but whose arithmetic is one it has a
    formula for: the CPU's flash attention (F.scaled_dot_product_attention on a CPU)
    takes the same arguments, first to last, as the flash attention of CUDA."""
    import torch
    from torch.utils.flop_counter import flop_registry

    aten = torch.ops.aten
    same = {
        aten._scaled_dot_product_flash_attention_for_cpu: aten._scaled_dot_product_flash_attention,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: (
            aten._scaled_dot_product_flash_attention_backward
        ),
    }
    return {op: _as_is(flop_registry[like]) for op, like in same.items()}


def _as_is(formula: Any) -> Any:
    """torch's formula, as its registry holds it (already taking tensors), for
    FlopCounterMode's custom_mapping, which would otherwise wrap it a second time."""

    def formula_of(*args: Any, **kwargs: Any) -> Any:
        return formula(*args, **kwargs)

    formula_of._get_raw = True  # type: ignore[attr-defined]
    return formula_of
