"""The parent's live view of a sweep: which job, how many done, status, headline time."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from benchflow.core.job import Job
from benchflow.core.units import format_interval, format_time
from benchflow.results.headline import headline_of, median_time
from benchflow.results.row import ResultRow


def _console() -> Console:
    """The terminal's error stream, where the progress goes (stdout: the report)."""
    return Console(stderr=True, highlight=False)


@contextlib.contextmanager
def running(enabled: bool, num: int, total: int, name: str) -> Iterator[None]:
    """A live spinner and sweep bar while a job's child runs (no-op when not a terminal)."""
    name = escape(name)  # a job's name may hold brackets: inductor[freezing]
    console = _console()
    if not enabled or not console.is_terminal:
        console.print(f"[{num + 1}/{total}] {name} …", soft_wrap=True)
        yield
        return
    columns = (
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("jobs"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        bar.add_task(f"[{num + 1}/{total}] {name}", total=total, completed=num)
        yield


def note(text: str) -> None:
    """A line about the sweep itself (waiting for CPUs, and such)."""
    _console().print(f"[dim]{escape(text)}[/]", soft_wrap=True)


def duplicate(job: Job, first: Job, total: int) -> None:
    """A job planned twice (an earlier job's fingerprint): run once, as the first. Each
    side by the overrides it alone has (xla=PJRT against xla=auto), where they differ."""
    own = [o for o in job.overrides if o not in first.overrides]
    theirs = [o for o in first.overrides if o not in job.overrides]
    differ = f" ({' '.join(own)})" if own else ""
    first_differ = f" ({' '.join(theirs)})" if theirs else ""
    _console().print(
        f"[{job.num + 1}/{total}] [dim]{escape(job.name + differ)}: the same job as "
        f"[{first.num + 1}/{total}]{escape(first_differ)}, run once as it[/]",
        soft_wrap=True,
    )


def report(row: ResultRow, num: int, total: int, tally: Counter[str]) -> None:
    status = row.status
    h = headline_of(row)
    parts = [f"[{num + 1}/{total}]", f"[{status.style}]{status:<11}[/]"]
    parts.append(escape(f"{row.job.name:<28}"))
    if h.time_s is not None:
        parts.append(f"{format_time(h.time_s)}/iter")
        ci = ""
        if h.ci_low_s is not None and h.ci_high_s is not None:
            ci = f"95% CI {format_interval(h.ci_low_s, h.ci_high_s)}, "
        procs = f"{h.processes} processes, " if h.processes > 1 else ""
        cold = format_time(h.compile_first_s)
        parts.append(f"({ci}{procs}{h.repeats} repeats; cold start {cold})")
        if h.host and not h.host.quiet:
            parts.append("[yellow]host busy[/]")
    elif row.error:
        parts.append(row.error.splitlines()[0][:100])
    elif row.untimed:  # an accuracy sweep's job: what it checked and read
        said = row.signals.said() if row.signals else ""
        parts.append(escape(f"accuracy {row.verification_code}" + (f"; {said}" if said else "")))
    parts.append(f"· wall {row.job.wall_time_s or 0.0:.1f} s")
    done = ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
    parts.append(f"· done: {done}")
    _console().print(" ".join(parts), soft_wrap=True)


def kept(row: ResultRow, num: int, total: int, retry: str) -> None:
    """A job a resumed sweep does not run again: its recorded result stands."""
    status = row.status
    parts = [f"[{num + 1}/{total}]", f"[{status.style}]{'kept ' + status:<11}[/]"]
    parts.append(escape(f"{row.job.name:<28}"))
    per_iter = median_time(row)
    if per_iter is not None:
        parts.append(f"{format_time(per_iter)}/iter")
    parts.append(f"· recorded earlier in this folder (retry={retry})")
    _console().print(" ".join(parts), soft_wrap=True)
