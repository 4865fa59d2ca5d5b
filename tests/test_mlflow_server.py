"""Tracking as a team runs it: a real `mlflow server` on 127.0.0.1 whose runs are in a
real PostgreSQL server and whose artifacts it serves itself (services/postgres.py,
started and stopped by PID here). A sweep logs to it; `report`, `rerun` and `sync` read
from it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from tests.conftest import (
    REPO,
    SEARCHPATH,
    CliResult,
    EarlySweeps,
    early,
    read_rows,
    run_cli,
    sweep_runs,
)
from tests.test_ui_browser import METRIC, browser, experiment_page_shows  # noqa: F401


@early("mlflow_server", long=True)
def _server_and_sweep(root: Path) -> tuple[str, CliResult, CliResult | None]:
    """PostgreSQL and an MLflow server on it, a sweep logging to it, then `benchflow
    report` reading that sweep back from the server by its parent run id, a rerun of
    it, and `sync` of its folder (from the first test on)."""
    from services import postgres

    # as docs/launchers.md shows it, on free ports
    # niced, as the early runs' other processes: yields the CPU to the suite's tests
    up = ["nice", "-n", "10", "make", "-s", "postgres-up", "PG_PORT=0", "MLFLOW_PORT=0"]
    subprocess.run(up, cwd=REPO, check=True)
    service = postgres.up()  # (it runs: its URIs)
    url = str(service["tracking_uri"])
    DATABASES[url] = str(service["postgres_uri"])
    workdir = root / "work"
    workdir.mkdir()
    try:
        res = run_cli(
            [
                "-m",
                SEARCHPATH,
                "model=matmul_chain,fault_raise",
                "model.size=tiny",
                "repeat=2",
                "iterations_per_run=2",
                f"mlflow.tracking_uri={url}",
                "mlflow.experiment=server_check",
            ],
            workdir,
        )
        found = (
            list((workdir / "multirun").glob("*/*/mlflow_parent_run.txt"))
            if res.returncode == 0
            else []
        )
        rep = again = None
        if len(found) == 1:
            run_id = found[0].read_text().strip()
            rep = run_cli(["report", run_id, "--tracking-uri", url, "--out", "rep"], workdir)
            # The sweep again, from its parent run on the server, in another folder; its
            # runs in another experiment (not measured: the fingerprints stay).
            elsewhere = root / "rerun"
            elsewhere.mkdir()
            again = run_cli(
                ["rerun", run_id, "--tracking-uri", url, "mlflow.experiment=server_rerun"],
                elsewhere,
            )
            SYNCS[url] = run_cli(["sync", str(found[0].parent)], workdir)
    except BaseException:
        subprocess.run(["make", "-s", "postgres-down"], cwd=REPO, check=False)
        raise
    RERUNS[url] = again
    return url, res, rep


RERUNS: dict[str, CliResult | None] = {}  # the server's URL -> the rerun of its sweep
SYNCS: dict[str, CliResult] = {}  # the server's URL -> `sync` of its sweep's folder
DATABASES: dict[str, str] = {}  # the server's URL -> its PostgreSQL database's URI


@pytest.fixture(scope="module")
def served(early_sweeps: EarlySweeps) -> Iterator[tuple[str, CliResult, CliResult | None]]:

    url, res, rep = early_sweeps.result("mlflow_server")
    yield url, res, rep
    subprocess.run(["make", "-s", "postgres-down"], cwd=REPO, check=True)


def test_sweep_logs_to_a_real_server(served: tuple[str, CliResult, CliResult | None]) -> None:
    mlflow_server, res, rep = served
    workdir = res.cwd
    assert res.returncode == 0, res.stderr[-3000:]
    assert not (workdir / "mlflow.db").exists(), "fell back to the local store"
    client = MlflowClient(mlflow_server)
    parents, child_runs = sweep_runs(mlflow_server, "server_check")
    children = {r.info.run_name: r for r in child_runs}
    assert len(parents) == 1 and set(children) == {
        "matmul_chain·eager·eval",
        "fault_raise·eager·eval",
    }
    ok = children["matmul_chain·eager·eval"]
    assert ok.info.status == "FINISHED" and ok.data.metrics["headline.per_iter_time_s"] > 0
    assert children["fault_raise·eager·eval"].info.status == "FAILED"
    # Artifacts went through the server's proxy and can be read back.
    local = client.download_artifacts(ok.info.run_id, "result.json", str(workdir))
    assert '"status": "ok"' in Path(local).read_text()
    parent_files = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert {"results.jsonl", "report"} <= parent_files
    # The report read the sweep back from the server by its parent run id.
    (parent_file,) = (workdir / "multirun").glob("*/*/mlflow_parent_run.txt")
    assert parent_file.read_text().strip() == parents[0].info.run_id
    assert rep is not None
    assert rep.returncode == 0, rep.stderr
    md = (workdir / "rep" / "report.md").read_text()
    assert (
        "| matmul_chain | eval | eager | ok |" in md
        and "| fault_raise | eval | eager | failed |" in md
    )


def test_a_sweep_reruns_from_its_parent_run_on_a_real_server(
    served: tuple[str, CliResult, CliResult | None],
) -> None:
    url, res, _ = served
    again = RERUNS[url]
    assert again is not None, "the sweep did not run"
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    (old_folder,) = [p.parent for p in (res.cwd / "multirun").glob("*/*/results.jsonl")]
    old = {r["row_id"]: r for r in read_rows(old_folder)}
    (new_folder,) = again.sweep_dirs
    new = read_rows(new_folder)
    assert sorted(r["job"]["rerun_of"] for r in new) == sorted(old)
    for row in new:
        before = old[row["job"]["rerun_of"]]
        assert row["job"]["fingerprint"] == before["job"]["fingerprint"]
        assert row["status"] == before["status"]  # fault_raise fails again
    ok = next(r for r in new if r["status"] == "ok")
    assert ok["job"]["rerun_digest"] == "reproduced"
    # The new runs are on the server, in the experiment the override named.
    _, reruns = sweep_runs(url, "server_rerun")
    assert {r.data.tags["benchflow.rerun_of"] for r in reruns} == set(old)
    assert not (again.cwd / "mlflow.db").exists(), "fell back to the local store"


def test_the_server_keeps_the_runs_in_postgresql_and_sync_reads_them(
    served: tuple[str, CliResult, CliResult | None],
) -> None:
    """The runs are rows of the PostgreSQL database (not a file beside the server), the
    same the server answers with; `sync` of the sweep's folder finds each job's run
    there complete and logs nothing again."""
    import psycopg

    url, _, _ = served
    parents, children = sweep_runs(url, "server_check")
    with psycopg.connect(DATABASES[url]) as conn:
        stored = dict(
            conn.execute(
                "SELECT r.run_uuid, r.status FROM runs r JOIN experiments e"
                " ON r.experiment_id = e.experiment_id WHERE e.name = 'server_check'"
            ).fetchall()
        )
    assert stored == {r.info.run_id: r.info.status for r in [*parents, *children]}
    sync = SYNCS[url]
    assert sync.returncode == 0, sync.stderr[-2000:]
    assert "0 job run(s) logged, 2 already complete" in sync.stdout, sync.stdout


@pytest.mark.full  # the default store's UI is checked in the default suite (no room for both)
def test_the_mlflow_ui_of_the_postgresql_server_shows_the_sweep(
    served: tuple[str, CliResult, CliResult | None],
    browser: Any,  # noqa: F811  (the browser fixture, imported above)
) -> None:
    """The same browser check as the default store's (tests/test_ui_browser.py), on the
    PostgreSQL-backed server's own UI: the sweep's run, its job runs under it, their
    metric and tag (screenshot: test-artifacts/mlflow_ui_postgresql.png)."""
    url, _, _ = served
    client = MlflowClient(url)
    exp = client.get_experiment_by_name("server_check")
    assert exp is not None
    (parent,), children = sweep_runs(url, "server_check")
    timed = [c for c in children if METRIC in c.data.metrics]
    assert [c.info.run_name for c in timed] == ["matmul_chain·eager·eval"]
    link = f"{url}/#/experiments/{exp.experiment_id}?workflowType=machine_learning"
    experiment_page_shows(browser, link, parent, children, timed)
