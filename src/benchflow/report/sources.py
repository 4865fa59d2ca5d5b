"""Where a report's rows come from: a sweep folder, a results file, or MLflow.

A source is a folder or file holding ``results.jsonl`` or ``result.json``, an MLflow
run id (a sweep's parent run, or one job's), or an MLflow experiment (``run:<id>`` and
``experiment:<name>`` say which). MLflow holds the folder's own files as artifacts, so
a report from MLflow is the same as one from the folder.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchflow.core.layout import JobDir, SweepDir
from benchflow.report.model import Meta
from benchflow.results.io import bulk, loads, read_rows
from benchflow.results.row import Provenance, ResultRow, RowError
from benchflow.tracking.mlflow_runs import (
    BASELINE_TAG,
    KIND_SWEEP,
    KIND_TAG,
    PARENT_TAG,
    SWEEP_DIR_TAG,
    default_tracking_uri,
    job_runs,
    run_artifact,
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


def experiment_name(spec: str) -> str | None:
    """The MLflow experiment a SOURCE names (``experiment:<name>``, or a bare name that
    is neither a path nor a run id); None for any other source."""
    if Path(spec).expanduser().exists():
        return None
    kind, _, value = spec.partition(":")
    if kind == "experiment" and value:
        return value
    if (kind == "run" and value) or RUN_ID.match(spec):
        return None
    if "/" in spec or spec.endswith((".jsonl", ".json")):
        return None  # a path that is not there: load says so
    return spec


def load(spec: str, tracking_uri: str | None = None) -> Sweep:
    path = Path(spec).expanduser()
    if path.exists():
        return _from_path(path, tracking_uri)
    uri = tracking_uri or default_tracking_uri(Path.cwd())
    if (name := experiment_name(spec)) is not None:
        return _from_experiment(name, uri)
    kind, _, value = spec.partition(":")
    if kind == "run" and value:
        return _from_run(value, uri)
    if RUN_ID.match(spec):
        return _from_run(spec, uri)
    raise SourceError(f"{spec}: no such file or folder")


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
        raise SourceError(
            f"{path}: no result rows; allowed: a sweep, run folder or results file whose "
            "jobs wrote rows"
        )
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
        return ResultRow.from_dict(loads(path.read_text()))
    except RowError as exc:
        raise SourceError(f"{path}: {exc}") from None


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _rows_of(client: Any, runs: list[Any]) -> list[ResultRow]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            try:
                found = run_artifact(client, run, "result.json", tmp)
                rows.append(ResultRow.from_dict(loads(found.read_text())))
            except Exception as exc:  # a run killed before its artifacts were logged
                log.warning(
                    "run %s (%s) has no result.json: %s", run.info.run_id, run.info.run_name, exc
                )
    return rows


def _sweep_rows(client: Any, run: Any) -> list[ResultRow] | None:
    """A sweep run's rows from its results.jsonl; None where the sweep did not end."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            return read_rows(run_artifact(client, run, "results.jsonl", tmp))
        except Exception:
            return None


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


def _experiment(client: Any, name: str, uri: str) -> Any:
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
    return exp


# MLflow search filters: a sweep's parent run; a job run that no sweep run holds.
SWEEP_RUNS = f"tags.`{KIND_TAG}` = '{KIND_SWEEP}'"
LONE_RUNS = f"tags.`{PARENT_TAG}` IS NULL AND tags.`{KIND_TAG}` IS NULL"


def _lone_runs(client: Any, experiment_id: str, sweeps: set[str]) -> list[Any]:
    """The job runs of none of the experiment's sweep runs (`sweeps`)."""
    try:
        return search_all(client, experiment_id, LONE_RUNS)
    except Exception:  # a server older than IS NULL in search filters: every run, filtered here
        return [
            r
            for r in search_all(client, experiment_id)
            if KIND_TAG not in r.data.tags and r.data.tags.get(PARENT_TAG) not in sweeps
        ]


def experiment_sweeps(name: str, uri: str) -> list[Sweep]:
    """An MLflow experiment's rows, a sweep each: its sweep runs' results.jsonl (else
    their job runs'), then the job runs of no sweep run, split by their job folders."""
    client = _client(uri)
    exp = _experiment(client, name, uri)
    with bulk():
        return _sweeps_in(client, exp, uri)


def _sweeps_in(client: Any, exp: Any, uri: str) -> list[Sweep]:
    out: list[Sweep] = []
    sweeps: set[str] = set()
    for run in search_all(client, exp.experiment_id, SWEEP_RUNS):
        sweeps.add(run.info.run_id)
        rows = _sweep_rows(client, run)
        if rows is None:
            rows = _rows_of(client, job_runs(client, run)[0])
        if not rows:
            continue
        tags = run.data.tags
        out.append(
            Sweep(
                label=tags.get(SWEEP_DIR_TAG) or sweep_of(rows[0]),
                rows=rows,
                parent_run_id=run.info.run_id,
                tracking_uri=uri,
                baseline=tags.get(BASELINE_TAG),
            )
        )
    lone = _rows_of(client, _lone_runs(client, exp.experiment_id, sweeps))
    out += [
        Sweep(label=folder or f"experiment {exp.name}", rows=rows, tracking_uri=uri)
        for folder, rows in by_sweep(lone).items()
    ]
    if not out:
        raise SourceError(
            f"MLflow experiment {exp.name!r} at {uri} has no job runs with a result.json"
        )
    return out


def _from_experiment(name: str, uri: str) -> Sweep:
    rows = [row for s in experiment_sweeps(name, uri) for row in s.rows]
    return Sweep(label=f"experiment {name}", rows=rows, tracking_uri=uri)


def sweep_of(row: ResultRow) -> str:
    """The folder of the sweep a row ran in, from its job folder (a sweep's job folders
    are named by the job's number; a single run's folder is its own sweep)."""
    folder = Path(row.job.dir or "")
    return str(folder.parent if folder.name == str(row.job.num) else folder)


def by_sweep(rows: list[ResultRow]) -> dict[str, list[ResultRow]]:
    """Rows by the sweep folder they ran in (sweep_of)."""
    groups: dict[str, list[ResultRow]] = {}
    for row in rows:
        groups.setdefault(sweep_of(row), []).append(row)
    return groups


def split(sweep: Sweep) -> list[Sweep]:
    """A source that holds several sweeps' rows as one sweep each (by their job folders)."""
    groups = by_sweep(sweep.rows)
    if len(groups) < 2:
        return [sweep]
    return [
        dataclasses.replace(sweep, label=folder or sweep.label, rows=rows, directory=None)
        for folder, rows in groups.items()
    ]


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
