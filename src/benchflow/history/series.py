"""A history: many sweeps' rows, one series per job.

A job is its fingerprint (core/job.py), so its rows line up across sweeps and a changed
configuration is another series. The sweeps are ordered by when they ran, or by a fact
with an order of its own (`ordered`); each gives a series at most one point.
"""

from __future__ import annotations

import functools
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from benchflow.core.status import Status
from benchflow.report.sources import Sweep
from benchflow.results.environment import FACTS
from benchflow.results.headline import Headline, headline_of
from benchflow.results.io import current
from benchflow.results.row import ResultRow


@dataclass(frozen=True)
class Point:
    sweep: str  # the sweep's label (its folder, or its MLflow parent run)
    order: int  # the sweep's place in the history, 0 the oldest
    row: ResultRow

    @functools.cached_property
    def headline(self) -> Headline:
        """The row's headline numbers, read once (series, change points, dashboard ask)."""
        return headline_of(self.row)

    @property
    def time_s(self) -> float | None:
        """The job's median time per step; None unless it ran ok."""
        return self.headline.time_s if self.row.status is Status.OK else None


@dataclass
class Series:
    fingerprint: str
    name: str  # the job's name (model·backend·test·dtype)
    points: list[Point] = field(default_factory=list)

    def timed(self) -> list[Point]:
        return [p for p in self.points if p.time_s is not None]


def ran_at(sweep: Sweep) -> float:
    """When the sweep ran: its first job's start (epoch seconds)."""
    times = [r.job.started_at or r.timestamp for r in sweep.rows]
    return min((t for t in times if t), default=0.0)


# --order-by: when the sweeps ran, or a recorded fact with an order of its own: a
# package's version (PEP 440), or a commit (its place in a git checkout's history).
BY_TIME = "time"
COMMITS = ("git_sha", "torchbench_sha")


def order_choices() -> list[str]:
    return [BY_TIME, *(f.name for f in FACTS if f.name.startswith("version.") or f.name in COMMITS)]


class OrderError(ValueError):
    """The sweeps cannot be put in the asked order (the message says why)."""


def _fact_of(sweep: Sweep, name: str) -> str | None:
    fact = next(f for f in FACTS if f.name == name)
    values = [v for r in sweep.rows if (v := fact.get(r.provenance)) not in (None, "")]
    return str(Counter(values).most_common(1)[0][0]) if values else None


def _commit_places(repo: Path) -> dict[str, int]:
    """Each commit of a git checkout by its place in history, the oldest first."""
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--topo-order", "--reverse", "--all"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise OrderError(f"{repo} is not a git checkout: {done.stderr.strip()[:200]}")
    return {sha: i for i, sha in enumerate(done.stdout.split())}


def ordered(sweeps: Sequence[Sweep], by: str = BY_TIME, repo: Path = Path(".")) -> list[Sweep]:
    """The sweeps by when they ran, or by a fact (order_choices), ties by when they ran.
    A commit's place is read from the git checkout `repo`."""
    by_time = sorted(sweeps, key=ran_at)
    if by == BY_TIME:
        return by_time
    values = [_fact_of(s, by) for s in by_time]
    if missing := [s.label for s, v in zip(by_time, values, strict=True) if v is None]:
        raise OrderError(f"--order-by {by}: no {by} recorded in {', '.join(missing[:3])}")
    keys: list[Any]
    if by in COMMITS:
        places = _commit_places(repo)
        shas = [str(v).removesuffix("-dirty") for v in values]
        if unknown := sorted({sha for sha in shas if sha not in places}):
            raise OrderError(f"--order-by {by}: commit(s) {', '.join(unknown[:3])} not in {repo}")
        keys = [places[sha] for sha in shas]
    else:
        try:
            keys = [Version(str(v)) for v in values]
        except InvalidVersion as exc:
            raise OrderError(f"--order-by {by}: {exc}") from None
    ranked = sorted(range(len(by_time)), key=lambda i: keys[i])  # stable: ties by time
    return [by_time[i] for i in ranked]


def build(
    sweeps: Sequence[Sweep], by: str = BY_TIME, repo: Path = Path(".")
) -> tuple[list[Sweep], list[Series]]:
    """The sweeps in order (`ordered`), and one series per job fingerprint (in the
    order first seen; names that two fingerprints share get the fingerprint's head)."""
    ordered_sweeps = ordered(sweeps, by, repo)
    found: dict[str, Series] = {}
    for order, sweep in enumerate(ordered_sweeps):
        for row in current(sweep.rows):
            if row.untimed:  # timing=false: no time to follow
                continue
            fp = row.job.fingerprint
            found.setdefault(fp, Series(fp, row.job.name)).points.append(
                Point(sweep.label, order, row)
            )
    series = list(found.values())
    names = Counter(s.name for s in series)
    for s in series:
        if names[s.name] > 1:
            s.name = f"{s.name} [{s.fingerprint[:8]}]"
    return ordered_sweeps, series
