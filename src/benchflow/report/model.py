"""What a report says, computed from result rows (no I/O, no plotting, no torch).

A report has one *entry* per (model, test, configuration) and one *summary* per
configuration. A configuration is the backend (``eager``, ``lazy_xla`` or the
dynamo backend) plus every other swept axis whose value differs between the
rows (e.g. ``dtype=float32``); axes every row shares are left out of the label.

Definitions (the PyTorch HUD's, restated in the README):
- passed: the job ran (``status=ok``) and accuracy did not fail: the code is
  ``PASS``, or ``VERIFIER_SKIPPED`` when the sweep did not ask for ``verify``
  (counted as passing, and the summary says how many were verified).
- passrate: passed models / models that have a row, ``skipped`` rows excluded.
- speedup: baseline median per-iteration time / this configuration's, per model,
  where both passed; the geomean is over those models only.
- compile time: the cold-start step's excess over a steady step
  (``first_iter_time_s - median per_iter_time_s``, at least 0): what tracing and
  compiling added to the first call, for every backend alike.
- memory compression ratio: baseline peak memory / this configuration's peak,
  mean over models where both passed. The device allocator's peak where the
  device has one (CUDA, XLA on TPU/GPU); else the process's peak host RSS.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchflow.backends.catalog import backend_label, baseline_label
from benchflow.results.stats import geomean, quantile

FAILED_CODES = (
    "FAIL",
    "EAGER_FAILED",
    "EXCEPTION_RAISED",
    "NONDETERMINISTIC_EAGER_RUN",
    "VERIFIER_DIDNT_RUN",
)
# Overrides that never distinguish two configurations in a report: the model is a
# line of its own, the backend is the label's first part, the rest do not change
# what is measured (the same list the fingerprint leaves out, plus Hydra's own).
_NOT_AXES = {
    "model",
    "dynamo",
    "xla",
    "experiment",
    "timeout_s",
    "fail_fast",
    "progress",
    "baseline",
    "suite.torchbench_root",
    "resume",
    "retry",
}
_NOT_AXIS_PREFIXES = ("mlflow.", "hydra.", "hydra/")


def row_backend(row: dict[str, Any]) -> str:
    exp = row["experiment"]
    return backend_label(exp.get("dynamo"), bool(exp.get("xla")))


def _axes(row: dict[str, Any]) -> dict[str, str]:
    out = {}
    for item in row.get("job", {}).get("overrides", []) or []:
        key, sep, value = str(item).lstrip("+~").partition("=")
        if not sep or key in _NOT_AXES or key.startswith(_NOT_AXIS_PREFIXES):
            continue
        out[key] = value
    return out


def varying_axes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Override keys whose value is not the same in every row (absent counts as a value)."""
    per_row = [_axes(r) for r in rows]
    keys = sorted({k for axes in per_row for k in axes})
    return [k for k in keys if len({axes.get(k) for axes in per_row}) > 1]


@dataclass(frozen=True)
class Config:
    """A backend plus the values of the varying axes: one column of the comparison."""

    backend: str
    axes: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return " ".join([self.backend, *(f"{k}={v}" for k, v in self.axes)])

    def with_backend(self, backend: str) -> Config:
        return Config(backend, self.axes)


@dataclass
class Entry:
    """One job's numbers as the report shows them."""

    model: str
    test: str
    config: Config
    row: dict[str, Any]
    status: str
    time_s: float | None  # median per-iteration time
    q1_s: float | None
    q3_s: float | None
    repeats: int
    compile_s: float | None
    peak_bytes: float | None
    memory_kind: str | None  # "device" or "host RSS"
    verification: str
    cv: float | None = None  # coefficient of variation of the per-iteration times
    flags: list[str] = field(default_factory=list)  # why the timing is not to be trusted
    speedup: float | None = None
    memory_ratio: float | None = None
    in_geomean: bool = True  # False: this row or its baseline is flagged
    note: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.model, self.test, self.config.label)

    @property
    def passed(self) -> bool:
        return self.status == "ok" and self.verification not in FAILED_CODES

    @property
    def iqr_s(self) -> float | None:
        if self.q1_s is None or self.q3_s is None:
            return None
        return self.q3_s - self.q1_s

    @property
    def error(self) -> str:
        err = self.row.get("error") or ""
        return err.splitlines()[0][:160] if err else ""


def _median_of(value: Any) -> float | None:
    if isinstance(value, list):
        nums = [float(v) for v in value if isinstance(v, (int, float))]
        return statistics.median(nums) if nums else None
    return float(value) if isinstance(value, (int, float)) else None


def make_entry(row: dict[str, Any], config: Config) -> Entry:
    summary = row.get("summary", {}).get("per_iter_time_s") or {}
    metrics = row.get("metrics", {}) or {}
    per_repeat = [float(v) for v in metrics.get("per_iter_time_s") or [] if v is not None]
    median = summary.get("median")
    q1: float | None
    q3: float | None
    if per_repeat:
        q1, q3 = quantile(per_repeat, 0.25), quantile(per_repeat, 0.75)
    elif median is not None:  # rows without the series: the summary's IQR around the median
        half = float(summary.get("iqr", 0.0)) / 2
        q1, q3 = median - half, median + half
    else:
        q1 = q3 = None
    first = metrics.get("first_iter_time_s")
    compile_s = max(0.0, float(first) - median) if first is not None and median else None
    device_peak = _median_of(metrics.get("peak_device_memory_bytes"))
    host_peak = _median_of(metrics.get("peak_host_rss_bytes"))
    peak, kind = (device_peak, "device") if device_peak else (host_peak, "host RSS")
    cv = summary.get("cv")
    return Entry(
        cv=float(cv) if cv is not None and row["status"] == "ok" else None,
        flags=timing_flags(row) if row["status"] == "ok" else [],
        model=row["model"]["model_name"],
        test=row["experiment"]["test"],
        config=config,
        row=row,
        status=row["status"],
        time_s=float(median) if median is not None and row["status"] == "ok" else None,
        q1_s=q1,
        q3_s=q3,
        repeats=len(per_repeat),
        compile_s=compile_s if row["status"] == "ok" else None,
        peak_bytes=peak if row["status"] == "ok" else None,
        memory_kind=kind if peak else None,
        verification=row.get("verification_code") or "VERIFIER_SKIPPED",
    )


# A row's timing is flagged, and kept out of the geomean, when its repeats vary by more
# than this, when a timed repeat compiled, or when a repeat lasts a few timer ticks.
CV_LIMIT = 0.10
RESOLUTION_FACTOR = 1000


def timing_flags(row: dict[str, Any]) -> list[str]:
    flags = []
    timing = row.get("timing") or {}
    if timing.get("steady_state") is False:
        first = (timing.get("unsteady_repeats") or [{}])[0]
        flags.append(f"not steady: repeat {first.get('repeat')} {first.get('reason')}")
    summary = row.get("summary", {}).get("per_iter_time_s") or {}
    if (cv := summary.get("cv")) is not None and cv > CV_LIMIT:
        flags.append(f"noisy: CV {cv:.0%} > {CV_LIMIT:.0%}")
    totals = row.get("metrics", {}).get("total_time_s") or []
    resolution = timing.get("timer_resolution_s")
    if resolution and totals and min(totals) < RESOLUTION_FACTOR * resolution:
        flags.append(f"a repeat lasts under {RESOLUTION_FACTOR} timer ticks ({resolution:g} s)")
    return flags


@dataclass
class Summary:
    """One configuration's HUD-style summary row."""

    config: Config
    models: int  # models with a row that was not skipped
    passed: int
    verified: int  # of the passed, how many had accuracy checked (PASS)
    skipped: int
    geomean_speedup: float | None
    speedup_models: int
    mean_compile_s: float | None
    memory_ratio: float | None
    memory_models: int

    @property
    def passrate(self) -> float | None:
        return self.passed / self.models if self.models else None


@dataclass
class Report:
    baseline: str  # backend label the speedups are over
    entries: list[Entry]
    summaries: list[Summary]
    axes: list[str]  # the varying override keys in the configuration labels
    notes: list[str] = field(default_factory=list)

    @property
    def configs(self) -> list[Config]:
        return _configs(self.entries)

    def lookup(self) -> dict[tuple[str, str, str], Entry]:
        return {e.key: e for e in self.entries}


def build_report(rows: Sequence[dict[str, Any]], baseline: str = "inductor") -> Report:
    """Entries (a later row for the same model/test/configuration wins), speedups, summaries."""
    base = baseline_label(baseline)
    axes = varying_axes(rows)
    notes: list[str] = []
    latest: dict[tuple[str, str, str], Entry] = {}
    superseded = 0
    # Oldest first: a rerun replaces an earlier row, and column order follows the
    # sweep's own order whatever order the rows were read in (MLflow: newest first).
    rows = sorted(rows, key=lambda r: r.get("timestamp") or 0.0)
    for row in rows:
        row_axes = _axes(row)
        config = Config(row_backend(row), tuple((k, row_axes.get(k, "-")) for k in axes))
        entry = make_entry(row, config)
        superseded += entry.key in latest
        latest.pop(entry.key, None)  # keep the order of first appearance stable below
        latest[entry.key] = entry
    if superseded:
        notes.append(
            f"{superseded} older row(s) for the same model and configuration "
            "were replaced by later ones"
        )
    entries = sorted(latest.values(), key=lambda e: (e.model, e.test))
    # Order within a model: configurations in the order they first appear.
    order: dict[str, int] = {}
    for row in rows:
        row_axes = _axes(row)
        label = Config(row_backend(row), tuple((k, row_axes.get(k, "-")) for k in axes)).label
        order.setdefault(label, len(order))
    entries.sort(key=lambda e: (e.model, e.test, order.get(e.config.label, 0)))

    index = {e.key: e for e in entries}
    has_base = any(e.config.backend == base for e in entries)
    if not has_base:
        backends = ", ".join(sorted({e.config.backend for e in entries}))
        notes.append(
            f"baseline {base} is not in these results: no speedups "
            f"(choose one of {backends} with --baseline, or baseline= in the sweep)"
        )
    for e in entries:
        if e.config.backend == base or not has_base:
            continue
        ref = index.get((e.model, e.test, e.config.with_backend(base).label))
        if ref is None:
            e.note = f"no {base} row: no speedup"
        elif not ref.passed:
            e.note = f"{base} {_outcome(ref)}: no speedup"
        elif not e.passed:
            e.note = f"{_outcome(e)}: not in the geomean"
        elif e.time_s and ref.time_s:
            e.speedup = ref.time_s / e.time_s
            if e.flags or ref.flags:
                e.in_geomean = False
                e.note = "; ".join(e.flags or [f"{base}: {f}" for f in ref.flags])
                e.note += ": not in the geomean"
            if e.peak_bytes and ref.peak_bytes and e.memory_kind == ref.memory_kind:
                e.memory_ratio = ref.peak_bytes / e.peak_bytes
    for e in entries:
        if e.config.backend == base and not e.passed:
            e.note = f"{_outcome(e)}: {e.model} has no baseline"
        elif e.config.backend == base and e.flags:
            e.note = "; ".join(e.flags)
    flagged = sum(bool(e.flags) for e in entries)
    if flagged:
        notes.append(
            f"{flagged} row(s) have timing not to be trusted (see their notes); "
            "their speedups are shown but left out of the geomean"
        )
    summaries = [
        _summarize(config, [e for e in entries if e.config == config], base)
        for config in _configs(entries)
    ]
    return Report(baseline=base, entries=entries, summaries=summaries, axes=axes, notes=notes)


def _outcome(e: Entry) -> str:
    if e.status != "ok":
        return e.status
    return f"accuracy {e.verification}"


def _configs(entries: Sequence[Entry]) -> list[Config]:
    seen: dict[Config, None] = {}
    for e in entries:
        seen.setdefault(e.config)
    return list(seen)


def _summarize(config: Config, entries: list[Entry], base: str) -> Summary:
    counted = [e for e in entries if e.status != "skipped"]
    passed = [e for e in counted if e.passed]
    speedups = [e.speedup for e in passed if e.speedup and e.in_geomean]
    compiles = [e.compile_s for e in passed if e.compile_s is not None]
    ratios = [e.memory_ratio for e in passed if e.memory_ratio]
    is_base = config.backend == base
    return Summary(
        config=config,
        models=len(counted),
        passed=len(passed),
        verified=sum(e.verification == "PASS" for e in passed),
        skipped=len(entries) - len(counted),
        geomean_speedup=1.0 if is_base and passed else (geomean(speedups) if speedups else None),
        speedup_models=len(passed) if is_base else len(speedups),
        mean_compile_s=statistics.fmean(compiles) if compiles else None,
        memory_ratio=1.0 if is_base and passed else (statistics.fmean(ratios) if ratios else None),
        memory_models=len(ratios),
    )


def headline_metrics(row: dict[str, Any]) -> dict[str, float]:
    """The few numbers a run is compared on, named to sort together in MLflow."""
    e = make_entry(row, Config(row_backend(row)))
    out = {
        "headline.per_iter_time_s": e.time_s,
        "headline.per_iter_time_iqr_s": e.iqr_s if e.time_s is not None else None,
        "headline.compile_time_s": e.compile_s,
        "headline.peak_memory_bytes": e.peak_bytes,
        "headline.throughput_samples_per_s": row.get("metrics", {}).get("throughput_samples_per_s"),
    }
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}
