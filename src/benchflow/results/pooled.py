"""processes=N: one job timed in N fresh processes, its samples pooled (as pyperf's
workers are), so that what differs between processes is inside the interval, not
hidden by one process's luck.

The pooled result is the first process's in all but its samples (cold call, digest,
accuracy); the series, summaries, steadiness and host load are the pool's, and the
interval is over the process medians (results/intervals.time_interval).
`timing.processes` keeps each process's own figures.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any

from benchflow.results.child import (
    ChildResult,
    ChildTimings,
    Timing,
    Unsteady,
)
from benchflow.results.intervals import Timed, time_interval
from benchflow.results.load import host_load
from benchflow.results.stats import summarize


def process_summary(result: ChildResult) -> dict[str, Any]:
    """One process's entry in `timing.processes`: its count, median, fastest, stop, cold call,
    and the compiled step it forked with (if it did)."""
    per_iter = result.metrics.get("per_iter_time_s")
    values = per_iter if isinstance(per_iter, list) else []
    return {
        "repeats": len(values),
        "median_s": statistics.median(values) if values else None,
        # its least disturbed repeat: a paired sweep's figure (results/intervals.py)
        "fastest_s": min(values) if values else None,
        "stop": result.timing.stop if result.timing else None,
        "first_iter_time_s": result.metrics.get("first_iter_time_s"),
        # forked with the step compiled (harness/prebuilt.warm_here): that call's seconds
        "shared_step_s": result.timing.shared_step_s if result.timing else None,
        "host_reference_s": result.metrics.get("host_reference_s"),
        "quiet": (result.timing.host or {}).get("quiet") if result.timing else None,
    }


def _timings(results: Sequence[ChildResult]) -> ChildTimings | None:
    parts = [r.child_timings for r in results if r.child_timings]
    if not parts:
        return None
    summed = {
        f.name: sum(getattr(p, f.name) for p in parts)
        for f in dataclasses.fields(ChildTimings)
        if f.name.endswith("_s")
    }
    return ChildTimings(**summed, entered=parts[0].entered, done=parts[-1].done)


def pool(results: Sequence[ChildResult], cores: int) -> ChildResult:
    """The processes' results of one job as one (each timed ok); `cores`: the job's."""
    first = results[0]
    if len(results) == 1 or first.timing is None:
        return first
    metrics: dict[str, Any] = dict(first.metrics)
    series: dict[str, list[float]] = {
        k: [] for k, v in first.metrics.items() if isinstance(v, list)
    }
    unsteady: list[Unsteady] = []
    offset = 0
    for r in results:
        for key, values in series.items():
            got = r.metrics.get(key)
            values.extend(got if isinstance(got, list) else [])
        if r.timing:
            unsteady += [Unsteady(u.repeat + offset, u.reason) for u in r.timing.unsteady_repeats]
            offset += r.timing.repeats or 0
    metrics.update(series)
    per_iter = series.get("per_iter_time_s") or []
    median = statistics.median(per_iter) if per_iter else 0.0
    processes = [process_summary(r) for r in results]
    timed = Timed.of(per_iter, processes)
    interval = time_interval(timed)
    summary = {k: summarize(v) for k, v in series.items() if v}
    if "per_iter_time_s" in summary:  # the time's interval is the processes' (intervals.py)
        summary["per_iter_time_s"].pop("ci_low", None)
        summary["per_iter_time_s"].pop("ci_high", None)
        if interval:
            summary["per_iter_time_s"] |= {"ci_low": interval.low, "ci_high": interval.high}
    if median > 0 and first.batch_size:
        metrics["throughput_samples_per_s"] = first.batch_size / median
    stops = list(dict.fromkeys(r.timing.stop for r in results if r.timing and r.timing.stop))
    load = host_load(series, cores)
    timing: Timing = dataclasses.replace(
        first.timing,
        steady_state=not unsteady,
        unsteady_repeats=unsteady,
        repeats=len(per_iter),
        ci_rel=interval.rel_half_width(median) if interval else None,
        stop=",".join(stops) or None,
        host=load.to_dict() if load else None,
        processes=processes,
    )
    return dataclasses.replace(
        first,
        metrics=metrics,
        summary=summary,
        timing=timing,
        child_timings=_timings(results),
        child_wall_s=sum(r.child_wall_s or 0.0 for r in results),
    )
