"""`benchflow ui`: the MLflow UI on 127.0.0.1 over the store the runs used, with links that
open the runs table ("Model training"), not MLflow 3's GenAI view.

`mlflow ui` runs as a child in its own session, not in place of this process: a
SIGTERM to `mlflow` alone can leave its uvicorn server and workers running, while
stopping this process stops all of them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import psutil

from benchflow.cli import refuse
from benchflow.tracking.mlflow_runs import default_tracking_uri

# The query that opens an experiment on its runs table ("Model training" in the sidebar).
RUNS_VIEW = "?workflowType=machine_learning"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchflow ui",
        description=(
            "Start the MLflow UI (`mlflow ui`) over benchflow's runs and print its URL and "
            "one link per experiment. Each sweep is a parent run with its jobs nested "
            "under it (unfold it in the runs table; add metric columns such as "
            "headline.per_iter_time_s with 'Columns'); compare runs in the chart view over "
            "params such as backend, model.name and dtype. Stop it with Ctrl-C."
        ),
        epilog=(
            "examples: benchflow ui  |  benchflow ui --port 5001  |  "
            "benchflow ui --tracking-uri sqlite:////data/bench/mlflow.db"
        ),
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    p.add_argument(
        "--tracking-uri",
        help="backend store: a database URI such as sqlite:///PATH (default: "
        "sqlite:///<cwd>/mlflow.db, where the sweeps log by default). An `mlflow server` "
        "URL is refused: that server shows its own UI",
    )
    p.add_argument(
        "--artifacts",
        type=Path,
        help="artifact root for experiments created from the UI (default: <cwd>/mlartifacts; "
        "benchflow's experiments keep the location they were created with)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server worker processes (default 1: enough for one person; MLflow's is 4)",
    )
    return p


def command(args: argparse.Namespace) -> list[str]:
    mlflow_bin = Path(sys.executable).parent / "mlflow"
    uri = args.tracking_uri or default_tracking_uri(Path.cwd())
    artifacts = (args.artifacts or Path.cwd() / "mlartifacts").resolve()
    return [
        str(mlflow_bin),
        "ui",
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--backend-store-uri",
        uri,
        "--default-artifact-root",
        artifacts.as_uri(),
        "--workers",
        str(args.workers),
    ]


def experiment_links(store: str, base_url: str) -> list[str]:
    """`name: URL` for each active experiment with runs in a SQLite store, read-only and
    without importing mlflow (empty if the store cannot be read)."""
    path = store.removeprefix("sqlite:///")
    if not store.startswith("sqlite:///") or not Path(path).is_file():
        return []
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            rows = db.execute(
                "SELECT e.experiment_id, e.name FROM experiments e "
                "WHERE e.lifecycle_stage = 'active' AND EXISTS (SELECT 1 FROM runs r "
                "WHERE r.experiment_id = e.experiment_id AND r.lifecycle_stage = 'active') "
                "ORDER BY e.experiment_id"
            ).fetchall()
    except sqlite3.Error:
        return []
    return [f"{name}: {base_url}/#/experiments/{eid}{RUNS_VIEW}" for eid, name in rows]


# What stops the UI. SIGHUP (its terminal closed) too: the server runs in a session of
# its own, so a hang-up would not reach it.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# How long MLflow's processes get to finish after the signal before they are killed.
GRACE_S = 10.0


class _Stop(Exception):
    """Raised by the signal handler, so that a blocking wait for the server ends."""


class _Signals:
    """Stop signals as they arrive; while armed, the first one also raises _Stop."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.armed = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if self.armed:
            self.armed = False  # raised once: a second signal only hurries the shutdown
            raise _Stop


def _alive(procs: Sequence[psutil.Process]) -> list[psutil.Process]:
    """Those still running; a zombie has ended (its parent has yet to reap it)."""
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _with_descendants(procs: Sequence[psutil.Process]) -> list[psutil.Process]:
    """The processes and every descendant they have now, each once. Taken while the
    parents live: a process whose parent has exited is no one's descendant any more."""
    seen = {p.pid: p for p in procs}
    for p in list(procs):
        try:
            for child in p.children(recursive=True):
                seen.setdefault(child.pid, child)
        except psutil.NoSuchProcess:
            pass
    return list(seen.values())


def _send(group: int, procs: Sequence[psutil.Process], sig: int) -> None:
    """`sig` once to the server's process group and to each process of the tree outside
    it (uvicorn takes a second signal as "force exit")."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            if os.getpgid(p.pid) != group:
                p.send_signal(sig)  # psutil checks that the pid was not reused


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _shut_down(server: subprocess.Popen[bytes], signum: int | None, sigs: _Signals) -> None:
    """Stop the server and everything it started: SIGTERM to all of it (a SIGINT makes
    uvicorn's workers print tracebacks), up to GRACE_S, then SIGKILL what is left. With
    no signal (the server ended by itself), only kill what it left behind."""
    procs = _with_descendants([psutil.Process(server.pid)]) if server.poll() is None else []
    if signum is not None:
        _send(server.pid, procs, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        seen = len(sigs.received)
        while time.monotonic() < deadline and len(sigs.received) == seen:
            server.poll()  # reap the server once it exits
            procs = _with_descendants(_alive(procs))
            if not procs and not _group_exists(server.pid):
                break
            time.sleep(0.1)
    left = _alive(procs)
    if left:
        print(
            f"benchflow ui: {len(left)} MLflow process(es) still running after "
            f"{GRACE_S:g} s: killing them (pids {', '.join(str(p.pid) for p in left)})",
            file=sys.stderr,
        )
    _send(server.pid, left, signal.SIGKILL)
    server.wait()
    psutil.wait_procs(left, timeout=5)


def serve(cmd: list[str]) -> int:
    """Run `mlflow ui` until it exits or a stop signal comes; either way no process it
    started is left. Returns its exit code, or 128 + the signal's number, as a shell does."""
    sigs = _Signals()
    # Handlers before the server starts: a signal that comes while it starts is recorded
    # (and acted on below), not lost with the server left running.
    previous = {s: signal.signal(s, sigs) for s in STOP_SIGNALS}
    try:
        # Its own session: the server's processes share a process group to signal, and
        # Ctrl-C in a terminal reaches this process only, which then stops them all.
        server = subprocess.Popen(cmd, start_new_session=True)
        try:
            sigs.armed = True
            if not sigs.received:
                server.wait()
            sigs.armed = False
        except _Stop:
            pass
        signum = sigs.received[0] if sigs.received else None
        _shut_down(server, signum, sigs)
        code = server.returncode if signum is None else -signum
        return 128 - code if code < 0 else code
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not 0 < args.port < 65536:
        return refuse("ui", f"--port={args.port}; allowed: 1..65535")
    if args.workers < 1:
        return refuse("ui", f"--workers={args.workers}; allowed: >= 1")
    if args.tracking_uri and args.tracking_uri.startswith(("http://", "https://")):
        return refuse(
            "ui",
            f"--tracking-uri={args.tracking_uri} is an MLflow server, "
            f"which serves its own UI: open {args.tracking_uri} in a browser; allowed here: "
            "a database URI such as sqlite:///PATH",
        )
    cmd = command(args)
    store = cmd[cmd.index("--backend-store-uri") + 1]
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
        print(
            f"benchflow ui: note: {store} does not exist yet; run a sweep here first "
            "(or pass --tracking-uri)",
            file=sys.stderr,
        )
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    url = f"http://{host}:{args.port}"
    print(f"benchflow ui: MLflow UI at {url} over {store}")
    for link in experiment_links(store, url):
        print(f"benchflow ui: runs of experiment {link}")
    sys.stdout.flush()
    # MLflow's job runner (GenAI judges and scorers) is not needed to browse runs and
    # slows the start; a value set by the user wins.
    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    return serve(cmd)
