"""The report in a terminal: the columns a performance engineer reads at a glance, in
tables no wider than WIDTH, then where the files with every column are (report.md and
report.html: report/render.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from benchflow.core.units import NOT_APPLICABLE, format_span, format_time
from benchflow.report import render
from benchflow.report.compare import GOOD, Change
from benchflow.report.entry import Entry
from benchflow.report.model import Report, Summary
from benchflow.results.signals import DYNAMO_COUNTS

WIDTH = 120  # the widest line the terminal report prints
# The columns a table takes beyond its cells (_table's look): between two columns a
# divider with a space each side, nothing at the edges.
BETWEEN = 3

ENTRY_COLUMNS = (
    "model",
    "test",
    "config",
    "status",
    "median",
    "95% CI",
    "speedup (95% CI)",
    "compile",
    "note",
)
# An accuracy sweep's (timing=false: no entry timed): what was checked and read in place
# of the times (docs/expected.md); the note is the check's detail or the error.
UNTIMED_COLUMNS = (
    "model",
    "test",
    "config",
    "status",
    "accuracy",
    *DYNAMO_COUNTS.values(),
    "note",
)
SUMMARY_COLUMNS = (
    "config",
    "passrate",
    "geomean speedup (95% CI)",
    "geomean share of peak",
    "mean compile",
    "memory ratio",
    "skipped",
)
UNTIMED_SUMMARY = ("config", "passrate", "skipped")  # an accuracy sweep's: no time to sum up
# Where a table is wider than WIDTH, the columns that give way, in turn, each down to
# the width given (never below its header's): words first, then names.
ENTRY_GIVE = (("note", 24), ("config", 16), ("model", 14), ("note", 8), ("config", 10))
SUMMARY_GIVE = (("config", 16), ("passrate", 12), ("config", 10))
CHANGE_GIVE = (("detail", 24), ("config", 16), ("model", 14), ("detail", 8), ("verdict", 12))
INVALID_GIVE = (("why it never ran", 24), ("settings", 16), ("model", 14))
BREAKS_GIVE = (("reason", 32), ("where", 20), ("config", 16), ("model", 14), ("reason", 12))
# Cut in the middle: a configuration's end tells it apart (inductor.cpp.threads=1 or =2),
# a place's line number is at its end.
MIDDLE = ("config", "settings", "where")


def entry_cells(e: Entry, baseline: bool) -> list[str]:
    """ENTRY_COLUMNS' cells: the median's interval with its unit once, the compile time
    without the export it includes, the note or the error's first line."""
    return [
        e.model,
        e.test,
        e.config.label,
        e.status.value,
        format_time(e.time_s),
        format_span(e.ci_low_s, e.ci_high_s),
        render.speedup_cell(e, baseline),
        format_time(e.compile_s) if e.compiles else NOT_APPLICABLE,
        e.note or e.error,
    ]


def untimed_cells(e: Entry) -> list[str]:
    """UNTIMED_COLUMNS' cells: the accuracy check's code, dynamo's counts (– where a count
    does not apply: no dynamo, no graphs) and the check's detail or the error."""
    detail = e.row.verification_detail or e.error
    cells = [e.model, e.test, e.config.label, e.status.value, e.verification]
    return [*cells, *render.signal_cells(e), detail]


def summary_cells(s: Summary, columns: Sequence[str] = SUMMARY_COLUMNS) -> list[str]:
    """`columns`' cells, as render's summary has them."""
    cells = dict(zip(render.SUMMARY_HEADER, render.summary_cells(s), strict=True))
    return [cells[name] for name in columns]


def change_cells(c: Change) -> list[str]:
    """render's cells of a change, each side by its median alone."""
    cells = render.change_cells(c)
    cells[3:5] = [render.side_cell(c.base, full=False), render.side_cell(c.cand, full=False)]
    return cells


def legend(report: Report, timed: bool = True) -> str:
    if not timed:
        return (
            "accuracy: the check against eager and float64 (docs/accuracy.md); graphs, graph "
            "breaks, recompiles: dynamo's, over the first two steps (–: no dynamo)"
        )
    return (
        f"median: time per iteration; speedup: {report.baseline} time / this time (> 1 is "
        "faster); geomean share of peak: of a step's FLOP/s in the device's measured matmul "
        "peak (report.md has each row's); compile: first call minus a steady step"
    )


def where(full: Sequence[Path]) -> str:
    """The last line: which files hold the whole report."""
    folders = {p.parent for p in full}
    files = (
        f"{', '.join(p.name for p in full)} in {folders.pop()}/"
        if len(folders) == 1
        else ", ".join(map(str, full))
    )
    return f"full report (every column, how each number is computed): {files}"


def fit(
    header: Sequence[str], rows: Sequence[Sequence[str]], give: Sequence[tuple[str, int]]
) -> list[list[str]]:
    """The rows with `give`'s columns cut, in turn, down to their widths there (an
    ellipsis where cut), until the table is at most WIDTH wide."""
    widths = [max(map(len, column)) for column in zip(header, *rows, strict=False)]
    over = sum(widths) + BETWEEN * (len(header) - 1) - WIDTH
    for name, least in give:
        i = header.index(name)
        cut = max(0, min(over, widths[i] - max(least, len(name))))
        widths[i] -= cut
        over -= cut
    return [
        [_cut(c, w, h in MIDDLE) for c, w, h in zip(row, widths, header, strict=True)]
        for row in rows
    ]


def _cut(text: str, width: int, middle: bool) -> str:
    if len(text) <= width:
        return text
    if not middle:
        return text[: width - 1] + "…"
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def _table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    give: Sequence[tuple[str, int]],
    title: str,
    styles: Sequence[str | None] = (),
    sections: Sequence[bool] = (),
) -> Table:
    """A fitted table of plain text (not Rich markup: a name or a setting may hold
    brackets, inductor[freezing]); a row whose `sections` is true starts a section."""
    table = Table(*header, title=title, box=box.MINIMAL, show_edge=False, pad_edge=False)
    for i, cells in enumerate(fit(header, rows, give)):
        if i < len(sections) and sections[i]:
            table.add_section()
        style = styles[i] if i < len(styles) else None
        table.add_row(*map(Text, cells), style=style)
    return table


def print_terminal(
    report: Report,
    title: str,
    changes: Sequence[Change] | None = None,
    *,
    full: Sequence[Path] = (),
    console: Console | None = None,
) -> None:
    """The report's tables, each at most WIDTH wide, its notes, and (where `full` names
    the files written) which files hold every column."""
    if console is None:
        console = Console(highlight=False)
        if not console.is_terminal:  # logs and pipes: Rich would assume 80 columns
            console = Console(highlight=False, width=WIDTH)
    width = min(console.width, WIDTH)

    def say(*renderables: Table | str, style: str | None = None) -> None:
        console.print(*renderables, width=width, style=style, markup=False, highlight=False)

    if changes is not None:
        cells = [change_cells(c) for c in changes]
        styles = ["red" if c.fails else ("green" if c.verdict in GOOD else None) for c in changes]
        against = f"{title}: against the baseline"
        say(_table(render.CHANGE_HEADER, cells, CHANGE_GIVE, against, styles))
        for text in render.overall_lines(changes):
            say(text)
    entries = report.entries
    timed = not report.untimed
    say(
        _table(
            ENTRY_COLUMNS if timed else UNTIMED_COLUMNS,
            [
                entry_cells(e, report.is_baseline(e.config)) if timed else untimed_cells(e)
                for e in entries
            ],
            ENTRY_GIVE,
            title,
            styles=[None if e.passed else e.status.style for e in entries],
            sections=[
                i > 0 and (e.model, e.test) != (entries[i - 1].model, entries[i - 1].test)
                for i, e in enumerate(entries)
            ],
        )
    )
    columns = SUMMARY_COLUMNS if timed else UNTIMED_SUMMARY
    summaries = [summary_cells(s, columns) for s in report.summaries]
    say(_table(columns, summaries, SUMMARY_GIVE, "summary"))
    say(legend(report, timed), style="dim")
    if report.invalid:
        invalid = render.invalid_rows(report)
        styles = ["yellow"] * len(invalid)
        title_invalid = render.INVALID_TITLE.lower()
        say(_table(render.INVALID_HEADER, invalid, INVALID_GIVE, title_invalid, styles))
    if report.graph_breaks:
        rows = render.break_rows(report)
        say(_table(render.BREAKS_HEADER, rows, BREAKS_GIVE, render.BREAKS_TITLE.lower()))
    if report.time_spent:
        header = [*render.TIME_HEADER[2:-1], "total"]
        phases = [render.time_rows(report)[0][2:]]
        say(_table(header, phases, (), f"{render.TIME_TITLE.lower()} (s, all jobs)"))
    for note in report.notes:
        say(f"note: {note}")
    if full:
        say(where(full))
