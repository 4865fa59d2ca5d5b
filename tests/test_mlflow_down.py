"""The MLflow server dies in the middle of a sweep: jobs go on and are not failed for
it, results stay on disk, and `python -m benchflow sync` uploads what is missing once
the server is back (and adds nothing when run again)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import (
    SEARCHPATH,
    MlflowServer,
    read_rows,
    run_cli,
    start_cli,
    sweep_runs,
    wait_for_text,
)


@pytest.mark.full  # a server, a sweep, a kill and two syncs: ~2.5 min on 2 CPUs
def test_server_killed_mid_sweep_then_sync(tmp_path: Path) -> None:
    server = MlflowServer(tmp_path / "server_root")
    server.root.mkdir()
    url = server.start()
    err = tmp_path / "stderr.log"
    proc = start_cli(
        [
            "-m",
            SEARCHPATH,
            "model=matmul_chain",
            "model.size=tiny",
            "dtype=float32",
            "repeat=2,3,4",
            "iterations_per_run=2",
            "warmup=1",
            f"mlflow.tracking_uri={url}",
            "hydra.sweep.dir=sweep",
        ],
        tmp_path,
        err,
    )
    try:
        wait_for_text(err, "[1/3] ok", proc)
        server.stop(9)  # SIGKILL: no goodbye
        assert proc.wait(timeout=600) == 0, err.read_text()[-3000:]
    finally:
        server.stop()
        if proc.poll() is None:
            proc.kill()
    rows = read_rows(tmp_path / "sweep")
    assert [r["status"] for r in rows] == ["ok", "ok", "ok"]  # not failed for MLflow's sake
    # each job after the kill warned (in the sweep's log, and on the terminal) and went on
    said = (tmp_path / "sweep" / "benchflow.log").read_text()
    assert said.count("MLflow start_run failed, results stay on disk") == 2
    assert all(r["job"]["wall_time_s"] < 60 for r in rows)  # no minutes of MLflow retries

    server.start()  # back, same store
    _, children = sweep_runs(url)
    assert len(children) == 1  # only the job logged before the kill
    synced = run_cli(["sync", "sweep"], tmp_path)
    assert synced.returncode == 0, synced.stderr[-3000:]
    assert "2 job run(s) logged, 1 already complete" in synced.stdout
    parents, children = sweep_runs(url)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(c.data.tags["benchflow.logged"] for c in children) == sorted(
        r["row_id"] for r in rows
    )
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert all(c.data.metrics["headline.per_iter_time_s"] > 0 for c in children)
    again = run_cli(["sync", "sweep"], tmp_path)
    assert "0 job run(s) logged, 3 already complete" in again.stdout
    assert len(sweep_runs(url)[1]) == 3
    server.stop()


@pytest.mark.parametrize("args", [["sync", "nowhere"]])
def test_sync_needs_a_sweep(tmp_path: Path, args: list[str]) -> None:
    res = run_cli(args, tmp_path)
    assert res.returncode == 2 and "nowhere has no results.jsonl" in res.stderr
