"""The recorded jobs `benchflow rerun WHAT` names (a row or run id, a results.jsonl line,
a folder or a file), each as its row and the resolved config it ran with, found in the
sweep folders here or in MLflow; sweep/rerun.py plans them again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchflow.config.schema import BenchConfig, config_from_yaml
from benchflow.core.layout import JobDir, SweepDir
from benchflow.results.io import current, loads, read_rows
from benchflow.results.row import ResultRow, RowError
from benchflow.tracking.mlflow_runs import default_tracking_uri, job_runs, run_artifact

log = logging.getLogger(__name__)

HEX32 = re.compile(r"^[0-9a-f]{32}$")


class RerunError(Exception):
    """WHAT names nothing that can be rerun; the message says what to pass instead."""


@dataclass(frozen=True)
class Recorded:
    row: ResultRow
    config: BenchConfig  # resolved, as the job ran


def find(what: str, tracking_uri: str | None, project_dir: Path) -> list[Recorded]:
    """The recorded jobs WHAT names: a row or run id, a results.jsonl line, a folder or a file."""
    text = what.strip()
    if text.startswith("{"):
        return _from_json(text, "the line given is not a result row")
    path = Path(text).expanduser()
    if path.exists():
        return _from_path(path)
    uri = tracking_uri or default_tracking_uri(project_dir)
    kind, _, value = text.partition(":")
    if kind == "row" and value:
        return _by_row_id(value, project_dir) or _from_run(None, uri, row_id=value)
    if kind == "run" and value:
        return _from_run(value, uri)
    if HEX32.match(text):
        return _by_row_id(text, project_dir) or _from_run(text, uri, row_id=text)
    raise RerunError(
        f"{what!r} is not a folder, a file, a results.jsonl line or an id; allowed: a "
        "sweep folder (multirun/<date>/<time>), a results.jsonl or result.json, one line "
        "of results.jsonl, a row_id, or an MLflow run id (row:<id> / run:<id>)"
    )


def _from_path(path: Path) -> list[Recorded]:
    if path.is_dir() and SweepDir(path).results.exists():
        path = SweepDir(path).results
    elif path.is_dir() and JobDir(path).result.exists():
        path = JobDir(path).result
    if path.is_file() and path.suffix == ".jsonl":
        rows = current(read_rows(path))
        if not rows:
            raise RerunError(f"{path}: no result rows")
        return [Recorded(r, _config_of(r, path.parent)) for r in rows]
    if path.is_file() and path.suffix == ".json":
        return _from_json(path.read_text(), str(path))
    raise RerunError(
        f"{path}: has no results.jsonl or result.json; allowed: a sweep folder, a job "
        "folder, a results.jsonl or a result.json"
    )


def _from_json(text: str, where: str) -> list[Recorded]:
    """The job one row (a result.json, or a results.jsonl line) records."""
    try:
        row = ResultRow.from_dict(loads(text))
    except (json.JSONDecodeError, RowError) as exc:
        raise RerunError(f"{where}: {exc}") from None
    return [Recorded(row, _config_of(row, None))]


def _config_of(row: ResultRow, sweep_dir: Path | None) -> BenchConfig:
    """The resolved config a row's job ran with: config.yaml, else its plan.json entry."""
    config = JobDir(Path(row.job.dir)).config if row.job.dir else None
    if config is not None and config.is_file():
        return config_from_yaml(config)
    plan = SweepDir(sweep_dir).read_plan() if sweep_dir else None
    job = plan.job(row.job.num) if plan else None
    if job is not None and job.fingerprint == row.job.fingerprint:
        return job.config
    raise RerunError(
        f"row {row.row_id} ({row.job.name}): its config is gone ({config or 'no job folder'} "
        "and no plan.json entry); allowed: a row whose job folder or sweep folder is kept, "
        "or its MLflow run id"
    )


def _by_row_id(row_id: str, project_dir: Path) -> list[Recorded]:
    """The row with this id under ./multirun (none: an empty list)."""
    for results in sorted((project_dir / "multirun").glob("**/results.jsonl")):
        with results.open() as f:
            lines = [line for line in f if row_id in line]
        for row in (ResultRow.from_dict(loads(line)) for line in lines):
            if row.row_id == row_id:
                return [Recorded(row, _config_of(row, results.parent))]
    return []


def _from_run(run_id: str | None, uri: str, row_id: str | None = None) -> list[Recorded]:
    """An MLflow job run, or a parent run's job runs (run_id None: the one row_id tags)."""
    from mlflow.tracking import MlflowClient

    from benchflow.tracking.sync import LOGGED_TAG

    client = MlflowClient(tracking_uri=uri)
    run = None
    if run_id is not None:
        try:
            run = client.get_run(run_id)
        except Exception:
            run = None
    if run is None and row_id is not None:
        found = client.search_runs(
            [e.experiment_id for e in client.search_experiments()],
            filter_string=f"tags.`{LOGGED_TAG}` = '{row_id}'",
            max_results=1,
        )
        run = found[0] if found else None
    if run is None:
        raise RerunError(
            f"{run_id or row_id}: no such row under ./multirun and no such MLflow run at "
            f"{uri}; allowed: a row_id of a sweep here, or a run id of that store "
            "(--tracking-uri for another)"
        )
    runs, _ = job_runs(client, run)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for job_run in runs:
            if job_run.info.lifecycle_stage == "deleted":
                continue  # superseded by a later attempt of the same job
            try:
                out.append(_recorded_run(client, job_run, tmp))
            except Exception as exc:  # a run killed before its artifacts were logged
                log.warning("MLflow run %s has no result.json or config.yaml: %s", job_run, exc)
    if not out:
        raise RerunError(f"MLflow run {run.info.run_id} at {uri}: no job run with its record")
    return out


def _recorded_run(client: Any, run: Any, tmp: str) -> Recorded:
    folder = Path(tmp) / run.info.run_id
    folder.mkdir()
    row_file = run_artifact(client, run, "result.json", str(folder))
    config = config_from_yaml(run_artifact(client, run, "config.yaml", str(folder)))
    row = ResultRow.from_dict(loads(row_file.read_text()))
    row = dataclasses.replace(row, job=dataclasses.replace(row.job, mlflow_run_id=run.info.run_id))
    return Recorded(row, config)
