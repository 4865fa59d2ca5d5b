"""The few numbers a row is compared on (time, compile time, peak memory), read once
from a row for the report, the progress line and MLflow alike; no torch, no I/O
(docs/reports.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from benchflow import backends
from benchflow.backends.probes import EXPORT_METRICS
from benchflow.core.status import Status
from benchflow.results.flops import Flops
from benchflow.results.intervals import Timed, time_interval
from benchflow.results.load import HostLoad
from benchflow.results.row import ResultRow
from benchflow.results.stats import geomean, quantile

# An exporting backend's export seconds in its cold call (backends/probes.ExportProbe;
# the child keeps the cold call's probe deltas as cold_<metric>)
EXPORT_METRIC = f"cold_{EXPORT_METRICS['export']}"
# A row's arithmetic as MLflow metrics (results/flops.py), each where the row has it: the
# one list of their names (the peak they are a share of is in the row, and the report).
FLOP_METRICS: dict[str, Callable[[Flops], float | None]] = {
    "headline.flops_per_step": lambda f: f.per_step,
    "headline.flop_per_s": lambda f: f.per_s,
    "headline.flop_per_s_ci_low": lambda f: f.per_s_ci_low,
    "headline.flop_per_s_ci_high": lambda f: f.per_s_ci_high,
    "headline.share_of_peak": lambda f: f.share_of_peak,
    "headline.share_of_peak_ci_low": lambda f: f.share_ci_low,
    "headline.share_of_peak_ci_high": lambda f: f.share_ci_high,
}


@dataclass(frozen=True)
class Headline:
    status: Status
    backend: str  # the backend's label
    time_s: float | None  # median per-iteration time (None unless ok)
    q1_s: float | None
    q3_s: float | None
    ci_low_s: float | None  # the median's 95% interval (None: too few repeats)
    ci_high_s: float | None
    repeats: int
    processes: int  # how many processes timed it (their medians give the interval if > 1)
    host: HostLoad | None  # what else ran while it timed (results/load.py)
    host_reference_s: float | None  # the host's reference step (geomean over processes)
    cv: float | None  # coefficient of variation of the per-iteration times
    compiles: bool  # the backend's first call compiles (else compile time does not apply)
    compile_s: float | None
    compile_first_s: float | None  # the cold first call itself (compile included)
    export_s: float | None  # of the compile, the model's export (dynamo=aot_inductor)
    peak_bytes: float | None
    memory_kind: str | None  # "device" or "host RSS"
    flops: Flops | None = None  # FLOPs per step, FLOP/s and share of peak (None unless ok)

    @property
    def iqr_s(self) -> float | None:
        if self.q1_s is None or self.q3_s is None:
            return None
        return self.q3_s - self.q1_s

    def metrics(self, throughput: float | None = None) -> dict[str, float]:
        """As MLflow metrics, named to sort together; what does not apply is left out."""
        out = {
            "headline.per_iter_time_s": self.time_s,
            "headline.per_iter_time_iqr_s": self.iqr_s if self.time_s is not None else None,
            "headline.per_iter_time_ci_low_s": self.ci_low_s if self.time_s is not None else None,
            "headline.per_iter_time_ci_high_s": self.ci_high_s if self.time_s is not None else None,
            "headline.compile_time_s": self.compile_s,
            "headline.export_time_s": self.export_s,
            "headline.peak_memory_bytes": self.peak_bytes,
            "headline.throughput_samples_per_s": throughput,
            "headline.host_quiet": float(self.host.quiet) if self.host else None,
            "headline.host_contended_repeats": len(self.host.contended) if self.host else None,
            "headline.host_other_cpu_cores": self.host.other_cpu_cores if self.host else None,
            # a GPU row's (results/load.py): its throttled repeats and median SM clock
            "headline.gpu_throttled_repeats": len(self.host.throttled)
            if self.host and self.host.gpu_sm_clock_mhz is not None
            else None,
            "headline.gpu_sm_clock_mhz": self.host.gpu_sm_clock_mhz if self.host else None,
        }
        if self.flops is not None:
            out |= {name: read(self.flops) for name, read in FLOP_METRICS.items()}
        return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}


def median_time(row: ResultRow) -> float | None:
    """Median per-iteration seconds, the number a sweep is compared on."""
    stats = row.summary.get("per_iter_time_s")
    return stats["median"] if stats else None


def _median_of(value: float | list[float] | None) -> float | None:
    if isinstance(value, list):
        nums = [float(v) for v in value if isinstance(v, (int, float))]
        return statistics.median(nums) if nums else None
    return float(value) if isinstance(value, (int, float)) else None


def headline_of(row: ResultRow) -> Headline:
    summary = row.summary.get("per_iter_time_s") or {}
    per_repeat = row.series("per_iter_time_s")
    median = summary.get("median")
    q1: float | None
    q3: float | None
    if per_repeat:
        q1, q3 = quantile(per_repeat, 0.25), quantile(per_repeat, 0.75)
    elif median is not None:  # rows without the series: the summary's IQR around the median
        half = float(summary.get("iqr", 0.0)) / 2
        q1, q3 = median - half, median + half
    else:
        q1 = q3 = None
    ok = row.status is Status.OK
    backend = backends.REGISTRY.get(row.backend)
    compiles = backend.has_compile_step if backend else True
    first = row.scalar("first_iter_time_s")
    compile_s = max(0.0, first - median) if first is not None and median else None
    device_peak = _median_of(row.metrics.get("peak_device_memory_bytes"))
    host_peak = _median_of(row.metrics.get("peak_host_rss_bytes"))
    peak, kind = (device_peak, "device") if device_peak else (host_peak, "host RSS")
    cv = summary.get("cv")
    ci = _interval(summary, row)
    each_reference = references(row)  # the row's: the geometric mean of its processes'
    return Headline(
        status=row.status,
        backend=row.backend,
        time_s=float(median) if median is not None and ok else None,
        q1_s=q1,
        q3_s=q3,
        ci_low_s=ci[0] if ci and ok else None,
        ci_high_s=ci[1] if ci and ok else None,
        repeats=len(per_repeat),
        processes=max(1, len(row.timing.processes or ()) if row.timing else 1),
        host=HostLoad.from_dict(row.timing.host) if row.timing and ok else None,
        host_reference_s=geomean(each_reference) if ok and each_reference else None,
        cv=float(cv) if cv is not None and ok else None,
        compiles=compiles,
        compile_s=compile_s if ok and compiles else None,
        compile_first_s=first,
        export_s=row.scalar(EXPORT_METRIC) if ok else None,
        peak_bytes=peak if ok else None,
        memory_kind=kind if ok and peak else None,
        flops=row.flops if ok else None,
    )


def _interval(summary: dict[str, float], row: ResultRow) -> tuple[float, float] | None:
    """The time's 95% interval as recorded, else (rows before schema 4) from its samples."""
    if "ci_low" in summary and "ci_high" in summary:
        return float(summary["ci_low"]), float(summary["ci_high"])
    ci = time_interval(timed_of(row))
    return (ci.low, ci.high) if ci else None


def references(row: ResultRow) -> list[float]:
    """Each process's reference step time (harness/load.py); [] for rows without one."""
    processes = row.timing.processes if row.timing else None
    each = [p.get("host_reference_s") for p in processes or ()] or [row.scalar("host_reference_s")]
    return [float(s) for s in each if s] if all(each) else []


def timed_of(row: ResultRow) -> Timed:
    """A row's times as a sample to reason from: its repeats, and its processes'
    medians where it ran in more than one (results/intervals.py)."""
    processes = row.timing.processes if row.timing else None
    return Timed.of(row.series("per_iter_time_s"), processes)


def headline_metrics(row: ResultRow) -> dict[str, float]:
    """The headline numbers of a row as MLflow metrics."""
    return headline_of(row).metrics(row.scalar("throughput_samples_per_s"))
