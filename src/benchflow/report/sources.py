"""Where a report's rows come from: a sweep folder, a results file, or MLflow.

- a folder with ``results.jsonl`` (a sweep) or ``result.json`` (a single run);
- a ``results.jsonl`` / ``result.json`` file;
- an MLflow run id: a sweep's parent run (its child runs' rows), or one job's run;
- an MLflow experiment, by name or id: every job run in it.
``run:<id>`` and ``experiment:<name>`` say which explicitly.

MLflow rows are the ``result.json`` artifact every job run carries, so a report
from MLflow is the same as one from the folder, on any machine that can reach
the tracking store.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchflow.core.layout import JobDir, SweepDir
from benchflow.report.model import Meta
from benchflow.results.io import read_rows
from benchflow.results.row import Provenance, ResultRow, RowError
from benchflow.tracking.mlflow_runs import (
    BASELINE_TAG,
    KIND_TAG,
    default_tracking_uri,
    job_runs,
    search_all,
)

log = logging.getLogger(__name__)

RUN_ID = re.compile(r"^[0-9a-f]{32}$")


class SourceError(Exception):
    """A source that cannot be read; the message says what to pass instead."""


@dataclass
class Sweep:
    label: str
    rows: list[ResultRow]
    directory: Path | None = None
    parent_run_id: str | None = None
    tracking_uri: str | None = None
    baseline: str | None = None  # the sweep's own `baseline=`, where it is known


def load(spec: str, tracking_uri: str | None = None) -> Sweep:
    path = Path(spec).expanduser()
    if path.exists():
        return _from_path(path, tracking_uri)
    uri = tracking_uri or default_tracking_uri(Path.cwd())
    kind, _, value = spec.partition(":")
    if kind == "run" and value:
        return _from_run(value, uri)
    if kind == "experiment" and value:
        return _from_experiment(value, uri)
    if RUN_ID.match(spec):
        return _from_run(spec, uri)
    if "/" in spec or spec.endswith((".jsonl", ".json")):
        raise SourceError(f"{spec}: no such file or folder")
    return _from_experiment(spec, uri)


def _from_path(path: Path, tracking_uri: str | None) -> Sweep:
    if path.is_file():
        rows = read_rows(path) if path.suffix == ".jsonl" else [_read_row(path)]
        folder = path.parent
    elif SweepDir(path).results.exists():
        rows, folder = read_rows(SweepDir(path).results), path
    elif JobDir(path).result.exists():
        rows, folder = [_read_row(JobDir(path).result)], path
    else:
        inside = sorted(p.parent for p in path.glob("*/results.jsonl"))
        hint = (
            "; it holds these sweeps: " + ", ".join(str(p) for p in inside[:10])
            if inside
            else "; pass a sweep folder (multirun/<date>/<time>) or a run folder"
        )
        raise SourceError(f"{path}: has no results.jsonl or result.json{hint}")
    if not rows:
        raise SourceError(f"{path}: no result rows")
    sweep = SweepDir(folder)
    plan = sweep.read_plan()
    return Sweep(
        label=str(path),
        rows=rows,
        directory=folder,
        parent_run_id=sweep.parent_run_id(),
        tracking_uri=tracking_uri or sweep.recorded_tracking_uri(),
        baseline=plan.baseline if plan else None,
    )


def _read_row(path: Path) -> ResultRow:
    """A result.json."""
    try:
        return ResultRow.from_dict(json.loads(path.read_text()))
    except RowError as exc:
        raise SourceError(f"{path}: {exc}") from None


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _result_file(client: Any, run: Any, tmp: str) -> Path:
    """A run's result.json: read where it lies when its artifacts are local files (a
    download asks the store for the run again, per run), else downloaded into `tmp`."""
    from mlflow.utils.file_utils import local_file_uri_to_path

    uri = run.info.artifact_uri or ""
    if uri.startswith("file:") or (uri and "://" not in uri):
        here = Path(local_file_uri_to_path(uri)) / "result.json"
        if here.is_file():
            return here
    return Path(client.download_artifacts(run.info.run_id, "result.json", tmp))


def _rows_of(client: Any, runs: list[Any]) -> list[ResultRow]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            try:
                local = _result_file(client, run, tmp)
                rows.append(ResultRow.from_dict(json.loads(local.read_text())))
            except Exception as exc:  # a run killed before its artifacts were logged
                log.warning(
                    "run %s (%s) has no result.json: %s", run.info.run_id, run.info.run_name, exc
                )
    return rows


def _from_run(run_id: str, uri: str) -> Sweep:
    client = _client(uri)
    try:
        run = client.get_run(run_id)
    except Exception as exc:
        raise SourceError(f"MLflow run {run_id} not found at {uri}: {exc}") from None
    runs, children = job_runs(client, run)
    rows = _rows_of(client, runs)
    if not rows:
        raise SourceError(f"MLflow run {run_id} at {uri}: no job run with a result.json")
    return Sweep(
        label=f"run {run.info.run_name or run_id}",
        rows=rows,
        parent_run_id=run_id if children else None,
        tracking_uri=uri,
        baseline=run.data.tags.get(BASELINE_TAG) if children else None,
    )


def _from_experiment(name: str, uri: str) -> Sweep:
    client = _client(uri)
    exp = client.get_experiment_by_name(name)
    if exp is None and name.isdigit():
        try:
            exp = client.get_experiment(name)
        except Exception:
            exp = None
    if exp is None:
        known = [e.name for e in client.search_experiments()]
        raise SourceError(
            f"{name!r} is not a folder, a run id or an MLflow experiment at {uri}; "
            f"experiments there: {', '.join(known) or '(none)'}"
        )
    runs = [
        r
        for r in search_all(client, exp.experiment_id)
        if KIND_TAG not in r.data.tags  # a job's run, not a sweep's or a history's
    ]
    rows = _rows_of(client, runs)
    if not rows:
        raise SourceError(f"MLflow experiment {name!r} at {uri} has no job runs with a result.json")
    return Sweep(label=f"experiment {exp.name}", rows=rows, tracking_uri=uri)


def meta_of(sweep: Sweep, baseline: str) -> Meta:
    prov = sweep.rows[0].provenance if sweep.rows else Provenance()
    return {
        "source": sweep.label,
        "rows": len(sweep.rows),
        "baseline": baseline,
        "host": prov.host,
        "cpu": prov.cpu_model,
        "cpu features": ",".join(prov.hardware.cpu_features) if prov.hardware else None,
        "git": prov.git_sha,
        "torch": prov.versions.get("torch"),
        "torch_xla": prov.versions.get("torch_xla"),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def describe(sweep: Sweep) -> str:
    """What a side of a comparison ran on: commit, versions, host (from its rows)."""
    seen: dict[str, set[str]] = {}
    for row in sweep.rows:
        prov = row.provenance
        for key, value in (
            ("git", (prov.git_sha or "")[:10]),
            ("torch", prov.versions.get("torch")),
            ("torch_xla", prov.versions.get("torch_xla")),
            ("host", prov.host),
        ):
            if value:
                seen.setdefault(key, set()).add(str(value))
    return ", ".join(f"{k} {'/'.join(sorted(v))}" for k, v in seen.items()) or "no provenance"
