"""`python -m benchflow ui`: the MLflow UI on 127.0.0.1 over the store the runs used.

By default that is the embedded store of the directory you run from (mlflow.db and
mlartifacts/, as the sweeps write them). The UI is MLflow's own server process;
benchflow only picks the store and the address, and prints where to look.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from benchflow.tracking.mlflow_runs import default_tracking_uri


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchflow ui",
        description=(
            "Start the MLflow UI over benchflow's runs. Each sweep is a parent run with "
            "its jobs nested under it (expand it in the runs table); compare runs with "
            "the chart and parallel-coordinates views over params such as backend, "
            "model.name, dtype, and the headline.* metrics."
        ),
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    p.add_argument(
        "--tracking-uri",
        help="backend store (default: sqlite:///<cwd>/mlflow.db, the sweeps' default)",
    )
    p.add_argument(
        "--artifacts",
        type=Path,
        help="default artifact root for new experiments (default: <cwd>/mlartifacts)",
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
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not 0 < args.port < 65536:
        print(f"benchflow ui: error: --port={args.port}; allowed: 1..65535", file=sys.stderr)
        return 2
    cmd = command(args)
    store = cmd[cmd.index("--backend-store-uri") + 1]
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
        print(
            f"benchflow ui: note: {store} does not exist yet; run a sweep here first "
            "(or pass --tracking-uri)",
            file=sys.stderr,
        )
    print(f"benchflow ui: MLflow UI at http://{args.host}:{args.port} over {store}", flush=True)
    # Become the UI server: Ctrl-C and signals go straight to MLflow.
    os.execv(cmd[0], cmd)
    return 0  # not reached
