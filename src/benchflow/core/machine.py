"""Facts about this machine, read without importing torch."""

from __future__ import annotations

import os
import platform
import re
import sys
from functools import cache
from pathlib import Path

from benchflow.core.files import read_text

# The CPU features that decide which kernels run (oneDNN, Inductor's C++ and XLA pick
# their paths by them), as /proc/cpuinfo spells them (x86 `flags`, arm `Features`).
KERNEL_FEATURES = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
)

# arm's /proc/cpuinfo names the implementer by its code (a few of the common ones).
ARM_IMPLEMENTERS = {"0x41": "ARM", "0x61": "Apple", "0xc0": "Ampere", "0x48": "HiSilicon"}


@cache
def _cpuinfo() -> list[dict[str, str]]:
    """/proc/cpuinfo as one mapping per logical CPU ([] where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return []
    cpus = []
    for block in text.strip().split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        cpus.append(fields)
    return cpus


@cache
def cpu_model_name() -> str:
    for cpu in _cpuinfo():
        if "model name" in cpu:
            return cpu["model name"]
    return platform.processor() or platform.machine()


@cache
def cpu_vendor() -> str | None:
    first = _cpuinfo()[0] if _cpuinfo() else {}
    if "vendor_id" in first:
        return first["vendor_id"]
    code = first.get("CPU implementer")
    return ARM_IMPLEMENTERS.get(code or "", code) if code else None


@cache
def cpu_features() -> tuple[str, ...]:
    """The kernel-relevant features (KERNEL_FEATURES) this CPU has, in that order."""
    first = _cpuinfo()[0] if _cpuinfo() else {}
    have = set((first.get("flags") or first.get("Features") or "").split())
    return tuple(f for f in KERNEL_FEATURES if f in have)


@cache
def core_counts() -> tuple[int | None, int]:
    """(physical cores, logical CPUs): a physical core is a distinct (package, core id)
    pair; None where /proc/cpuinfo does not say (arm: each CPU is a core)."""
    cpus = _cpuinfo()
    logical = len(cpus) or os.cpu_count() or 1
    cores = {(c.get("physical id"), c.get("core id")) for c in cpus if "core id" in c}
    if cores:
        return len(cores), logical
    return (logical if cpus and "CPU implementer" in cpus[0] else None), logical


@cache
def memory_bytes() -> int | None:
    found = re.search(r"^MemTotal:\s+(\d+) kB", read_text(Path("/proc/meminfo")) or "", re.M)
    return int(found.group(1)) * 1024 if found else None


def nvidia_driver() -> str | None:
    """The NVIDIA kernel driver's version, from /proc (None: no driver)."""
    text = read_text(Path("/proc/driver/nvidia/version")) or ""
    found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", text)
    return found.group(1) if found else None


def cuda_present() -> bool:
    """Cheap probe without importing torch: an NVIDIA driver node exists and is visible."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")


def node_name() -> str:
    """Where this process runs, as its launcher names it (a row's `job.node`):
    `ray:<node id>` (two Ray nodes may share a host), `slurm:<node>`, else the host name."""
    ray = sys.modules.get("ray")  # imported by the Ray launcher's worker, never here
    if ray is not None and ray.is_initialized():
        return f"ray:{ray.get_runtime_context().get_node_id()}"
    if slurm_node := os.environ.get("SLURMD_NODENAME"):
        return f"slurm:{slurm_node}"
    return platform.node()
