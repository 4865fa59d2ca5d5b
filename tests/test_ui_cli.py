"""`python -m benchflow ui`: its arguments, the `mlflow ui` command it runs, the links it
prints, and a stop that leaves no MLflow process behind. The browser test
(test_ui_browser.py) starts the real UI, opens it, then stops it with SIGTERM through
`signal_ends_every_mlflow_process` here; SIGINT has a UI of its own (full suite)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from tests.conftest import ServerProcess, free_port

from benchflow.cli import ui


def test_help_is_fast_and_imports_neither_torch_nor_mlflow(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "benchflow", "ui", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--tracking-uri" in proc.stdout and "--port" in proc.stdout
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()}
    assert not {m for m in imported if m.split(".")[0] in ("torch", "mlflow", "torch_xla")}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "0"], "--port=0; allowed: 1..65535"),
        (["--workers", "0"], "--workers=0; allowed: >= 1"),
        (
            ["--tracking-uri", "http://127.0.0.1:5000"],
            "is an MLflow server, which serves its own UI: open http://127.0.0.1:5000",
        ),
    ],
)
def test_bad_arguments_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchflow", "ui", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_runs_mlflow_ui_over_the_sweeps_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow.tracking import MlflowClient

    from benchflow.tracking.mlflow_runs import default_tracking_uri

    store = default_tracking_uri(tmp_path)
    client = MlflowClient(store)
    exp_id = client.create_experiment("benchflow")
    client.create_experiment("empty")  # no runs: no link
    client.create_run(exp_id, run_name="a run")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", raising=False)
    served: list[list[str]] = []
    monkeypatch.setattr(ui, "serve", lambda cmd: served.append(cmd) or 0)

    assert ui.main(["--port", "5123"]) == 0
    (cmd,) = served
    assert cmd[0] == str(Path(sys.executable).parent / "mlflow") and cmd[1] == "ui"
    opts = dict(zip(cmd[2::2], cmd[3::2], strict=True))
    assert opts == {
        "--host": "127.0.0.1",
        "--port": "5123",
        "--backend-store-uri": store,
        "--default-artifact-root": (tmp_path / "mlartifacts").resolve().as_uri(),
        "--workers": "1",
    }
    assert os.environ["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    out = capsys.readouterr().out
    assert f"MLflow UI at http://127.0.0.1:5123 over {store}" in out
    assert (
        f"runs of experiment benchflow: http://127.0.0.1:5123/#/experiments/{exp_id}"
        "?workflowType=machine_learning"
    ) in out
    assert "empty" not in out and "Default" not in out


def test_tracking_uri_and_artifacts_are_passed_on(tmp_path: Path) -> None:
    args = ui.parser().parse_args(
        ["--tracking-uri", f"sqlite:///{tmp_path}/x.db", "--artifacts", str(tmp_path / "art")]
    )
    cmd = ui.command(args)
    assert cmd[cmd.index("--backend-store-uri") + 1] == f"sqlite:///{tmp_path}/x.db"
    assert cmd[cmd.index("--default-artifact-root") + 1] == (tmp_path / "art").as_uri()
    assert ui.experiment_links(f"sqlite:///{tmp_path}/x.db", "http://h:1") == []  # no store yet


def _gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Those of `procs` still running after `timeout` s (a zombie has ended)."""
    deadline = time.monotonic() + timeout
    while True:
        left = ui._alive(procs)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def signal_ends_every_mlflow_process(
    server: ServerProcess, sig: int, code: int, workers: int
) -> None:
    """`server` is a started `benchflow ui` with that many server workers (uvicorn
    serves alone with one, and supervises them with more). The signal goes to
    the `benchflow ui` process only (as `kill PID` or a scheduler sends it), and every
    process of the tree it had once the UI answered must end, with the shell's code
    for that signal."""
    assert server.proc is not None
    benchflow = psutil.Process(server.proc.pid)
    tree = [benchflow, *benchflow.children(recursive=True)]
    try:
        (mlflow,) = benchflow.children()
        assert mlflow.cmdline()[1:3] == [str(Path(sys.executable).parent / "mlflow"), "ui"]
        assert mlflow.environ()["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
        # mlflow, uvicorn and its workers at least, in a session of their own
        assert len(tree) >= 3 + (workers if workers > 1 else 0), [p.cmdline()[:4] for p in tree]
        assert any("uvicorn" in p.cmdline() for p in tree), [p.cmdline()[:4] for p in tree]
        assert {os.getsid(p.pid) for p in tree[1:]} == {mlflow.pid}
        assert f"MLflow UI at {server.url} over " in server.log.read_text()

        server.proc.send_signal(sig)
        assert server.proc.wait(timeout=60) == code
        left = _gone(tree, timeout=10)
        assert not left, [(p.pid, p.cmdline()[:4]) for p in left]
        assert "Traceback" not in server.log.read_text()  # a clean stop, SIGINT too
    finally:
        for p in _gone(tree, timeout=0):
            p.kill()


# SIGTERM is checked in the default suite on the browser test's UI (test_ui_browser.py).
@pytest.mark.full
def test_a_sigint_to_benchflow_ui_alone_ends_every_mlflow_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(store)
    exp_id = client.create_experiment("benchflow")
    client.create_run(exp_id, run_name="a run")
    monkeypatch.delenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", raising=False)
    port = free_port()
    cmd = [sys.executable, "-m", "benchflow", "ui", "--port", str(port), "--tracking-uri", store]
    server = ServerProcess([*cmd, "--workers", "2"], port, tmp_path / "ui.log", cwd=tmp_path)
    server.start()
    try:
        log = server.log.read_text()
        assert f"runs of experiment benchflow: {server.url}/#/experiments/{exp_id}" in log
        signal_ends_every_mlflow_process(server, signal.SIGINT, 130, workers=2)
    finally:
        server.stop(signal.SIGKILL)
