"""Baseline sweep against candidate sweep: each row's verdict, and the regression gate.

A row both sides timed is judged on a test of its samples (results/intervals.py, its
p-values adjusted over the rows by Benjamini-Hochberg) together with a minimum effect,
`threshold`; each configuration is judged the same way on its geomean over models, so
that many small slowdowns can fail the gate though no row does. A change the host's
load or speed could account for is `suspicious` and does not fail it. Verdicts and the
paired form (`--pair`, report/pairs.py) are in docs/reports.md.
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
NOT_TIMED = "not timed"  # a side ran with timing=false: its accuracy is judged, no time
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
        test is on, so that the change judged against the threshold is the one tested."""
        if self.paired and self.tested and self.tested.estimate is not None:
            return self.tested.estimate
        if self.base and self.cand and self.base.time_s and self.cand.time_s:
            return self.cand.time_s / self.base.time_s
        return None

    @property
    def fails(self) -> bool:
        return self.verdict in FAILING


def _by_status(base: Entry, cand: Entry) -> tuple[str, str] | None:
    """The verdict when a side did not pass, or was not timed (None: both passed and
    were timed: judge their times)."""
    if base.passed and not cand.passed:
        what = cand.status if cand.status != "ok" else f"accuracy {cand.verification}"
        return BROKEN, f"passed in the baseline, {what} in the candidate {cand.error}".rstrip()
    if not base.passed and cand.passed:
        return "fixed", "passes now"
    if not base.passed:
        return "still failing", cand.status if cand.status != "ok" else cand.verification
    if untimed := [name for name, e in (("baseline", base), ("candidate", cand)) if e.untimed]:
        return NOT_TIMED, f"the {' and the '.join(untimed)} ran with timing=false: no time"
    return None


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
    """Does the ratio's interval still lie past the threshold once the host's own change
    of speed (`host`: its reference step's ratio) is taken off it?"""
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
    """One change per (model, test, configuration) either side has; `paired`: paired by
    round (report/pairs.py); `budget`: a paired sweep's rounds."""
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
    for ch in timed:  # each timed row's verdict from its ratio, test and adjusted p-value
        assert ch.tested and ch.ratio is not None
        ch.verdict, ch.detail = _judge(
            ch.ratio, ch.tested, ch.q_value, threshold, _busy(ch), _speed(ch)
        )
    return changes


def judge_paired(cand: Timed, base: Timed, threshold: float, budget: int, family: int = 1) -> str:
    """One pair's verdict at a look of a paired sweep (sweep/pairs.py), by `report
    --pair`'s rule. `family`: the pairs the report adjusts together; Bonferroni over them
    is never below the report's BH value, so a pair decided here is decided there too."""
    test = paired_ratio_test(cand, base, budget=budget)
    ratio = test.estimate or statistics.median(cand.repeats) / statistics.median(base.repeats)
    q = None if test.p_value is None else min(1.0, test.p_value * family)
    return _judge(ratio, test, q, threshold)[0]


@dataclass
class Overall:
    """One configuration's change over the models both sides timed (as the HUD's): the
    geomean of candidate / baseline, its test and its verdict, judged as a row's is."""

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
    """Per configuration, the geomean of its rows' ratios and its verdict by the rows'
    rule, adjusted over the configurations; suspicious where a row ran on a busy host."""
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
