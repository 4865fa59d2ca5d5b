"""The metrics of a job's MLflow run: the few numbers a person compares between runs.

A row's hundred-odd statistics would bury these in MLflow's tables; the full row stays
in the run's `result.json` artifact.
"""

from __future__ import annotations

from benchflow.results.headline import headline_metrics
from benchflow.results.row import ResultRow

# Counters summed over the cold call and the timed repeats (backends/probes.py), logged
# only where their probe ran, so a missing metric never reads as a zero.
COUNTERS = {
    # Graphs dynamo made: more than 1, it split at graph breaks or recompiled.
    "counters.dynamo_graphs": "dynamo_unique_graphs",
    # Where dynamo stopped tracing and fell back to Python: each one splits the graph.
    "counters.graph_breaks": "dynamo_graph_breaks",
    # XLA compilations: the cold call's, plus any recompile in the timed repeats.
    "counters.xla_compiles": "xla_CompileTime_number",
}
# XLA graph executions per timed step: more than 1, the step ran as several graphs.
XLA_EXECUTIONS = "counters.xla_executions_per_step"
XLA_EXECUTIONS_SOURCE = "xla_ExecuteTime_number"
# The job's wall time as the parent saw it: what the job cost the sweep.
WALL_TIME = "job.wall_time_s"
# Per-repeat values, logged as the metric's history (the repeat as the step), so MLflow
# charts the spread behind the median.
SERIES = ("per_iter_time_s",)


def job_metrics(row: ResultRow) -> tuple[dict[str, float], dict[str, list[float]]]:
    """(scalars, per-repeat series) for a job's run: `headline.*` (the numbers the report
    compares, results/headline.py), the counters above that apply, the wall time."""
    out = dict(headline_metrics(row))
    for name, source in COUNTERS.items():
        if source in row.metrics or f"cold_{source}" in row.metrics:
            out[name] = (row.scalar(f"cold_{source}") or 0.0) + sum(row.series(source))
    executions = row.series(XLA_EXECUTIONS_SOURCE)
    steps = len(executions) * row.iterations_per_run
    if steps > 0:
        out[XLA_EXECUTIONS] = sum(executions) / steps
    if row.job.wall_time_s is not None:
        out[WALL_TIME] = float(row.job.wall_time_s)
    series = {name: values for name in SERIES if (values := row.series(name))}
    return out, series
