"""Tracking through a real `mlflow server` process on 127.0.0.1 (artifacts proxied)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from tests.conftest import SEARCHPATH, run_cli, sweep_runs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("server")
    port = _free_port()
    mlflow_bin = Path(sys.executable).parent / "mlflow"
    proc = subprocess.Popen(
        [
            str(mlflow_bin),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{root / 'server.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--workers",
            "1",
        ],
        stdout=(root / "server.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(
                "mlflow server did not start:\n" + (root / "server.log").read_text()[-3000:]
            )
        time.sleep(0.5)
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def test_sweep_logs_to_a_real_server(mlflow_server: str, workdir: Path) -> None:
    res = run_cli(
        [
            "-m",
            SEARCHPATH,
            "model=matmul_chain,fault_raise",
            "model.size=tiny",
            "repeat=2",
            "iterations_per_run=2",
            f"mlflow.tracking_uri={mlflow_server}",
            "mlflow.experiment=server_check",
        ],
        workdir,
    )
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
    assert ok.info.status == "FINISHED" and ok.data.metrics["per_iter_time_s.median"] > 0
    assert children["fault_raise·eager·eval"].info.status == "FAILED"
    # Artifacts went through the server's proxy and can be read back.
    local = client.download_artifacts(ok.info.run_id, "result.json", str(workdir))
    assert '"status": "ok"' in Path(local).read_text()
    parent_files = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert {"results.jsonl", "report"} <= parent_files
    # The report reads the sweep back from the server by its parent run id.
    rep = run_cli(
        ["report", parents[0].info.run_id, "--tracking-uri", mlflow_server, "--out", "rep"],
        workdir,
    )
    assert rep.returncode == 0, rep.stderr
    md = (workdir / "rep" / "report.md").read_text()
    assert (
        "| matmul_chain | eval | eager | ok |" in md
        and "| fault_raise | eval | eager | failed |" in md
    )
