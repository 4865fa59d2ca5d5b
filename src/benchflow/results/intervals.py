"""How sure a number is: every interval and test benchflow reports, defined once.

A job timed in more than one process is judged by its processes (each process's
median is one sample: what differs between processes moves a whole process's times
together and is most of the noise); a job timed in one process by its repeats, and
says so. Each function names its method, taken from scipy.stats (docs/timing.md,
docs/reports.md), but for the two every job and command takes (a median's, a geometric
mean's), worked out here as scipy does and checked against it: importing scipy.stats
costs a process 1.2 CPU-seconds. scipy is imported inside each function: other paths
never pay for it.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchflow.config.schema import FIRST_LOOK
from benchflow.results.child import process_facts, process_values
from benchflow.results.load import paired_rounds

LEVEL = 0.95  # every interval benchflow reports is a 95% one
ALPHA = 1 - LEVEL  # and every test is judged at this level
BOOTSTRAP_RESAMPLES = 2000  # percentile bootstrap: ~1-2% Monte Carlo error on a 95% bound
SEED = 0  # bootstrap resampling is seeded: the same rows give the same report


@dataclass(frozen=True)
class Timed:
    """One job's times as a sample: its per-repeat times (pooled over its processes),
    and each process's median and fastest repeat where it ran in more than one."""

    repeats: tuple[float, ...]
    process_medians: tuple[float, ...] = ()
    # each process's reference step (harness/load.py) and whether its host was quiet
    # (results/load.py), where every process has them: which rounds a pair counts
    process_references: tuple[float, ...] = ()
    process_quiet: tuple[bool, ...] = ()
    process_fastest: tuple[float, ...] = ()

    @classmethod
    def of(cls, repeats: Sequence[float], processes: list[dict[str, Any]] | None) -> Timed:
        """A job's repeats and its `Timing.processes` (results/pooled.process_summary)."""
        facts = process_facts(processes)
        return cls(
            tuple(repeats),
            process_values(processes, "median_s"),
            tuple(ref for ref, _ in facts),
            tuple(quiet for _, quiet in facts),
            process_values(processes, "fastest_s"),
        )

    @property
    def by_process(self) -> bool:
        return len(self.process_medians) >= 2

    @property
    def unit(self) -> str:
        """What one sample is, in words: "3 processes", "20 repeats"."""
        if self.by_process:
            return f"{len(self.process_medians)} processes"
        return f"{len(self.repeats)} repeats in one process"


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
        """The interval's larger distance from `center`, relative to it (0.02: ±2%)."""
        if center <= 0:
            return math.inf
        return max(center - self.low, self.high - center) / center


def median_ci(values: Sequence[float], level: float = LEVEL) -> Interval | None:
    """The median's order-statistics interval; None under the samples `level` needs (6 at 95%).

    scipy.stats.quantile_test's two-sided interval for p=0.5, from the binomial's exact
    tail in whole numbers: every job's timing loop and every command take it, and
    importing scipy.stats costs a process 1.2 CPU-seconds (test_intervals checks the two
    agree)."""
    from fractions import Fraction

    data = sorted(float(v) for v in values)
    n = len(data)
    if n == 0:
        return None
    # Of the 2**n equally likely signs of (x_i - median), how many may fall in each tail.
    tail = Fraction((1 - level) / 2) * 2**n
    k, term, below = 0, 1, 1  # below: the sign patterns with at most k values under
    while below < tail:  # the binomial's ppf: the first k whose cdf reaches the tail
        term = term * (n - k) // (k + 1)
        k += 1
        below += term
    low, high = k - 1, n - 1 - (k if below == tail else k - 1)  # isf, by symmetry
    if low < 0 or high >= n:
        return None
    return Interval(data[low], data[high], level, "order statistics")


def median_ci_rel(values: Sequence[float], level: float = LEVEL) -> float | None:
    """The median's interval as a share of the median (the row's `timing.ci_rel`, what
    the sampling rule targets); None where the values have no interval."""
    ci = median_ci(values, level)
    return ci.rel_half_width(statistics.median(values)) if ci else None


@functools.cache
def fewest_for_interval(level: float = LEVEL) -> int:
    """The fewest samples whose median has an interval at `level` (6 at 95%)."""
    return next(n for n in range(1, 1000) if median_ci([float(i) for i in range(n)], level))


def _student_t(logs: Sequence[float], level: float) -> tuple[float, float, float]:
    """Student's t against 0 on `logs` (at least 2, not all equal): their mean, the
    half-width of its interval at `level` and the two-sided p-value. scipy.stats.ttest_1samp's,
    from scipy.special's t distribution (a fifth of scipy.stats' import, and a tenth of
    ttest_1samp's time a call; test_intervals checks the two agree)."""
    from scipy.special import stdtr, stdtrit

    n = len(logs)
    mean, se = statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(n)
    half = float(stdtrit(n - 1, (1 + level) / 2)) * se
    return mean, half, 2 * float(stdtr(n - 1, -abs(mean) / se))


def log_t_interval(values: Sequence[float], level: float = LEVEL) -> Interval | None:
    """Student's t interval of their geometric mean; None under 2 values or for one <= 0."""
    data = [float(v) for v in values]
    if len(data) < 2 or min(data) <= 0:
        return None
    logs = [math.log(v) for v in data]
    what = "t on log process medians"
    if max(logs) == min(logs):  # all equal: t is undefined, the interval is the value
        return Interval(data[0], data[0], level, what)
    mean, half, _ = _student_t(logs, level)
    return Interval(math.exp(mean - half), math.exp(mean + half), level, what)


def time_interval(timed: Timed, level: float = LEVEL) -> Interval | None:
    """A job's time's interval: by processes, :func:`log_t_interval` of the process
    medians; by repeats, :func:`median_ci` of the repeats."""
    if timed.by_process:
        return log_t_interval(timed.process_medians, level)
    return median_ci(timed.repeats, level) if timed.repeats else None


@dataclass(frozen=True)
class Test:
    """Two jobs' times compared: num / den."""

    p_value: float | None  # two-sided; None: no test could be made
    ratio_ci: Interval | None  # the interval of num's time / den's time
    method: str  # what was tested, in words
    can_reach: bool  # False: these sample sizes can never give p < ALPHA
    # the change the test is on, where it is not the ratio of the two times (a paired
    # test's: the geometric mean of the rounds' ratios it counted)
    estimate: float | None = None


def compare_times(num: Timed, den: Timed, level: float = LEVEL) -> Test:
    """num against den: Welch's t on the log process medians where both ran in more
    than one process, else Mann-Whitney U on the repeats with a bootstrap ratio interval."""
    if num.by_process and den.by_process:
        a, b = num.process_medians, den.process_medians
        return welch_log_ratio(
            a, b, f"Welch's t on log process medians, {len(a)} against {len(b)}", level
        )
    what = f"Mann-Whitney U on repeats, {len(num.repeats)} against {len(den.repeats)}"
    return Test(
        mann_whitney(den.repeats, num.repeats),
        ratio_ci(num.repeats, den.repeats, level),
        what,
        min_p_value(len(den.repeats), len(num.repeats)) < ALPHA,
    )


def welch_log_ratio(
    num: Sequence[float], den: Sequence[float], what: str, level: float = LEVEL
) -> Test:
    """Welch's t test of the logs of two samples of times (at least 2 each): its p-value
    and the interval of the ratio of their geometric means."""
    import numpy as np

    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if a.size < 2 or b.size < 2 or np.any(a <= 0) or np.any(b <= 0):
        return Test(None, None, what, False)
    from scipy.stats import ttest_ind

    la, lb = np.log(a), np.log(b)
    if np.ptp(la) == 0 and np.ptp(lb) == 0:  # no spread on either side: no t
        ratio = float(a[0] / b[0])
        return Test(1.0 if ratio == 1 else 0.0, Interval(ratio, ratio, level, what), what, True)
    res = ttest_ind(la, lb, equal_var=False)
    ci = res.confidence_interval(level)
    interval = Interval(float(np.exp(ci.low)), float(np.exp(ci.high)), level, what)
    return Test(float(res.pvalue), interval, what, True)


def geomean_change_test(pairs: Sequence[tuple[Timed, Timed]], level: float = LEVEL) -> Test:
    """A configuration's change over models: Welch's t extended to the mean of the
    models' log-ratio differences (Welch-Satterthwaite degrees of freedom), its p-value
    and the geomean ratio's interval. scipy tests one difference of means, not a mean of
    several, hence this."""
    import numpy as np
    from scipy.stats import t as student

    what = f"Welch's t on the mean log ratio over {len(pairs)} model(s)"
    terms: list[tuple[float, int]] = []  # each side's variance of its mean log, its n
    diffs = []
    for num, den in pairs:
        logs = [np.log(np.asarray(s, dtype=float)) for s in _samples(num, den) if len(s) >= 2]
        if len(logs) < 2 or not all(np.isfinite(x).all() for x in logs):
            return Test(None, None, what, False)
        diffs.append(float(logs[0].mean() - logs[1].mean()))
        terms += [(float(x.var(ddof=1)) / x.size, x.size) for x in logs]
    if not diffs:
        return Test(None, None, what, False)
    k = len(diffs)
    mean, var = float(np.mean(diffs)), sum(v for v, _ in terms) / k**2
    if var == 0:  # no spread anywhere: the ratio is what it is
        ratio = float(np.exp(mean))
        return Test(1.0 if mean == 0 else 0.0, Interval(ratio, ratio, level, what), what, True)
    df = sum(v for v, _ in terms) ** 2 / sum(v**2 / (n - 1) for v, n in terms)
    stat = mean / var**0.5
    half = float(student.ppf(0.5 + level / 2, df)) * var**0.5
    interval = Interval(float(np.exp(mean - half)), float(np.exp(mean + half)), level, what)
    return Test(float(2 * student.sf(abs(stat), df)), interval, what, True)


def paired_ratio_test(
    num: Timed, den: Timed, level: float = LEVEL, budget: int | None = None
) -> Test:
    """num against den process by process, a paired t-test on the rounds' log ratios:
    the i-th processes ran in the same round of an interleaved sweep (sweep/steps.py), so
    the host's drift drops out of their ratio. `budget`: a paired sweep's rounds."""
    return paired_geomean_test([(num, den)], level, budget)


def paired_geomean_test(
    pairs: Sequence[tuple[Timed, Timed]], level: float = LEVEL, budget: int | None = None
) -> Test:
    """A configuration's change over models, paired by round: in each round the mean
    over models of their log ratios (num_i's process figure / den_i's: paired_figures),
    then Student's t over the rounds (the rounds every model has on both sides).
    `budget`: the pairs ran in a paired sweep that looked at them as it went and stops
    by `budget` rounds: the test is its look's (sequential_test)."""

    rounds = min((min(len(n.process_medians), len(d.process_medians)) for n, d in pairs), default=0)
    if budget is not None:
        return sequential_test(pairs, rounds, budget)
    models = f", {len(pairs)} models" if len(pairs) > 1 else ""
    if rounds < 2:
        return Test(None, None, f"paired t over {rounds} rounds{models}", False)
    logs, left_out = _round_logs(pairs, rounds)
    return _one_sample_t(logs, level, _paired_what(rounds, left_out, models))


def _paired_what(rounds: int, left_out: int, models: str, look: str = "") -> str:
    """A paired test's method, in words: its rounds, those left out, its look."""
    over = f"{rounds - left_out} of {rounds} rounds" if left_out else f"{rounds} rounds"
    out = f"paired t over {over}{models}"
    if left_out:
        out += f" ({left_out} left out: the host busy or slower for one process of the two)"
    return out + (f", {look}" if look else "")


def _round_logs(pairs: Sequence[tuple[Timed, Timed]], rounds: int) -> tuple[Any, int]:
    """Each of the first `rounds` rounds' mean log ratio over the pairs that count it
    (results/load.paired_rounds), and how many rounds no pair counted."""
    import numpy as np

    logs = np.full((len(pairs), rounds), np.nan)
    for i, (n, d) in enumerate(pairs):
        facts = _round_facts(n, d, rounds)
        counted = np.asarray(paired_rounds(facts) if facts else [True] * rounds, dtype=bool)
        ratio = np.log(np.asarray(paired_figures(n)[:rounds])) - np.log(
            np.asarray(paired_figures(d)[:rounds])
        )
        logs[i, counted] = ratio[counted]
    kept = ~np.isnan(logs).all(axis=0)
    return np.nanmean(logs[:, kept], axis=0), int(rounds - kept.sum())


def paired_figures(timed: Timed) -> tuple[float, ...]:
    """Each process's figure in a paired test: its fastest repeat where every process has
    one, else its median. The host only ever slows a window of steps, so the one it left
    alone is the process's speed (docs/reports.md)."""
    fastest = timed.process_fastest
    return fastest if len(fastest) == len(timed.process_medians) else timed.process_medians


def _round_facts(num: Timed, den: Timed, rounds: int) -> list[tuple[bool, float]] | None:
    """Each of the first `rounds` rounds' (both processes found the host alike, num's
    reference step / den's); None where a side's processes lack them."""
    sides = (num, den)
    if any(len(t.process_quiet) < rounds or len(t.process_references) < rounds for t in sides):
        return None
    return [
        (
            num.process_quiet[i] == den.process_quiet[i],
            num.process_references[i] / den.process_references[i],
        )
        for i in range(rounds)
    ]


def _one_sample_t(logs: Any, level: float, what: str) -> Test:
    """Student's t on log ratios against 0, and their geometric mean's interval."""
    if len(logs) < 2:
        return Test(None, None, what, False)
    values = [float(x) for x in logs]
    estimate = math.exp(statistics.fmean(values))
    if max(values) == min(values):  # the same ratio every round: t is undefined
        interval = Interval(estimate, estimate, level, what)
        return Test(1.0 if estimate == 1 else 0.0, interval, what, True, estimate)
    mean, half, p = _student_t(values, level)
    interval = Interval(math.exp(mean - half), math.exp(mean + half), level, what)
    return Test(p, interval, what, True, estimate)


def looks(budget: int) -> tuple[int, ...]:
    """The rounds after which a paired sweep judges its pairs: 3, 5, 8, 12, ... and the
    budget. Few, since each spends its own share of the false-alarm level (look_alpha)."""
    out = [FIRST_LOOK]
    while (following := math.ceil(out[-1] * 1.5)) < budget:
        out.append(following)
    return (*(r for r in out if r < budget), budget)


@functools.cache
def look_alpha(rounds: int, budget: int, alpha: float = ALPHA) -> float:
    """The false-alarm level the look after `rounds` rounds is tested at: its share of
    the O'Brien-Fleming-type spending function of Lan and DeMets (1983), little early
    and most at the budget. By Bonferroni the looks' false alarms sum to at most `alpha`
    (conservative: it ignores the looks' correlation)."""
    from scipy.stats import norm

    z = norm.ppf(1 - alpha / 2)

    def spent(r: int) -> float:
        return 0.0 if r <= 0 else float(2 - 2 * norm.cdf(z / math.sqrt(min(r, budget) / budget)))

    marks = looks(budget)
    at = max((r for r in marks if r <= rounds), default=0)
    before = max((r for r in marks if r < at), default=0)
    return spent(at) - spent(before)


def sequential_test(pairs: Sequence[tuple[Timed, Timed]], rounds: int, budget: int) -> Test:
    """The pairs' paired test at the last look their `rounds` reached, at its level
    (look_alpha). Its p-value is scaled by ALPHA / look_alpha (capped at 1), so that
    reports judge it by the usual p < ALPHA rule."""

    at = max((r for r in looks(budget) if r <= rounds), default=0)
    models = f", {len(pairs)} models" if len(pairs) > 1 else ""
    if not at:
        return Test(
            None, None, f"paired t over {rounds} rounds{models}, before the first look", False
        )
    share, marks = look_alpha(at, budget), looks(budget)
    look = f"look {marks.index(at) + 1} of {len(marks)} at alpha={share:.2g}"
    logs, left_out = _round_logs(pairs, at)
    test = _one_sample_t(logs, 1 - share, _paired_what(at, left_out, models, look))
    scaled = None if test.p_value is None else min(1.0, test.p_value * ALPHA / share)
    return Test(scaled, test.ratio_ci, test.method, test.can_reach, test.estimate)


def out_of_reach(num: Timed, den: Timed, rounds: int, budget: int, threshold: float) -> str:
    """Why an undecided pair cannot be decided by its `budget` ("" where it can): its
    change lies within ±threshold, and at its spread the budget's interval would still
    be wider than the band. A non-binding futility rule: a pair stopped by it is judged
    at its look as any other, so it never adds a false alarm (benchmarks/RESULTS.md)."""
    import numpy as np
    from scipy.stats import t

    at = max((r for r in looks(budget) if r <= rounds), default=0)
    if not at or at >= budget:
        return ""
    logs, _ = _round_logs([(num, den)], at)
    if len(logs) < 2:
        return ""
    band, estimate = math.log1p(threshold), float(np.mean(logs))
    half = float(t.ppf(1 - look_alpha(budget, budget) / 2, budget - 1))
    half *= float(np.std(logs, ddof=1)) / math.sqrt(budget)
    if abs(estimate) > band or abs(estimate) + half <= band:
        return ""
    return (
        f"{math.expm1(estimate):+.1%} lies within ±{threshold:.0%}, and at its rounds' "
        f"spread an interval after {budget} rounds would still reach "
        f"{math.expm1(math.copysign(abs(estimate) + half, estimate)):+.1%}"
    )


def _samples(num: Timed, den: Timed) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A model's two samples: both sides' process medians where both have them, else repeats."""
    if num.by_process and den.by_process:
        return num.process_medians, den.process_medians
    return num.repeats, den.repeats


def _medians_ratio(num, den, axis=-1):  # type: ignore[no-untyped-def]
    import numpy as np

    return np.median(num, axis=axis) / np.median(den, axis=axis)


def ratio_ci(num: Sequence[float], den: Sequence[float], level: float = LEVEL) -> Interval | None:
    """The bootstrap interval of median(num) / median(den); None under 2 values a side."""
    import numpy as np

    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if a.size < 2 or b.size < 2 or np.median(a) <= 0 or np.median(b) <= 0:
        return None
    return _percentile_bootstrap((a, b), _medians_ratio, level, "percentile bootstrap")


def geomean_ratio_ci(pairs: Sequence[tuple[Timed, Timed]], level: float = LEVEL) -> Interval | None:
    """The interval of the geometric mean over models of num_i's time / den_i's: by
    processes, geomean_change_test's (a bootstrap of 3 process medians can only
    reshuffle them); else a percentile bootstrap of each model's two samples. None when
    a model has fewer than 2 values on a side or none is given."""
    import numpy as np

    if pairs and all(num.by_process and den.by_process for num, den in pairs):
        return geomean_change_test(pairs, level).ratio_ci

    samples = [np.asarray(s, dtype=float) for n, d in pairs for s in _samples(n, d)]
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
    """The smallest two-sided p-value the U test can give for these sample sizes (3
    against 3: 0.1), so that a comparison that can never be significant says so."""
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
