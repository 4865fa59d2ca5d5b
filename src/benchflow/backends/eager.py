"""Eager PyTorch: the module as it is, on the host CPU or a CUDA GPU."""

from benchflow.backends.base import Backend, register


@register
class Eager(Backend):
    label = "eager"
    dynamo = "none"
    summary = "eager PyTorch (no torch.compile)"
    has_compile_step = False  # nothing compiles: the report shows no compile time
