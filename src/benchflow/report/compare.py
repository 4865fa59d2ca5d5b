"""Baseline sweep against candidate sweep: each row's verdict, and the regression gate.

A row both sides timed is judged on its samples and a minimum effect (`threshold`, 5%
by default), together (docs/reports.md):

- a test of the two sides' samples gives a p-value (results/intervals.compare_times):
  Welch's t on the log process medians where both sides ran in more than one process,
  else Mann-Whitney U on the raw per-repeat samples; the p-values of all the rows
  compared are adjusted together by Benjamini-Hochberg, so that at most 5% of the rows
  called changed are false alarms;
- the change is the ratio of the times (candidate / baseline), with its 95% interval.

regression: significant (adjusted p < 0.05) and slower than 1 + threshold;
improvement: significant and faster than 1 / (1 + threshold);
no significant change: the ratio's interval lies within ±threshold: any change there
is smaller than the threshold, with 95% confidence;
insufficient data: neither can be said: the sample sizes could never reach p < 0.05
(3 against 3 repeats in one process each), or the interval is wider than the threshold
allows.
A regression or an improvement where a side ran on a busy host, or where the host ran
its reference step at another speed for one side than for the other (results/load.py)
by enough to account for the change, is `suspicious`: it is shown with why, and does
not fail the gate. A change past the threshold even once the host's own change is
taken off its interval stays a regression (or improvement), and says how the host
moved. A job
that passed in the baseline and not in the candidate (a failure, a crash, a timeout, or
accuracy that broke) is *broken* and fails the gate. Models only one side ran are
listed, never dropped, and do not fail it.

Each configuration is judged too, on the geometric mean of its rows' changes over the
models both sides timed (results/intervals.geomean_change_test: Welch's t on the mean
log ratio), by the same rule and threshold, its p-values adjusted over the
configurations: a configuration can be a significant regression though none of its
rows is on its own (many small slowdowns), and then fails the gate as a row does.

Paired (`report --pair AXIS`, report/pairs.py): the two sides are one sweep's A and B,
whose processes ran round by round; each row is tested on its rounds' log ratios (a
paired t-test), each configuration on the rounds' mean over its models, and judged by
the same rule.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from benchflow.report.entry import Entry
from benchflow.report.model import Report
from benchflow.results.intervals import (
    ALPHA,
    Interval,
    Test,
    Timed,
    adjust,
    compare_times,
    geomean_change_test,
    paired_geomean_test,
    paired_ratio_test,
)
from benchflow.results.load import speed_change
from benchflow.results.stats import geomean

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no significant change"
INSUFFICIENT = "insufficient data"
SUSPICIOUS = "suspicious"  # a change measured on a busy host: shown, not failing
BROKEN = "broken"
FAILING = (REGRESSION, BROKEN)
GOOD = (IMPROVEMENT, "fixed")


@dataclass
class Change:
    model: str
    test: str
    config: str
    base: Entry | None
    cand: Entry | None
    verdict: str
    detail: str
    tested: Test | None = None  # candidate against baseline (results/intervals.py)
    q_value: float | None = None  # the p-value adjusted over the comparison's rows (BH)
    threshold: float = 0.0  # the minimum effect it was judged with
    paired: bool = False  # the sides' processes paired by round (one sweep's A and B)
    budget: int | None = None  # paired, in a paired sweep of this many rounds (pair=AXIS)

    @property
    def ratio_ci(self) -> Interval | None:
        """candidate / baseline time, its 95% interval."""
        return self.tested.ratio_ci if self.tested else None

    @property
    def p_value(self) -> float | None:
        return self.tested.p_value if self.tested else None

    @property
    def ratio(self) -> float | None:
        """candidate time / baseline time: > 1 is slower. Paired by round, the change its
        test is on (the geometric mean of the ratios of the rounds it counted: its
        interval's center), so that the change judged against the threshold is the one
        tested."""
        if self.paired and self.tested and self.tested.estimate is not None:
            return self.tested.estimate
        if self.base and self.cand and self.base.time_s and self.cand.time_s:
            return self.cand.time_s / self.base.time_s
        return None

    @property
    def fails(self) -> bool:
        return self.verdict in FAILING


def _by_status(base: Entry, cand: Entry) -> tuple[str, str] | None:
    """The verdict when a side did not pass (None: both passed, judge their times)."""
    if base.passed and not cand.passed:
        what = cand.status if cand.status != "ok" else f"accuracy {cand.verification}"
        return BROKEN, f"passed in the baseline, {what} in the candidate {cand.error}".rstrip()
    if not base.passed and cand.passed:
        return "fixed", "passes now"
    if not base.passed:
        return "still failing", cand.status if cand.status != "ok" else cand.verification
    return None


def _judge_times(change: Change, threshold: float) -> tuple[str, str]:
    """A timed row's verdict from its adjusted p-value, ratio and interval."""
    assert change.base and change.cand and change.tested and change.ratio is not None
    return _judge(
        change.ratio,
        change.tested,
        change.q_value,
        threshold,
        _busy(change),
        _speed(change),
    )


def _judge(
    ratio: float,
    test: Test,
    q: float | None,
    threshold: float,
    busy: str = "",
    speed: float | None = None,
) -> tuple[str, str]:
    """A change's verdict (a row's, or a configuration's over its models) from its ratio,
    its test, the test's adjusted p-value, and what the host did meanwhile."""
    ci = test.ratio_ci
    effect = f"{ratio - 1:+.1%}"
    if q is None or not test.can_reach:
        return INSUFFICIENT, f"{effect}; {test.method} can never reach p < {ALPHA:g}"
    where = f"{ci.level * 100:.3g}% CI {ci.low - 1:+.1%} to {ci.high - 1:+.1%}" if ci else "no CI"
    upper, lower = 1 + threshold, 1 / (1 + threshold)
    significant = f"{effect} ({where}), p={q:.2g} after BH"
    if q < ALPHA and not lower <= ratio <= upper:
        if busy or (speed and not _beyond_host(ratio, ci, upper, lower, 1 + speed)):
            why = " and ".join(x for x in (busy, _speed_words(speed)) if x)
            return SUSPICIOUS, f"{significant}, but {why}"
        if speed:  # past what the host's change could make of it: say how it moved
            way = "less than the change" if (speed > 0) == (ratio > 1) else "the other way"
            significant += f"; {_speed_words(speed)}, {way}"
        return (REGRESSION if ratio > upper else IMPROVEMENT), significant
    if ci and lower <= ci.low and ci.high <= upper:
        return NO_CHANGE, f"{effect} ({where}): within ±{threshold:.0%}"
    return INSUFFICIENT, f"{effect} ({where}) is wider than ±{threshold:.0%}, p={q:.2g}"


def _busy(change: Change) -> str:
    """Which side ran on a busy host, in words; "" when neither."""
    sides = [
        f"the {name} ran on a busy host ({e.host.described})"
        for name, e in (("baseline", change.base), ("candidate", change.cand))
        if e and e.host and not e.host.quiet
    ]
    return " and ".join(sides)


def _speed(change: Change) -> float | None:
    """How much slower (> 0) the host ran its reference step for the candidate than for
    the baseline, beyond the limit (results/load.py); None: the same speed."""
    base, cand = change.base, change.cand
    return speed_change(base.host_reference_s, cand.host_reference_s) if base and cand else None


def _speed_words(speed: float | None) -> str:
    if speed is None:
        return ""
    return (
        f"the host ran its reference step {abs(speed):.0%} "
        f"{'slower' if speed > 0 else 'faster'} for the candidate than for the baseline"
    )


def _beyond_host(
    ratio: float, ci: Interval | None, upper: float, lower: float, host: float
) -> bool:
    """Is the change beyond what the host's own change of speed (`host`: its reference
    step's ratio, candidate over baseline) could have made of it, with 95% confidence?
    The host can slow (or speed) a job as much as it did its reference step: the ratio's
    interval, less that, must still lie past the threshold."""
    if ci is None:
        return False
    if ratio > upper:
        return ci.low / max(host, 1.0) > upper
    return ci.high / min(host, 1.0) < lower


def compare(
    base: Report,
    cand: Report,
    threshold: float,
    paired: bool = False,
    budget: int | None = None,
) -> list[Change]:
    """One change per (model, test, configuration) that either side has; `paired`: the
    two sides are one sweep's A and B, their processes paired by round (report/pairs.py);
    `budget`: that sweep was a paired sweep (pair=AXIS) of so many rounds, which judged
    its pairs as it went: each is tested at the look where it stopped (sequential_test)."""
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    b, c = base.lookup(), cand.lookup()
    changes: list[Change] = []
    for key in [*b, *(k for k in c if k not in b)]:
        model, test, config = key
        be, ce = b.get(key), c.get(key)
        if be is None:
            verdict, detail = "new", "only in the candidate"
        elif ce is None:
            verdict, detail = "missing", "only in the baseline"
        else:
            verdict, detail = _by_status(be, ce) or ("", "")
        changes.append(
            Change(
                model,
                test,
                config,
                be,
                ce,
                verdict,
                detail,
                threshold=threshold,
                paired=paired,
                budget=budget,
            )
        )
    timed = [ch for ch in changes if not ch.verdict]
    for ch in timed:
        assert ch.base and ch.cand
        if paired:
            ch.tested = paired_ratio_test(ch.cand.timed, ch.base.timed, budget=budget)
        else:
            ch.tested = compare_times(ch.cand.timed, ch.base.timed)
    tested = [ch for ch in timed if ch.p_value is not None]
    for ch, q in zip(tested, adjust([ch.p_value or 1.0 for ch in tested]), strict=True):
        ch.q_value = q
    for ch in timed:
        ch.verdict, ch.detail = _judge_times(ch, threshold)
    return changes


def judge_paired(cand: Timed, base: Timed, threshold: float, budget: int, family: int = 1) -> str:
    """One pair's verdict at a look of a paired sweep (sweep/pairs.py), by the rule and
    test `report --pair` judges its row by: the look's sequential test on the rounds so
    far, and the change it is on. `family`: the pairs the report will adjust
    together; the p-value is taken times their number (Bonferroni), which is never less
    than the report's Benjamini-Hochberg value for it, so that a pair decided here as a
    regression or an improvement is one in the report too."""
    test = paired_ratio_test(cand, base, budget=budget)
    ratio = test.estimate or statistics.median(cand.repeats) / statistics.median(base.repeats)
    q = None if test.p_value is None else min(1.0, test.p_value * family)
    return _judge(ratio, test, q, threshold)[0]


@dataclass
class Overall:
    """One configuration's change over the models both sides timed (as the HUD averages
    only over models that ran on both sides): the geomean of candidate / baseline, its
    test (results/intervals.geomean_change_test) and verdict, judged as a row's is."""

    config: str
    models: int
    geomean_ratio: float
    tested: Test
    q_value: float | None = None  # adjusted over the comparison's configurations (BH)
    verdict: str = ""
    detail: str = ""

    @property
    def ci(self) -> Interval | None:
        return self.tested.ratio_ci

    @property
    def fails(self) -> bool:
        return self.verdict in FAILING


def overall(changes: list[Change]) -> list[Overall]:
    """Per configuration, the geomean of the ratios of the rows both sides timed, and its
    verdict: regression, improvement, no significant change or insufficient data by the
    rows' rule and threshold, the p-values adjusted over the configurations (a family
    of their own: the rows' adjustment is over the rows); suspicious where a row of it
    ran on a busy host."""
    by_config: dict[str, list[Change]] = {}
    for ch in changes:
        if ch.ratio is not None and ch.base and ch.cand and ch.base.passed and ch.cand.passed:
            by_config.setdefault(ch.config, []).append(ch)
    out = []
    for config, rows in by_config.items():
        pairs = [(c.cand.timed, c.base.timed) for c in rows if c.cand and c.base]
        ratios = [c.ratio for c in rows if c.ratio]
        if rows[0].paired:
            test = paired_geomean_test(pairs, budget=rows[0].budget)
        else:
            test = geomean_change_test(pairs)
        out.append(Overall(config, len(rows), geomean(ratios), test))
    tested = [o for o in out if o.tested.p_value is not None]
    for o, q in zip(tested, adjust([o.tested.p_value or 1.0 for o in tested]), strict=True):
        o.q_value = q
    for o in out:
        rows = by_config[o.config]
        busy = next((b for b in map(_busy, rows) if b), "")
        o.verdict, o.detail = _judge(o.geomean_ratio, o.tested, o.q_value, rows[0].threshold, busy)
    return out
