"""Where everything of a sweep lives on disk: the one owner of every file name.

A sweep folder holds the plan, the rows, the MLflow pointers and the report; each job
has a folder of its own (Hydra's job dir) with its config, the child's files and its row.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from benchflow.core.files import read_text, write_json_atomic
from benchflow.core.job import Plan


def cache_root() -> Path:
    """benchflow's cache outside any sweep ($BENCHFLOW_CACHE_DIR, default
    ~/.cache/benchflow): warm compile caches, and slow-to-learn facts of the machine."""
    return Path(os.environ.get("BENCHFLOW_CACHE_DIR") or Path.home() / ".cache" / "benchflow")


class _In:
    """A file or folder of a sweep's or a job's folder (`path`), by its name there."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, folder: JobDir | SweepDir, owner: type) -> Path:
        return folder.path / self.name


@dataclass(frozen=True)
class JobDir:
    path: Path

    config = _In("config.yaml")  # the resolved config, as YAML
    job_file = _In("job.json")  # what the child is told to run
    child_result = _In("child_result.json")  # what the child wrote back
    result = _In("result.json")  # the job's row
    rounds = _In("processes.json")  # the job's processes so far (sweep/run.py's journal)
    compile_cache = _In(".compile_cache")  # compile_cache=cold: removed after the job
    profile = _In("profile")
    ir = _In("ir")
    inductor_code = _In("ir/inductor")  # ir.inductor_code: generated source kept
    xla_dump = _In("ir/xla_dump")  # XLA's own --xla_dump_to
    xla_metrics = _In("xla_metrics_report.txt")
    dynamo_counters = _In("dynamo_counters.json")
    signals = _In("signals.json")  # the row's signals, graph breaks' reasons and all: MLflow's
    hydra = _In(".hydra")  # Hydra's record of the job's config and overrides

    @staticmethod
    def process_prefix(n: int) -> str:
        """processes=N: process n's files (its result, job file, logs) are named with
        this prefix; the first process's have none."""
        return f"process{n}." if n else ""

    def process_files(self, n: int) -> tuple[Path, Path]:
        """Process n's result and job file."""
        prefix = self.process_prefix(n)
        return (
            self.path / f"{prefix}{self.child_result.name}",
            self.path / f"{prefix}{self.job_file.name}",
        )


@dataclass(frozen=True)
class SweepDir:
    path: Path

    plan = _In("plan.json")  # every job, planned, before any runs
    references = _In("references")  # the accuracy check's eager and float64 runs, shared
    results = _In("results.jsonl")  # one row per job attempt (JSON lines)
    parent_run = _In("mlflow_parent_run.txt")  # the MLflow parent run's id
    tracking_uri = _In("mlflow_tracking_uri.txt")  # the store that parent run lives in
    report = _In("report")

    def write_plan(self, plan: Plan) -> None:
        write_json_atomic(self.plan, plan.to_dict())

    def read_plan(self) -> Plan | None:
        """plan.json (None: none, or not a plan)."""
        try:
            data = json.loads(self.plan.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        return Plan.from_dict(data) if isinstance(data, dict) else None

    def parent_run_id(self) -> str | None:
        return read_text(self.parent_run)

    def recorded_tracking_uri(self) -> str | None:
        return read_text(self.tracking_uri)
