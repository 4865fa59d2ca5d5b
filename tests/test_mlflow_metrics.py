"""What a job's MLflow run shows: the curated metrics of tracking/metrics.py, not every
statistic of the row. Real rows (the session's grid sweep: eager, lazy XLA, Inductor,
openxla and two invalid pairs; and a model with three dynamo graph breaks, from the
cases sweep) are logged with `Tracker` + `log_job` into a store of the test's own and
read back through MlflowClient."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from tests.conftest import SessionSweep

from benchflow.config.schema import MlflowConfig
from benchflow.results.headline import headline_metrics
from benchflow.results.row import ResultRow
from benchflow.tracking.mlflow_runs import Tracker
from benchflow.tracking.sync import log_job

HEADLINE = {
    "headline.per_iter_time_s",
    "headline.per_iter_time_iqr_s",
    "headline.compile_time_s",
    "headline.peak_memory_bytes",
    "headline.throughput_samples_per_s",
}
# what else ran on the host while it timed (results/load.py)
HOST = {"headline.host_quiet", "headline.host_contended_repeats", "headline.host_other_cpu_cores"}
# a step's FLOPs, the FLOP/s it reached and their share of the device's peak (results/
# flops.py; these rows' repeats are too few for an interval, whose bounds are left out)
FLOPS = {"headline.flops_per_step", "headline.flop_per_s", "headline.share_of_peak"}
EVERY_JOB = {*HEADLINE, *HOST, *FLOPS, "job.wall_time_s", "per_iter_time_s"}
# the row's signals' counts (results/signals.py), and XLA's compilations
DYNAMO = {"counters.dynamo_graphs", "counters.graph_breaks", "counters.recompiles"}
XLA = {"counters.xla_compiles", "counters.xla_repeat_compiles", "counters.xla_executions_per_step"}
# The metric names each backend's run must have, no more (eager compiles nothing: no
# compile time).
EXPECTED = {
    "eager": EVERY_JOB - {"headline.compile_time_s"},
    "lazy_xla": EVERY_JOB | XLA,
    "inductor": EVERY_JOB | DYNAMO | {"counters.inductor_kernels"},
    "aot_eager": EVERY_JOB | DYNAMO,
    "openxla": EVERY_JOB | DYNAMO | XLA,
}


@pytest.fixture(scope="module")
def rows(cases_sweep: SessionSweep, grid_sweep: SessionSweep) -> list[dict[str, Any]]:
    """The grid's rows (eight ok, two invalid), the graph-break model's and the
    recompiling model's."""
    names = (
        "profile_graph_breaks",
        "graph_breaks_openxla",
        "graph_breaks_lazy",
        "recompiles_fixed",
    )
    breaks = [cases_sweep.case(name) for name in names]
    return [*grid_sweep.rows(), *breaks]


@pytest.fixture(scope="module")
def logged(
    rows: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[MlflowClient, list[tuple[dict[str, Any], str]]]:
    """(a client on the store, [(row, its run id)])."""
    tracker = Tracker(MlflowConfig(), tmp_path_factory.mktemp("store"))
    runs = []
    for row in rows:
        run_id = tracker.start_run(row["job"]["name"])
        log_job(tracker, run_id, ResultRow.from_dict(row), Path(row["job"]["dir"]))
        runs.append((row, run_id))
    return MlflowClient(tracker.uri), runs


def test_each_backend_shows_only_its_curated_metrics(
    logged: tuple[MlflowClient, list[tuple[dict[str, Any], str]]],
) -> None:
    client, runs = logged
    ok = [(row, run_id) for row, run_id in runs if row["status"] == "ok"]
    assert {row["backend"] for row, _ in ok} == set(EXPECTED)
    for row, run_id in ok:
        name = row["job"]["name"]
        metrics = client.get_run(run_id).data.metrics
        assert set(metrics) == EXPECTED[row["backend"]], name
        assert len(metrics) < 20
        for key, value in headline_metrics(ResultRow.from_dict(row)).items():
            assert metrics[key] == value, (name, key)
        assert metrics["job.wall_time_s"] == row["job"]["wall_time_s"]
    invalid = [run_id for row, run_id in runs if row["status"] == "invalid"]
    assert len(invalid) == 2  # inductor on the XLA device, for each model
    for run_id in invalid:
        assert set(client.get_run(run_id).data.metrics) == {"job.wall_time_s"}


def test_counters_are_the_jobs_totals(
    logged: tuple[MlflowClient, list[tuple[dict[str, Any], str]]],
) -> None:
    """The graph-break model breaks the graph at 3 places: dynamo makes 4 graphs, and
    under openxla a step runs as 4 XLA executions; lazy XLA traces a step as one graph.
    With model.step=module dynamo compiles the step function that calls the module,
    whose frame breaks once more at that call (at the first place, seen from the outer
    frame): 3 places either way, the first broken at twice. The recompiling model
    compiles its step twice (its buffer's dtype guard fails). Inductor generates kernels."""
    client, runs = logged

    def counters(run_id: str) -> dict[str, float]:
        return {k: v for k, v in client.get_run(run_id).data.metrics.items() if "counters." in k}

    for row, run_id in runs:
        if row["status"] != "ok":
            continue
        got = counters(run_id)
        if row["model"]["model_name"] == "graph_breaks" and row["backend"] != "lazy_xla":
            assert got["counters.graph_breaks"] == 3.0, row["job"]["name"]
            assert got["counters.recompiles"] == 0.0, row["job"]["name"]
            first = 2 if row["config"]["model.step"] == "module" else 1
            assert [b["count"] for b in row["signals"]["breaks"]] == [first, 1, 1]
        elif row["model"]["model_name"] == "recompiles":
            assert got["counters.recompiles"] == 1.0 and got["counters.dynamo_graphs"] == 2.0
        elif row["backend"] in ("inductor", "openxla"):
            assert got["counters.graph_breaks"] == 0.0 and got["counters.dynamo_graphs"] == 1.0
            assert got["counters.recompiles"] == 0.0
        if row["backend"] == "inductor":
            assert got["counters.inductor_kernels"] >= 1.0, row["job"]["name"]
        if row["job"]["name"] == "graph_breaks·openxla·eval":
            assert got["counters.dynamo_graphs"] == 4.0
            assert got["counters.xla_executions_per_step"] == 4.0
        if row["job"]["name"] == "graph_breaks·lazy_xla·eval":
            assert got["counters.xla_executions_per_step"] == 1.0  # no dynamo: one graph
        if row["backend"] in ("lazy_xla", "openxla"):
            m = row["metrics"]
            compiles = m["cold_xla_CompileTime_number"] + sum(m["xla_CompileTime_number"])
            assert got["counters.xla_compiles"] == compiles >= 1, row["job"]["name"]


def test_the_reasons_are_the_runs_signals_artifact(
    logged: tuple[MlflowClient, list[tuple[dict[str, Any], str]]], tmp_path: Path
) -> None:
    """Each job run holds its row's signals as signals.json: the graph-break model's three
    places, each with dynamo's reason; the recompiling model's failed guard."""
    client, runs = logged
    for row, run_id in runs:
        if row["status"] != "ok":
            continue
        got = json.loads(
            Path(client.download_artifacts(run_id, "signals.json", str(tmp_path))).read_text()
        )
        assert got == row["signals"], row["job"]["name"]
        if row["model"]["model_name"] == "graph_breaks" and row["backend"] != "lazy_xla":
            assert [b["reason"].split(":")[0] for b in got["breaks"]] == [
                "Call to `torch._dynamo.graph_break()`"
            ] * 3
            assert all(
                b["frame"].split(":")[0].endswith("tests/models/faults.py") for b in got["breaks"]
            )
        if row["model"]["model_name"] == "recompiles":
            (guard,) = got["guards"]
            assert "dtype mismatch. expected Int, actual Long" in guard["guard"], guard


def test_per_repeat_times_are_one_metric_over_the_repeats(
    logged: tuple[MlflowClient, list[tuple[dict[str, Any], str]]],
) -> None:
    client, runs = logged
    for row, run_id in runs:
        if row["status"] != "ok":
            continue
        history = sorted(client.get_metric_history(run_id, "per_iter_time_s"), key=lambda m: m.step)
        assert [m.step for m in history] == list(range(len(row["metrics"]["per_iter_time_s"])))
        assert [m.value for m in history] == row["metrics"]["per_iter_time_s"]
        assert not [k for k in client.get_run(run_id).data.metrics if k.startswith("repeat.")]


def test_the_full_row_stays_in_the_result_artifact(
    logged: tuple[MlflowClient, list[tuple[dict[str, Any], str]]], tmp_path: Path
) -> None:
    client, runs = logged
    row, run_id = next(
        (r, i) for r, i in runs if r["job"]["name"] == "llama·openxla·eval" and r["status"] == "ok"
    )
    local = client.download_artifacts(run_id, "result.json", str(tmp_path))
    # every statistic of every counter: in the artifact, none of them a metric
    assert json.loads(Path(local).read_text()) == row
    assert (
        "dynamo_calls_captured" in row["summary"]
        and "cold_xla_ExecuteTime_time_s" in row["metrics"]
    )


def test_a_heterogeneous_sweeps_summary_reaches_its_parent_run(
    cases_sweep: SessionSweep,
) -> None:
    """The cases sweep's configurations differ in many keys: names from their labels
    longer than MLflow's 250 characters (its report logging once failed on them). Each
    configuration's summary is a parent metric under a name of its own that fits."""
    from mlflow.utils.validation import MAX_ENTITY_KEY_LENGTH
    from tests.conftest import sweep_runs

    from benchflow.report.model import build_report
    from benchflow.report.output import SUMMARY_STATS

    assert "report logging failed" not in cases_sweep.result.stdout + cases_sweep.result.stderr
    report = build_report([ResultRow.from_dict(r) for r in cases_sweep.rows()])
    labels = [s.config.label for s in report.summaries]
    longest = max(len(f"report.{label}.{stat}") for label in labels for stat in SUMMARY_STATS)
    assert longest > MAX_ENTITY_KEY_LENGTH  # the case this test covers
    (parent,), _ = sweep_runs(cases_sweep.tracking_uri)
    names = [k for k in parent.data.metrics if k.startswith("report.")]
    assert names and max(len(k) for k in names) <= MAX_ENTITY_KEY_LENGTH
    passrates = [k for k in names if k.endswith(".passrate")]
    rated = [s for s in report.summaries if s.passrate is not None]  # some ran no model
    assert len(passrates) == len(rated) > len(labels) / 2


def test_a_search_reads_every_page_and_results_are_read_where_they_lie(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An experiment's runs are read page by page (one search stops at 50,000 runs,
    silently), and a local store's result.json is read in place, not downloaded (the
    report's reader and rerun's alike)."""
    from benchflow.tracking import mlflow_runs

    tracker = Tracker(MlflowConfig(), tmp_path)
    made = [tracker.start_run(f"job{n}") for n in range(5)]
    for run_id in made:
        tracker.client.log_text(run_id, json.dumps({"n": run_id}), "result.json")
    monkeypatch.setattr(mlflow_runs, "SEARCH_PAGE", 2)  # three pages of at most two
    runs = mlflow_runs.search_all(tracker.client, tracker.experiment_id)
    assert sorted(r.info.run_id for r in runs) == sorted(made)
    client = MlflowClient(tracker.uri)
    for run in runs:
        path = mlflow_runs.run_artifact(client, run, "result.json", str(tmp_path / "downloads"))
        assert path.is_relative_to(tmp_path / "mlartifacts"), path  # where it lies
        assert json.loads(path.read_text()) == {"n": run.info.run_id}
    assert not (tmp_path / "downloads").exists()
