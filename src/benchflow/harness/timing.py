"""The timed loop: cold start, warm-up, then `repeat` x `iterations_per_run` steps.

What each number means (seeds 000/001/003):
- ``first_iter_time_s``: the very first step, synchronized; includes compilation.
- ``total_time_s``: one repeat from the first step's start until the device has
  finished the last one (mark_step per step, then a waiting synchronize).
- ``trace_total_time_s`` (XLA only): host time spent inside the steps before the
  sync, i.e. tracing; device execution is not in it.
- counter deltas (XLA CompileTime/ExecuteTime, dynamo) per repeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchflow.backends.device import Device
from benchflow.results.stats import summarize

log = logging.getLogger(__name__)


class Probe(Protocol):
    def snapshot(self) -> Any: ...
    def delta(self, before: Any, after: Any) -> dict[str, float]: ...


@dataclass
class Measurement:
    first_iter_time_s: float = 0.0
    warmup_time_s: float = 0.0
    per_repeat: dict[str, list[float]] = field(default_factory=dict)
    cold: dict[str, float] = field(default_factory=dict)  # probe deltas over the first step

    def add(self, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.per_repeat.setdefault(key, []).append(float(value))

    def summary(self) -> dict[str, dict[str, float]]:
        return {key: summarize(vals) for key, vals in self.per_repeat.items()}


def _deltas(probes: list[Probe], before: list[Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for probe, snap in zip(probes, before, strict=True):
        out.update(probe.delta(snap, probe.snapshot()))
    return out


def measure(
    step: Callable[[], Any],
    device: Device,
    *,
    repeat: int,
    iterations_per_run: int,
    warmup: int,
    probes: list[Probe],
    trace_time: bool,
) -> Measurement:
    """Run and time `step`; the device is synchronized before every end timestamp."""
    m = Measurement()

    before = [p.snapshot() for p in probes]
    start = time.perf_counter()
    out = step()
    device.mark_step()
    device.synchronize()
    m.first_iter_time_s = time.perf_counter() - start
    m.cold = _deltas(probes, before)
    del out
    log.info("cold start (first iteration) %.4f s", m.first_iter_time_s)

    start = time.perf_counter()
    for _ in range(warmup):
        out = step()
        device.mark_step()
    device.synchronize()
    m.warmup_time_s = time.perf_counter() - start

    for r in range(repeat):
        before = [p.snapshot() for p in probes]
        traced = 0.0
        device.reset_peak_memory()
        start = time.perf_counter()
        for _ in range(iterations_per_run):
            t0 = time.perf_counter()
            # Keep the output alive until the sync, or a lazy device may prune its graph.
            out = step()
            traced += time.perf_counter() - t0
            device.mark_step()
        device.synchronize()
        total = time.perf_counter() - start
        del out
        metrics = {"total_time_s": total, "per_iter_time_s": total / iterations_per_run}
        if trace_time:
            metrics["trace_total_time_s"] = traced
            metrics["trace_per_iter_time_s"] = traced / iterations_per_run
        peak = device.peak_memory_bytes()
        if peak is not None:
            metrics["peak_device_memory_bytes"] = peak
        metrics.update(_deltas(probes, before))
        m.add(metrics)
        log.info("repeat %d: %.6f s/iter", r, metrics["per_iter_time_s"])
    return m
