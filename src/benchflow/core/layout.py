"""Where everything of a sweep lives on disk: the one owner of every file name.

A sweep folder holds the plan, the rows, the MLflow pointers and the report; each job
has a folder of its own (Hydra's job dir) with its config, the child's files and its row.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from benchflow.core.files import write_json_atomic
from benchflow.core.job import Plan


def cache_root() -> Path:
    """benchflow's cache outside any sweep ($BENCHFLOW_CACHE_DIR, default
    ~/.cache/benchflow): warm compile caches, and slow-to-learn facts of the machine."""
    return Path(os.environ.get("BENCHFLOW_CACHE_DIR") or Path.home() / ".cache" / "benchflow")


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


@dataclass(frozen=True)
class JobDir:
    path: Path

    @property
    def config(self) -> Path:  # the resolved config, as YAML
        return self.path / "config.yaml"

    @property
    def job_file(self) -> Path:  # what the child is told to run
        return self.path / "job.json"

    @property
    def child_result(self) -> Path:  # what the child wrote back
        return self.path / "child_result.json"

    @property
    def result(self) -> Path:  # the job's row
        return self.path / "result.json"

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

    @property
    def rounds(self) -> Path:  # the job's processes so far (sweep/run.py's journal)
        return self.path / "processes.json"

    @property
    def compile_cache(self) -> Path:  # compile_cache=cold: removed after the job
        return self.path / ".compile_cache"

    @property
    def profile(self) -> Path:
        return self.path / "profile"

    @property
    def ir(self) -> Path:
        return self.path / "ir"

    @property
    def inductor_code(self) -> Path:  # ir.inductor_code: generated source kept
        return self.path / "ir/inductor"

    @property
    def xla_dump(self) -> Path:  # XLA's own --xla_dump_to
        return self.path / "ir/xla_dump"

    @property
    def xla_metrics(self) -> Path:
        return self.path / "xla_metrics_report.txt"

    @property
    def dynamo_counters(self) -> Path:
        return self.path / "dynamo_counters.json"

    @property
    def signals(self) -> Path:  # the row's signals, graph breaks' reasons and all: MLflow's
        return self.path / "signals.json"

    @property
    def hydra(self) -> Path:  # Hydra's record of the job's config and overrides
        return self.path / ".hydra"


@dataclass(frozen=True)
class SweepDir:
    path: Path

    @property
    def plan(self) -> Path:  # every job, planned, before any runs
        return self.path / "plan.json"

    @property
    def references(self) -> Path:  # the accuracy check's eager and float64 runs, shared
        return self.path / "references"

    @property
    def results(self) -> Path:  # one row per job attempt (JSON lines)
        return self.path / "results.jsonl"

    @property
    def parent_run(self) -> Path:  # the MLflow parent run's id
        return self.path / "mlflow_parent_run.txt"

    @property
    def tracking_uri(self) -> Path:  # the store that parent run lives in
        return self.path / "mlflow_tracking_uri.txt"

    @property
    def report(self) -> Path:
        return self.path / "report"

    @property
    def compare(self) -> Path:
        return self.path / "compare"

    def job(self, path: Path) -> JobDir:
        return JobDir(path)

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
        return _read_text(self.parent_run)

    def recorded_tracking_uri(self) -> str | None:
        return _read_text(self.tracking_uri)
