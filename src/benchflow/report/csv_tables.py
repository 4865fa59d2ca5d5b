"""The report's CSV files (report.csv, summary.csv, compare.csv, configurations.csv):
raw numbers, seconds and bytes, one line per model and configuration, per
configuration, per change, or per configuration's change."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from typing import Any

from benchflow.report.compare import Change, overall
from benchflow.report.entry import Entry
from benchflow.report.model import Report
from benchflow.results.flops import Flops
from benchflow.results.headline import FLOP_METRICS
from benchflow.results.signals import DYNAMO_COUNTS


def _csv(columns: Sequence[tuple[str, Any]], items: Sequence[Any]) -> str:
    """A CSV with one column per (name, getter) and one line per item."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow([name for name, _ in columns])
    w.writerows([get(item) for _, get in columns] for item in items)
    return out.getvalue()


def entries_csv(report: Report) -> str:
    """Raw numbers (seconds, bytes), one line per model and configuration."""

    def timed(value: float | None, e: Entry) -> str:
        return _num(value if e.time_s is not None else None)

    axes = [(k, lambda e, k=k: dict(e.config.axes).get(k, "")) for k in report.axes]
    columns: list[tuple[str, Any]] = [
        ("model", lambda e: e.model),
        ("test", lambda e: e.test),
        ("config", lambda e: e.config.label),
        ("backend", lambda e: e.config.backend),
        *axes,
        ("status", lambda e: e.status.value),
        ("per_iter_time_median_s", lambda e: _num(e.time_s)),
        ("per_iter_time_q1_s", lambda e: timed(e.q1_s, e)),
        ("per_iter_time_q3_s", lambda e: timed(e.q3_s, e)),
        ("per_iter_time_ci_low_s", lambda e: timed(e.ci_low_s, e)),
        ("per_iter_time_ci_high_s", lambda e: timed(e.ci_high_s, e)),
        ("repeats", lambda e: e.repeats),
        ("speedup", lambda e: _num(e.speedup)),
        ("speedup_ci_low", lambda e: _num(e.speedup_ci.low if e.speedup_ci else None)),
        ("speedup_ci_high", lambda e: _num(e.speedup_ci.high if e.speedup_ci else None)),
        *[
            (name, lambda e, read=read: _num(read(e.flops) if e.flops else None))
            for name, read in FLOP_COLUMNS.items()
        ],
        ("compile_time_s", lambda e: _num(e.compile_s)),
        ("export_time_s", lambda e: _num(e.export_s)),
        ("peak_memory_bytes", lambda e: _num(e.peak_bytes)),
        ("memory_kind", lambda e: e.memory_kind or ""),
        ("memory_ratio", lambda e: _num(e.memory_ratio)),
        ("verification_code", lambda e: e.verification),
        *[
            (name, lambda e, name=name: _num(getattr(e.row.signals, name, None)))
            for name in DYNAMO_COUNTS
        ],
        ("passed", lambda e: int(e.passed)),
        ("note", lambda e: e.note),
        ("error", lambda e: e.error),
    ]
    return _csv(columns, report.entries)


# A row's arithmetic (results/flops.py), one column each: its MLflow metrics' names
# without "headline." (results/headline.FLOP_METRICS), and the peak it is a share of,
# with the vendor's beside it.
FLOP_COLUMNS: dict[str, Callable[[Flops], float | None]] = {
    **{name.removeprefix("headline."): read for name, read in FLOP_METRICS.items()},
    "peak_flop_per_s": lambda f: f.peak.flop_per_s if f.peak else None,
    "vendor_peak_flop_per_s": lambda f: f.peak.vendor_flop_per_s if f.peak else None,
}


def summary_csv(report: Report) -> str:
    columns: list[tuple[str, Any]] = [
        ("config", lambda s: s.config.label),
        ("models", lambda s: s.models),
        ("passed", lambda s: s.passed),
        ("verified", lambda s: s.verified),
        ("skipped", lambda s: s.skipped),
        ("passrate", lambda s: _num(s.passrate)),
        ("geomean_speedup", lambda s: _num(s.geomean_speedup)),
        ("geomean_ci_low", lambda s: _num(s.geomean_ci.low if s.geomean_ci else None)),
        ("geomean_ci_high", lambda s: _num(s.geomean_ci.high if s.geomean_ci else None)),
        ("speedup_models", lambda s: s.speedup_models),
        ("geomean_share_of_peak", lambda s: _num(s.geomean_share)),
        ("share_models", lambda s: s.share_models),
        ("left_out", lambda s: "; ".join(f"{m}: {why}" for m, why in s.left_out)),
        ("mean_compile_time_s", lambda s: _num(s.mean_compile_s)),
        ("memory_compression_ratio", lambda s: _num(s.memory_ratio)),
        ("memory_models", lambda s: s.memory_models),
    ]
    return _csv(columns, report.summaries)


def changes_csv(changes: Sequence[Change]) -> str:
    columns: list[tuple[str, Any]] = [
        ("model", lambda c: c.model),
        ("test", lambda c: c.test),
        ("config", lambda c: c.config),
        ("baseline_time_s", lambda c: _num(c.base.time_s if c.base else None)),
        ("candidate_time_s", lambda c: _num(c.cand.time_s if c.cand else None)),
        ("ratio", lambda c: _num(c.ratio)),
        ("ratio_ci_low", lambda c: _num(c.ratio_ci.low if c.ratio_ci else None)),
        ("ratio_ci_high", lambda c: _num(c.ratio_ci.high if c.ratio_ci else None)),
        ("p_value", lambda c: _num(c.p_value)),
        ("q_value", lambda c: _num(c.q_value)),
        ("method", lambda c: c.tested.method if c.tested else ""),
        ("verdict", lambda c: c.verdict),
        ("detail", lambda c: c.detail),
    ]
    return _csv(columns, changes)


def configurations_csv(changes: Sequence[Change]) -> str:
    """Each configuration's verdict on its geomean change (report/compare.overall)."""
    columns: list[tuple[str, Any]] = [
        ("config", lambda o: o.config),
        ("models", lambda o: o.models),
        ("geomean_ratio", lambda o: _num(o.geomean_ratio)),
        ("ratio_ci_low", lambda o: _num(o.ci.low if o.ci else None)),
        ("ratio_ci_high", lambda o: _num(o.ci.high if o.ci else None)),
        ("p_value", lambda o: _num(o.tested.p_value)),
        ("q_value", lambda o: _num(o.q_value)),
        ("method", lambda o: o.tested.method),
        ("verdict", lambda o: o.verdict),
        ("detail", lambda o: o.detail),
    ]
    return _csv(columns, overall(list(changes)))


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"
