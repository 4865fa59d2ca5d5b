"""A paired sweep (`pair=AXIS`): its two values of one axis, A and B, compared job by job as
it runs, each pair stopped once decided (docs/reports.md). A's and B's processes run back
to back each round, so that the host's drift drops out of their ratio; after each look a
pair is judged as `benchflow report --pair` will, the looks accounted for.
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
        """As the notes name it: "NAME: job 1 (slowdown=0.05) against job 0 (slowdown=null)"."""
        axis = self.a.config.pair
        a, b = (
            next((o.lstrip("+~") for o in job.overrides if _key(o) == axis), "?")
            for job in (self.a, self.b)
        )
        return f"{self.b.name}: job {self.b.num} ({b}) against job {self.a.num} ({a})"


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def pairs_of(jobs: Sequence[Job]) -> list[Pair]:
    """The sweep's pairs ([]: none); ConfigError where the jobs' `pair=` differ, or is not an
    axis of two values."""
    named = {job.config.pair for job in jobs}
    if len(named) > 1:
        given = ", ".join(sorted(str(v) for v in named))
        raise ConfigError(f"pair differs between the sweep's jobs ({given}); allowed: one axis")
    if not named or (axis := named.pop()) is None:
        return []
    jobs = sorted(jobs, key=lambda j: j.num)
    seen: dict[str, dict[str, None]] = {}  # each key's values, in the order of job numbers
    for job in jobs:
        for o in job.overrides:
            seen.setdefault(_key(o), {})[o.split("=", 1)[-1]] = None
    values = {k: list(v) for k, v in seen.items()}
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
    for job in jobs:
        rest = tuple(sorted(o for o in job.overrides if _key(o) != axis))
        is_a = f"{axis}={a_value}" in (o.lstrip("+~") for o in job.overrides)
        sides.setdefault(rest, {}).setdefault(is_a, job)
    return [Pair(s[True], s[False]) for s in sides.values() if len(s) == 2]


def steps_from(jobs: Sequence[Job]) -> dict[int, int]:
    """Each B with its A, whose steps per repeat B runs: loops calibrated apart would differ."""
    return {pair.b.num: pair.a.num for pair in pairs_of(jobs)}


def _timed(outcomes: Sequence[Outcome], upto: int) -> Timed | None:
    """The job's first `upto` processes pooled as a row pools them (None: one not ok)."""
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
    """After `done` rounds: each pair decided at this look, judged over the sweep's `family` as
    the report will, or out of reach; with its verdict. None at the budget: all end there."""
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
    """A paired sweep's stopping between rounds: its pairs, and the jobs of those decided."""

    pairs: list[Pair]
    closed: set[int]

    @classmethod
    def of(cls, plan: Plan) -> Stopping:
        """The plan's pairs, as it wrote them: each B's steps name its A (steps_from)."""
        found = {(s.steps_from, s.job) for s in plan.steps if s.steps_from is not None}
        return cls([Pair(plan.job(a), plan.job(b)) for a, b in sorted(found)], set())

    def swaps(self, index: int) -> dict[int, int]:
        """Round `index`'s order: every other round A and B swap (ABBA): each runs second alike."""
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
