"""MLflow for a job's run, and `benchflow sync SWEEP_DIR`: upload what a sweep
could not log (the server was down, the network went away) once the server is back.

A job's run is complete once its last tag, `benchflow.logged`, is set; sync (re)logs
every current row whose run is missing or incomplete, so running it twice adds nothing.
"""

from __future__ import annotations

from pathlib import Path

from benchflow.config.schema import Settings
from benchflow.core.layout import JobDir, SweepDir
from benchflow.results.environment import facts
from benchflow.results.io import current, read_rows, tally
from benchflow.results.row import ResultRow
from benchflow.tracking.metrics import job_metrics
from benchflow.tracking.mlflow_runs import KIND_SWEEP, KIND_TAG, SWEEP_DIR_TAG, Tracker

LOGGED_TAG = "benchflow.logged"
RERUN_TAG = "benchflow.rerun_of"  # the row_id a rerun's job ran again


def log_job(
    tracker: Tracker,
    run_id: str,
    row: ResultRow,
    job_dir: Path,
    params: Settings | None = None,
) -> None:
    """Everything a job's run holds, in three calls: its files, one log_batch (whose last
    tag, `benchflow.logged`, says it is complete), then its end."""
    metrics, series = job_metrics(row)  # the curated few; the rest: result.json
    tracker.log_tree(run_id, job_artifacts(JobDir(job_dir)))
    tags = {
        "status": row.status.value,
        "verification_code": row.verification_code,
        "error": (row.error or "")[:5000] or None,
        "model_source": row.model.model_source,
        "config_fingerprint": row.job.fingerprint,
        "accelerator_model": row.experiment.accelerator_model,
        # host, git_sha, versions, the CPU's features, the lock's hash, env.<VAR>...
        **facts(row.provenance),
        RERUN_TAG: row.job.rerun_of,
        "rerun_digest": row.job.rerun_digest,
    }
    tracker.log_batch(
        run_id,
        metrics=metrics,
        series=series,
        params=params,
        tags=tags,
        last_tags={LOGGED_TAG: row.row_id},
    )
    tracker.end_run(run_id, row.status)


def job_artifacts(job: JobDir) -> dict[str, Path]:
    """A job's files as its run holds them: {path in the run's artifacts: local file}."""
    out = {p.name: p for p in (job.config, job.result, job.signals)}
    folders = {
        "logs": sorted(job.path.glob("*.log")),
        "dumps": [p for p in (job.xla_metrics, job.dynamo_counters) if p.exists()],
        "hydra": sorted(job.hydra.glob("*.yaml")),
        "profile": sorted(job.profile.glob("*")),
        "ir": sorted(job.ir.glob("graphs.*")),
        "ir/inductor": sorted(job.inductor_code.glob("output_code_*")),
    }
    for folder, paths in folders.items():
        out |= {f"{folder}/{p.name}": p for p in paths}
    if job.xla_dump.is_dir():
        dump = job.xla_dump
        out |= {f"ir/xla_dump/{p.relative_to(dump)}": p for p in sorted(dump.rglob("*"))}
    return {name: path for name, path in out.items() if path.is_file()}


def _job_run(tracker: Tracker, row: ResultRow) -> tuple[str | None, bool]:
    """(run id to log into, already complete?) for a row."""
    found = tracker.client.search_runs(
        [tracker.experiment_id], filter_string=f"tags.`{LOGGED_TAG}` = '{row.row_id}'"
    )
    if found:
        return found[0].info.run_id, True
    run_id = row.job.mlflow_run_id
    if run_id:
        try:
            tracker.client.get_run(run_id)
            return run_id, False  # created, not finished: log into it
        except Exception:  # not in this store
            pass
    return None, False


KILLED_TAG = "benchflow.killed"  # why a job run was ended KILLED by a later process


def close_interrupted(tracker: Tracker, sweep: SweepDir, parent_id: str) -> dict[str, int]:
    """A resumed sweep's first act in MLflow: end the job runs a killed predecessor left
    RUNNING. One whose row was recorded is logged from it, as `sync` does; one without is
    ended KILLED, tagged why, and deleted (restorable): its job runs again in a new run.
    Returns how many of each."""
    from benchflow.tracking.mlflow_runs import PARENT_TAG, search_all

    rows = {r.job.mlflow_run_id: r for r in read_rows(sweep.results) if r.job.mlflow_run_id}
    running = search_all(
        tracker.client,
        tracker.experiment_id,
        f"tags.`{PARENT_TAG}` = '{parent_id}' and attributes.status = 'RUNNING'",
    )
    counts = {"completed": 0, "killed": 0}
    for run in running:
        run_id = run.info.run_id
        row = rows.get(run_id)
        if row is not None and not row.superseded_by:
            _log_recorded(tracker, row, run_id, parent_id)
            counts["completed"] += 1
            continue
        why = "its sweep's process ended before this job's row was recorded"
        tracker.client.set_terminated(run_id, status="KILLED")
        tracker.client.set_tag(run_id, KILLED_TAG, f"{why}; the resumed sweep runs it again")
        tracker.client.delete_run(run_id)
        counts["killed"] += 1
    return counts


def status_tags(rows: list[ResultRow]) -> dict[str, int]:
    """A sweep run's `jobs.<status>` tags: how many of its current rows ended so."""
    return {f"jobs.{status}": n for status, n in tally(rows).items()}


def job_params(settings: Settings, backend: str) -> Settings:
    """A job run's params: its measured settings (config/schema.py's mark) and its backend."""
    return {**settings, "backend": backend}


def _log_recorded(tracker: Tracker, row: ResultRow, run_id: str | None, parent_id: str) -> None:
    """log_job for a recorded row, with its params; run_id None: a new run under parent_id."""
    from benchflow.config.schema import config_from_yaml, measured_flat

    job = JobDir(Path(row.job.dir or ""))
    settings = row.config  # schema 2; older rows: from the job's config.yaml
    if settings is None:
        settings = measured_flat(config_from_yaml(job.config))
    if run_id is None:
        run_id = tracker.start_run(row.job.name, parent_id=parent_id)
    log_job(tracker, run_id, row, job.path, params=job_params(settings, row.backend))


def sync(sweep_dir: Path, tracking_uri: str | None = None) -> dict[str, int]:
    """Log every current row of the sweep that MLflow lacks. Returns counts."""
    import dataclasses

    from benchflow.config.schema import config_from_yaml

    sweep = SweepDir(sweep_dir)
    rows = current(read_rows(sweep.results))
    if not rows:
        raise SystemExit(f"benchflow sync: error: {sweep_dir} has no results.jsonl rows")
    cfg = config_from_yaml(JobDir(Path(rows[0].job.dir or "")).config)
    uri = tracking_uri or sweep.recorded_tracking_uri()
    mlflow_cfg = dataclasses.replace(cfg.mlflow, tracking_uri=uri or cfg.mlflow.tracking_uri)
    tracker = Tracker(mlflow_cfg, Path.cwd())
    parent = sweep.parent_run_id()
    if parent is None:
        parent = tracker.start_run(
            f"sweep {sweep_dir.parent.name} {sweep_dir.name}",
            tags={KIND_TAG: KIND_SWEEP, SWEEP_DIR_TAG: str(sweep_dir.resolve())},
        )
        sweep.parent_run.write_text(parent)
        sweep.tracking_uri.write_text(tracker.uri)
    counts = {"complete": 0, "logged": 0}
    for row in rows:
        run_id, complete = _job_run(tracker, row)
        if complete:
            counts["complete"] += 1
            continue
        _log_recorded(tracker, row, run_id, parent)
        counts["logged"] += 1
    tracker.log_files(parent, [sweep.results])
    if sweep.report.is_dir():
        tracker.log_files(parent, sorted(sweep.report.iterdir()), "report")
    tracker.set_tags(parent, status_tags(rows))
    tracker.end_run(parent, "ok")
    return counts
