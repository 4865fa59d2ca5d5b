"""Summaries over repeats. Pure Python: the parent uses them without torch."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default), q in [0, 1]."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values: Sequence[float]) -> dict[str, float]:
    """median, min, max, mean, std (sample), iqr and cv over one metric's repeats, and
    the median's 95% interval (ci_low, ci_high: results/intervals.py) where it has one."""
    from benchflow.results.intervals import median_ci

    vals = [float(v) for v in values]
    mean = statistics.fmean(vals)
    std = statistics.stdev(vals) if len(vals) > 1 else 0.0
    ci = median_ci(vals)
    return ({"ci_low": ci.low, "ci_high": ci.high} if ci else {}) | {
        "median": statistics.median(vals),
        "min": min(vals),
        "max": max(vals),
        "mean": mean,
        "std": std,
        "iqr": quantile(vals, 0.75) - quantile(vals, 0.25),
        "cv": std / mean if mean else 0.0,
    }


def geomean(values: Sequence[float]) -> float:
    if not values or any(v <= 0 for v in values):
        raise ValueError("geomean needs positive values")
    return math.exp(statistics.fmean(math.log(v) for v in values))
