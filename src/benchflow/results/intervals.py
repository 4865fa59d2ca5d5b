"""How sure a number is: every interval and test benchflow reports, defined once.

A job timed in more than one process (``processes``, 3 by default where the repeats
are adaptive) is judged by its processes: each process's median is one sample, since
what differs between processes (memory layout, thread placement, the host's state)
moves a whole process's times together and is most of the noise. A job timed in one
process is judged by its repeats, and says so. :class:`Timed` holds both; each function
below names its method and takes it from scipy.stats (docs/timing.md and
docs/reports.md say what each means, in one sentence each):

- :func:`time_interval`: a job's time. By processes: Student's t interval of the mean
  of the log process medians (``scipy.stats.ttest_1samp``), exponentiated: where the
  typical process's median lies. By repeats: :func:`median_ci`, the median's
  distribution-free interval from order statistics (the binomial method behind
  ``scipy.stats.quantile_test``), which assumes only independent draws of one
  distribution (what the timing loop's steady state is checked for; 6 samples at 95%).
- :func:`compare_times`: two jobs' times (a speedup, a slowdown). By processes:
  Welch's t-test on the log process medians (``scipy.stats.ttest_ind``,
  ``equal_var=False``), whose interval of the difference of the mean logs,
  exponentiated, is the interval of the ratio. By repeats: the Mann-Whitney U test on
  the raw per-repeat samples (as asv and google-benchmark's compare.py do), with the
  ratio of medians' interval from the percentile bootstrap (``scipy.stats.bootstrap``),
  each sample resampled on its own, and :func:`min_p_value`, the smallest p-value those
  sample sizes can reach, so that a comparison that could never be significant says so.
- :func:`geomean_ratio_ci`: the geometric mean over models of such ratios, by the
  bootstrap, every model's two samples (process medians, or repeats) resampled on their
  own: what the measurement noise of each model makes of the summary (the models are
  fixed, not a sample).
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
    """One job's times as a sample to reason from: its per-repeat per-iteration times
    (pooled over its processes), and each process's median where it ran in more than
    one (then the process is the unit of replication), and its fastest repeat (what a
    paired test compares round by round: paired_figures)."""

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


def log_t_interval(values: Sequence[float], level: float = LEVEL) -> Interval | None:
    """Student's t interval of the mean of log(values), exponentiated (the interval of
    their geometric mean); None under 2 values or for a value that is not positive."""
    import numpy as np
    from scipy.stats import ttest_1samp

    data = np.asarray(values, dtype=float)
    if data.size < 2 or np.any(data <= 0):
        return None
    logs = np.log(data)
    what = "t on log process medians"
    if np.ptp(logs) == 0:  # all equal: t is undefined, the interval is the value
        return Interval(float(data[0]), float(data[0]), level, what)
    ci = ttest_1samp(logs, 0.0).confidence_interval(level)
    return Interval(float(np.exp(ci.low)), float(np.exp(ci.high)), level, what)


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
    """num against den: by processes when both ran in more than one (Welch's t on the
    log process medians), else by their repeats (Mann-Whitney U, bootstrap ratio)."""
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
    """Welch's t test of the logs of two samples of times (at least 2 each): its p-value,
    and the interval of the ratio of their geometric means (its CI of the difference of
    the mean logs, exponentiated)."""
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
    """A configuration's change over models: the geometric mean over models of num_i's
    time / den_i's, tested as Welch's t is for one model, extended to the mean of the
    models' log-ratio differences (each model's two samples independent; Welch-
    Satterthwaite degrees of freedom): its p-value against no change, and the interval
    of the geomean ratio. Each model's samples are both sides' process medians where
    both ran in more than one process, else their repeats. scipy tests one difference of
    means, not a mean of several, hence this."""
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
    """num against den process by process: the i-th process of each ran in the same round
    of an interleaved sweep (sweep/steps.py), one after the other, so the host's drift
    from round to round is common to the pair and drops out of its ratio. Student's t
    on the rounds' log ratios (a paired t-test): its p-value against no change, and the
    interval of their geometric mean; `budget`: a paired sweep's rounds (sequential_test)."""
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
    """Each of the first `rounds` rounds' mean over the pairs of log(num's process
    figure / den's: paired_figures), as a numpy array, over the rounds each pair counts
    (results/load.paired_rounds: a round whose two processes found the host busy for
    one and quiet for the other, or at two speeds, is no pair); and how many rounds no
    pair counted."""
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
    """Each process's figure in a paired test: its fastest repeat, where every process
    has one (rows from before it was kept: its median). A repeat is a window of steps
    (harness/timing.py) and the host only ever slows one, so the window it left alone is
    the process's speed; the median of three moves as soon as two are disturbed
    (docs/reports.md, where the replayed figures are)."""
    fastest = timed.process_fastest
    return fastest if len(fastest) == len(timed.process_medians) else timed.process_medians


def _round_facts(num: Timed, den: Timed, rounds: int) -> list[tuple[bool, float]] | None:
    """Each of the first `rounds` rounds' (both processes found the host alike: both
    quiet or both busy, num's reference step / den's); None where a side's processes
    lack them (rows from before they were kept)."""
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
    """Student's t on log ratios (a numpy array) against 0, and their geometric mean's
    interval; none under 2 of them."""
    import numpy as np
    from scipy.stats import ttest_1samp

    if len(logs) < 2:
        return Test(None, None, what, False)
    estimate = float(np.exp(np.mean(logs)))
    if np.ptp(logs) == 0:  # the same ratio every round: t is undefined
        interval = Interval(estimate, estimate, level, what)
        return Test(1.0 if estimate == 1 else 0.0, interval, what, True, estimate)
    res = ttest_1samp(logs, 0.0)
    ci = res.confidence_interval(level)
    interval = Interval(float(np.exp(ci.low)), float(np.exp(ci.high)), level, what)
    return Test(float(res.pvalue), interval, what, True, estimate)


def looks(budget: int) -> tuple[int, ...]:
    """The rounds after which a paired sweep of `budget` rounds judges its pairs: the
    first after FIRST_LOOK (Student's t with 2 degrees of freedom), then each about half
    as many rounds again (3, 5, 8, 12, ...), and the budget. Few looks: each spends its
    own share of the false-alarm level (look_alpha), so every look costs the others."""
    out = [FIRST_LOOK]
    while (following := math.ceil(out[-1] * 1.5)) < budget:
        out.append(following)
    return (*(r for r in out if r < budget), budget)


@functools.cache
def look_alpha(rounds: int, budget: int, alpha: float = ALPHA) -> float:
    """The false-alarm level the look after `rounds` rounds is tested at: the
    O'Brien-Fleming-type spending function of Lan and DeMets (1983),
    a(t) = 2 - 2 Phi(z_(1 - alpha/2) / sqrt(t)) at t = rounds / budget, gives each look
    a(t) less what the earlier looks took, so that little is spent early (when few
    rounds can mislead) and most at the budget. Each look is tested at its share alone;
    by Bonferroni's inequality the chance of a false alarm at any look, however the
    looks' statistics go together, is at most their sum, `alpha` (conservative: the
    exact group-sequential bounds would take the looks' correlation into account)."""
    from scipy.stats import norm

    z = norm.ppf(1 - alpha / 2)

    def spent(r: int) -> float:
        return 0.0 if r <= 0 else float(2 - 2 * norm.cdf(z / math.sqrt(min(r, budget) / budget)))

    marks = looks(budget)
    at = max((r for r in marks if r <= rounds), default=0)
    before = max((r for r in marks if r < at), default=0)
    return spent(at) - spent(before)


def sequential_test(pairs: Sequence[tuple[Timed, Timed]], rounds: int, budget: int) -> Test:
    """The pairs' paired test at the look of a paired sweep that their `rounds` reached
    (the last look at or before them: a sweep records a pair where it stopped, at a
    look), over that look's rounds and at its level, look_alpha. Its p-value is scaled
    to the sweep's level, p * ALPHA / look_alpha (capped at 1): p < ALPHA exactly where
    the look's own test is significant, so that reports judge it by the usual rule."""

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
    """Why a paired sweep's pair, undecided at the look its `rounds` reached, cannot be
    decided by its `budget` ("" where it can): its change lies within ±threshold, so no
    look can call it past the threshold unless it moves, and at its rounds' spread the
    budget's interval (the last look's level, over `budget` rounds) would still be wider
    than the band, so no look can call it within the band either. A futility rule
    (non-binding): a pair stopped by it is judged at its look as any other, so it can
    only take chances of a false alarm away, never add one (look_alpha's bound holds).
    On the per-round ratios of 117 A/A pairs of this VM's sweeps (benchmarks/RESULTS.md)
    it stopped them after 5.1 rounds on average instead of 8.0 and, with 5% added to
    each, called as many regressions as without it (83); on rounds drawn at random
    (tests/test_intervals.py), 1% fewer."""
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
    """A model's two samples, as a geomean over models takes them: both sides' process
    medians where both ran in more than one process, else their repeats."""
    if num.by_process and den.by_process:
        return num.process_medians, den.process_medians
    return num.repeats, den.repeats


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


def geomean_ratio_ci(pairs: Sequence[tuple[Timed, Timed]], level: float = LEVEL) -> Interval | None:
    """The interval of the geometric mean over models of num_i's time / den_i's time:
    where every model ran in more than one process on both sides, Student's t on the
    mean log ratio (geomean_change_test, as one model's speedup is Welch's t: a
    bootstrap of 3 process medians can only reshuffle them); else a percentile
    bootstrap with each model's two samples (process medians, or repeats) resampled on
    their own. None when a model has fewer than 2 values on a side or none is given."""
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
