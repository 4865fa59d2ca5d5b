"""A history: many sweeps' rows, one series per job.

A job is its fingerprint (core/job.py: the resolved config less what does not change
what is measured), so the rows of one job line up across sweeps, and a job whose
configuration changed is another series. The sweeps are ordered by when they ran
(their first job's start); each sweep gives a series at most one point, its current
row of that job.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchflow.core.status import Status
from benchflow.report.sources import Sweep
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
        """The row's headline numbers, read once (the series, the search for change
        points and the dashboard all ask)."""
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


def sweep_of(row: ResultRow) -> str:
    """The folder of the sweep a row ran in, from its job folder (a sweep's job folders
    are named by the job's number; a single run's folder is its own sweep)."""
    folder = Path(row.job.dir or "")
    return str(folder.parent if folder.name == str(row.job.num) else folder)


def split(sweep: Sweep) -> list[Sweep]:
    """A source that holds several sweeps' rows (an MLflow experiment) as one sweep
    each; a source of one sweep as it is."""
    groups: dict[str, list[ResultRow]] = {}
    for row in sweep.rows:
        groups.setdefault(sweep_of(row), []).append(row)
    if len(groups) < 2:
        return [sweep]
    return [
        dataclasses.replace(sweep, label=folder or sweep.label, rows=rows, directory=None)
        for folder, rows in groups.items()
    ]


def build(sweeps: Sequence[Sweep]) -> tuple[list[Sweep], list[Series]]:
    """The sweeps in the order they ran, and one series per job fingerprint (in the
    order first seen; names that two fingerprints share get the fingerprint's head)."""
    ordered = sorted(sweeps, key=ran_at)
    found: dict[str, Series] = {}
    for order, sweep in enumerate(ordered):
        for row in current(sweep.rows):
            fp = row.job.fingerprint
            found.setdefault(fp, Series(fp, row.job.name)).points.append(
                Point(sweep.label, order, row)
            )
    series = list(found.values())
    names: dict[str, int] = {}
    for s in series:
        names[s.name] = names.get(s.name, 0) + 1
    for s in series:
        if names[s.name] > 1:
            s.name = f"{s.name} [{s.fingerprint[:8]}]"
    return ordered, series
