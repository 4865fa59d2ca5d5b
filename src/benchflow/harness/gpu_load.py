"""Was the GPU at full speed while a job timed? A probe read around every timed repeat of a
GPU job, as harness/load.py reads the host: SM clock, temperature, throttling and power
capping (docs/timing.md), read through NVML without a CUDA call; what it lacks is omitted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from benchflow.core.gpus import nvml

log = logging.getLogger(__name__)

# The clock-event reasons (nvml.h) that slow a GPU for reasons other than its work.
THROTTLED = {0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "power_brake"}
POWER_CAP = 0x4  # nvmlClocksEventReasonSwPowerCap


def throttle_names(reasons: int) -> list[str]:
    """The judged reasons set in an NVML clock-event bitmask, by name."""
    return [name for bit, name in THROTTLED.items() if reasons & bit]


@dataclass(frozen=True)
class Reading:
    sm_clock_mhz: float | None
    temp_c: float | None
    reasons: int
    thermal_ns: int | None  # cumulative, from the driver
    power_ns: int | None


class GpuProbe:
    """NVML's readings of one GPU around each timed repeat."""

    def __init__(self, lib: Any, handle: Any) -> None:
        self.lib, self.handle = lib, handle

    def _try(self, read: Any, *args: Any) -> Any:
        try:
            return read(self.handle, *args)
        except self.lib.NVMLError:  # not supported on this GPU, or a transient error
            return None

    def snapshot(self) -> Reading:
        lib = self.lib
        reasons_of = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
            lib.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        thermal = self._try(lib.nvmlDeviceGetViolationStatus, lib.NVML_PERF_POLICY_THERMAL)
        power = self._try(lib.nvmlDeviceGetViolationStatus, lib.NVML_PERF_POLICY_POWER)
        return Reading(
            sm_clock_mhz=self._try(lib.nvmlDeviceGetClockInfo, lib.NVML_CLOCK_SM),
            temp_c=self._try(lib.nvmlDeviceGetTemperature, lib.NVML_TEMPERATURE_GPU),
            reasons=int(self._try(reasons_of) or 0),
            thermal_ns=None if thermal is None else int(thermal.violationTime),
            power_ns=None if power is None else int(power.violationTime),
        )

    def delta(self, before: Reading, after: Reading) -> dict[str, float]:
        return window(before, after)


def window(before: Reading, after: Reading) -> dict[str, float]:
    """A timed window's figures from the readings at its two ends."""
    out: dict[str, float] = {}
    clocks = [c for c in (before.sm_clock_mhz, after.sm_clock_mhz) if c is not None]
    temps = [t for t in (before.temp_c, after.temp_c) if t is not None]
    if clocks:
        out["gpu_sm_clock_mhz"] = float(min(clocks))
    if temps:
        out["gpu_temp_c"] = float(max(temps))
    thermal_s = power_s = None
    if before.thermal_ns is not None and after.thermal_ns is not None:
        thermal_s = out["gpu_thermal_violation_s"] = (after.thermal_ns - before.thermal_ns) / 1e9
    if before.power_ns is not None and after.power_ns is not None:
        power_s = out["gpu_power_violation_s"] = (after.power_ns - before.power_ns) / 1e9
    reasons = before.reasons | after.reasons
    out["gpu_throttled"] = float(bool(throttle_names(reasons)) or bool(thermal_s and thermal_s > 0))
    out["gpu_power_capped"] = float(bool(reasons & POWER_CAP) or bool(power_s and power_s > 0))
    return out


def gpu_probe(device_kind: str) -> list[GpuProbe]:
    """The probe of the job's GPU ([] off a GPU, or where NVML cannot read it)."""
    if device_kind != "cuda":
        return []
    lib, why = nvml()
    if lib is None:
        log.warning("the GPU's clocks and throttling are not recorded: %s", why)
        return []
    try:
        return [GpuProbe(lib, _handle(lib))]
    except (AttributeError, lib.NVMLError) as exc:
        log.warning("the GPU's clocks and throttling are not recorded: %s", exc)
        return []


def _handle(lib: Any) -> Any:
    """NVML's handle of the job's GPU, by torch's UUID (NVML ignores CUDA_VISIBLE_DEVICES)."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    uuid = str(getattr(props, "uuid", "") or "")
    if uuid:
        return lib.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    if lib.nvmlDeviceGetCount() == 1:
        return lib.nvmlDeviceGetHandleByIndex(0)
    raise AttributeError("torch gives no UUID of the GPU, and NVML lists several")
