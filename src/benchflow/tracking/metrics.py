"""The metrics of a job's MLflow run: the few numbers a person compares between runs.

A row's hundred-odd statistics would bury these in MLflow's tables; the full row stays
in the run's `result.json` artifact.
"""

from __future__ import annotations

from benchflow.results.headline import headline_metrics
from benchflow.results.row import ResultRow

# XLA compilations, the cold call's and the timed repeats', logged where its probe ran, so a
# missing metric never reads as a zero. The row's other counts are its signals'
# (results/signals.py: graphs, graph breaks, recompiles, XLA compiles in the timed
# repeats and executions per step, Inductor's kernels), each under the metric it names.
XLA_COMPILES = "counters.xla_compiles"
XLA_COMPILES_SOURCE = "xla_CompileTime_number"
# The job's wall time as the parent saw it: what the job cost the sweep.
WALL_TIME = "job.wall_time_s"
# Per-repeat values, logged as the metric's history (the repeat as the step), so MLflow
# charts the spread behind the median.
SERIES = ("per_iter_time_s",)


def job_metrics(row: ResultRow) -> tuple[dict[str, float], dict[str, list[float]]]:
    """(scalars, per-repeat series) for a job's run: `headline.*` (the numbers the report
    compares, results/headline.py), the counts that apply, the wall time."""
    out = dict(headline_metrics(row))
    source = XLA_COMPILES_SOURCE
    if source in row.metrics or f"cold_{source}" in row.metrics:
        out[XLA_COMPILES] = (row.scalar(f"cold_{source}") or 0.0) + sum(row.series(source))
    if row.signals is not None:
        out |= row.signals.metrics()
    if row.job.wall_time_s is not None:
        out[WALL_TIME] = float(row.job.wall_time_s)
    series = {name: values for name in SERIES if (values := row.series(name))}
    return out, series
