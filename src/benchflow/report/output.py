"""Write a report's files, and log them to the sweep's MLflow parent run."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from benchflow.report import csv_tables, render
from benchflow.report.compare import Change
from benchflow.report.model import Meta, Report, Summary

log = logging.getLogger(__name__)

FORMATS = ("md", "csv", "html")
# The file of each format that holds the whole report to read (the terminal's table
# has some of its columns, and ends by naming these).
FULL = {"md": "report.md", "html": "report.html"}


def full_report(out_dir: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """The files `write` makes in `out_dir` that hold the whole report to read."""
    return [out_dir / FULL[f] for f in formats if f in FULL]


def write(
    report: Report,
    out_dir: Path,
    title: str,
    meta: Meta,
    changes: Sequence[Change] | None = None,
    formats: Sequence[str] = FORMATS,
) -> list[Path]:
    """report.md, report.csv + summary.csv (+ compare.csv), report.html + the plots as PNG."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def put(name: str, text: str) -> None:
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)

    if "md" in formats:
        put(FULL["md"], render.to_markdown(report, title, changes))
    if "csv" in formats:
        put("report.csv", csv_tables.entries_csv(report))
        put("summary.csv", csv_tables.summary_csv(report))
        if changes is not None:
            put("compare.csv", csv_tables.changes_csv(changes))
            put("configurations.csv", csv_tables.configurations_csv(changes))
    if "html" in formats:
        from benchflow.report.plots import figures, to_svg

        figs = figures(report)
        for name, fig in figs.items():
            path = out_dir / f"{name}.png"
            fig.savefig(path, dpi=110)
            written.append(path)
        put(
            FULL["html"],
            render.to_html(report, title, {n: to_svg(f) for n, f in figs.items()}, meta, changes),
        )
    return written


# A configuration's summary numbers, as parent metrics `report.<configuration>.<stat>`.
SUMMARY_STATS: dict[str, Callable[[Summary], float | None]] = {
    "passrate": lambda s: s.passrate,
    "geomean_speedup": lambda s: s.geomean_speedup,
    "geomean_speedup_ci_low": lambda s: s.geomean_ci.low if s.geomean_ci else None,
    "geomean_speedup_ci_high": lambda s: s.geomean_ci.high if s.geomean_ci else None,
    "mean_compile_time_s": lambda s: s.mean_compile_s,
    "memory_compression_ratio": lambda s: s.memory_ratio,
    "geomean_share_of_peak": lambda s: s.geomean_share,
}


def _metric_name(text: str) -> str:
    """A label as an MLflow name (letters, digits, _ - . space /, at most
    MAX_ENTITY_KEY_LENGTH): one too long keeps its start and gets a hash of the whole."""
    from mlflow.utils.validation import MAX_ENTITY_KEY_LENGTH

    name = re.sub(r"[^A-Za-z0-9_\-. /]", "_", text)
    room = MAX_ENTITY_KEY_LENGTH - len("report..") - max(map(len, SUMMARY_STATS))
    if len(name) <= room:
        return name
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    return f"{name[: room - len(digest) - 1]}-{digest}"


def log_to_mlflow(
    report: Report, files: Sequence[Path], tracking_uri: str, parent_run_id: str
) -> None:
    """Report files under the parent run's `report/`, summary numbers as its metrics, and
    each job run's `headline.speedup_vs_<baseline>` with its interval."""
    import time

    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    from benchflow.tracking.mlflow_runs import RetryingClient

    # The same "database is locked" retry as every other MLflow call of benchflow.
    client = RetryingClient(MlflowClient(tracking_uri=tracking_uri))
    for path in files:
        client.log_artifact(parent_run_id, str(path), "report")
    now = int(time.time() * 1000)
    metrics = []
    for s in report.summaries:
        name = _metric_name(s.config.label)
        for stat, read in SUMMARY_STATS.items():
            value = read(s)
            if value is not None:
                metrics.append(Metric(f"report.{name}.{stat}", float(value), now, 0))
    if metrics:
        client.log_batch(parent_run_id, metrics=metrics, synchronous=True)
    name = f"headline.speedup_vs_{_metric_name(report.baseline)}"
    for e in report.entries:
        run_id = e.row.job.mlflow_run_id
        if run_id and e.speedup is not None:
            values = {name: e.speedup}
            if e.speedup_ci:
                values |= {f"{name}_ci_low": e.speedup_ci.low, f"{name}_ci_high": e.speedup_ci.high}
            client.log_batch(
                run_id,
                metrics=[Metric(k, float(v), now, 0) for k, v in values.items()],
                synchronous=True,
            )
