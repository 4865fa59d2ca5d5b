"""The timed loop: cold start, warm-up, calibration, then the timed repeats (docs/timing.md
says what each interval means and how many samples a job takes). Steady state is checked,
not assumed: a repeat in which anything compiled is named in ``Measurement.unsteady``.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchflow.backends.device import Device
from benchflow.config.schema import VALUES_PER_PROCESS, BenchConfig
from benchflow.harness.load import reference_step_s
from benchflow.results.child import Summary, Unsteady
from benchflow.results.intervals import fewest_for_interval, median_ci_rel
from benchflow.results.stats import summarize

log = logging.getLogger(__name__)


class Probe(Protocol):
    def snapshot(self) -> Any: ...
    def delta(self, before: Any, after: Any) -> dict[str, float]: ...


def _default(name: str) -> Any:
    """The config's default for `name` (config/schema.py: defined there once)."""
    return next(f.default for f in dataclasses.fields(BenchConfig) if f.name == name)


@dataclass(frozen=True)
class Sampling:
    """How many samples a job takes (None: adaptive repeats, calibrated iterations_per_run)."""

    repeat: int | None = _default("repeat")
    iterations_per_run: int | None = _default("iterations_per_run")
    adaptive_repeat: bool = _default("adaptive_repeat")
    max_repeat: int = _default("max_repeat")
    target_ci: float = _default("target_ci")
    min_run_time_s: float = _default("min_run_time_s")
    timed_budget_s: float = _default("timed_budget_s")
    processes: int | None = _default("processes")  # the job's processes (this one of them)
    slowdown: float = 0.0  # diagnostics: each timed step made this fraction slower

    @classmethod
    def of(cls, cfg: BenchConfig) -> Sampling:
        names = [f.name for f in dataclasses.fields(cls) if f.name != "slowdown"]
        return cls(**{n: getattr(cfg, n) for n in names}, slowdown=cfg.slowdown or 0.0)

    @property
    def adaptive(self) -> bool:
        return self.repeat is None or self.adaptive_repeat

    @property
    def fewest(self) -> int:
        """The repeats an adaptive rule takes before it may stop (results/intervals.py)."""
        one = (self.processes or 1) == 1
        return max(self.repeat or 0, fewest_for_interval() if one else VALUES_PER_PROCESS)


# Why the repeats stopped (the row's timing.stop).
STOP_COUNT, STOP_PRECISION, STOP_BUDGET, STOP_CAP = "count", "precision", "budget", "cap"


def stop_reason(per_iter: list[float], elapsed_s: float, rule: Sampling) -> str | None:
    """Why the timed repeats stop after these samples (None: take another)."""
    n = len(per_iter)
    if not rule.adaptive:
        return STOP_COUNT if n >= (rule.repeat or 1) else None
    if n >= rule.max_repeat:
        return STOP_CAP
    if n < rule.fewest:
        return None
    precision = median_ci_rel(per_iter)
    if precision is not None and precision <= rule.target_ci:
        return STOP_PRECISION
    return STOP_BUDGET if elapsed_s >= rule.timed_budget_s else None


@dataclass
class Measurement:
    first_iter_time_s: float = 0.0
    warmup_time_s: float = 0.0  # warm-up and calibration steps
    per_repeat: dict[str, list[float]] = field(default_factory=dict)
    cold: dict[str, float] = field(default_factory=dict)  # probe deltas over the first step
    warmup_steps: int = 0
    warmup_settled: bool | None = None  # adaptive warm-up: settled before its cap
    unsteady: list[Unsteady] = field(default_factory=list)  # repeats that compiled
    iterations_per_run: int = 1  # as used: given, or calibrated
    calibrated: bool = False  # iterations_per_run was calibrated to min_run_time_s
    calibration_steps: int = 0
    stop: str | None = None  # STOP_*: why the repeats stopped
    host_reference_s: float | None = None  # the reference step, before and after (load.py)
    ci_rel: float | None = None  # the median's 95% interval: larger half-width / median
    before_timed_s: float | None = None  # measure's `before_timed`, where it did something
    second: dict[str, float] = field(default_factory=dict)  # untimed: probe deltas, step 2

    def summary(self) -> Summary:
        return {key: summarize(vals) for key, vals in self.per_repeat.items()}


def _deltas(probes: list[Probe], before: list[Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for probe, snap in zip(probes, before, strict=True):
        out.update(probe.delta(snap, probe.snapshot()))
    return out


def _synced(
    step: Callable[[], Any], device: Device, probes: list[Probe]
) -> tuple[Any, float, dict[str, float]]:
    """One step, cut and synchronized: its output, its seconds and its probe deltas."""
    before = [p.snapshot() for p in probes]
    start = time.perf_counter()
    out = step()
    device.mark_step()
    device.synchronize()
    seconds = time.perf_counter() - start
    return out, seconds, _deltas(probes, before)


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


# Adaptive warm-up settles when nothing compiled for two windows whose medians agree within
# SETTLE_SPREAD: medians, so that one preempted step cannot keep it going to its cap.
SETTLE_WINDOW = 3
SETTLE_STEPS = 2 * SETTLE_WINDOW
SETTLE_SPREAD = 0.10


def settled(times: list[float]) -> bool:
    if len(times) < SETTLE_STEPS:
        return False
    last = statistics.median(times[-SETTLE_WINDOW:])
    before = statistics.median(times[-SETTLE_STEPS:-SETTLE_WINDOW])
    return last > 0 and abs(last - before) / last <= SETTLE_SPREAD


def _run(step: Callable[[], Any], device: Device, steps: int) -> float:
    """`steps` steps cut one by one, then a waiting synchronize: seconds taken."""
    start = time.perf_counter()
    for _ in range(steps):
        out = step()
        device.mark_step()
        del out
    device.synchronize()
    return time.perf_counter() - start


MAX_ITERATIONS_PER_RUN = 1_000_000


def calibrate(
    step: Callable[[], Any], device: Device, min_run_time_s: float
) -> tuple[int, float, int]:
    """The fewest steps per repeat lasting `min_run_time_s`, found as pyperf finds its loops:
    (steps per repeat, seconds a step in the last run, steps taken)."""
    n, taken = 1, 0
    while True:
        elapsed = _run(step, device, n)
        taken += n
        if elapsed >= min_run_time_s or n >= MAX_ITERATIONS_PER_RUN:
            return n, elapsed / n, taken
        grow = min(10.0, 1.05 * min_run_time_s / elapsed) if elapsed > 0 else 10.0
        n = min(MAX_ITERATIONS_PER_RUN, max(n + 1, math.ceil(n * grow)))


def measure(
    step: Callable[[], Any],
    device: Device,
    *,
    sampling: Sampling,
    warmup: int,
    probes: list[Probe],
    trace_time: bool,
    adaptive_warmup: bool = False,
    max_warmup: int = 50,
    on_first: Callable[[Any], None] | None = None,
    before_timed: Callable[[], float | None] = lambda: None,
) -> Measurement:
    """Run and time `step`, synchronized before every end timestamp. `on_first` gets the first
    step's output (results/digest.py); `before_timed` runs after the warm-up, counted in it."""
    m = Measurement()
    _cold(m, step, device, probes, on_first)

    start = time.perf_counter()
    _warm_up(m, step, device, warmup, probes, max_warmup if adaptive_warmup else None)
    m.before_timed_s = before_timed()
    if sampling.iterations_per_run is None:
        m.iterations_per_run, step_s, m.calibration_steps = calibrate(
            step, device, sampling.min_run_time_s
        )
        m.calibrated = True
        log.info("calibrated: %d step(s) per repeat (%.6f s a step)", m.iterations_per_run, step_s)
    else:
        m.iterations_per_run = sampling.iterations_per_run
    m.warmup_time_s = time.perf_counter() - start

    reference = [reference_step_s()]  # the host's speed, outside every timed region
    timed_start = time.perf_counter()
    r = 0
    while m.stop is None:
        before = [p.snapshot() for p in probes]
        metrics = _repeat(step, device, m.iterations_per_run, sampling.slowdown, trace_time)
        delta = _deltas(probes, before)
        for key, value in (metrics | delta).items():
            m.per_repeat.setdefault(key, []).append(float(value))
        if reason := compiled(delta):
            m.unsteady.append(Unsteady(r, reason))
            log.warning("repeat %d is not steady state: %s", r, reason)
        log.info("repeat %d: %.6f s/iter", r, metrics["per_iter_time_s"])
        per_iter = m.per_repeat["per_iter_time_s"]
        m.stop = stop_reason(per_iter, time.perf_counter() - timed_start, sampling)
        r += 1
    m.ci_rel = median_ci_rel(per_iter)
    reference.append(reference_step_s())
    m.host_reference_s = statistics.fmean(reference)
    log.info("%d repeat(s), stopped by %s, 95%% interval ±%s", r, m.stop, m.ci_rel)
    return m


def _cold(
    m: Measurement,
    step: Callable[[], Any],
    device: Device,
    probes: list[Probe],
    on_first: Callable[[Any], None] | None,
) -> None:
    """The first step (the compile), its seconds and its probe deltas into `m`."""
    out, m.first_iter_time_s, m.cold = _synced(step, device, probes)
    if on_first is not None:
        on_first(out)  # outside every timed region and counter delta
    del out
    log.info("cold start (first iteration) %.4f s", m.first_iter_time_s)


def untimed(
    step: Callable[[], Any],
    device: Device,
    *,
    probes: list[Probe],
    on_first: Callable[[Any], None] | None = None,
) -> Measurement:
    """timing=false: the first step and a second, each cut and synchronized, the
    second's probe deltas in `m.second` (what a step compiles again, and the XLA
    executions of one). No warm-up, no timed repeat: their seconds are only the job's
    phases (compile, warm-up), never a time of the model's."""
    m = Measurement()
    _cold(m, step, device, probes, on_first)
    # the job's phases count the second step as warm-up
    _, m.warmup_time_s, m.second = _synced(step, device, probes)
    return m


def _warm_up(
    m: Measurement,
    step: Callable[[], Any],
    device: Device,
    warmup: int,
    probes: list[Probe],
    max_warmup: int | None,
) -> None:
    """`warmup` steps; adaptive (`max_warmup`): then until nothing compiles and times agree."""
    out = None
    for _ in range(warmup):
        out = step()
        device.mark_step()
    device.synchronize()
    m.warmup_steps = warmup
    del out
    if max_warmup is None:
        return
    times: list[float] = []
    quiet = 0
    m.warmup_settled = False
    while m.warmup_steps < max_warmup:
        out, seconds, delta = _synced(step, device, probes)
        times.append(seconds)
        m.warmup_steps += 1
        quiet = 0 if compiled(delta) else quiet + 1
        if quiet >= SETTLE_STEPS and settled(times):
            m.warmup_settled = True
            break
        del out
    log.info("adaptive warm-up: %d steps, settled=%s", m.warmup_steps, m.warmup_settled)


def _repeat(
    step: Callable[[], Any], device: Device, iterations: int, slowdown: float, trace_time: bool
) -> dict[str, float]:
    """One timed repeat of `iterations` steps: its metrics (time, trace time, peak)."""
    traced = 0.0
    device.reset_peak_memory()
    # As timeit does: no garbage-collector pass lands in a timed repeat.
    gc.disable()
    start = time.perf_counter()
    for _ in range(iterations):
        t0 = time.perf_counter()
        # Alive until the step is cut (a lazy device prunes what nothing refers to), then
        # dropped: held over the next step, it changes what the allocator can reuse.
        out = step()
        traced += time.perf_counter() - t0
        device.mark_step()
        del out
    device.synchronize()
    if slowdown:
        # After the device finished, so that an asynchronous device is slowed as eager is.
        end = time.perf_counter() + slowdown * (time.perf_counter() - start)
        while time.perf_counter() < end:  # busy: a sleep wakes a scheduler tick late
            pass
    total = time.perf_counter() - start
    gc.enable()
    metrics = {"total_time_s": total, "per_iter_time_s": total / iterations}
    if trace_time:
        metrics["trace_total_time_s"] = traced
        metrics["trace_per_iter_time_s"] = traced / iterations
    peak = device.peak_memory_bytes()
    if peak is not None:
        metrics["peak_device_memory_bytes"] = peak
    return metrics
