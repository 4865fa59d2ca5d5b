"""MLflow for a job's run, and `python -m benchflow sync SWEEP_DIR`: upload what a sweep
could not log (the server was down, the network went away) once the server is back.

Results never depend on MLflow: they are on disk first. A job's run is complete when
its last tag, `benchflow.logged` = the row's `row_id`, is set; sync (re)logs every
current row whose run is missing or incomplete, so running it twice adds nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchflow.results.headline import headline_metrics
from benchflow.results.row import flat_metrics
from benchflow.tracking.mlflow_runs import Tracker

LOGGED_TAG = "benchflow.logged"


def log_job(tracker: Tracker, run_id: str, row: dict[str, Any], job_dir: Path) -> bool:
    """Everything a job's run holds; the `benchflow.logged` tag, set last, says it is complete."""
    series = {k: v for k, v in row["metrics"].items() if isinstance(v, list)}
    tracker.log_metrics(run_id, {**flat_metrics(row), **headline_metrics(row)}, series)
    versions = row["provenance"].get("versions", {})
    tracker.set_tags(
        run_id,
        {
            "status": row["status"],
            "verification_code": row["verification_code"],
            "error": (row["error"] or "")[:5000] or None,
            "model_source": row["model"]["model_source"],
            "config_fingerprint": row["job"]["fingerprint"],
            "git_sha": row["provenance"].get("git_sha"),
            "host": row["provenance"].get("host"),
            "accelerator_model": row["experiment"]["accelerator_model"],
            **{f"version.{k}": v for k, v in versions.items()},
        },
    )
    hydra_logs = list(job_dir.glob("*.log"))
    tracker.log_files(run_id, [job_dir / "config.yaml", job_dir / "result.json"])
    tracker.log_files(run_id, hydra_logs, "logs")
    dumps = [job_dir / "xla_metrics_report.txt", job_dir / "dynamo_counters.json"]
    tracker.log_files(run_id, [p for p in dumps if p.exists()], "dumps")
    tracker.log_files(run_id, (job_dir / ".hydra").glob("*.yaml"), "hydra")
    tracker.log_files(run_id, sorted((job_dir / "profile").glob("*")), "profile")
    tracker.log_files(run_id, sorted((job_dir / "ir").glob("graphs.*")), "ir")
    tracker.log_files(run_id, sorted((job_dir / "ir" / "inductor").glob("*.py")), "ir/inductor")
    if (job_dir / "ir" / "xla_dump").is_dir():
        tracker.client.log_artifacts(run_id, str(job_dir / "ir" / "xla_dump"), "ir/xla_dump")
    tracker.set_tags(run_id, {LOGGED_TAG: row.get("row_id", "")})
    tracker.end_run(run_id, row["status"])
    return True


def _job_run(tracker: Tracker, row: dict[str, Any]) -> tuple[str | None, bool]:
    """(run id to log into, already complete?) for a row."""
    row_id = row.get("row_id", "")
    found = tracker.client.search_runs(
        [tracker.experiment_id], filter_string=f"tags.`{LOGGED_TAG}` = '{row_id}'"
    )
    if found:
        return found[0].info.run_id, True
    run_id = row.get("job", {}).get("mlflow_run_id")
    if run_id:
        try:
            tracker.client.get_run(run_id)
            return run_id, False  # created, not finished: log into it
        except Exception:  # not in this store
            pass
    return None, False


def sync(sweep_dir: Path, tracking_uri: str | None = None) -> dict[str, int]:
    """Log every current row of the sweep that MLflow lacks. Returns counts."""
    import dataclasses

    from benchflow.config.schema import MlflowConfig, config_from_dict
    from benchflow.results.io import current, read_jsonl
    from benchflow.tracking.mlflow_runs import PARENT_RUN_FILE, TRACKING_URI_FILE, flatten

    rows = current(read_jsonl(sweep_dir / "results.jsonl"))
    if not rows:
        raise SystemExit(f"benchflow sync: error: {sweep_dir} has no results.jsonl rows")
    job_dir = Path(rows[0]["job"]["dir"])
    cfg = config_from_dict(_load_yaml(job_dir / "config.yaml"))
    uri_file = sweep_dir / TRACKING_URI_FILE
    uri = tracking_uri or (uri_file.read_text().strip() if uri_file.exists() else None)
    mlflow_cfg = dataclasses.replace(cfg.mlflow, tracking_uri=uri or cfg.mlflow.tracking_uri)
    assert isinstance(mlflow_cfg, MlflowConfig)
    tracker = Tracker(mlflow_cfg, Path.cwd())
    parent_file = sweep_dir / PARENT_RUN_FILE
    parent = parent_file.read_text().strip() if parent_file.exists() else None
    if parent is None:
        parent = tracker.start_run(
            f"sweep {sweep_dir.parent.name} {sweep_dir.name}",
            tags={"benchflow.kind": "sweep", "sweep_dir": str(sweep_dir.resolve())},
        )
        parent_file.write_text(parent)
        uri_file.write_text(tracker.uri)
    counts = {"complete": 0, "logged": 0}
    for row in rows:
        run_id, complete = _job_run(tracker, row)
        if complete:
            counts["complete"] += 1
            continue
        job_dir = Path(row["job"]["dir"])
        if run_id is None:
            job_cfg = config_from_dict(_load_yaml(job_dir / "config.yaml"))
            params = flatten(dataclasses.asdict(job_cfg))
            params = {k: v for k, v in params.items() if not k.startswith("suite.rules.")}
            run_id = tracker.start_run(row["job"]["name"], parent_id=parent, params=params)
        log_job(tracker, run_id, row, job_dir)
        counts["logged"] += 1
    tracker.log_files(parent, [sweep_dir / "results.jsonl"])
    report = sweep_dir / "report"
    if report.is_dir():
        tracker.log_files(parent, sorted(report.iterdir()), "report")
    jobs: dict[str, int] = {}
    for row in rows:
        jobs[row["status"]] = jobs.get(row["status"], 0) + 1
    tracker.set_tags(parent, {f"jobs.{k}": v for k, v in jobs.items()})
    tracker.end_run(parent, "ok")
    return counts


def _load_yaml(path: Path) -> Any:
    import yaml

    return yaml.safe_load(path.read_text())


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchflow sync",
        description="Upload to MLflow what a sweep could not log (its results are on disk). "
        "Idempotent: jobs whose run is complete are left alone.",
    )
    p.add_argument("sweep_dir", type=Path, help="the sweep folder (multirun/<date>/<time>)")
    p.add_argument("--tracking-uri", help="the store (default: the one the sweep used)")
    args = p.parse_args(argv)
    if not (args.sweep_dir / "results.jsonl").exists():
        print(f"benchflow sync: error: {args.sweep_dir} has no results.jsonl", file=sys.stderr)
        return 2
    try:
        counts = sync(args.sweep_dir, args.tracking_uri)
    except Exception as exc:  # the server is still down, or the store is wrong
        print(f"benchflow sync: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(
        f"benchflow sync: {counts['logged']} job run(s) logged, "
        f"{counts['complete']} already complete"
    )
    return 0
