"""What a report says, computed from result rows (no I/O, no plotting, no torch).

A report has one *entry* per (model, test, configuration) and one *summary* per
configuration. A configuration is the backend plus every other swept axis whose value
differs between the rows (e.g. ``dtype=float32``). Passed, passrate, speedup, compile
time and memory compression ratio are the PyTorch HUD's (docs/reports.md). A noisy row
stays in the geomean (its interval carries the doubt); a biased one (a timed repeat
compiled, or lasted under 1000 timer ticks) is left out and named.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchflow import backends
from benchflow.config.schema import (
    DEFAULT_BASELINE,
    PROJECT_TOOLCHAIN,
    Setting,
    is_knob,
    is_measured,
    setting_text,
    unset_settings,
)
from benchflow.core.status import INVALID_PREFIX, Status
from benchflow.core.units import format_rate
from benchflow.report.entry import Config, Entry, make_entry
from benchflow.results.headline import references
from benchflow.results.intervals import Interval, compare_times, geomean_ratio_ci
from benchflow.results.load import speed_spread
from benchflow.results.phases import PHASES
from benchflow.results.row import ResultRow
from benchflow.results.stats import geomean

# Measured settings that are not axes of a configuration: the model and the test are
# the lines of the report, and dynamo/xla are the backend, the label's first part.
_IDENTITY = ("model.name", "model.builtin", "test.name", "dynamo.name", "xla.name")

# A configuration's toolchain: one axis, by name (its pins are the toolchain's own).
TOOLCHAIN_AXIS = "toolchain"
_TOOLCHAIN_KEYS = f"{TOOLCHAIN_AXIS}."
# The settings a row's config leaves out while unset (and a row from before them), at that
# value (`host_allocator=steady` beside `host_allocator=glibc`); a compiler setting is shown
# only where set (report/entry.py).
_UNSET = {k: setting_text(v) for k, v in unset_settings().items() if not is_knob(k)}

# What a report's header says: where the rows came from, what they ran on, when.
Meta = dict[str, str | int | None]


def row_axes(row: ResultRow) -> dict[str, str]:
    """A row's measured settings, as text (its `config`; before schema 2, its measured
    overrides and the step). The toolchain is one axis, its name."""
    if row.config is not None:
        out = _UNSET | {
            k: _text(v)
            for k, v in row.config.items()
            if k not in _IDENTITY and not k.startswith(_TOOLCHAIN_KEYS)
        }
        out[TOOLCHAIN_AXIS] = str(row.config.get(f"{TOOLCHAIN_AXIS}.name") or PROJECT_TOOLCHAIN)
        return out
    out = _UNSET | {"model.step": row.experiment.step, TOOLCHAIN_AXIS: PROJECT_TOOLCHAIN}
    for item in row.job.overrides:
        key, sep, value = str(item).lstrip("+~").partition("=")
        if sep and key not in ("model", "dynamo", "xla", "test") and is_measured(key):
            out[key] = value
    return out


def _text(value: Setting) -> str:
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return setting_text(value)


def varying_axes(
    rows: Sequence[ResultRow], settings: Sequence[dict[str, str]] | None = None
) -> list[str]:
    """Measured settings whose value differs between two rows of the same model and test
    (absent counts as a value); a suite's per-model dtype or batch size makes no new
    configuration. `settings`: the rows' `_axes`, where the caller has them."""
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for i, row in enumerate(rows):
        key = (row.model_name, row.test)
        groups.setdefault(key, []).append(settings[i] if settings else row_axes(row))
    varying: set[str] = set()
    for per_row in groups.values():
        keys = {k for axes in per_row for k in axes}
        varying |= {k for k in keys if len({axes.get(k) for axes in per_row}) > 1}
    return sorted(varying)


@dataclass
class Summary:
    """One configuration's HUD-style summary row."""

    config: Config
    models: int  # models with a row that was not skipped
    passed: int
    verified: int  # of the passed, how many had accuracy checked (PASS)
    skipped: int
    geomean_speedup: float | None
    speedup_models: int  # the models in the geomean
    geomean_ci: Interval | None  # its 95% interval (None: a model in it has under 2 repeats)
    mean_compile_s: float | None
    memory_ratio: float | None
    memory_models: int
    # geometric mean of the passing models' share of the device's peak, over `share_models`
    geomean_share: float | None = None
    share_models: int = 0
    compiles: bool = True  # False: no model of it compiles (eager): no compile time
    baseline: bool = False  # the configuration the speedups are over
    # Models not skipped that the geomean leaves out, each with why (a failure on either
    # side, no baseline row, a biased median).
    left_out: list[tuple[str, str]] = field(default_factory=list)

    @property
    def passrate(self) -> float | None:
        return self.passed / self.models if self.models else None


@dataclass
class Report:
    baseline: str  # what the speedups are over: a backend's label, or toolchain=<name>
    entries: list[Entry]
    summaries: list[Summary]
    axes: list[str]  # the measured settings that vary, in the configuration labels
    steps: list[str] = field(default_factory=list)  # the timed steps (model.step) rows ran
    notes: list[str] = field(default_factory=list)
    invalid: list[Invalid] = field(default_factory=list)  # jobs that never ran
    # Where each job's time went (results/phases.py), in the order the jobs ran.
    time_spent: list[JobTime] = field(default_factory=list)
    # Each configuration's graph breaks, by model and reason (results/signals.py)
    graph_breaks: list[GraphBreak] = field(default_factory=list)

    @property
    def configs(self) -> list[Config]:
        return _configs(self.entries)

    @property
    def untimed(self) -> bool:
        """An accuracy sweep's report: every entry ran with timing=false."""
        return all_untimed(self.entries)

    def phase_totals(self) -> dict[str, float]:
        return {k: sum(t.phases.get(k, 0.0) for t in self.time_spent) for k in PHASES}

    @property
    def dtypes(self) -> str:
        """The dtypes its jobs ran in, by test, each with who chose it (suite, user...)."""
        found = dict.fromkeys(
            f"{x.test} {x.dtype} ({x.dtype_source or 'not recorded'})"
            for x in (e.row.experiment for e in self.entries)
            if x.dtype
        )
        return ", ".join(found) or "none recorded"

    def lookup(self) -> dict[tuple[str, str, str], Entry]:
        return {e.key: e for e in self.entries}

    def is_baseline(self, config: Config) -> bool:
        """Is this the configuration (or one of those) the speedups are over?"""
        return any(s.baseline and s.config == config for s in self.summaries)


@dataclass(frozen=True)
class JobTime:
    name: str
    status: Status
    phases: dict[str, float]


@dataclass(frozen=True)
class GraphBreak:
    """One place where dynamo broke a model's graph in one configuration, and why."""

    config: str
    model: str
    test: str
    reason: str
    frame: str  # file:line in the user's code
    count: int  # times dynamo broke there (results/signals.Break)


def graph_breaks(entries: Sequence[Entry]) -> list[GraphBreak]:
    """The entries' graph breaks, by configuration (in the report's order), model and test."""
    order = {c.label: i for i, c in enumerate(_configs(entries))}
    found = [
        GraphBreak(e.config.label, e.model, e.test, b.reason, b.frame, b.count)
        for e in entries
        if e.row.signals is not None
        for b in e.row.signals.breaks
    ]
    return sorted(found, key=lambda g: (order[g.config], g.model, g.test))


# An untimed row's note (timing=false): it has accuracy and signals, no time.
UNTIMED_NOTE = "not timed (timing=false)"


@dataclass(frozen=True)
class Invalid:
    """A job that never ran because its settings cannot go together: no configuration."""

    model: str
    test: str
    settings: str  # the job's own overrides, less the model's
    reason: str


# The settings whose combination can be invalid (backends.select, sweep.plan.resolve).
_COMBINED = ("dynamo", "xla", "accelerator", "dtype")


def _invalid(row: ResultRow) -> Invalid:
    overrides = [o for o in row.job.overrides if o.split("=")[0] in _COMBINED]
    return Invalid(
        model=row.model_name,
        test=row.test,
        settings=" ".join(overrides) or row.job.name,
        reason=(row.error or "").removeprefix(INVALID_PREFIX),
    )


@dataclass(frozen=True)
class Baseline:
    """What a report's speedups are over: a backend (the same axes with that backend), or
    a toolchain (each configuration over itself run with it: a release against another)."""

    backend: str
    toolchain: str | None = None

    @property
    def label(self) -> str:
        return f"{TOOLCHAIN_AXIS}={self.toolchain}" if self.toolchain else self.backend

    def is_base(self, config: Config) -> bool:
        if self.toolchain:
            return config.axis(TOOLCHAIN_AXIS) == self.toolchain
        return config == self.reference(config)

    def reference(self, config: Config) -> Config:
        """The configuration whose row is `config`'s baseline: the same axes with the
        baseline's backend at its compiler's defaults, less what it does not take, so that
        `inductor inductor.freezing=true` is compared with plain Inductor, or eager."""
        if self.toolchain:
            return config.with_axis(TOOLCHAIN_AXIS, self.toolchain)
        backend = backends.REGISTRY.get(self.backend)

        def kept(key: str) -> bool:
            return not is_knob(key) and (backend is None or backend.takes(key))

        return Config(self.backend, tuple((k, v if kept(k) else "-") for k, v in config.axes))


def build_report(
    rows: Sequence[ResultRow],
    baseline: str = DEFAULT_BASELINE,
    baseline_toolchain: str | None = None,
) -> Report:
    """Entries (a later row of a model/test/configuration wins), speedups over `baseline`
    or `baseline_toolchain`, and summaries; invalid combinations are listed apart."""
    base = Baseline(backends.baseline_label(baseline), baseline_toolchain)
    invalid = [_invalid(r) for r in rows if r.status is Status.INVALID]
    # Oldest first: a rerun replaces an earlier row, and column order follows the
    # sweep's own order whatever order the rows were read in (MLflow: newest first).
    rows = sorted((r for r in rows if r.status.counts_as_configuration), key=lambda r: r.timestamp)
    settings = [row_axes(row) for row in rows]
    axes = varying_axes(rows, settings)
    notes: list[str] = []
    configs = [
        Config(r.backend, tuple((k, s.get(k, "-")) for k in axes))
        for r, s in zip(rows, settings, strict=True)
    ]
    entries = _latest(rows, configs)
    if superseded := len(rows) - len(entries):
        notes.append(
            f"{superseded} older row(s) for the same model and configuration "
            "were replaced by later ones"
        )
    notes += _speedups(entries, base)
    notes += _host_notes(entries)
    notes += _machine_checks_run(rows)
    notes += _flops_notes(entries)
    biased = sum(bool(e.flags) for e in entries)
    if biased:
        notes.append(
            f"{biased} row(s) have a biased median (see their notes): their speedups are "
            "shown, and the summary names them among the models its geomean leaves out"
        )
    summaries = [
        _summarize(config, [e for e in entries if e.config == config], base.is_base(config))
        for config in _configs(entries)
    ]
    return Report(
        baseline=base.label,
        entries=entries,
        summaries=summaries,
        axes=axes,
        steps=sorted({r.experiment.step for r in rows if r.status is not Status.SKIPPED}),
        notes=notes,
        invalid=invalid,
        time_spent=[
            JobTime(r.job.name, r.status, r.job.phases)
            for r in sorted(rows, key=lambda r: r.job.started_at or 0.0)
            if r.job.phases
        ],
        graph_breaks=graph_breaks(entries),
    )


def _latest(rows: Sequence[ResultRow], configs: Sequence[Config]) -> list[Entry]:
    """One entry per model, test and configuration (the latest row's), by model and
    test, and within a model in the order its configurations first appear."""
    latest: dict[tuple[str, str, str], Entry] = {}
    for row, config in zip(rows, configs, strict=True):
        entry = make_entry(row, config)
        latest.pop(entry.key, None)  # keep the order of first appearance stable below
        latest[entry.key] = entry
    order = {label: i for i, label in enumerate(dict.fromkeys(c.label for c in configs))}
    return sorted(latest.values(), key=lambda e: (e.model, e.test, order.get(e.config.label, 0)))


def all_untimed(entries: list[Entry]) -> bool:
    """Entries of an accuracy sweep: at least one, and none timed (timing=false)."""
    return bool(entries) and all(e.untimed for e in entries)


def _speedups(entries: list[Entry], base: Baseline) -> list[str]:
    """Each entry's speedup over its baseline's row (or the note saying why none), and
    the report's notes where the baseline is not among the entries."""
    index = {e.key: e for e in entries}
    # (an accuracy sweep's entries, all untimed, have no speedup to miss)
    has_base = all_untimed(entries) or any(base.is_base(e.config) for e in entries)
    notes: list[str] = []
    if not has_base and base.toolchain:
        present = ", ".join(
            sorted({e.config.axis(TOOLCHAIN_AXIS) or PROJECT_TOOLCHAIN for e in entries})
        )
        notes.append(
            f"baseline toolchain {base.toolchain} is not among these results' toolchains: "
            f"no speedups (choose one of {present} with --baseline-toolchain)"
        )
    elif not has_base:
        present = ", ".join(sorted({e.config.backend for e in entries}))
        knobs = any(is_knob(k) for e in entries for k, _ in e.config.axes)
        plain = " with no compiler setting (inductor.*, dynamo.dynamic*)" if knobs else ""
        notes.append(
            f"baseline {base.label}{plain} is not in these results: no speedups "
            f"(choose one of {present} with --baseline, or baseline= in the sweep)"
        )
    for e in entries:
        if e.untimed:
            e.note = UNTIMED_NOTE
            continue
        if base.is_base(e.config) or not has_base:
            continue
        ref = index.get((e.model, e.test, base.reference(e.config).label))
        if ref is None:
            e.note = f"no {base.label} row: no speedup"
        elif ref.untimed:
            e.note = f"{base.label} {UNTIMED_NOTE}: no speedup"
        elif not ref.passed:
            e.note = f"{base.label} {_outcome(ref)}: no speedup"
        elif not e.passed:
            e.note = f"{_outcome(e)}: not in the geomean"
        elif e.time_s and ref.time_s:
            e.speedup = ref.time_s / e.time_s
            e.baseline = ref.timed
            e.speedup_ci = compare_times(ref.timed, e.timed).ratio_ci
            if e.flags or ref.flags:
                e.in_geomean = False
                e.note = "; ".join(e.flags or [f"{base.label}: {f}" for f in ref.flags])
                e.note += ": not in the geomean"
            if e.peak_bytes and ref.peak_bytes and e.memory_kind == ref.memory_kind:
                e.memory_ratio = ref.peak_bytes / e.peak_bytes
    for e in entries:
        if e.untimed:
            continue
        if base.is_base(e.config) and not e.passed:
            e.note = f"{_outcome(e)}: {e.model} has no baseline"
        elif base.is_base(e.config) and e.flags:
            e.note = "; ".join(e.flags)
    return notes


def _host_notes(entries: list[Entry]) -> list[str]:
    """The report's notes on entries timed on a busy host or while its speed moved."""
    notes: list[str] = []
    busy = [e for e in entries if e.host and not e.host.quiet]
    for e in busy:
        assert e.host is not None
        e.note = "; ".join(n for n in (e.note, f"host busy: {e.host.described}") if n)
    if busy:
        notes.append(
            f"{len(busy)} row(s) timed on a busy host (see their notes): other processes "
            "took time from the job's own cores in more than a tenth of their repeats"
        )
    moved = [(e, s) for e in entries if e.passed and (s := speed_spread(references(e.row)))]
    for e, spread in moved:
        what = f"host speed moved {spread:.0%} between its processes (reference step)"
        e.note = "; ".join(n for n in (e.note, what) if n)
    if moved:
        notes.append(
            f"{len(moved)} row(s) timed while the host changed speed (see their notes): "
            "their processes ran the same reference step more than 10% apart, which "
            "widens their intervals"
        )
    return notes


def _outcome(e: Entry) -> str:
    if e.status is not Status.OK:
        return e.status.value
    return f"accuracy {e.verification}"


def _configs(entries: Sequence[Entry]) -> list[Config]:
    return list(dict.fromkeys(e.config for e in entries))


def _summarize(config: Config, entries: list[Entry], is_base: bool) -> Summary:
    counted = [e for e in entries if e.status.counts_in_passrate]
    passed = [e for e in counted if e.passed]
    in_geomean = [e for e in passed if not e.untimed and (is_base or (e.speedup and e.in_geomean))]
    left_out = [(e.model, _why_left_out(e)) for e in counted if e not in in_geomean]
    compiles = [e.compile_s for e in passed if e.compile_s is not None]
    ratios = [e.memory_ratio for e in passed if e.memory_ratio]
    speedups = [e.speedup for e in in_geomean if e.speedup]
    shares = [e.flops.share_of_peak for e in passed if e.flops and e.flops.share_of_peak]
    return Summary(
        config=config,
        models=len(counted),
        passed=len(passed),
        verified=sum(e.verification == "PASS" for e in passed),
        skipped=len(entries) - len(counted),
        geomean_speedup=1.0
        if is_base and in_geomean
        else (geomean(speedups) if speedups else None),
        speedup_models=len(in_geomean),
        geomean_ci=None
        if is_base or not speedups
        else geomean_ratio_ci([(e.baseline, e.timed) for e in in_geomean]),
        mean_compile_s=statistics.fmean(compiles) if compiles else None,
        memory_ratio=1.0
        if is_base and in_geomean
        else (statistics.fmean(ratios) if ratios else None),
        memory_models=len(ratios),
        geomean_share=geomean(shares) if shares else None,
        share_models=len(shares),
        compiles=any(e.compiles for e in entries),
        baseline=is_base,
        left_out=left_out,
    )


def _why_left_out(e: Entry) -> str:
    if not e.passed:
        return _outcome(e)
    if e.untimed:
        return UNTIMED_NOTE
    return e.note.removesuffix(": not in the geomean") or "no speedup"


def _machine_checks_run(rows: Sequence[ResultRow]) -> list[str]:
    """A note for each machine check a zygote of the sweep ran rather than read from the
    machine's cache (runner/zygote.py): a cold machine's first sweep pays it once."""
    took: dict[str, float] = {}
    for row in rows:
        for name, check in (row.timing.machine_checks if row.timing else {}).items():
            if not check.get("from_cache"):
                took[name] = max(took.get(name, 0.0), float(check.get("s") or 0.0))
    return [
        f"{backends.MACHINE_CHECKS.get(name, name)} ran in this sweep ({s:.1f} s before its "
        "first job of that kind); later sweeps on this machine read its answer from "
        "benchflow's cache"
        for name, s in sorted(took.items())
    ]


def _flops_notes(entries: Sequence[Entry]) -> list[str]:
    """The peaks the rows' shares are of (each with the vendor's, where known), and why a
    passing row has no FLOP/s, each said once with the rows it holds for."""
    peaks: dict[str, list[str]] = {}
    missing: dict[str, list[str]] = {}
    for e in entries:
        f = e.flops
        if f is None or not e.passed:
            continue
        name = f"{e.model} {e.test} {e.config.label}"
        if f.peak is not None:
            p = f.peak
            threads = f", {p.threads} thread(s)" if p.threads is not None else ""
            vendor = (
                f"; {p.vendor}: {format_rate(p.vendor_flop_per_s)}"
                if p.vendor and p.vendor_flop_per_s
                else ""
            )
            cached = "from benchflow's cache" if p.from_cache else "measured in this sweep"
            if not p.quiet:
                cached += f", on a busy host: the best of {p.measures} measurement(s)"
            wide = f" in {p.computed_in}" if p.computed_in != p.dtype else ""
            what = (
                f"{p.device}, {p.dtype}{threads}: {format_rate(p.flop_per_s)} "
                f"(torch.mm's best{wide}, {cached}{vendor})"
            )
            peaks.setdefault(what, []).append(name)
        if why := (f.why_none or (f"no peak: {f.peak_error}" if f.peak_error else None)):
            missing.setdefault(why, []).append(name)
    notes = [f"share of peak: of {what}, for {_some(names)}" for what, names in peaks.items()]
    return notes + [f"{why}: {_some(names)}" for why, names in missing.items()]


def _some(names: list[str], shown: int = 4) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
