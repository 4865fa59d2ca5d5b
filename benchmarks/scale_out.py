"""Issue 28's figures: one sweep of tiny jobs under each launcher, on the real services of
services/ (a two-node Ray cluster, a single-host SLURM cluster), and a 100-job sweep
logging to an MLflow server over PostgreSQL, with its report read back from the server.

The launchers' sweep: 20 jobs (tiny llama, eager, seeds 0-19, one process and one
repeat each, cpus_per_job=1: two jobs at a time on 2 cores where the launcher runs
them so). For each launcher: the sweep's wall, and per job the parent's own time the
rows give (the `gap` before each job and the `start`, `teardown` and `other` phases:
docs/timing.md), against the basic launcher's. The services are started before their
sweep and stopped after it, by PID; their start is not in the wall.

    .venv/bin/python benchmarks/scale_out.py --out benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results_md import publish

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

JOBS = 20
SWEEP = [
    "-m",
    "model=llama",
    "model.size=tiny",
    "dynamo=none",
    f"seed=range(0,{JOBS})",
    "repeat=1",
    "iterations_per_run=1",
    "warmup=0",
    "cpus_per_job=1",
    "progress=false",
    "mlflow.enabled=false",
]
OVERHEAD_PHASES = ("gap", "start", "teardown", "other")  # the parent's, not the model's


def sweep(cwd: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One sweep in `cwd`; its wall and what its rows say."""
    cwd.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "benchflow", *SWEEP, *extra]
    began = time.monotonic()
    done = subprocess.run(
        cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True
    )
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-3000:]}")
    (results,) = cwd.glob("multirun/*/*/results.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    overhead = [sum(r["job"]["phases"].get(p, 0.0) for p in OVERHEAD_PHASES) for r in rows]
    return {
        "wall_s": wall,
        "rows": len(rows),
        "ok": sum(r["status"] == "ok" for r in rows),
        "nodes": len({r["job"].get("node") for r in rows}),
        "overhead_per_job_s": sum(overhead) / len(rows),
        "fingerprints": sorted(r["job"]["fingerprint"] for r in rows),
    }


def launchers(root: Path) -> dict[str, dict[str, Any]]:
    from services import ray_cluster, slurm

    got = {"basic": sweep(root / "basic")}
    got["joblib (2 workers)"] = sweep(
        root / "joblib", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"
    )
    cluster = ray_cluster.up()
    try:
        address = f"hydra.launcher.ray.init.address={cluster['address']}"
        got["Ray, 2 nodes"] = sweep(root / "ray", "hydra/launcher=ray_cluster", address)
    finally:
        ray_cluster.down()
    info = slurm.up()
    try:
        got["SLURM, 1 node"] = sweep(
            root / "slurm", "hydra/launcher=submitit_slurm", env=dict(info["env"])
        )
    finally:
        slurm.down()
    return got


def postgres_sweep(root: Path, jobs: int = 100) -> dict[str, Any]:
    """`jobs` tiny jobs logging to the PostgreSQL-backed server, then their report read
    back from it by the parent run's id."""
    from services import postgres

    url = str(postgres.up()["tracking_uri"])
    cwd = root / "postgres"
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        cmd = [
            sys.executable,
            "-m",
            "benchflow",
            *[a for a in SWEEP if not a.startswith(("seed=", "mlflow.enabled"))],
            f"seed=range(0,{jobs})",
            f"mlflow.tracking_uri={url}",
            "mlflow.experiment=scale_out",
        ]
        began = time.monotonic()
        subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
        wall = time.monotonic() - began
        (parent,) = cwd.glob("multirun/*/*/mlflow_parent_run.txt")
        run_id = parent.read_text().strip()
        began = time.monotonic()
        report = [sys.executable, "-m", "benchflow", "report", run_id, "--tracking-uri", url]
        subprocess.run([*report, "--out", "rep"], cwd=cwd, check=True, capture_output=True)
        report_s = time.monotonic() - began
        from mlflow.tracking import MlflowClient

        client = MlflowClient(url)
        children = client.search_runs(
            [client.get_run(run_id).info.experiment_id],
            f"tags.`mlflow.parentRunId` = '{run_id}'",
            max_results=1000,
        )
        statuses: dict[str, int] = {}
        for run in children:
            statuses[run.info.status] = statuses.get(run.info.status, 0) + 1
        md = (cwd / "rep" / "report.md").read_text()
        seeds = re.findall(r"^\| llama \| eval \| eager seed=(\d+) \|", md, re.M)
        rows_in_report = len(set(seeds))
    finally:
        postgres.down()
    return {
        "jobs": jobs,
        "wall_s": wall,
        "report_s": report_s,
        "runs": statuses,
        "report_rows": rows_in_report,
    }


def markdown(got: dict[str, dict[str, Any]], pg: dict[str, Any]) -> str:
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    basic = got["basic"]
    lines = [
        f"## {when}: launchers on real services, on {platform.node()} ({os.cpu_count()} cores)",
        "",
        f"`.venv/bin/python benchmarks/scale_out.py` ({JOBS} jobs: `{' '.join(SWEEP[1:])}`)",
        "",
        "| launcher | rows ok | nodes | same fingerprints as basic | sweep wall, s "
        "| parent's time per job, s | against basic |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, g in got.items():
        same = "yes" if g["fingerprints"] == basic["fingerprints"] else "NO"
        more = g["overhead_per_job_s"] - basic["overhead_per_job_s"]
        lines.append(
            f"| {name} | {g['ok']} of {g['rows']} | {g['nodes']} | {same} | {g['wall_s']:.1f} "
            f"| {g['overhead_per_job_s']:.3f} | {more:+.3f} |"
        )
    lines += [
        "",
        "The parent's time per job: the rows' `gap`, `start`, `teardown` and `other` "
        "phases (not the model's).",
        "",
        f"PostgreSQL-backed MLflow server: {pg['jobs']} jobs logged in {pg['wall_s']:.1f} s; "
        f"their runs by status {pg['runs']}; `benchflow report <parent run id> "
        f"--tracking-uri` read them back in {pg['report_s']:.1f} s "
        f"({pg['report_rows']} rows in its report.md).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="append the figures to this Markdown file")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bf-scale-out-", dir="/tmp"))
    root.chmod(0o755)  # the postgres user enters its state folder under it
    os.environ["BENCHFLOW_SERVICES_DIR"] = str(root / "services")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    got = launchers(root)
    pg = postgres_sweep(root)
    text = markdown(got, pg)
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
