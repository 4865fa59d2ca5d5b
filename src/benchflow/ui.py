"""`python -m benchflow ui`: the MLflow UI on 127.0.0.1 over the store the runs used.

By default that is the embedded store of the directory you run from (mlflow.db and
mlartifacts/, as the sweeps write them). The UI is MLflow's own server process;
benchflow only picks the store and the address, and prints where to look: MLflow 3
opens an experiment in its GenAI (traces) view unless the link asks for the "Model
training" view, which has the runs table, so the links printed here ask for it.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from benchflow.tracking.mlflow_runs import default_tracking_uri

# The query that opens an experiment on its runs table ("Model training" in the sidebar).
RUNS_VIEW = "?workflowType=machine_learning"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchflow ui",
        description=(
            "Start the MLflow UI (`mlflow ui`) over benchflow's runs and print its URL and "
            "one link per experiment. Each sweep is a parent run with its jobs nested "
            "under it (unfold it in the runs table; add metric columns such as "
            "headline.per_iter_time_s with 'Columns'); compare runs in the chart view over "
            "params such as backend, model.name and dtype. Stop it with Ctrl-C."
        ),
        epilog=(
            "examples: python -m benchflow ui  |  python -m benchflow ui --port 5001  |  "
            "python -m benchflow ui --tracking-uri sqlite:////data/bench/mlflow.db"
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


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not 0 < args.port < 65536:
        print(f"benchflow ui: error: --port={args.port}; allowed: 1..65535", file=sys.stderr)
        return 2
    if args.workers < 1:
        print(f"benchflow ui: error: --workers={args.workers}; allowed: >= 1", file=sys.stderr)
        return 2
    if args.tracking_uri and args.tracking_uri.startswith(("http://", "https://")):
        print(
            f"benchflow ui: error: --tracking-uri={args.tracking_uri} is an MLflow server, "
            f"which serves its own UI: open {args.tracking_uri} in a browser; allowed here: "
            "a database URI such as sqlite:///PATH",
            file=sys.stderr,
        )
        return 2
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
    # MLflow's job runner (GenAI judges and scorers: about ten more processes) is not
    # needed to browse runs and slows the start (measured on 2 CPUs, one worker: 14-20 s
    # with it, 10-12 s without). A value set by the user wins.
    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    # Become the UI server: Ctrl-C and signals go straight to MLflow.
    os.execv(cmd[0], cmd)
    return 0  # not reached
