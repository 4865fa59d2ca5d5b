"""The metrics of a job's MLflow run: the few numbers a person compares between runs.

A row holds every statistic of every counter, per repeat (about 150 numbers for a
compiled XLA job); as MLflow metrics they bury the ones that matter in the runs
table's column picker and the chart view. The run shows the numbers below; the full
row stays in the run's `result.json` artifact (and in the sweep's results.jsonl).
"""

from __future__ import annotations

from benchflow.results.headline import headline_metrics
from benchflow.results.row import ResultRow

# Counters summed over the cold call and the timed repeats, from the probes' deltas
# (backends/probes.py: `cold_<name>` for the first call, `<name>` per repeat). A counter
# is logged only when its probe ran: eager has no dynamo counters, only XLA backends
# have XLA counters, so a missing metric never reads as a zero.
COUNTERS = {
    # Graphs dynamo made of the model: 1 is the whole model in one graph; more, it was
    # split at graph breaks, or recompiled during the timed repeats.
    "counters.dynamo_graphs": "dynamo_unique_graphs",
    # Where dynamo stopped tracing and fell back to Python: each one splits the graph.
    "counters.graph_breaks": "dynamo_graph_breaks",
    # XLA compilations: the cold call's, plus any in the timed repeats (a recompile,
    # which the timing then flags as not steady).
    "counters.xla_compiles": "xla_CompileTime_number",
}
# XLA graph executions per timed step: 1 is the step as one graph; more, the step ran
# as several (a mid-step sync of lazy tensors, or dynamo graph breaks under openxla).
XLA_EXECUTIONS = "counters.xla_executions_per_step"
XLA_EXECUTIONS_SOURCE = "xla_ExecuteTime_number"
# The job's wall time as the parent saw it (child start to end: imports, compile,
# timing, checks): what the job cost the sweep.
WALL_TIME = "job.wall_time_s"
# Per-repeat values, logged as the metric's history with the repeat index as the step
# (0..n-1), so MLflow charts them over the repeats: the spread behind the headline median.
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
