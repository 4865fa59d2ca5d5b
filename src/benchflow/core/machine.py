"""Facts about this machine, read without importing torch."""

from __future__ import annotations

import os
import platform
from functools import cache


@cache
def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cuda_present() -> bool:
    """Cheap probe without importing torch: an NVIDIA driver node exists and is visible."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")
