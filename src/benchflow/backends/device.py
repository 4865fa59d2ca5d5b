"""Devices: where a model runs, how to wait for it, and what it can tell about memory.

Each timed region ends with :meth:`Device.synchronize`, so a reported time always
covers the device's work, not only the host's dispatch (seeds 000/001).
"""

from __future__ import annotations

import os
from typing import ClassVar

import torch

from benchflow.core.machine import cpu_model_name


class Device:
    """Eager host CPU: work is done when the call returns."""

    kind: ClassVar[str] = "cpu"
    autocast_type: ClassVar[str] = "cpu"

    def __init__(self) -> None:
        self.torch_device = torch.device("cpu")

    def set_matmul_precision(self, precision: str) -> None:
        """`matmul_precision` (torch's names: highest, high, medium) for float32 matmuls."""
        torch.set_float32_matmul_precision(precision)

    def mark_step(self) -> None:
        """End of one iteration's graph. Only lazy devices need it."""

    def synchronize(self) -> None:
        """Block until every queued computation has finished."""

    def reset_peak_memory(self) -> None:
        """Start a new peak-memory window."""

    def peak_memory_bytes(self) -> int | None:
        """Device allocator's peak since the last reset, where the device has one."""
        return None

    def model_name(self) -> str:
        return cpu_model_name()


class CudaDevice(Device):
    """CUDA: kernels run asynchronously, so the timer waits on the stream."""

    kind = "cuda"
    autocast_type = "cuda"

    def __init__(self) -> None:
        if not torch.cuda.is_available():
            raise RuntimeError("accelerator=cuda but torch.cuda.is_available() is False")
        self.torch_device = torch.device("cuda", torch.cuda.current_device())

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.torch_device)

    def reset_peak_memory(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.torch_device)

    def peak_memory_bytes(self) -> int | None:
        return int(torch.cuda.max_memory_allocated(self.torch_device))

    def model_name(self) -> str:
        return torch.cuda.get_device_name(self.torch_device)


class XlaDevice(Device):
    """Lazy XLA through PJRT: ops are traced; sync() compiles and launches the graph.

    `mark_step` cuts the graph per iteration and launches it asynchronously;
    `synchronize` waits for *every* launched execution, with ``xm.wait_device_ops()``:
    ``torch_xla.sync(wait=True)`` alone returns before earlier graphs finish
    (docs/timing.md).
    """

    kind = "xla"
    autocast_type = "xla"

    def __init__(self, accelerator: str) -> None:
        # PJRT reads this at first device use; CPU here, CUDA where asked for.
        os.environ.setdefault("PJRT_DEVICE", "CUDA" if accelerator == "cuda" else "CPU")
        import torch_xla
        import torch_xla.core.xla_model as xm

        self._xla = torch_xla
        self._xm = xm
        self.accelerator = accelerator
        self.torch_device = torch_xla.device()

    # torch's precision names -> torch_xla's (torch_xla.backends.set_mat_mul_precision):
    # medium is one bfloat16 pass, torch_xla's "default" (also its own default).
    XLA_MATMUL_PRECISION: ClassVar[dict[str, str]] = {
        "highest": "highest",
        "high": "high",
        "medium": "default",
    }

    def set_matmul_precision(self, precision: str) -> None:
        """Both torch's and torch_xla's, as the experiment runner sets them; torch_xla's by
        its C call, since torch_xla.backends' logs a warning each time."""
        super().set_matmul_precision(precision)
        self._xla._XLAC._xla_set_mat_mul_precision(self.XLA_MATMUL_PRECISION[precision])

    def mark_step(self) -> None:
        self._xla.sync()

    def synchronize(self) -> None:
        self._xla.sync(wait=True)
        self._xm.wait_device_ops()

    def peak_memory_bytes(self) -> int | None:
        import torch_xla.core.xla_model as xm

        try:
            info = xm.get_memory_info(self.torch_device)
        except Exception:  # the CPU PJRT client keeps no allocator statistics
            return None
        peak = info.get("peak_bytes_used") if isinstance(info, dict) else None
        return int(peak) if isinstance(peak, (int, float)) else None

    def model_name(self) -> str:
        if self.accelerator == "cuda" and torch.cuda.is_available():
            return torch.cuda.get_device_name()
        return f"XLA:{os.environ['PJRT_DEVICE']} ({cpu_model_name()})"


def native_device(accelerator: str) -> Device:
    """The host CPU, or the CUDA GPU with accelerator=cuda."""
    return CudaDevice() if accelerator == "cuda" else Device()
