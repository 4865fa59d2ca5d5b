"""The README's headline sweep with verify=true, end to end on tiny models: four ok
rows with verification codes, one parent MLflow run with four child runs, and the
model x backend table."""

from __future__ import annotations

import pytest
from tests.conftest import CliResult, run_cli, sweep_runs


@pytest.fixture(scope="module")
def headline(tmp_path_factory: pytest.TempPathFactory) -> CliResult:
    cwd = tmp_path_factory.mktemp("headline")
    res = run_cli(
        [
            "-m",
            "model=llama,dlrm",
            "dynamo=openxla,inductor",
            "model.size=tiny",
            "repeat=3",
            "iterations_per_run=3",
            "verify=true",
        ],
        cwd,
    )
    assert res.returncode == 0, res.stderr[-4000:]
    return res


def test_four_ok_rows_with_the_right_axes(headline: CliResult) -> None:
    rows = headline.rows()
    assert [r["status"] for r in rows] == ["ok"] * 4
    axes = {
        (r["model"]["model_name"], r["experiment"]["dynamo"], r["experiment"]["xla"]) for r in rows
    }
    assert axes == {
        ("llama", "openxla", "PJRT"),
        ("llama", "inductor", None),
        ("dlrm", "openxla", "PJRT"),
        ("dlrm", "inductor", None),
    }
    for r in rows:
        assert r["model"]["model_source"] == "builtin"
        assert r["experiment"]["accelerator"] == "cpu"
        assert r["experiment"]["batch_size"] > 0
        # torchbench.yaml's rule: inference in bfloat16, decided by the suite
        assert (r["experiment"]["dtype"], r["experiment"]["dtype_source"]) == ("bfloat16", "suite")
        m = r["metrics"]
        assert len(m["per_iter_time_s"]) == 3
        # cold start (with compilation) is reported apart from the steady state
        assert m["first_iter_time_s"] > r["summary"]["per_iter_time_s"]["median"]
        assert m["cold_dynamo_compile_time_s"] > 0
        assert m["dynamo_graph_breaks"] == [0.0, 0.0, 0.0]
        if r["experiment"]["dynamo"] == "openxla":
            assert "trace_per_iter_time_s" in m and "xla_ExecuteTime_number" in m
        else:
            assert "trace_per_iter_time_s" not in m
        assert m["peak_host_rss_bytes"] > 100e6
        assert r["summary"]["per_iter_time_s"]["iqr"] >= 0
        # accuracy checked in the same job as the timing
        assert r["verification_code"] == "PASS", r["verification_detail"]
        assert 0.99 < m["accuracy_cosine_similarity"] <= 1.0 + 1e-9


def test_report_printed_and_written(headline: CliResult) -> None:
    (sweep,) = headline.sweep_dirs
    md = (sweep / "report" / "report.md").read_text()
    assert "| llama | eval | openxla | ok |" in md and "| llama | eval | inductor | ok |" in md
    assert "(baseline)" in md  # inductor is the default baseline
    assert "| openxla | 2/2 (100%) |" in md  # both passed verify=true
    assert "llama" in headline.stdout and "geomean speedup" in headline.stdout


def test_mlflow_parent_with_four_children(headline: CliResult) -> None:
    parents, children = sweep_runs(f"sqlite:///{headline.cwd / 'mlflow.db'}")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(c.info.run_name for c in children) == sorted(
        ["llama·openxla·eval", "llama·inductor·eval", "dlrm·openxla·eval", "dlrm·inductor·eval"]
    )
    for c in children:
        assert c.info.status == "FINISHED" and c.data.tags["status"] == "ok"
        assert c.data.params["dynamo.name"] in ("openxla", "inductor")
        assert c.data.tags["version.torch"] == "2.9.0"
        assert c.data.tags["verification_code"] == "PASS"
        assert c.data.metrics["headline.throughput_samples_per_s"] > 0
    assert parents[0].data.tags["jobs.ok"] == "4"
    # the report's files and plots are on the parent run
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{headline.cwd / 'mlflow.db'}")
    logged = {a.path for a in client.list_artifacts(parents[0].info.run_id, "report")}
    assert {"report/report.html", "report/speedup.png", "report/report.csv"} <= logged
    assert parents[0].data.metrics["report.openxla.passrate"] == 1.0
    for c in children:
        assert c.data.params["backend"] == c.data.params["dynamo.name"]
        assert c.data.metrics["headline.per_iter_time_s"] > 0
        if c.data.params["backend"] == "openxla":
            assert c.data.metrics["headline.speedup_vs_inductor"] > 0
