"""Did any work beside a job share one of its exclusive regions (results/regions.py: its
compile, warm-up, timed and profile regions)? The check, from the rows' own clocks
(build_ahead: harness/hold.py).

A model built ahead of its jobs (runner/pool.py) ran from the start to the end
of its build (``timing.shared_build_at``, in the rows of the jobs forked from it, with
the pid of the process that built it; ``timing.shared_builds``, one a process, where a
job ran in several), except while some job held it: each job's row
lists its holds (``timing.held``: when, and which pids). Every job's row also has the
clocks of each exclusive region and of its whole child (``child``) in ``timing.spans``.
All of them are CLOCK_MONOTONIC readings, one clock for every process on a host, so
the check is interval arithmetic: the build's running time is its span less the holds
on it, and no exclusive span of any job may meet it. ``beside_s`` is how long builds
ran while some job's child ran (the time build_ahead saved, at most), and
``held_cpu_s`` what the kernel counted for held processes while they were held (0
when every hold held).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from benchflow.results.child import Timing
from benchflow.results.regions import CHILD, EXCLUSIVE
from benchflow.results.row import ResultRow

Interval = tuple[float, float]


@dataclass(frozen=True)
class Overlap:
    builds: int = 0  # builds that ran beside the jobs (registered: held)
    beside_s: float = 0.0  # seconds they ran while a job's child ran
    held_s: float = 0.0  # seconds they were held, all holds together
    held_cpu_s: float = 0.0  # CPU time the held processes used while held: 0
    violations: list[str] = field(default_factory=list)  # a build met an exclusive span

    @property
    def ok(self) -> bool:
        return not self.violations and self.held_cpu_s == 0

    def summary(self) -> str:
        """One line for a report: what ran beside the jobs, and whether it kept out."""
        if not self.builds:
            return "no build ran beside a job"
        verdict = (
            "none of it in a compile, warm-up, timed or profile region"
            if not self.violations
            else f"{len(self.violations)} exclusive region(s) met: " + "; ".join(self.violations)
        )
        return (
            f"{self.builds} build(s) ran beside the jobs for {self.beside_s:.1f} s, held "
            f"{self.held_s:.1f} s ({self.held_cpu_s:g} CPU-s meanwhile): {verdict}"
        )


def _union(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _minus(span: Interval, holes: Sequence[Interval]) -> list[Interval]:
    """`span` less the (merged, sorted) `holes`."""
    left, out = span[0], []
    for start, end in holes:
        if end <= left or start >= span[1]:
            continue
        if start > left:
            out.append((left, start))
        left = max(left, end)
    if left < span[1]:
        out.append((left, span[1]))
    return out


def _met(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    """Seconds that the intervals of `a` and `b` share (each list disjoint)."""
    return sum(max(0.0, min(x[1], y[1]) - max(x[0], y[0])) for x in a for y in b)


def _shared_builds(t: Timing) -> list[tuple[int, Interval]]:
    """The builds a row's processes forked from: each process's (processes=N, where each
    round's may be another), else the one its fields name."""
    if t.shared_builds:
        return [(int(pid), (start, end)) for pid, start, end in t.shared_builds]
    if t.shared_build_pid is not None and t.shared_build_at:
        return [(t.shared_build_pid, (t.shared_build_at[0], t.shared_build_at[1]))]
    return []


def check(rows: Sequence[ResultRow]) -> Overlap:
    """The check over a sweep's rows."""
    return check_timings([(row.job.name, row.timing) for row in rows if row.timing])


def check_timings(timings: Sequence[tuple[str, Timing]]) -> Overlap:
    """The check over the rows' `timing`s, each with its job's name."""
    held: dict[int, list[Interval]] = {}
    cpu = 0.0
    for _, t in timings:
        for hold in t.held:
            cpu += float(hold.get("cpu_s") or 0.0)
            for pid in hold.get("pids") or []:
                held.setdefault(int(pid), []).append((hold["at"][0], hold["at"][1]))
    builds: dict[int, Interval] = {}
    for _, t in timings:
        for pid, at in _shared_builds(t):
            if pid in held:  # a build that ran beside jobs (they held it)
                builds[pid] = at
    running = {pid: _minus(at, _union(held[pid])) for pid, at in builds.items()}
    children = _union((s[1], s[2]) for _, t in timings for s in t.spans if s[0] == CHILD)
    violations = []
    for name, t in timings:
        for region, start, end in t.spans:
            if region not in EXCLUSIVE:
                continue
            for pid, runs in running.items():
                if (shared := _met(runs, [(start, end)])) > 0:
                    violations.append(f"{name}: its {region} ran {shared:.6f} s beside build {pid}")
    return Overlap(
        builds=len(builds),
        beside_s=sum(_met(runs, children) for runs in running.values()),
        held_s=sum(e - s for holds in held.values() for s, e in _union(holds)),
        held_cpu_s=round(cpu, 3),
        violations=violations,
    )
