"""Change points in a series of times (one value a sweep, in the sweeps' order): where a
job's time stepped to another level and stayed there.

Two stages, each a library's (docs/history.md says why these): candidates from a
penalized piecewise-constant fit (ruptures' PELT, least squares, as asv does) on the
logs in units of the series' own noise, with a BIC-like penalty; then each candidate
tested by Welch's t on the points either side, its p-values adjusted over the series
(Benjamini-Hochberg) and judged with the minimum effect as `report --compare` is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchflow.config.schema import THRESHOLD  # the smallest step reported
from benchflow.results.intervals import ALPHA, Interval, adjust, log_t_interval, welch_log_ratio
from benchflow.results.stats import geomean

PENALTY = 3.0  # times log(n): tuned on flat synthetic series (docs/history.md)
MIN_SIZE = 2  # a level needs 2 points: one point off is noise, not a change


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first point of the new level
    before: float  # the level before: the geometric mean of its points
    after: float
    before_ci: Interval | None  # Student's t over the points' logs (intervals.log_t_interval)
    after_ci: Interval | None
    ratio_ci: Interval | None  # of after / before
    p_value: float  # Welch's t, Benjamini-Hochberg adjusted over the series' candidates

    @property
    def ratio(self) -> float:
        return self.after / self.before

    @property
    def change(self) -> float:
        """+0.12: 12% slower after."""
        return self.ratio - 1


def noise_scale(logs: Sequence[float]) -> float:
    """The series' noise, one point's: the MAD of neighbours' differences, scaled to a
    normal's standard deviation over √2, so that a step does not inflate it."""
    import numpy as np
    from scipy.stats import median_abs_deviation

    diffs = np.diff(np.asarray(logs, dtype=float))
    if diffs.size == 0:
        return 0.0
    return float(median_abs_deviation(diffs, scale="normal") / np.sqrt(2))


def candidates(values: Sequence[float], penalty: float = PENALTY) -> list[int]:
    """Where the fit starts a new level (indices of first points), before any test."""
    import numpy as np
    import ruptures

    n = len(values)
    if n < 2 * MIN_SIZE or min(values) <= 0:
        return []
    logs = np.log(np.asarray(values, dtype=float))
    scale = noise_scale(logs)
    if scale <= 0:  # flat to the last digit but for steps: any step is one
        scale = max(float(np.ptp(logs)) * 1e-3, 1e-12)
    signal = ((logs - np.median(logs)) / scale).reshape(-1, 1)
    # KernelCPD's linear kernel: the same cuts as ruptures.Pelt(model="l2"), in C, far faster.
    fit = ruptures.KernelCPD(kernel="linear", min_size=MIN_SIZE, jump=1).fit(signal)
    return [int(b) for b in fit.predict(pen=penalty * float(np.log(n)))[:-1]]


def find(
    values: Sequence[float],
    threshold: float = THRESHOLD,
    penalty: float = PENALTY,
) -> list[ChangePoint]:
    """The series' significant change points, oldest first."""
    cuts = candidates(values, penalty)
    if not cuts:
        return []
    edges = [0, *cuts, len(values)]
    tests = []
    for i, cut in enumerate(cuts):
        before, after = list(values[edges[i] : cut]), list(values[cut : edges[i + 2]])
        tests.append((cut, before, after, welch_log_ratio(after, before, "Welch's t on logs")))
    p_values = [t.p_value if t.p_value is not None else 1.0 for *_, t in tests]
    found = []
    for (cut, before, after, test), q in zip(tests, adjust(p_values), strict=True):
        point = ChangePoint(
            index=cut,
            before=geomean(before),
            after=geomean(after),
            before_ci=log_t_interval(before),
            after_ci=log_t_interval(after),
            ratio_ci=test.ratio_ci,
            p_value=q,
        )
        if q < ALPHA and abs(point.change) >= threshold:
            found.append(point)
    return found
