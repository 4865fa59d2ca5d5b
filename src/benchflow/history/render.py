"""A history on the terminal: its change points, newest first, one block each (lines
that do not wrap, so that a CI log can be searched)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from benchflow.core.units import format_interval, format_time
from benchflow.history.changes import Change
from benchflow.history.series import Series
from benchflow.report.sources import Sweep
from benchflow.results.intervals import Interval


def _level(value: float, ci: Interval | None) -> str:
    if ci is None:
        return format_time(value)
    return f"{format_time(value)} (95% CI {format_interval(ci.low, ci.high)})"


def print_changes(
    sweeps: Sequence[Sweep], series: Sequence[Series], changes: Sequence[Change]
) -> None:
    console = Console(highlight=False)
    say = lambda text: console.print(text, soft_wrap=True)  # noqa: E731
    say(f"history: {len(sweeps)} sweep(s), {len(series)} job(s), {len(changes)} change point(s)")
    for c in changes:
        p, style = c.point, "red" if c.regression else "green"
        kind = "slower" if c.regression else "faster"
        say(f"\n[bold]{c.series.name}[/]: [{style}]{p.change:+.1%} ({kind})[/] from {c.when}, "
            f"p={p.p_value:.2g} after BH")  # fmt: skip
        say(f"  before {_level(p.before, p.before_ci)}; after {_level(p.after, p.after_ci)}")
        say(f"  what changed: {c.explained}")
        say(f"  rerun the run before: {c.reruns[0]}")
        say(f"  rerun the run after:  {c.reruns[1]}")
