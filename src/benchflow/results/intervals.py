"""How sure a number is: every interval and test benchflow reports, defined once.

Each function names its method and takes it from scipy.stats (docs/timing.md and
docs/reports.md say what each means, in one sentence each):

- :func:`median_ci`: the median's distribution-free confidence interval, from order
  statistics (the binomial method behind ``scipy.stats.quantile_test``). It assumes
  only that the samples are independent draws of one distribution, which is what the
  timing loop's steady state is checked for. It needs 6 samples at 95%.
- :func:`ratio_ci`: the ratio of two independent samples' medians (a speedup, a
  slowdown), by the percentile bootstrap (``scipy.stats.bootstrap``), each sample
  resampled on its own.
- :func:`geomean_ratio_ci`: the geometric mean over models of such ratios, by the same
  bootstrap, every model's two samples resampled on their own: what the measurement
  noise of each model makes of the summary (the models are fixed, not a sample).
- :func:`mann_whitney`: whether two samples differ in location (the Mann-Whitney U
  test, two-sided, on the raw per-repeat samples, as asv and google-benchmark's
  compare.py do); :func:`min_p_value` is the smallest p-value its sample sizes can
  reach, so that a comparison that could never be significant says so.
- :func:`adjust`: the Benjamini-Hochberg procedure over the rows of one comparison
  (``scipy.stats.false_discovery_control``): it bounds the share of false alarms among
  the rows called changed at the level asked for.

scipy is imported inside each function: the parent's other paths never pay for it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

LEVEL = 0.95  # every interval benchflow reports is a 95% one
ALPHA = 1 - LEVEL  # and every test is judged at this level
BOOTSTRAP_RESAMPLES = 2000  # percentile bootstrap: ~1-2% Monte Carlo error on a 95% bound
SEED = 0  # bootstrap resampling is seeded: the same rows give the same report


@dataclass(frozen=True)
class Interval:
    """A confidence interval [low, high] at `level`, and how it was made."""

    low: float
    high: float
    level: float = LEVEL
    method: str = ""

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def rel_half_width(self, center: float) -> float:
        """The interval's larger distance from `center`, relative to it (the precision a
        sampling rule targets: 0.02 means within ±2% of the median)."""
        if center <= 0:
            return math.inf
        return max(center - self.low, self.high - center) / center


def median_ci(values: Sequence[float], level: float = LEVEL) -> Interval | None:
    """The median's confidence interval from order statistics; None for fewer samples
    than the level needs (6 at 95%: the widest interval, smallest to largest, covers
    the median with probability 1 - 2·0.5^n)."""
    import numpy as np
    from scipy.stats import quantile_test

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return None
    ci = quantile_test(data, q=float(np.median(data)), p=0.5).confidence_interval(level)
    if not (math.isfinite(ci.low) and math.isfinite(ci.high)):
        return None
    return Interval(float(ci.low), float(ci.high), level, "order statistics")


def median_ci_rel(values: Sequence[float], level: float = LEVEL) -> float | None:
    """The median's interval as a share of the median (its larger half-width: 0.02 is
    ±2%), the precision the sampling rule targets and the row's `timing.ci_rel`; None
    where the values have no interval."""
    import statistics

    ci = median_ci(values, level)
    return ci.rel_half_width(statistics.median(values)) if ci else None


@functools.cache
def fewest_for_interval(level: float = LEVEL) -> int:
    """The fewest samples whose median has an interval at `level` (6 at 95%)."""
    return next(n for n in range(1, 1000) if median_ci([float(i) for i in range(n)], level))


def _medians_ratio(num, den, axis=-1):  # type: ignore[no-untyped-def]
    import numpy as np

    return np.median(num, axis=axis) / np.median(den, axis=axis)


def ratio_ci(num: Sequence[float], den: Sequence[float], level: float = LEVEL) -> Interval | None:
    """The interval of median(num) / median(den), two independent samples; None when
    either has fewer than 2 values (no resampling can vary it) or a median is not
    positive."""
    import numpy as np

    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if a.size < 2 or b.size < 2 or np.median(a) <= 0 or np.median(b) <= 0:
        return None
    return _percentile_bootstrap((a, b), _medians_ratio, level, "percentile bootstrap")


def geomean_ratio_ci(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], level: float = LEVEL
) -> Interval | None:
    """The interval of the geometric mean over models of median(num_i) / median(den_i);
    None when a model has fewer than 2 values on a side or none is given."""
    import numpy as np

    samples = [np.asarray(s, dtype=float) for pair in pairs for s in pair]
    if not samples or any(s.size < 2 or np.median(s) <= 0 for s in samples):
        return None

    def geomean_of_ratios(*resampled, axis=-1):  # type: ignore[no-untyped-def]
        logs = [
            np.log(_medians_ratio(resampled[i], resampled[i + 1], axis))
            for i in range(0, len(resampled), 2)
        ]
        return np.exp(np.mean(logs, axis=0))

    what = "percentile bootstrap over each model's samples"
    # batch: every sample's resamples are held at once per batch (memory)
    return _percentile_bootstrap(tuple(samples), geomean_of_ratios, level, what, batch=200)


def _percentile_bootstrap(samples, statistic, level, what, batch=None):  # type: ignore[no-untyped-def]
    """scipy.stats.bootstrap's percentile interval of `statistic` over independent
    samples, each resampled on its own (seeded: the same rows give the same report)."""
    import numpy as np
    from scipy.stats import bootstrap

    res = bootstrap(
        samples,
        statistic,
        n_resamples=BOOTSTRAP_RESAMPLES,
        batch=batch,
        vectorized=True,
        paired=False,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(SEED),
    )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Interval(low, high, level, what)


def mann_whitney(base: Sequence[float], cand: Sequence[float]) -> float | None:
    """The two-sided p-value of the Mann-Whitney U test of two samples (exact where
    scipy computes it exactly: small samples without ties); None without samples."""
    from scipy.stats import mannwhitneyu

    if len(base) == 0 or len(cand) == 0:
        return None
    return float(mannwhitneyu(list(base), list(cand), alternative="two-sided").pvalue)


def min_p_value(n_base: int, n_cand: int) -> float:
    """The smallest two-sided p-value the U test can give for these sample sizes: that
    of two samples that do not overlap at all (3 against 3: 0.1, never below 0.05)."""
    from scipy.stats import mannwhitneyu

    if n_base < 1 or n_cand < 1:
        return 1.0
    apart = mannwhitneyu(
        list(range(n_base)),
        list(range(n_base, n_base + n_cand)),
        alternative="two-sided",
        method="exact" if n_base + n_cand <= 60 else "asymptotic",
    )
    return float(apart.pvalue)


def adjust(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the same order."""
    from scipy.stats import false_discovery_control

    if not p_values:
        return []
    return [float(q) for q in false_discovery_control(list(p_values), method="bh")]
