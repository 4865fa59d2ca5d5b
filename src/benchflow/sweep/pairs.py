"""A paired sweep (`pair=AXIS`): the sweep's two values of one axis, A and B, compared
job by job as it runs, each pair stopped once its change is decided.

Its jobs run one process a round (sweep/steps.py), A's and B's of the same settings one
right after the other, so that the host's drift between rounds drops out of their ratio
(report/pairs.py); B runs first in every other round (Stopping.swaps), so that an
effect of running second falls on both sides alike. After the rounds that are looks
(results/intervals.looks: 3, 5, 8, ... and the budget, `processes`), the sweeper judges
each pair that both sides ran ok this far, as `benchflow report SWEEP --pair AXIS`
will: the paired t-test at the look's share of the false-alarm level
(results/intervals.sequential_test), by the sweep's `pair_threshold`. A pair whose
change is a regression or an improvement past the threshold, or lies within it, is
decided; so is one that no look up to the budget could decide (its change within the
threshold, its spread too wide for the band: results/intervals.out_of_reach). Its two
jobs are recorded then from the processes they have, and run no more. As asv's `continuous` and
pyperf's `compare_to` would, but the sweep stops sampling what is already clear, as
nvbench and google-benchmark stop on a noise criterion, with the looks accounted for.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchflow.config.errors import ConfigError
from benchflow.core.job import Job, Plan
from benchflow.core.status import Status
from benchflow.results.intervals import Timed, looks, out_of_reach
from benchflow.results.pooled import process_summary
from benchflow.runner.isolated import Outcome


@dataclass(frozen=True)
class Pair:
    """Two jobs of one configuration, A (the axis's first value in the sweep) and B."""

    a: Job
    b: Job

    @property
    def nums(self) -> tuple[int, int]:
        return self.a.num, self.b.num

    def described(self) -> str:
        """What the sweep's notes call it: "NAME: job 1 (slowdown=0.05) against job 0
        (slowdown=null)"."""
        axis = self.a.config.pair
        a, b = (
            next((o.lstrip("+~") for o in job.overrides if _key(o) == axis), "?")
            for job in (self.a, self.b)
        )
        return f"{self.b.name}: job {self.b.num} ({b}) against job {self.a.num} ({a})"


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def axis_of(jobs: Sequence[Job]) -> str | None:
    """The sweep's `pair=` (None: not a paired sweep). Raises ConfigError where its jobs
    name more than one."""
    named = {job.config.pair for job in jobs}
    if len(named) > 1:
        values = ", ".join(sorted(str(v) for v in named))
        raise ConfigError(f"pair differs between the sweep's jobs ({values}); allowed: one axis")
    return named.pop() if named else None


def pairs_of(jobs: Sequence[Job]) -> list[Pair]:
    """The sweep's pairs ([]: not a paired sweep). Raises ConfigError, naming the axes
    there are, where `pair=` is not an axis of the sweep with two values."""
    axis = axis_of(jobs)
    if axis is None:
        return []
    values: dict[str, list[str]] = {}  # each key's values, in the order of job numbers
    for job in sorted(jobs, key=lambda j: j.num):
        for o in job.overrides:
            values.setdefault(_key(o), [])
            if (value := o.split("=", 1)[-1]) not in values[_key(o)]:
                values[_key(o)].append(value)
    axes = [k for k, v in values.items() if len(v) > 1]
    if axis not in axes:
        close = difflib.get_close_matches(axis, axes, n=1)
        hint = f"did you mean pair={close[0]}? " if close else ""
        raise ConfigError(
            f"pair={axis} is not an axis of this sweep; {hint}allowed: "
            + (", ".join(axes) or "none: give two values, e.g. -m slowdown=null,0.05 pair=slowdown")
        )
    if len(values[axis]) != 2:
        raise ConfigError(
            f"pair={axis}: the sweep has {len(values[axis])} values of it "
            f"({', '.join(values[axis])}); allowed: two ({axis}=A,B)"
        )
    a_value = values[axis][0]
    sides: dict[tuple[str, ...], dict[bool, Job]] = {}
    for job in sorted(jobs, key=lambda j: j.num):
        rest = tuple(sorted(o for o in job.overrides if _key(o) != axis))
        is_a = f"{axis}={a_value}" in (o.lstrip("+~") for o in job.overrides)
        sides.setdefault(rest, {}).setdefault(is_a, job)
    return [Pair(s[True], s[False]) for s in sides.values() if len(s) == 2]


def steps_from(jobs: Sequence[Job]) -> dict[int, int]:
    """Each B of the sweep's pairs, with its A, whose first process's steps per repeat B's
    processes run (core/job.Step.steps_from): both sides time the same loop. Calibrated
    apart, A and B of one A/A pair came out 25 and 26 steps, or 2 and 3, and their times
    1-3% apart in every round: a difference of the loop, which pairing does not take out."""
    return {pair.b.num: pair.a.num for pair in pairs_of(jobs)}


def _timed(outcomes: Sequence[Outcome], upto: int) -> Timed | None:
    """The job's processes 0..upto-1 as a sample, as a row pools them (results/pooled.py)
    (None: one is missing or not ok)."""
    summaries: list[dict[str, Any]] = []
    repeats: list[float] = []
    for outcome in outcomes[:upto]:
        per_iter = outcome.result.metrics.get("per_iter_time_s") if outcome.result else None
        if outcome.status is not Status.OK or not isinstance(per_iter, list) or not per_iter:
            return None
        assert outcome.result is not None
        summaries.append(process_summary(outcome.result))
        repeats.extend(per_iter)
    timed = Timed.of(repeats, summaries)
    return timed if len(timed.process_medians) == upto else None


def decided(
    pairs: Sequence[Pair], ran: Mapping[int, Sequence[Outcome]], done: int, budget: int, family: int
) -> list[tuple[Pair, str]]:
    """After `done` rounds: each pair of `pairs` whose change is decided at this look,
    with its verdict (none where `done` is not a look, or is the budget: every job ends
    there anyway), its p-value taken over the `family` of the sweep's pairs as the
    report will (judge_paired); and each pair that no look up to the budget could
    decide (results/intervals.out_of_reach), with why. `ran`: each job's processes."""
    if done not in looks(budget) or done >= budget:
        return []
    from benchflow.report.compare import INSUFFICIENT, SUSPICIOUS, judge_paired

    out: list[tuple[Pair, str]] = []
    for pair in pairs:
        base = _timed(ran.get(pair.a.num, ()), done)
        cand = _timed(ran.get(pair.b.num, ()), done)
        if base is None or cand is None:
            continue  # a side failed (its row says so), or has not run this far
        threshold = pair.a.config.pair_threshold
        verdict = judge_paired(cand, base, threshold, budget, family)
        if verdict == INSUFFICIENT and (why := out_of_reach(cand, base, done, budget, threshold)):
            out.append((pair, f"out of reach ({why})"))
        elif verdict not in (INSUFFICIENT, SUSPICIOUS):
            out.append((pair, verdict))
    return out


@dataclass
class Stopping:
    """A paired sweep's stopping between its rounds: its pairs, and the jobs of those
    decided (closed: recorded from the processes they have, never run again)."""

    pairs: list[Pair]
    closed: set[int]

    @classmethod
    def of(cls, plan: Plan) -> Stopping:
        """The plan's pairs, as it wrote them: each B's steps name its A (steps_from)."""
        found = {(s.steps_from, s.job) for s in plan.steps if s.steps_from is not None}
        return cls([Pair(plan.job(a), plan.job(b)) for a, b in sorted(found)], set())

    def swaps(self, index: int) -> dict[int, int]:
        """Round `index`'s order: in every other round each open pair's B runs in A's
        place and A in B's (ABBA), so that whatever the second of two jobs run back to
        back pays (about 1% here: benchmarks/RESULTS.md) falls on each side alike."""
        if index % 2 == 0:
            return {}
        out: dict[int, int] = {}
        for pair in self.pairs:
            if not set(pair.nums) & self.closed:
                out |= {pair.a.num: pair.b.num, pair.b.num: pair.a.num}
        return out

    def look(self, done: int, budget: int, ran: Mapping[int, Sequence[Outcome]]) -> set[int]:
        """After `done` of `budget` rounds: the jobs of the pairs decided now, closed."""
        from benchflow.sweep import progress

        open_pairs = [p for p in self.pairs if not set(p.nums) & self.closed]
        closing: set[int] = set()
        for pair, verdict in decided(open_pairs, ran, done, budget, len(self.pairs)):
            closing |= set(pair.nums)
            progress.note(f"{pair.described()}: {verdict} after {done} rounds, recorded now")
        self.closed |= closing
        return closing
