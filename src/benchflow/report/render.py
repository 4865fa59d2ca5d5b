"""A report as tables: Markdown and the HTML page, with every column (the terminal's
fitted table: report/terminal.py)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from benchflow.config.schema import STEPS
from benchflow.core.status import Status
from benchflow.core.units import (
    MISSING,
    NOT_APPLICABLE,
    format_interval,
    format_rate,
    format_share,
    format_time,
)
from benchflow.report.compare import GOOD, Change, overall
from benchflow.report.entry import Entry
from benchflow.report.model import Meta, Report, Summary
from benchflow.results.intervals import Interval
from benchflow.results.phases import MODEL_WORK, PHASES
from benchflow.results.signals import DYNAMO_COUNTS, short_frame
from benchflow.suite.rules import DTYPE_RULE

ENTRY_HEADER = [
    "model",
    "test",
    "config",
    "status",
    "time (median)",
    "95% CI",
    "CV",
    "speedup (95% CI)",
    "FLOP/s (95% CI)",
    "share of peak (95% CI)",
    "compile",
    "peak mem",
    "verify",
    *DYNAMO_COUNTS.values(),
    "note",
]
SUMMARY_HEADER = [
    "config",
    "passrate",
    "geomean speedup (95% CI)",
    "left out of the geomean",
    "geomean share of peak",
    "mean compile",
    "memory ratio",
    "skipped",
]
CHANGE_TITLE, SUMMARY_TITLE = "Against the baseline", "Summary"
INVALID_HEADER = ["model", "test", "settings", "why it never ran"]
INVALID_TITLE = "Invalid combinations (never run; no configuration)"
TIME_TITLE = "Where the time went"
TIME_HEADER = ["job", "status", *PHASES, "total"]
CHANGE_HEADER = ["model", "test", "config", "baseline", "candidate", "change", "verdict", "detail"]
BREAKS_TITLE = "Graph breaks"
BREAKS_HEADER = ["config", "model", "test", "breaks", "reason", "where"]


def _bytes(n: float | None) -> str:
    if not n:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _x_ci(value: float | None, ci: Interval | None) -> str:
    """A ratio with its interval: "1.02x (0.98-1.06)"."""
    if value is None:
        return "-"
    return f"{value:.2f}x" + (f" ({ci.low:.2f}-{ci.high:.2f})" if ci else " (no CI)")


def speedup_cell(e: Entry, baseline: bool) -> str:
    """The speedup with its interval; "(baseline)" for a passing row of the baseline."""
    return "(baseline)" if baseline and e.passed else _x_ci(e.speedup, e.speedup_ci)


def entry_cells(e: Entry, baseline: bool) -> list[str]:
    mem = _bytes(e.peak_bytes)
    if e.peak_bytes and e.memory_kind != "device":
        mem += f" ({e.memory_kind})"
    return [
        e.model,
        e.test,
        e.config.label,
        e.status.value,
        format_time(e.time_s),
        format_interval(e.ci_low_s, e.ci_high_s),
        f"{e.cv:.1%}" if e.cv is not None and e.time_s is not None else "-",
        speedup_cell(e, baseline),
        rate_cell(e),
        share_cell(e),
        _compile(e),
        mem,
        e.verification,
        *signal_cells(e),
        e.note or e.error,
    ]


def signal_cells(e: Entry) -> list[str]:
    """Dynamo's counts of the row (DYNAMO_COUNTS): – where one does not apply (no dynamo),
    - where the row has none (it did not run)."""
    signals = e.row.signals
    counts = [getattr(signals, name) if signals else None for name in DYNAMO_COUNTS]
    return [MISSING if signals is None else NOT_APPLICABLE if c is None else str(c) for c in counts]


def rate_cell(e: Entry) -> str:
    """The FLOP/s a step reached, with the interval its time's gives."""
    f = e.flops
    return format_rate(f.per_s, f.per_s_ci_low, f.per_s_ci_high) if f else "-"


def share_cell(e: Entry) -> str:
    """Those FLOP/s as a share of the device's measured peak, with their interval."""
    f = e.flops
    return format_share(f.share_of_peak, f.share_ci_low, f.share_ci_high) if f else "-"


def _compile(e: Entry) -> str:
    """The compile time, with the export it includes where the model was exported."""
    if not e.compiles:
        return NOT_APPLICABLE
    export = f" (export {format_time(e.export_s)})" if e.export_s is not None else ""
    return format_time(e.compile_s) + export


def summary_cells(s: Summary) -> list[str]:
    rate = "-" if s.passrate is None else f"{s.passed}/{s.models} ({s.passrate:.0%})"
    if s.passed and not s.verified:
        rate += ", accuracy not checked"
    elif s.verified < s.passed:
        rate += f", {s.verified} of them verified"
    speed = (
        _x(s.geomean_speedup) if s.geomean_ci is None else _x_ci(s.geomean_speedup, s.geomean_ci)
    )
    if s.geomean_speedup is not None:
        speed += f" over {s.speedup_models} of {s.models}"
    memory = _x(s.memory_ratio)
    if s.memory_ratio is not None and s.memory_models:
        memory += f" over {s.memory_models}"
    share = format_share(s.geomean_share)
    if s.geomean_share is not None:
        share += f" over {s.share_models} of {s.models}"
    return [
        s.config.label,
        rate,
        speed,
        "; ".join(f"{model}: {why}" for model, why in s.left_out) or "none",
        share,
        format_time(s.mean_compile_s) if s.compiles else NOT_APPLICABLE,
        memory,
        str(s.skipped),
    ]


def invalid_rows(report: Report) -> list[list[str]]:
    return [[i.model, i.test, i.settings, i.reason] for i in report.invalid]


def side_cell(e: Entry | None, full: bool = True) -> str:
    """One side of a comparison: its median (`full`: with interval, repeats), or why none."""
    if e is None:
        return "-"
    if e.time_s is None or not e.passed:
        return e.status.value if e.status is not Status.OK else e.verification
    if not full:
        return format_time(e.time_s)
    ci = format_interval(e.ci_low_s, e.ci_high_s)
    return f"{format_time(e.time_s)} ({ci}, {e.repeats} rep.)"


def change_cells(c: Change) -> list[str]:
    ratio = c.ratio
    return [
        c.model,
        c.test,
        c.config,
        side_cell(c.base),
        side_cell(c.cand),
        "-" if ratio is None else f"{ratio - 1:+.1%}",
        c.verdict,
        c.detail,
    ]


def time_rows(report: Report) -> list[list[str]]:
    """The sweep's seconds by phase, then each job's, in the order they ran."""
    totals = report.phase_totals()
    whole = sum(totals.values())
    lines = [
        ["all jobs", "", *(f"{totals[k]:.2f}" for k in PHASES), f"{whole:.2f}"],
        ["share", "", *(f"{totals[k] / whole:.1%}" if whole else "" for k in PHASES), ""],
    ]
    for t in report.time_spent:
        cells = [f"{t.phases.get(k, 0.0):.2f}" for k in PHASES]
        lines.append([t.name, str(t.status), *cells, f"{sum(t.phases.values()):.2f}"])
    return lines


def break_rows(report: Report) -> list[list[str]]:
    """Each configuration's graph breaks, a row per model, test and place."""
    return [
        [g.config, g.model, g.test, str(g.count), g.reason, short_frame(g.frame)]
        for g in report.graph_breaks
    ]


def breaks_note() -> str:
    return (
        "each place in a model's code where dynamo broke its graph (where: file:line; the "
        "row's signals have the full path), with dynamo's reason; breaks: how many times it "
        "broke there (a compiled step breaks at its call of the module too, a recompile "
        "traces the place again). A configuration with no row here broke no graph."
    )


def time_note() -> str:
    return (
        "seconds from the end of the job before (gap: the parent's work) to the end of "
        f"this job; the model's own work is {', '.join(MODEL_WORK)}; start (fork or spawn, "
        "imports), teardown and other are the harness's overhead; the sweep's own start-up "
        "is the first job's gap."
    )


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    def esc(cell: str) -> str:
        return (cell or " ").replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in line) + " |" for line in body]
    return "\n".join(lines)


def definitions(report: Report) -> str:
    steps = "; ".join(f"model.step={s}: {STEPS.get(s, s)}" for s in report.steps)
    return (
        (f"timed step: {steps}. " if steps else "")
        + "time: median per-iteration time over the repeats of all the job's processes; "
        "95% CI: where the typical process's median lies, with 95% confidence (Student's t "
        "over the log process medians), or for a job timed in one process the median's "
        "interval over its repeats (order statistics; none under 6 repeats); "
        "CV: the repeats' std / mean; "
        f"speedup: {report.baseline} time / this time (> 1 is faster), with its 95% interval "
        "(Welch's t over both jobs' log process medians; bootstrap over their repeats for "
        "jobs timed in one process); "
        f"dtype: {DTYPE_RULE} (this report's: {report.dtypes}); "
        "FLOP/s: the FLOPs of one step (torch's counter on the eager module: the model's "
        "arithmetic, the same for every backend) / the median time, the interval from the "
        "time's; share of peak: those FLOP/s / the best torch.mm throughput measured on the "
        "device in the job's dtype and threads (the notes name each peak); geomean share of "
        "peak: over the passing models that have one; "
        "compile: first call minus a steady step (export: of it, torch.export's); "
        f"memory ratio: {report.baseline} peak / this peak; "
        "passrate: ran ok and accuracy did not fail, over models not skipped; "
        "geomean and means over models where both this configuration and the baseline passed "
        "(the geomean's interval: t over the models' log ratios of process medians, or a "
        "bootstrap over their repeats; "
        "the models it leaves out are named)."
    )


def overall_lines(changes: Sequence[Change]) -> list[str]:
    """Per configuration, the geomean change over the models both sides timed, and its verdict."""
    return [
        f"{o.config}: {o.verdict}, geomean change {o.detail} over the {o.models} model(s) "
        "both sides timed"
        for o in overall(list(changes))
    ]


@dataclass(frozen=True)
class Section:
    """One of a report's tables, with what follows it, as each format renders it."""

    title: str
    header: Sequence[str]
    rows: list[list[str]]
    classes: Sequence[str] = ()  # the HTML page's class of each row (bad, good, skip)
    lines: Sequence[str] | None = None  # a list after the table (the configurations' verdicts)
    note: str | None = None


def _sections(report: Report, changes: Sequence[Change] | None) -> list[Section]:
    """The report's tables in order (the last three only where they have rows); the HTML
    page draws its plots after the Summary."""
    found = []
    if changes is not None:
        classes = ["bad" if c.fails else ("good" if c.verdict in GOOD else "") for c in changes]
        rows = [change_cells(c) for c in changes]
        found.append(Section(CHANGE_TITLE, CHANGE_HEADER, rows, classes, overall_lines(changes)))
    summaries = [summary_cells(s) for s in report.summaries]
    entries = [entry_cells(e, report.is_baseline(e.config)) for e in report.entries]
    classes = [
        "" if e.passed else ("skip" if e.status is Status.SKIPPED else "bad")
        for e in report.entries
    ]
    found += [
        Section(SUMMARY_TITLE, SUMMARY_HEADER, summaries),
        Section("Per model", ENTRY_HEADER, entries, classes, note=definitions(report)),
    ]
    if report.invalid:
        found.append(Section(INVALID_TITLE, INVALID_HEADER, invalid_rows(report)))
    if report.graph_breaks:
        found.append(Section(BREAKS_TITLE, BREAKS_HEADER, break_rows(report), note=breaks_note()))
    if report.time_spent:
        found.append(Section(TIME_TITLE, TIME_HEADER, time_rows(report), note=time_note()))
    return found


def to_markdown(report: Report, title: str, changes: Sequence[Change] | None = None) -> str:
    parts = [f"# {title}", ""]
    for section in _sections(report, changes):
        parts += [f"## {section.title}", "", markdown_table(section.header, section.rows), ""]
        parts += [*(f"- {line}" for line in section.lines), ""] if section.lines is not None else []
        parts += [section.note, ""] if section.note else []
    parts += [f"- {n}" for n in report.notes]
    return "\n".join(parts).rstrip() + "\n"


def html_table(
    header: Sequence[str], body: Sequence[Sequence[str]], classes: Sequence[str] = ()
) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    lines = []
    for i, line in enumerate(body):
        cls = f' class="{classes[i]}"' if i < len(classes) and classes[i] else ""
        lines.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"


CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f0f0f0} tr.bad td{background:#fde8e8} tr.good td{background:#e8f6e8}
tr.skip td{color:#888} figure{margin:1em 0} .note{color:#555;font-size:13px}
"""


def to_html(
    report: Report,
    title: str,
    figures: dict[str, str],
    meta: Meta,
    changes: Sequence[Change] | None = None,
) -> str:
    """One file, no external resources: the plots are inline SVG."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        "<p class='note'>"
        + " · ".join(f"{html.escape(k)}: {html.escape(str(v))}" for k, v in meta.items())
        + "</p>",
    ]
    for section in _sections(report, changes):
        parts += [
            f"<h2>{html.escape(section.title)}</h2>",
            html_table(section.header, section.rows, section.classes),
            *[f"<p>{html.escape(line)}</p>" for line in section.lines or ()],
        ]
        parts += [f"<p class='note'>{html.escape(section.note)}</p>"] if section.note else []
        if section.title == SUMMARY_TITLE:
            parts += [f"<figure id='{html.escape(n)}'>{svg}</figure>" for n, svg in figures.items()]
    parts += [f"<p class='note'>note: {html.escape(n)}</p>" for n in report.notes]
    parts.append("</body></html>")
    return "\n".join(parts)
