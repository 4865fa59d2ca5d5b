"""The timed loop: cold start, warm-up, then `repeat` x `iterations_per_run` steps.

What each number means (seeds 000/001/003):
- ``first_iter_time_s``: the very first step, synchronized; includes compilation.
- ``total_time_s``: one repeat from the first step's start until the device has
  finished the last one (mark_step per step, then a waiting synchronize).
- ``trace_total_time_s`` (XLA only): host time spent inside the steps before the
  sync, i.e. tracing; device execution is not in it.
- counter deltas (XLA CompileTime/ExecuteTime, dynamo) per repeat.

Steady state is checked, not assumed: a repeat in which XLA compiled, dynamo made
a new graph or spent compile time, is named in ``Measurement.unsteady`` (the row
gets ``timing.steady_state=false`` and the reason). ``adaptive_warmup`` keeps
warming up, one synchronized step at a time, until no step compiles and the last
few step times agree, with a cap; ``adaptive_repeat`` adds repeats until the
median's confidence interval is tight enough, with a cap.
"""

from __future__ import annotations

import gc
import logging
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchflow.backends.device import Device
from benchflow.results.child import Summary, Unsteady
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
    warmup_steps: int = 0
    warmup_settled: bool | None = None  # adaptive warm-up: settled before its cap
    unsteady: list[Unsteady] = field(default_factory=list)  # repeats that compiled
    ci_rel: float | None = None  # the median's 95% CI half-width over the median

    @property
    def steady_state(self) -> bool:
        return not self.unsteady

    def add(self, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.per_repeat.setdefault(key, []).append(float(value))

    def summary(self) -> Summary:
        return {key: summarize(vals) for key, vals in self.per_repeat.items()}


def _deltas(probes: list[Probe], before: list[Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for probe, snap in zip(probes, before, strict=True):
        out.update(probe.delta(snap, probe.snapshot()))
    return out


def compiled(delta: dict[str, float]) -> str | None:
    """What compiled inside a region, from its probe deltas (None: nothing did)."""
    reasons = []
    if (n := delta.get("xla_CompileTime_number", 0)) > 0:
        reasons.append(f"XLA compiled {n:g} graph(s)")
    graphs = max(delta.get("dynamo_unique_graphs", 0), delta.get("dynamo_frames_ok", 0))
    if graphs > 0:
        reasons.append(f"dynamo made {graphs:g} new graph(s)")
    elif (t := delta.get("dynamo_compile_time_s", 0.0)) > 0:
        reasons.append(f"dynamo/Inductor compiled for {t:.3f} s")
    return "; ".join(reasons) or None


# Adaptive warm-up settles when nothing compiled for two windows of SETTLE_WINDOW steps
# and the two windows' median step times agree within SETTLE_SPREAD: no trend is left.
# Medians, not a max-min spread, so that a step a busy host preempted cannot keep the
# warm-up going to its cap (one CI run saw 50 steps of 7-11 ms never settle on that).
SETTLE_WINDOW = 3
SETTLE_STEPS = 2 * SETTLE_WINDOW
SETTLE_SPREAD = 0.10


def settled(times: list[float]) -> bool:
    if len(times) < SETTLE_STEPS:
        return False
    last = statistics.median(times[-SETTLE_WINDOW:])
    before = statistics.median(times[-SETTLE_STEPS:-SETTLE_WINDOW])
    return last > 0 and abs(last - before) / last <= SETTLE_SPREAD


def median_ci_rel(values: list[float]) -> float | None:
    """Half-width of a 95% confidence interval of the mean (normal approximation, the
    spread `torch.utils.benchmark` reports), relative to the median."""
    if len(values) < 2:
        return None
    mid = statistics.median(values)
    return 1.96 * statistics.stdev(values) / math.sqrt(len(values)) / mid if mid > 0 else None


def measure(
    step: Callable[[], Any],
    device: Device,
    *,
    repeat: int,
    iterations_per_run: int,
    warmup: int,
    probes: list[Probe],
    trace_time: bool,
    adaptive_warmup: bool = False,
    max_warmup: int = 50,
    adaptive_repeat: bool = False,
    max_repeat: int = 50,
    target_ci: float = 0.02,
    on_first: Callable[[Any], None] | None = None,
) -> Measurement:
    """Run and time `step`; the device is synchronized before every end timestamp.
    `on_first` is handed the first step's output once it was timed (results/digest.py)."""
    m = Measurement()

    before = [p.snapshot() for p in probes]
    start = time.perf_counter()
    out = step()
    device.mark_step()
    device.synchronize()
    m.first_iter_time_s = time.perf_counter() - start
    m.cold = _deltas(probes, before)
    if on_first is not None:
        on_first(out)  # outside every timed region and counter delta
    del out
    log.info("cold start (first iteration) %.4f s", m.first_iter_time_s)

    start = time.perf_counter()
    for _ in range(warmup):
        out = step()
        device.mark_step()
    device.synchronize()
    m.warmup_steps = warmup
    if adaptive_warmup:
        # One synchronized step at a time until nothing compiles and the times agree.
        times: list[float] = []
        quiet = 0
        m.warmup_settled = False
        while m.warmup_steps < max_warmup:
            before = [p.snapshot() for p in probes]
            t0 = time.perf_counter()
            out = step()
            device.mark_step()
            device.synchronize()
            times.append(time.perf_counter() - t0)
            m.warmup_steps += 1
            quiet = 0 if compiled(_deltas(probes, before)) else quiet + 1
            if quiet >= SETTLE_STEPS and settled(times):
                m.warmup_settled = True
                break
        log.info("adaptive warm-up: %d steps, settled=%s", m.warmup_steps, m.warmup_settled)
    m.warmup_time_s = time.perf_counter() - start

    r = 0
    while r < repeat or (
        adaptive_repeat and r < max_repeat and (m.ci_rel is None or m.ci_rel > target_ci)
    ):
        before = [p.snapshot() for p in probes]
        traced = 0.0
        device.reset_peak_memory()
        # As timeit (hence torch.utils.benchmark) does: no garbage-collector pass lands
        # in a timed repeat (a full collect between repeats would cool the caches).
        gc.disable()
        start = time.perf_counter()
        for _ in range(iterations_per_run):
            t0 = time.perf_counter()
            # Keep the output alive until the step is cut (a lazy device prunes what
            # nothing refers to), then drop it, as a plain loop would: holding it over
            # the next step changes what the allocator can reuse.
            out = step()
            traced += time.perf_counter() - t0
            device.mark_step()
            del out
        device.synchronize()
        total = time.perf_counter() - start
        gc.enable()
        metrics = {"total_time_s": total, "per_iter_time_s": total / iterations_per_run}
        if trace_time:
            metrics["trace_total_time_s"] = traced
            metrics["trace_per_iter_time_s"] = traced / iterations_per_run
        peak = device.peak_memory_bytes()
        if peak is not None:
            metrics["peak_device_memory_bytes"] = peak
        delta = _deltas(probes, before)
        metrics.update(delta)
        m.add(metrics)
        if reason := compiled(delta):
            m.unsteady.append(Unsteady(r, reason))
            log.warning("repeat %d is not steady state: %s", r, reason)
        m.ci_rel = median_ci_rel(m.per_repeat["per_iter_time_s"])
        log.info("repeat %d: %.6f s/iter", r, metrics["per_iter_time_s"])
        r += 1
    return m
