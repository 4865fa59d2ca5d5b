"""Where a history's times changed, and what changed with them.

Each change point (results/changepoints.py) is explained by the environment facts that
differ between the runs either side (results/environment.py), and by the commands
that run those two again (`benchflow rerun`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchflow.history.series import Point, Series
from benchflow.results import changepoints
from benchflow.results.changepoints import ChangePoint
from benchflow.results.environment import Difference, differences

NOTHING = "nothing recorded changed"
WINDOW = 5  # --fail-on-new: a change in the last this many sweeps is new


@dataclass(frozen=True)
class Change:
    series: Series
    point: ChangePoint
    before: Point  # the run just before the change
    after: Point  # the first run after it
    diffs: list[Difference]
    sweeps_ago: int  # 0: the newest sweep is the first after the change

    @property
    def regression(self) -> bool:
        return self.point.change > 0

    @property
    def explained(self) -> str:
        """What differs between the runs either side, speed facts first, in words."""
        return "; ".join(str(d) for d in self.diffs) or NOTHING

    @property
    def when(self) -> str:
        """The first sweep after the change, and how far back it lies."""
        ago = self.sweeps_ago
        return f"{self.after.sweep} ({'the newest sweep' if not ago else f'{ago} sweep(s) ago'})"

    @property
    def reruns(self) -> tuple[str, str]:
        return rerun_command(self.before), rerun_command(self.after)


def rerun_command(point: Point) -> str:
    """The command that runs a point's job again from its record."""
    row = point.row
    if row.job.dir and Path(row.job.dir).is_dir():
        return f"benchflow rerun {row.job.dir}"
    return f"benchflow rerun row:{row.row_id}"


def find(series: Sequence[Series], sweeps: int, threshold: float) -> list[Change]:
    """Every series' significant change points, newest first, over `sweeps` sweeps."""
    out = []
    for s in series:
        timed = s.timed()
        times = [p.time_s for p in timed if p.time_s is not None]
        for point in changepoints.find(times, threshold):
            before, after = timed[point.index - 1], timed[point.index]
            diffs = differences([before.row.provenance], [after.row.provenance])
            out.append(Change(s, point, before, after, diffs, sweeps - 1 - after.order))
    return sorted(out, key=lambda c: (c.sweeps_ago, c.series.name))


def new_regressions(changes: Sequence[Change], window: int = WINDOW) -> list[Change]:
    """The regressions whose first run after lies in the last `window` sweeps."""
    return [c for c in changes if c.regression and c.sweeps_ago < window]
