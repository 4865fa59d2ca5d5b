"""The report's plots, with matplotlib's object API (no pyplot state, no display):
per-model speedup bars with each configuration's geomean, per-model times (log scale,
IQR error bars) and per-model share of the device's peak (95% interval bars). A job that
ran without a number gets a grey "n/a"; one never run leaves its slot empty. Legends sit
at a fixed place: matplotlib's "best" is slow.
"""

from __future__ import annotations

import io
from typing import Any

from benchflow.report.entry import Entry
from benchflow.report.model import Report

# Past this width (inches) the models' labels turn 45° instead, so a picture stays readable.
MAX_WIDTH_IN = 30.0


# Past this many bars, bars are too thin to carry a value or "n/a" label.
MAX_LABELLED_BARS = 200


def _grouped(
    report: Report, configs: list[Any], value: Any, ylabel: str, log: bool, floor: float = 0.0
) -> Any:
    """Grouped bars per model; bars grow from `floor` (1.0 for speedups: up is faster).
    Drawn in one call for all the bars and one for all the error bars."""
    from matplotlib.figure import Figure

    models = list(dict.fromkeys((e.model, e.test) for e in report.entries))
    tests = {t for _, t in models}
    index = {(e.model, e.test, e.config): e for e in report.entries}
    width_in = 1.2 * len(models) * max(1, len(configs)) ** 0.5 + 2
    fig = Figure(figsize=(min(MAX_WIDTH_IN, max(6.0, width_in)), 4.2))
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(configs))
    colors = [f"C{i % 10}" for i in range(len(configs))]  # matplotlib's cycle of ten
    bars: list[tuple[float, float, str]] = []  # x, value, colour
    errors: list[tuple[float, float, float, float]] = []  # x, value, below, above
    missing: list[float] = []  # ran without a number: "n/a"
    for i, config in enumerate(configs):
        for m, (model, test) in enumerate(models):
            x = m - 0.4 + width * (i + 0.5)
            e: Entry | None = index.get((model, test, config))
            if e is None:
                continue  # never ran: an empty slot
            v = value(e)
            if v is None:
                missing.append(x)
                continue
            height, err = v
            bars.append((x, height, colors[i]))
            if err is not None:
                errors.append((x, height, err[0], err[1]))
    if bars:
        xs, heights, bar_colors = zip(*bars, strict=True)
        ax.bar(
            xs,
            [abs(h - floor) for h in heights],
            width,
            bottom=[min(h, floor) for h in heights],
            color=bar_colors,
        )
    if len(configs) <= MAX_LEGEND:  # a legend entry per configuration that has a bar
        shown = {c for _, _, c in bars}
        for color, config in zip(colors, configs, strict=True):
            if color in shown:  # a square of its colour (an empty bar's legend took C0's)
                ax.plot([], [], "s", color=color, markersize=8, label=config.label)
    if len(bars) + len(missing) <= MAX_LABELLED_BARS:
        _labels(ax, bars, missing, floor)
    if errors:
        ex, ey, below, above = zip(*errors, strict=True)
        ax.errorbar(
            ex,
            ey,
            yerr=[below, above],
            fmt="none",
            ecolor="black",
            elinewidth=0.8,
            capsize=2,
        )
    crowded = width_in > MAX_WIDTH_IN
    ax.set_xticks(
        range(len(models)),
        [m if len(tests) == 1 else f"{m}\n({t})" for m, t in models],
        fontsize=8,
        rotation=45 if crowded else 0,
        ha="right" if crowded else "center",
    )
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    return fig, ax, colors


def _labels(
    ax: Any, bars: list[tuple[float, float, str]], missing: list[float], floor: float
) -> None:
    """ "n/a" where a job ran without a number, and (speedups) each bar's value at its end."""
    for x in missing:
        ax.text(
            x,
            0.02,
            "n/a",
            transform=ax.get_xaxis_transform(),
            ha="center",
            fontsize=7,
            color="grey",
            rotation=90,
        )
    if floor:  # speedups: the value at the bar's end
        for x, height, _ in bars:
            ax.annotate(
                f"{height:.2f}x",
                (x, height),
                xytext=(0, 2 if height >= floor else -9),
                textcoords="offset points",
                ha="center",
                fontsize=7,
            )


MAX_LEGEND = 40


def _legend(ax: Any, configs: int) -> None:
    if configs > MAX_LEGEND:
        note = f"{configs} configurations:\ntoo many to name here;\nsee the tables"
        ax.text(1.01, 1.0, note, transform=ax.transAxes, va="top", fontsize=7)
        return
    if not ax.get_legend_handles_labels()[0]:
        return  # nothing ran with a number: no legend (and no matplotlib warning)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def speedup_figure(report: Report) -> Any:
    configs = [c for c in report.configs if not report.is_baseline(c)]
    fig, ax, colors = _grouped(
        report,
        configs,
        lambda e: (e.speedup, None) if e.speedup else None,
        f"speedup over {report.baseline} (x, log)",
        log=True,
        floor=1.0,
    )
    ax.axhline(1.0, color="black", linewidth=1, label=f"{report.baseline} = 1.0")
    values = [e.speedup for e in report.entries if e.speedup] + [1.0]
    ax.set_ylim(min(values) / 1.6, max(values) * 1.6)  # room for the labels at both ends
    by_config = {s.config: s for s in report.summaries}
    for color, config in zip(colors, configs, strict=True):
        s = by_config.get(config)
        if s and s.geomean_speedup:
            ax.axhline(
                s.geomean_speedup,
                color=color,
                linestyle="--",
                linewidth=1.2,
                label=f"{config.label} geomean {s.geomean_speedup:.2f}x",
            )
    ax.set_title(f"Speedup per model over {report.baseline}")
    _legend(ax, len(configs))
    fig.tight_layout()
    return fig


def _spread(center: float, low: float | None, high: float | None) -> tuple[float, float] | None:
    """matplotlib's error bar: the distances below and above `center` (None: no bounds)."""
    if low is None or high is None:
        return None
    return max(0.0, center - low), max(0.0, high - center)


def _bars(report: Report, value: Any, label: str, title: str, log: bool) -> Any:
    fig, ax, _ = _grouped(report, report.configs, value, label, log=log)
    ax.set_title(title)
    _legend(ax, len(report.configs))
    fig.tight_layout()
    return fig


def times_figure(report: Report) -> Any:
    def value(e: Entry) -> tuple[float, tuple[float, float] | None] | None:
        if e.time_s is None:
            return None
        ms = e.time_s * 1e3
        q1, q3 = (None if q is None else q * 1e3 for q in (e.q1_s, e.q3_s))
        return ms, _spread(ms, q1, q3)

    label = "median per-iteration time (ms, log)"
    return _bars(report, value, label, "Time per model (error bars: IQR over repeats)", log=True)


def share_figure(report: Report) -> Any:
    def value(e: Entry) -> tuple[float, tuple[float, float] | None] | None:
        f = e.flops
        if f is None or f.share_of_peak is None:
            return None
        low, high = (None if b is None else b * 100 for b in (f.share_ci_low, f.share_ci_high))
        return f.share_of_peak * 100, _spread(f.share_of_peak * 100, low, high)

    label = "FLOP/s as % of the device's matmul peak"
    title = "Share of peak per model (error bars: 95% interval)"
    return _bars(report, value, label, title, log=False)


def figures(report: Report) -> dict[str, Any]:
    """The plots with two bars or more to compare: no speedup plot without the
    baseline's times, no share plot without a counted model's FLOP/s, and no plot of a
    single number (the table's line says it; a sweep's end drew it in about 0.8 s)."""
    entries = report.entries
    shares = [e.flops.share_of_peak for e in entries if e.flops]
    drawn = {
        "speedup": (speedup_figure, sum(bool(e.speedup) for e in entries)),
        "times": (times_figure, sum(e.time_s is not None for e in entries)),
        "share": (share_figure, sum(s is not None for s in shares)),
    }
    return {name: draw(report) for name, (draw, bars) in drawn.items() if bars >= 2}


def to_svg(fig: Any) -> str:
    """The figure as inline SVG, its text as text (the browser's font), not as glyph
    paths: a quarter of the time and size for a figure with many labels."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.find("<svg") :]  # drop the XML prolog and DOCTYPE for inline use
