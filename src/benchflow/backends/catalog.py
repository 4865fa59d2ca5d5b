"""What each backend needs, known without importing torch.

The parent process validates sweeps from this table alone; the implementations
in this package are only imported inside the isolated child.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendSpec:
    """Requirements of one `dynamo=` choice."""

    needs_xla: bool  # runs only on the lazy-tensor XLA device (xla=PJRT)
    needs_cuda: bool  # runs only with accelerator=cuda
    compiles: bool  # goes through torch.compile (dynamo counters apply)
    summary: str  # one line for --help and error messages


BACKENDS: dict[str, BackendSpec] = {
    "none": BackendSpec(False, False, False, "eager PyTorch, or lazy XLA tracing when xla=PJRT"),
    "eager": BackendSpec(False, False, True, "dynamo capture with no compiler (graph-break check)"),
    "aot_eager": BackendSpec(False, False, True, "dynamo + AOTAutograd, eager kernels"),
    "inductor": BackendSpec(False, False, True, "TorchInductor (C++ on CPU, Triton on CUDA)"),
    "cudagraphs": BackendSpec(False, True, True, "dynamo + CUDA graphs replay"),
    "openxla": BackendSpec(True, False, True, "dynamo graphs compiled by XLA (PJRT)"),
}


def backend_label(dynamo: str | None, lazy_xla: bool) -> str:
    """How reports, run names and MLflow params name a backend: the dynamo backend, or
    `eager` / `lazy_xla` without dynamo; dynamo's own `eager` backend is `dynamo_eager`
    so that it never collides with plain eager."""
    if dynamo in (None, "none"):
        return "lazy_xla" if lazy_xla else "eager"
    return "dynamo_eager" if dynamo == "eager" else dynamo


# What `baseline=` / `report --baseline` accept: a backend label; `none` means eager.
BASELINE_CHOICES = (
    "eager",
    "lazy_xla",
    "dynamo_eager",
    *(b for b in BACKENDS if b not in ("none", "eager")),
    "none",
)


def baseline_label(choice: str) -> str:
    return "eager" if choice == "none" else choice


XLA_CHOICES = ("auto", "none", "PJRT")
ACCELERATOR_CHOICES = ("auto", "cpu", "cuda")
TEST_CHOICES = ("eval", "train")
RETRY_CHOICES = ("failed", "none", "all")  # see BenchConfig.retry
DTYPE_CHOICES = ("float32", "float64", "bfloat16", "float16", "amp", "amp_bf16", "amp_fp16")
MATMUL_PRECISION_CHOICES = ("highest", "high", "medium")
MODEL_SOURCE_CHOICES = ("auto", "builtin", "torchbench")
