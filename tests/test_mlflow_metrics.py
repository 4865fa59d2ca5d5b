"""What a job's MLflow run shows: the curated metrics of tracking/metrics.py, not every
statistic of the row. Rows of one real sweep (a model with three dynamo graph breaks
under eager, aot_eager, lazy XLA and openxla) are logged with `Tracker` + `log_job`
into a real SQLite store and read back through MlflowClient."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from tests.conftest import SEARCHPATH, run_cli

from benchflow.config.schema import MlflowConfig
from benchflow.report.model import headline_metrics
from benchflow.tracking.mlflow_runs import Tracker
from benchflow.tracking.sync import log_job

HEADLINE = {
    "headline.per_iter_time_s",
    "headline.per_iter_time_iqr_s",
    "headline.compile_time_s",
    "headline.peak_memory_bytes",
    "headline.throughput_samples_per_s",
}
EVERY_JOB = {*HEADLINE, "job.wall_time_s", "per_iter_time_s"}
DYNAMO = {"counters.dynamo_graphs", "counters.graph_breaks"}
XLA = {"counters.xla_compiles", "counters.xla_executions_per_step"}
# The metric names each backend's run must have, no more.
EXPECTED = {
    "graph_breaks·eager·eval": EVERY_JOB,
    "graph_breaks·aot_eager·eval": EVERY_JOB | DYNAMO,
    "graph_breaks·lazy_xla·eval": EVERY_JOB | XLA,
    "graph_breaks·openxla·eval": EVERY_JOB | DYNAMO | XLA,
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The sweep's rows: four ok jobs and the two combinations it skips."""
    cwd = tmp_path_factory.mktemp("sweep")
    res = run_cli(
        [
            "-m",
            SEARCHPATH,
            "model=graph_breaks",
            "dynamo=none,aot_eager,openxla",
            "xla=none,PJRT",
            "repeat=3",
            "iterations_per_run=2",
            "warmup=1",
            "mlflow.enabled=false",  # logged below, into a store of the test's own
        ],
        cwd,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return res.rows()


@pytest.fixture(scope="module")
def logged(
    rows: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[MlflowClient, list[tuple[dict[str, Any], str]]]:
    """(a client on the store, [(row, its run id)])."""
    tracker = Tracker(MlflowConfig(), tmp_path_factory.mktemp("store"))
    runs = []
    for row in rows:
        run_id = tracker.start_run(row["job"]["name"])
        assert log_job(tracker, run_id, row, Path(row["job"]["dir"]))
        runs.append((row, run_id))
    return MlflowClient(tracker.uri), runs


def test_each_backend_shows_only_its_curated_metrics(
    logged: tuple[MlflowClient, list[tuple[dict[str, Any], str]]],
) -> None:
    client, runs = logged
    ok = {row["job"]["name"]: (row, run_id) for row, run_id in runs if row["status"] == "ok"}
    assert set(ok) == set(EXPECTED)
    for name, (row, run_id) in ok.items():
        metrics = client.get_run(run_id).data.metrics
        assert set(metrics) == EXPECTED[name], name
        assert len(metrics) < 15
        for key, value in headline_metrics(row).items():
            assert metrics[key] == value, (name, key)
        assert metrics["job.wall_time_s"] == row["job"]["wall_time_s"]
    skipped = [run_id for row, run_id in runs if row["status"] == "skipped"]
    assert len(skipped) == 2  # aot_eager on the XLA device, openxla without it
    for run_id in skipped:
        assert set(client.get_run(run_id).data.metrics) == {"job.wall_time_s"}


def test_counters_are_the_jobs_totals(
    logged: tuple[MlflowClient, list[tuple[dict[str, Any], str]]],
) -> None:
    """The model breaks the graph 3 times: dynamo makes 4 graphs, and under openxla a
    step runs as 4 XLA executions; lazy XLA traces the step as one graph."""
    client, runs = logged
    by_name = {row["job"]["name"]: (row, run_id) for row, run_id in runs if row["status"] == "ok"}
    counters = {
        name: {k: v for k, v in client.get_run(run_id).data.metrics.items() if "counters." in k}
        for name, (_, run_id) in by_name.items()
    }
    for name in ("graph_breaks·aot_eager·eval", "graph_breaks·openxla·eval"):
        assert counters[name]["counters.graph_breaks"] == 3.0, name
        assert counters[name]["counters.dynamo_graphs"] == 4.0, name
    assert counters["graph_breaks·openxla·eval"]["counters.xla_executions_per_step"] == 4.0
    assert counters["graph_breaks·lazy_xla·eval"]["counters.xla_executions_per_step"] == 1.0
    for name in ("graph_breaks·lazy_xla·eval", "graph_breaks·openxla·eval"):
        m = by_name[name][0]["metrics"]
        compiles = m["cold_xla_CompileTime_number"] + sum(m["xla_CompileTime_number"])
        assert counters[name]["counters.xla_compiles"] == compiles >= 1, name


def test_per_repeat_times_are_one_metric_over_the_repeats(
    logged: tuple[MlflowClient, list[tuple[dict[str, Any], str]]],
) -> None:
    client, runs = logged
    for row, run_id in runs:
        if row["status"] != "ok":
            continue
        history = sorted(client.get_metric_history(run_id, "per_iter_time_s"), key=lambda m: m.step)
        assert [m.step for m in history] == [0, 1, 2]
        assert [m.value for m in history] == row["metrics"]["per_iter_time_s"]
        assert not [k for k in client.get_run(run_id).data.metrics if k.startswith("repeat.")]


def test_the_full_row_stays_in_the_result_artifact(
    logged: tuple[MlflowClient, list[tuple[dict[str, Any], str]]], tmp_path: Path
) -> None:
    client, runs = logged
    row, run_id = next(
        (r, i)
        for r, i in runs
        if r["job"]["name"] == "graph_breaks·openxla·eval" and r["status"] == "ok"
    )
    local = client.download_artifacts(run_id, "result.json", str(tmp_path))
    # every statistic of every counter: in the artifact, none of them a metric
    assert json.loads(Path(local).read_text()) == row
    assert (
        "dynamo_calls_captured" in row["summary"]
        and "cold_xla_ExecuteTime_time_s" in row["metrics"]
    )
