"""GPU slots: a job on the GPU (``accelerator=cuda``) has a GPU of its own, as a CPU
slot gives it cores of its own (core/cpus.py).

Before its child starts, a cuda job takes a free GPU (of ``CUDA_VISIBLE_DEVICES``, else
the driver's) with an ``flock`` beside the CPU slots' locks, after its CPU slot, and its
child sees that GPU alone (docs/gpu.md). A lock names a GPU as its sweep does, so an
index and a UUID do not see each other's lock.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType

from benchflow.core.cpus import first_free

ENV_VISIBLE = "CUDA_VISIBLE_DEVICES"
ALL = "all"  # the one slot of every GPU, where they cannot be counted
_PROC_GPUS = Path("/proc/driver/nvidia/gpus")


def nvml() -> tuple[ModuleType | None, str]:
    """pynvml, initialized (the caller matches it with nvmlShutdown), or None and why not."""
    try:
        import pynvml
    except ImportError as exc:
        return None, f"nvidia-ml-py is not installed ({exc})"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:  # no driver library, no driver loaded
        return None, f"NVML is unavailable: {exc}"
    return pynvml, ""


def driver_count() -> int | None:
    """How many GPUs the NVIDIA driver lists (NVML, else /proc); None where neither says."""
    lib, _ = nvml()
    if lib is not None:
        try:
            return int(lib.nvmlDeviceGetCount())
        except lib.NVMLError:
            pass
        finally:
            lib.nvmlShutdown()
    try:
        return len(list(_PROC_GPUS.iterdir())) or None
    except OSError:
        return None


def visible(environ: Mapping[str, str], count: int | None) -> list[str]:
    """The GPUs a job may be given, by the names its CUDA_VISIBLE_DEVICES will carry: the
    variable's entries up to the first invalid one (as CUDA reads them), else
    0..count-1; [ALL] where that is unknown."""
    value = environ.get(ENV_VISIBLE)
    if value is not None:
        parts = (p.strip() for p in value.split(","))
        return list(itertools.takewhile(lambda p: p and not p.startswith("-"), parts))
    return [str(i) for i in range(count)] if count else [ALL]


def _lock_name(name: str) -> str:
    return "gpu" + re.sub(r"[^A-Za-z0-9_.-]", "_", name)


@contextlib.contextmanager
def gpu_slot(
    owner: str,
    on_wait: Callable[[str], None] | None = None,
    names: list[str] | None = None,
) -> Iterator[str]:
    """Hold a free GPU of `names` (default: :func:`visible`'s) for the block, waiting for
    one; yields its name (ALL: every GPU, CUDA_VISIBLE_DEVICES kept)."""
    if names is None:
        counted = None if ENV_VISIBLE in os.environ else driver_count()  # NVML: only if asked
        names = visible(os.environ, counted)
    # None visible (a Ray worker given no GPU sets CUDA_VISIBLE_DEVICES=""): one slot, the
    # variable kept, and the job's child says it sees no GPU (a failed row, not a crash)
    names = names or [ALL]
    waiting = f"waiting for a free GPU (of {', '.join(names)})"
    with first_free([[_lock_name(n)] for n in names], owner, waiting, on_wait) as index:
        yield names[index]


def child_env(name: str | None) -> dict[str, str]:
    """The job's child's variables for its GPU: that one alone visible to it."""
    return {ENV_VISIBLE: name} if name and name != ALL else {}


def slot_for(
    accelerator: str, owner: str, on_wait: Callable[[str], None] | None = None
) -> contextlib.AbstractContextManager[str | None]:
    """A job's GPU slot: :func:`gpu_slot` for a job on the GPU, none (None) for any other."""
    return gpu_slot(owner, on_wait) if accelerator == "cuda" else contextlib.nullcontext(None)
