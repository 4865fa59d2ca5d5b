"""TorchInductor: C++/OpenMP kernels on the CPU, Triton on CUDA."""

from benchflow.backends.base import DynamoBackend, register


@register
class Inductor(DynamoBackend):
    label = "inductor"
    dynamo = "inductor"
    summary = "TorchInductor (C++ on CPU, Triton on CUDA)"
    generates_code = True
    compile_zygote = "inductor"  # its C++ toolchain checked once there, not in each job
