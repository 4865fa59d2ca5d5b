"""A history as one HTML file to look at (no server, nothing fetched: inline SVG), laid
out as PyTorch's HUD's dashboard: the open change points, each configuration's summary
over the sweeps (report/model.py's definitions), and each model's times with their
intervals and change points (docs/history.md).
"""

from __future__ import annotations

import datetime
import html
import re
from collections.abc import Sequence
from typing import Any

from benchflow.core.units import format_time
from benchflow.history.changes import Change
from benchflow.history.series import Series, ran_at
from benchflow.report.model import Summary, build_report
from benchflow.report.plots import to_svg
from benchflow.report.render import CSS, html_table
from benchflow.report.sources import Sweep

# A configuration's panels: the title and how a summary gives its value.
PANELS: tuple[tuple[str, Any], ...] = (
    ("passrate", lambda s: s.passrate),
    ("geomean speedup", lambda s: s.geomean_speedup),
    ("mean compile time (s)", lambda s: s.mean_compile_s),
    ("memory ratio", lambda s: s.memory_ratio),
    ("geomean share of peak", lambda s: s.geomean_share),
)
OPEN_HEADER = [
    "first sweep after",
    "job",
    "change",
    "before",
    "after",
    "p (BH)",
    "what changed",
    "rerun before",
    "rerun after",
]


def model_anchor(series: Series) -> str:
    """The id of the plot that holds a series (one plot per model and test)."""
    model, test = _model_of(series)
    return "model-" + re.sub(r"[^A-Za-z0-9_-]", "_", f"{model}-{test}")


def change_id(change: Change) -> str:
    """The id of a change point's line in its model's plot."""
    return f"change-{change.series.fingerprint[:12]}-{change.after.order}"


def _model_of(series: Series) -> tuple[str, str]:
    row = series.points[0].row
    return row.model.model_name, row.experiment.test


def open_changes(changes: Sequence[Change]) -> list[Change]:
    """Each series' latest change point: its first in `changes`, ordered newest first."""
    latest: dict[str, Change] = {}
    for c in changes:
        latest.setdefault(c.series.fingerprint, c)
    return list(latest.values())


def _date(sweep: Sweep, fmt: str = "%m-%d %H:%M") -> str:
    at = ran_at(sweep)
    if not at:
        return sweep.label
    return datetime.datetime.fromtimestamp(at).strftime(fmt)


def summaries(sweeps: Sequence[Sweep], baseline: str) -> dict[str, list[tuple[int, Summary]]]:
    """Each configuration's summary in each sweep that ran it, by the sweep's place."""
    out: dict[str, list[tuple[int, Summary]]] = {}
    for order, sweep in enumerate(sweeps):
        report = build_report(sweep.rows, sweep.baseline or baseline)
        for s in report.summaries:
            out.setdefault(s.config.label, []).append((order, s))
    return out


MARKERS_UP_TO = 60  # a line's points drawn as dots up to this many sweeps; a line beyond


def _marker(points: int) -> dict[str, Any]:
    return {"marker": "o", "markersize": 3} if points <= MARKERS_UP_TO else {}


def _ticks(ax: Any, sweeps: Sequence[Sweep]) -> None:
    step = max(1, round(len(sweeps) / 8))
    places = list(range(0, len(sweeps), step))
    span_s = ran_at(sweeps[-1]) - ran_at(sweeps[0]) if sweeps else 0.0
    fmt = "%Y-%m-%d" if abs(span_s) > 180 * 86400 else "%m-%d %H:%M"  # a year's dates: the year
    ax.set_xticks(places, [_date(sweeps[i], fmt) for i in places], rotation=30, fontsize=7)
    ax.set_xlim(-0.5, len(sweeps) - 0.5)


def config_figure(label: str, points: list[tuple[int, Summary]], sweeps: Sequence[Sweep]) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 2.6))
    fig.subplots_adjust(left=0.04, right=0.99, bottom=0.3, top=0.8, wspace=0.25)
    fig.suptitle(label, fontsize=10)
    for i, (title, value) in enumerate(PANELS):
        ax = fig.add_subplot(1, len(PANELS), i + 1)
        ax.set_title(title, fontsize=9)
        xs = [o for o, s in points if value(s) is not None]
        ys = [value(s) for o, s in points if value(s) is not None]
        if not xs:  # said, not an empty axis from -0.05 to 0.05
            ax.text(0.5, 0.5, _none(title, points), ha="center", va="center", fontsize=8,
                    transform=ax.transAxes, wrap=True)  # fmt: skip
            ax.set_yticks([])
        ax.plot(xs, ys, **_marker(len(xs)))
        if title == "geomean speedup":
            low = [(o, s.geomean_ci) for o, s in points if s.geomean_ci is not None]
            if low:
                ax.fill_between(
                    [o for o, _ in low],
                    [ci.low for _, ci in low],
                    [ci.high for _, ci in low],
                    alpha=0.25,
                )
        _ticks(ax, sweeps)
    return fig


def _none(title: str, points: list[tuple[int, Summary]]) -> str:
    """Why a configuration's panel has no point in any sweep."""
    summaries = [s for _, s in points]
    if title == "geomean speedup":
        return "no speedup: no baseline row of its models passed in these sweeps"
    if title.startswith("mean compile") and not any(s.compiles for s in summaries):
        return "no compile: its backend does not compile"
    if title == "memory ratio":
        return "no memory ratio: no baseline row with the same kind of peak"
    if title == "geomean share of peak":
        return "no share of peak: no passing row with a FLOP count, a time and a peak"
    return f"no {title} in these sweeps"


def model_figure(group: list[Series], changes: Sequence[Change], sweeps: Sequence[Sweep]) -> Any:
    """A model's jobs (one line per configuration): time per sweep in ms, the 95%
    interval as a band, each change point a dashed line in its job's colour."""
    from matplotlib.figure import Figure

    fig = Figure(
        figsize=(12, max(3.2, 0.6 + 0.17 * len(group))), layout="constrained"
    )  # the legend
    ax = fig.add_subplot()
    for i, series in enumerate(group):
        color = f"C{i % 10}"
        timed = series.timed()
        xs = [p.order for p in timed]
        ax.plot(xs, [(p.time_s or 0) * 1e3 for p in timed], color=color, label=series.name,
                **_marker(len(xs)))  # fmt: skip
        band = [
            (p.order, low, high)
            for p in timed
            if (low := p.headline.ci_low_s) is not None and (high := p.headline.ci_high_s)
        ]
        if band:
            ax.fill_between([b[0] for b in band], [b[1] * 1e3 for b in band],
                            [b[2] * 1e3 for b in band], color=color, alpha=0.2,
                            gid=f"band-{series.fingerprint[:12]}")  # fmt: skip
        for c in changes:
            if c.series is series:
                x = c.after.order - 0.5
                ax.axvline(x, color=color, linestyle="--", linewidth=1, gid=change_id(c))
                ax.annotate(f"{c.point.change:+.1%}", (x, 1.0), xycoords=("data", "axes fraction"),
                            fontsize=8, color=color, va="top", ha="left")  # fmt: skip
    ax.set_ylabel("time per step (ms)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    _ticks(ax, sweeps)
    return fig


def _open_cells(c: Change) -> list[str]:
    p = c.point
    return [
        c.when,
        c.series.name,
        f"{p.change:+.1%}",
        format_time(p.before),
        format_time(p.after),
        f"{p.p_value:.2g}",
        c.explained,
        c.reruns[0],
        c.reruns[1],
    ]


def to_html(
    sweeps: Sequence[Sweep],
    series: Sequence[Series],
    changes: Sequence[Change],
    baseline: str,
    title: str,
) -> str:
    """The dashboard: the open change points, then each configuration, then each model."""
    opened = open_changes(changes)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='note'>{len(sweeps)} sweep(s) from {html.escape(_date(sweeps[0]))} to "
        f"{html.escape(_date(sweeps[-1]))}; {len(series)} job(s); {len(changes)} change "
        f"point(s), {len(opened)} open</p>"
        if sweeps
        else "<p>no sweep</p>",
        "<h2 id='open'>Open change points, newest first</h2>",
    ]
    if opened:
        table = html_table(OPEN_HEADER, [_open_cells(c) for c in opened],
                           ["bad" if c.regression else "good" for c in opened])  # fmt: skip
        # each job's cell links to its model's plot
        for c in opened:
            name = html.escape(c.series.name)
            link = f"<a class='change' href='#{model_anchor(c.series)}'>{name}</a>"
            table = table.replace(f"<td>{name}</td>", f"<td>{link}</td>", 1)
        parts.append(table)
    else:
        parts.append("<p>none: every job's time kept its level</p>")
    parts.append("<h2>Configurations over time</h2>")
    for label, points in summaries(sweeps, baseline).items():
        svg = to_svg(config_figure(label, points, sweeps))
        parts.append(f"<figure class='config'>{svg}</figure>")
    parts.append("<h2>Models over time</h2>")
    groups: dict[str, list[Series]] = {}
    for s in series:
        if s.timed():
            groups.setdefault(model_anchor(s), []).append(s)
    for anchor, group in groups.items():
        model, test = _model_of(group[0])
        parts += [
            f"<h3 id='{anchor}'>{html.escape(model)} ({html.escape(test)})</h3>",
            f"<figure class='model'>{to_svg(model_figure(group, changes, sweeps))}</figure>",
        ]
    parts.append("</body></html>")
    return "\n".join(parts)
